"""A real Postgres server for the tests, started once per test session from the machine's own
binaries (Debian's ``postgresql`` package: ``initdb``, ``pg_ctl``), on 127.0.0.1 and a free port,
in a throwaway data folder; each test gets its own fresh database (``pg_url``).

Postgres refuses to run as root; under root (CI containers) the server runs as the ``postgres``
user the Debian package creates, through ``runuser``. Without the binaries the Postgres tests
skip with one line that says how to get them, except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HOW_TO_GET = (
    "Postgres tests need Debian's postgresql package (apt-get install postgresql; "
    "`make test` installs it when run as root)"
)


def _bin_dir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server: ``url(dbname)`` names one of its databases."""

    bin_dir: Path
    base: Path
    port: int
    user: str | None  # run as this user (root), or None (as ourselves)
    databases: list[str] = field(default_factory=list)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)

    def create_database(self) -> str:
        import psycopg

        name = f"t{len(self.databases) + 1}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}".encode())
        self.databases.append(name)
        return self.url(name)


def _unavailable(reason: str) -> None:
    message = f"{reason}: {HOW_TO_GET}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI must run these tests, not skip them)")
    pytest.skip(message)


def start_server() -> Iterator[PostgresServer]:
    """Start a server for the session (a generator for a fixture); skips/fails if it cannot."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        _unavailable("no Postgres server binaries (initdb, pg_ctl) on this machine")
        return
    user: str | None = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root without a `postgres` user to run the server as")
            return
        user = "postgres"
    base = Path(tempfile.mkdtemp(prefix="promptcache-pg-"))
    if user:
        shutil.chown(base, user)
    server = PostgresServer(bin_dir, base, _free_port(), user)
    data = base / "data"
    done = server.run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                      "--no-sync")  # fmt: skip
    if done.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        _unavailable(f"initdb failed: {(done.stderr or done.stdout).strip()[-300:]}")
        return
    options = (
        f"-p {server.port} -c listen_addresses=127.0.0.1 -k {base} -c fsync=off"
        " -c max_connections=200"
    )
    started = server.run("pg_ctl", "-D", str(data), "-l", str(base / "log"), "-o", options,
                         "-w", "start")  # fmt: skip
    if started.returncode != 0:
        log = (base / "log").read_text() if (base / "log").exists() else started.stderr
        shutil.rmtree(base, ignore_errors=True)
        _unavailable(f"the Postgres server did not start: {log.strip()[-300:]}")
        return
    try:
        yield server
    finally:
        server.run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)
