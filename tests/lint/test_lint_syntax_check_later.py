"""A file that nothing triggers, forces or asks for is only compiled (PC000); in a program run
the driver compiles it once its last analysis is known (``runner.UNCHECKED``, ``checked``), so
a file that a later analysis parses anyway is not compiled first.

Each source shape gives the result the compile-only analysis gives; in a program, a broken file
nobody imports keeps its PC000 (in the cache too, so a warm run reports it without compiling),
and a file that a later analysis parses leaves no output unchecked."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from promptcache.lint_rules.analysis.program import Task, lint_program
from promptcache.lint_rules.config import LintConfig
from promptcache.lint_rules.runner import (
    UNCHECKED,
    _output,
    analyse_file,
    analyse_source,
    checked,
)

SOURCES = {
    "clean": "def add(a, b):\n    return a + b\n",
    "broken": "def add(a, b:\n    return a + b\n",
    # parses, but does not compile
    "return_at_module_level": "x = 1\nreturn x\n",
    "template": "def {{ name }}():\n    pass\n",
    "not_utf8": "x = 'caf\xe9'\n",
}


@pytest.mark.parametrize("shape", sorted(SOURCES))
def test_the_later_check_gives_what_compiling_at_once_gives(tmp_path: Path, shape: str) -> None:
    path = tmp_path / "util.py"
    path.write_bytes(SOURCES[shape].encode("latin-1"))
    config = LintConfig(root=tmp_path)
    task = Task(str(path), "util", False, {}, (), False)
    output = analyse_file(task, config)
    assert output[UNCHECKED] is True
    assert output["result"]["diagnostics"] == []
    result, exports, wanted, triggered = analyse_source(path.read_bytes(), str(path), config)
    content = output["content"]
    at_once = _output(result, exports, wanted, triggered, False, content, ())
    assert checked(output, str(path), config) == at_once
    broken = shape in ("broken", "return_at_module_level", "not_utf8")
    assert [d["code"] for d in at_once["result"]["diagnostics"]] == (["PC000"] if broken else [])
    assert at_once["result"]["skipped"] == ("template" if shape == "template" else "")


def test_a_triggered_or_asked_for_file_is_analysed_at_once(tmp_path: Path) -> None:
    path = tmp_path / "util.py"
    path.write_text("def add(a, b:\n    return a + b\n", encoding="utf-8")
    config = LintConfig(root=tmp_path)
    asked = analyse_file(Task(str(path), "util", False, {}, ("add",), False), config)
    assert UNCHECKED not in asked
    assert [d["code"] for d in asked["result"]["diagnostics"]] == ["PC000"]
    forced = analyse_file(Task(str(path), "util", False, {}, (), True), config)
    assert UNCHECKED not in forced


def _program(root: Path) -> list[str]:
    files = {
        "app.py": """
            import anthropic
            from helpers import greeting

            client = anthropic.Anthropic()

            def ask(question):
                return client.messages.create(
                    model="claude-sonnet-4-5",
                    max_tokens=100,
                    system=greeting(),
                    messages=[{"role": "user", "content": question}],
                )
            """,
        "helpers.py": """
            def greeting():
                return "You are terse."
            """,
        "broken.py": """
            def half(x:
                return x / 2
            """,
    }
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return [str(root / name) for name in sorted(files)]


def test_a_program_run_reports_pc000_once_and_caches_the_checked_output(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    files = _program(root)
    config = LintConfig(root=root)
    cache = tmp_path / "cache"
    results, program = lint_program(files, config, 1, cache)
    codes = {Path(r.path).name: [d.code for d in r.diagnostics] for r in results}
    assert codes == {"app.py": [], "broken.py": ["PC000"], "helpers.py": []}
    assert program.analysed > len(files)  # helpers.py was asked for greeting afterwards
    stored = [json.loads(p.read_text(encoding="utf-8")) for p in cache.rglob("*.json")]
    broken = [e for e in stored if e.get("path", "").endswith("broken.py")]
    assert len(broken) == 1
    outputs = list(broken[0]["outputs"].values())
    assert [UNCHECKED in o for o in outputs] == [False]
    assert [d["code"] for d in outputs[0]["result"]["diagnostics"]] == ["PC000"]
    warm, again = lint_program(files, config, 1, cache)
    assert again.analysed == 0
    assert [[d.code for d in r.diagnostics] for r in warm] == [
        [d.code for d in r.diagnostics] for r in results
    ]
