"""Fixtures for tests/engine_server; helpers and fixtures live in server_support.py."""

from __future__ import annotations

from server_support import (  # noqa: F401 (pytest finds fixtures by name here)
    async_client,
    client,
    reference,
    server,
)
