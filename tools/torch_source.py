"""Where ``make demo`` and ``make test`` take torch from: the ``pip install`` arguments of its CPU
build.

    python tools/torch_source.py [REQUIREMENT] [--index-url URL]

Prints the arguments on one line (``torch==2.13.0``, or ``torch==2.13.0 --index-url URL``) and,
on stderr, where they take torch from, for the Makefile's step line. The choice, in order:

1. ``--index-url URL`` given (the Makefile's ``TORCH_INDEX``): that index.
2. pip finds a wheel for REQUIREMENT without any index (its ``find-links``: ``PIP_FIND_LINKS``,
   ``pip config list``), checked with ``pip install --dry-run --no-index --no-deps
   --ignore-installed``, which downloads nothing: that wheel.
3. Otherwise PyTorch's CPU index, :data:`CPU_INDEX`, where the CPU-only builds are
   (https://pytorch.org/get-started/locally/, "Compute Platform: CPU", checked 2026-12-03).
   The default index would give Linux the CUDA build, several GB.

Standard library only: it runs with the new virtualenv's Python before anything is installed,
and asks that Python's pip (pip 22.2 or later has ``--dry-run``; an older pip takes step 3).
Exit status 2 with a one-line error when REQUIREMENT is not a torch requirement.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

__all__ = ["CPU_INDEX", "DEFAULT_REQUIREMENT", "find_locally", "main", "torch_source"]

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
DEFAULT_REQUIREMENT = "torch==2.13.0"
#: ``torch`` with an optional version specifier (PEP 440 operators), no extras or markers.
_REQUIREMENT = re.compile(r"^torch\s*((?:===?|~=|!=|<=?|>=?)\s*[\w.*+!-]+\s*,?\s*)*$")


def find_locally(requirement: str, python: str = sys.executable, timeout_s: float = 300) -> bool:
    """Whether ``python``'s pip finds a distribution for ``requirement`` with no index (its
    find-links alone), ignoring what is installed. Nothing is downloaded or installed."""
    command = [python, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps"]
    command += ["--ignore-installed", "--quiet", requirement]
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def torch_source(
    requirement: str, index_url: str | None = None, python: str = sys.executable
) -> tuple[list[str], str]:
    """The ``pip install`` arguments for ``requirement`` and, in words, where they take it from
    (the module docstring's order).

    Raises:
        ValueError: ``requirement`` is not ``torch`` with an optional version specifier.
    """
    if not _REQUIREMENT.match(requirement.strip()):
        raise ValueError(
            f"TORCH={requirement!r} is not a torch requirement; use e.g. torch==2.13.0 or torch"
        )
    if index_url:
        return [requirement, "--index-url", index_url], f"{requirement} from {index_url}"
    if find_locally(requirement, python):
        return [requirement], f"{requirement}, the wheel pip finds on this machine (find-links)"
    where = f"{requirement} from PyTorch's CPU index {CPU_INDEX} (no wheel on this machine)"
    return [requirement, "--index-url", CPU_INDEX], where


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("requirement", nargs="?", default=DEFAULT_REQUIREMENT)
    parser.add_argument("--index-url", default=None, help="take torch from this index")
    args = parser.parse_args(argv)
    try:
        pip_args, where = torch_source(args.requirement, args.index_url)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(where, file=sys.stderr)
    print(" ".join(pip_args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
