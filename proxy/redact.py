"""Keep credentials out of the log: key fingerprints, and redaction of stored bodies.

A client's API key is never stored. The log keeps ``key_fingerprint``: the first 16 hex digits of
SHA-256(salt || key), where the salt is random per database (so the same key gets the same
fingerprint across restarts, and a fingerprint cannot be checked against a guessed key without the
database). Bodies are stored only with ``--store-bodies``, and then every credential we can
recognise is replaced by ``[REDACTED]``: the request's own keys and bearer tokens wherever they
appear, the proxy's auth token, and anything shaped like an Anthropic, OpenAI or Google API key,
a bearer token, or the value of a JSON field named like a credential.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from urllib.parse import parse_qsl

__all__ = ["MIN_SECRET_CHARS", "REDACTED", "client_secrets", "key_fingerprint", "redact_text"]

REDACTED = "[REDACTED]"

#: Exact secrets shorter than this are not searched for in stored bodies (a short value would
#: redact ordinary words); so the proxy refuses an ``--auth-token`` shorter than this.
MIN_SECRET_CHARS = 8

#: Headers that carry a client's vendor credential.
_KEY_HEADERS = (b"x-api-key", b"authorization", b"x-goog-api-key", b"api-key")

_PATTERNS = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"sk-ant-[A-Za-z0-9_\-]{8,}"  # Anthropic
    r"|sk-[A-Za-z0-9_\-]{16,}"  # OpenAI (sk-, sk-proj-, sk-svcacct-)
    r"|AIza[0-9A-Za-z_\-]{30,}"  # Google API keys
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/=\-]{8,}"
    r")"
)
_JSON_CREDENTIAL = re.compile(
    r'("(?i:api[_-]?key|x-api-key|x-goog-api-key|authorization|access[_-]?token|secret|password)"'
    r'\s*:\s*)"(?:[^"\\]|\\.)*"'
)


def client_secrets(headers: Sequence[tuple[bytes, bytes]], query_string: bytes) -> list[str]:
    """The credentials a request carries: key headers (bearer prefix removed) and ``?key=``.

    Args:
        headers: ASGI header pairs (lower-case names).
        query_string: the raw query string (Gemini accepts ``?key=API_KEY``).

    Returns:
        The secret values, most specific first; empty when the request carries none.
    """
    secrets: list[str] = []
    for name, value in headers:
        if name in _KEY_HEADERS:
            text = value.decode("latin-1").strip()
            if text.lower().startswith("bearer "):
                text = text[7:].strip()
            if text:
                secrets.append(text)
    if query_string:
        for param, param_value in parse_qsl(query_string.decode("latin-1")):
            if param == "key" and param_value:
                secrets.append(param_value)
    return secrets


def key_fingerprint(secrets: Sequence[str], salt: bytes) -> str | None:
    """Salted SHA-256 fingerprint of the request's first credential, or ``None`` if it has none.

    Returns:
        16 lower-case hex digits (64 bits: enough to tell a team's keys apart, too few to matter
        as a stored hash of the key).
    """
    if not secrets:
        return None
    return hashlib.sha256(salt + secrets[0].encode()).hexdigest()[:16]


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every recognisable credential replaced by ``[REDACTED]``.

    Args:
        text: a request or response body (JSON or SSE) decoded as UTF-8.
        secrets: exact values to remove wherever they occur (the request's keys, the proxy's
            auth token); values shorter than ``MIN_SECRET_CHARS`` are ignored to keep text
            readable (the proxy refuses an auth token that short).
    """
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= MIN_SECRET_CHARS:
            text = text.replace(secret, REDACTED)
    text = _JSON_CREDENTIAL.sub(lambda m: f'{m.group(1)}"{REDACTED}"', text)
    return _PATTERNS.sub(REDACTED, text)
