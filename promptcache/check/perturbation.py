"""What changes between the runs of ``promptcache check``: one :class:`Perturbation` per run.

Run 0 is the baseline. Every later run changes the perturbation kinds it names and keeps the
others exactly as in run 0, so that a difference between run 0 and run ``k`` comes from the
kinds run ``k`` changed:

=============  ===============================================================================
``clock``      the wall clock: run 0 travels to the check's start time, run ``k`` to ``k`` x
               (1 day 3 h 17 min 42 s) later (``time-machine``, ticking from there)
``hash_seed``  ``PYTHONHASHSEED`` (the iteration order of sets and frozensets of str/bytes)
``random``     the seeds of ``random`` and of the ``uuid4``/``uuid1``/``secrets`` stream
``listdir``    the order of ``os.listdir``/``os.scandir`` (so ``glob``, ``os.walk``,
               ``Path.iterdir``): run 0 keeps the file system's order, run ``k`` a seeded
               shuffle that always differs from it (two entries or more)
``pid``        what ``os.getpid()`` reports
=============  ===============================================================================

By default each later run changes every kind; ``isolate=True`` gives each kind runs of its own,
so a finding names the one kind that caused it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Final

from promptcache.errors import ConfigError

__all__ = [
    "CLOCK_SHIFT",
    "KINDS",
    "KIND_LABELS",
    "Perturbation",
    "hook_dir",
    "plan_runs",
]

#: Every perturbation kind, in the order ``--isolate`` runs them.
KINDS: Final[tuple[str, ...]] = ("clock", "hash_seed", "random", "listdir", "pid")
#: How reports name each kind.
KIND_LABELS: Final[dict[str, str]] = {
    "clock": "the wall clock",
    "hash_seed": "PYTHONHASHSEED (set/frozenset order)",
    "random": "random, uuid4 and secrets",
    "listdir": "directory-listing order (os.listdir, os.scandir, glob, Path.iterdir)",
    "pid": "the process id",
}
#: How far run ``k``'s clock is ahead of run 0's: ``k`` times this.
CLOCK_SHIFT: Final = timedelta(days=1, hours=3, minutes=17, seconds=42)
_BASE_PID: Final = 40_000
_PID_STEP: Final = 7_919


def hook_dir() -> Path:
    """The folder put first on the child's ``PYTHONPATH`` (it holds ``sitecustomize.py``)."""
    return Path(__file__).resolve().parent / "hook"


@dataclass(frozen=True)
class Perturbation:
    """The environment of one run.

    Attributes:
        run: the run's index (0: baseline).
        changed: the kinds this run changes relative to run 0 (empty for run 0).
        clock: unix seconds the run's clock starts at.
        hash_seed: its ``PYTHONHASHSEED`` (1..4294967295).
        seed: the seed of ``random`` and of the uuid/secrets stream.
        listdir: 0 keeps the file system's listing order; any other value is a shuffle seed.
        pid: what ``os.getpid()`` reports in the run's first process (its forks and
            subprocesses report that plus their distance from it).
    """

    run: int
    changed: tuple[str, ...]
    clock: float
    hash_seed: int
    seed: int
    listdir: int
    pid: int

    def describe(self) -> str:
        """``"run 1: the wall clock +1 day, 3:17:42; ..."`` for reports."""
        if not self.changed:
            return f"run {self.run}: baseline"
        return f"run {self.run}: changes " + "; ".join(self.labels())

    def labels(self) -> list[str]:
        """One phrase per changed kind, with its setting in this run."""
        out = []
        for kind in self.changed:
            if kind == "clock":
                shift = CLOCK_SHIFT * self.run
                out.append(f"the wall clock (+{_duration(shift)})")
            elif kind == "hash_seed":
                out.append(f"PYTHONHASHSEED={self.hash_seed} (set/frozenset order)")
            elif kind == "random":
                out.append(f"random, uuid4 and secrets (seed {self.seed})")
            elif kind == "listdir":
                out.append(f"directory-listing order (shuffle {self.listdir})")
            else:
                out.append(f"the process id (os.getpid() = {self.pid})")
        return out

    def env(
        self, base: Mapping[str, str], endpoint: str, not_user: Sequence[str]
    ) -> dict[str, str]:
        """The child's environment: ``base`` plus the hook, the plan and ``PYTHONHASHSEED``.

        Args:
            base: the environment to start from (the parent's).
            endpoint: the capture endpoint's origin, ``http://127.0.0.1:PORT``.
            not_user: folders whose frames are not the user's code (promptcache's own).
        """
        plan = {
            "endpoint": endpoint,
            "run": self.run,
            "clock": self.clock,
            "seed": self.seed,
            "listdir": self.listdir,
            "pid": self.pid,
            "not_user": list(not_user),
        }
        env = dict(base)
        env.pop("PROMPTCACHE_CHECK_ROOT_PID", None)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(hook_dir()) + (os.pathsep + path if path else "")
        env["PYTHONHASHSEED"] = str(self.hash_seed)
        env["PROMPTCACHE_CHECK_PLAN"] = json.dumps(plan)
        return env


def _duration(delta: timedelta) -> str:
    days, rest = divmod(int(delta.total_seconds()), 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    day_word = "day" if days == 1 else "days"
    return f"{days} {day_word} {hours}:{minutes:02d}:{seconds:02d}"


def _run(run: int, changed: tuple[str, ...], start: float) -> Perturbation:
    def pick(kind: str, base: int, other: int) -> int:
        return other if kind in changed else base

    return Perturbation(
        run=run,
        changed=changed,
        clock=start + (CLOCK_SHIFT.total_seconds() * run if "clock" in changed else 0.0),
        hash_seed=pick("hash_seed", 1, 1 + run),
        seed=pick("random", 0, run),
        listdir=pick("listdir", 0, run),
        pid=pick("pid", _BASE_PID, _BASE_PID + _PID_STEP * run),
    )


def plan_runs(runs: int, *, isolate: bool, start: float) -> list[Perturbation]:
    """The perturbation of every run.

    Args:
        runs: runs in all, baseline included (at least 2). With ``isolate``, each kind gets
            ``runs - 1`` runs of its own.
        isolate: one kind per perturbed run (``1 + 5 * (runs - 1)`` runs in all).
        start: unix seconds of the baseline clock (the check's start).

    Raises:
        ConfigError: ``runs`` is below 2.
    """
    if runs < 2:
        raise ConfigError(
            f"--runs must be at least 2 (a baseline and one perturbed run), got {runs}"
        )
    plans = [_run(0, (), start)]
    if isolate:
        for _ in range(runs - 1):
            for kind in KINDS:
                plans.append(_run(len(plans), (kind,), start))
    else:
        for index in range(1, runs):
            plans.append(_run(index, KINDS, start))
    return plans
