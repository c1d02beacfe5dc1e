"""Kernel tests run on the CPU through the Triton interpreter, with fresh random inputs each run.

``TRITON_INTERPRET=1`` must be set before ``promptcache.kernels`` is imported (``@triton.jit``
reads it when a kernel is defined), so it is set here, at collection time. Every test that takes
the ``gen`` fixture gets a new seed; a failure report shows it, and ``PROMPTCACHE_TEST_SEED=<n>``
replays that run.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Generator

os.environ["TRITON_INTERPRET"] = "1"

import pytest
import torch

if "promptcache.kernels" in sys.modules:
    from promptcache.kernels import runs_on_cpu

    if not runs_on_cpu():
        raise RuntimeError(
            "promptcache.kernels was imported before tests/kernels/conftest.py set "
            "TRITON_INTERPRET=1; run the kernel tests with TRITON_INTERPRET=1 in the environment"
        )


@pytest.fixture
def gen(request: pytest.FixtureRequest) -> Generator[torch.Generator, None, None]:
    """A torch.Generator seeded afresh per test (or from PROMPTCACHE_TEST_SEED)."""
    seed = int(os.environ.get("PROMPTCACHE_TEST_SEED") or random.SystemRandom().randrange(2**31))
    request.node.user_properties.append(("seed", seed))
    g = torch.Generator().manual_seed(seed)
    yield g


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    seeds = [value for name, value in item.user_properties if name == "seed"]
    if report.failed and seeds:
        report.sections.append(("random seed", f"replay with PROMPTCACHE_TEST_SEED={seeds[0]}"))
    return report
