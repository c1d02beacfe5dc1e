"""Checked by mypy in `make test` (listed in pyproject's [tool.mypy] files), never run.

Calls between the folders mapped into `promptcache` (proxy/, engine/, ...) carry real types: if mypy
saw `promptcache.proxy` or `promptcache.engine` as a missing import, each name below would be `Any`,
every `assert_type` would fail, and the `type: ignore[assignment]` lines would be reported as unused
(warn_unused_ignores is on). tools/typecheck.py builds the layout that lets mypy resolve them.
"""

from typing import assert_type

from promptcache.engine.llm import LLM
from promptcache.engine.outputs import RequestOutput
from promptcache.engine.sampling_params import SamplingParams
from promptcache.proxy.report import Report, build_report


def report_is_typed() -> None:
    report = build_report("usage.db", since=0.0, until=1.0)
    assert_type(report, Report)
    wrong: int = build_report("usage.db", since=0.0, until=1.0)  # type: ignore[assignment]
    del wrong


def generate_is_typed(llm: LLM) -> None:
    outputs = llm.generate(["a prompt"], SamplingParams(max_tokens=1))
    assert_type(outputs, list[RequestOutput])
    wrong: str = llm.generate("a prompt")  # type: ignore[assignment]
    del wrong
