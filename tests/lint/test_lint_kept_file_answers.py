"""The program driver analyses a file a few times in one run; what an analysis derives from the
file's text alone is kept: whether a trigger word is in it (by content hash and sink names),
the line offsets of its nodes' segments and its suppression comments (on the kept tree). An
edited file, or another sink configuration, gets its own answers, never the kept ones."""

from __future__ import annotations

from pathlib import Path

from promptcache.lint_rules.analysis.program import Task
from promptcache.lint_rules.config import LintConfig
from promptcache.lint_rules.parse import parse_kept
from promptcache.lint_rules.runner import UNCHECKED, analyse_file, analyse_source
from promptcache.lint_rules.sinks import spec_from_config

ASK = "def ask(q):\n    return my_llm_call(q)\n"


def test_trigger_answer_follows_the_content_and_the_sink_names(tmp_path: Path) -> None:
    path = tmp_path / "app.py"
    path.write_text(ASK, encoding="utf-8")
    plain = LintConfig(root=tmp_path)
    with_sink = LintConfig(
        root=tmp_path, sinks=(spec_from_config({"call": "app.my_llm_call", "text": 0}),)
    )
    task = Task(str(path), "app", False, {}, (), False)
    for _ in range(2):  # the second time from the kept answers
        assert analyse_file(task, plain)[UNCHECKED] is True
        assert analyse_file(task, with_sink)["triggered"] is True
        assert analyse_file(task, plain)["triggered"] is False
    # the same file edited to hold a trigger word is analysed, not only compiled
    path.write_text(ASK + "SYSTEM = {'role': 'system'}\n", encoding="utf-8")
    edited = analyse_file(task, plain)
    assert UNCHECKED not in edited
    assert edited["triggered"] is True
    # and edited back, it is only compiled again
    path.write_text(ASK, encoding="utf-8")
    assert analyse_file(task, plain)[UNCHECKED] is True


def test_suppression_errors_are_those_of_the_text_analysed(tmp_path: Path) -> None:
    config = LintConfig(root=tmp_path)
    bad_code = "import time\nSTAMP = time.time()  # promptcache: ignore[PC999]\n"
    no_code = "import time\nSTAMP = time.time()  # promptcache: ignore\n"
    path = str(tmp_path / "m.py")
    first = analyse_source(bad_code.encode(), path, config, requests=("STAMP",))[0]
    again = analyse_source(bad_code.encode(), path, config, requests=("STAMP",))[0]
    assert parse_kept(bad_code.encode(), path) is parse_kept(bad_code.encode(), path)
    assert first.errors == again.errors
    assert len(first.errors) == 1 and "PC999" in first.errors[0]
    other = analyse_source(no_code.encode(), path, config, requests=("STAMP",))[0]
    assert len(other.errors) == 1 and "name the rules to ignore" in other.errors[0]
    assert analyse_source(bad_code.encode(), path, config, requests=("STAMP",))[0] == first
