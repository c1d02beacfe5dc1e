"""Child servers for the demo: start, wait until healthy, and always stop them (no orphans).

Each child is ``promptcache <args>`` run by this same interpreter, in its own process group
(``start_new_session``), with stdout and stderr in a log file. They are stopped, group by group
(SIGTERM, then SIGKILL after a grace period), on every way out:

- leaving the ``ChildProcesses`` context (normal end, an exception, Ctrl-C's KeyboardInterrupt);
  while the context is open SIGINT raises KeyboardInterrupt even if the demo was started with
  it ignored (a background job of a non-interactive shell, as in ``make test &`` or a CI
  runner: Python then keeps SIGINT ignored), as uvicorn does for the servers;
- SIGTERM or SIGHUP to the demo: handlers turn them into ``SystemExit`` while the context is open;
- interpreter exit: an ``atexit`` hook, in case the context was bypassed;
- the demo being killed outright (SIGKILL): on Linux each child asks the kernel for SIGTERM
  when its parent dies (``prctl(PR_SET_PDEATHSIG)``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO

import httpx

from promptcache.errors import DemoError

__all__ = ["ChildProcess", "ChildProcesses", "free_port"]

#: How the child runs the CLI with this interpreter (promptcache has no ``__main__`` module).
_CLI = "from promptcache.cli import main; main()"
_PR_SET_PDEATHSIG = 1
_LOG_TAIL_LINES = 15


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (the OS picks it; tiny race until bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when the demo dies (else a no-op)."""

    def preexec() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):  # not Linux
            return
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


@dataclass
class ChildProcess:
    """One started server.

    Attributes:
        name: short label used in messages ("engine", "proxy").
        args: the ``promptcache`` arguments it runs with.
        log_path: file holding its stdout and stderr.
        popen: the process (its pid is also its process-group id).
    """

    name: str
    args: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes]
    _log: IO[bytes] = field(repr=False)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of its log, for error messages."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def failure(self, what: str) -> DemoError:
        """A ``DemoError`` saying ``what`` went wrong, with the tail of the log."""
        tail = self.log_tail()
        shown = f"\n--- last lines of {self.log_path} ---\n{tail}" if tail else ""
        return DemoError(f"{self.name} {what} (full log: {self.log_path}){shown}")


class ChildProcesses:
    """Owns the demo's child servers; use as a context manager.

    Args:
        log_dir: folder for ``<name>.log`` files (created if missing).
        grace_s: seconds between SIGTERM and SIGKILL when stopping.
    """

    def __init__(self, log_dir: Path, *, grace_s: float = 5.0) -> None:
        self.log_dir = log_dir
        self.grace_s = grace_s
        self.children: list[ChildProcess] = []
        self._lock = threading.Lock()
        self._old_handlers: dict[int, object] = {}

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> ChildProcesses:
        atexit.register(self.stop_all)
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGHUP):
                self._old_handlers[signum] = signal.signal(signum, self._on_signal)
            self._old_handlers[signal.SIGINT] = signal.signal(
                signal.SIGINT, signal.default_int_handler
            )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.stop_all()
        finally:
            for signum, handler in self._old_handlers.items():
                signal.signal(signum, handler)  # type: ignore[arg-type]
            self._old_handlers.clear()
            atexit.unregister(self.stop_all)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    # -- children -------------------------------------------------------------------------------

    def start(self, name: str, args: list[str]) -> ChildProcess:
        """Run ``promptcache <args>`` in a new process group, logging to ``<name>.log``.

        Raises:
            DemoError: the process could not be started.
        """
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        log = log_path.open("wb")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        try:
            popen = subprocess.Popen(
                [sys.executable, "-c", _CLI, *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid()) if sys.platform == "linux" else None,
            )
        except OSError as exc:
            log.close()
            raise DemoError(f"cannot start the {name} ({exc})") from exc
        child = ChildProcess(name, list(args), log_path, popen, log)
        with self._lock:
            self.children.append(child)
        return child

    def wait_healthy(self, child: ChildProcess, url: str, *, timeout_s: float = 120.0) -> float:
        """Poll ``url`` until it answers 200; return the seconds it took.

        Raises:
            DemoError: the child exited first, or ``timeout_s`` passed; the message has the
                tail of its log.
        """
        started = time.monotonic()
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                code = child.popen.poll()
                if code is not None:
                    raise child.failure(f"exited with status {code} before it was ready")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(url).status_code == 200:
                        return time.monotonic() - started
                if time.monotonic() - started > timeout_s:
                    raise child.failure(f"did not answer {url} within {timeout_s:.0f} s")
                time.sleep(0.1)

    def stop_all(self) -> None:
        """Stop every child's process group: SIGTERM, wait ``grace_s``, then SIGKILL. Idempotent."""
        with self._lock:
            children, self.children = self.children, []
        for child in children:
            _signal_group(child.popen, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for child in children:
            try:
                child.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(child.popen, signal.SIGKILL)
                child.popen.wait()
            # Grandchildren, if any, share the group: make sure none outlives its parent.
            _signal_group(child.popen, signal.SIGKILL)
            child._log.close()


def _signal_group(popen: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` to the process group led by ``popen`` (ignored once it is gone)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, signum)
