"""A file whose values outgrow ``MAX_VALUE_FACTS`` is one PC000 info and the run goes on.

Without the bound such a file (on a real tree: one class whose dicts are rebuilt from each
other's whole values, re-keying the same uuid4 ids) ran for minutes and grew to gigabytes.
"""

from __future__ import annotations

from pathlib import Path

from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.facts import MAX_VALUE_FACTS
from promptcache.lint_rules.registry import KNOWN_CODES
from promptcache.lint_rules.runner import lint_paths

HEADER = "import uuid\nimport anthropic\n\nclient = anthropic.Anthropic()\n"

#: another file of the program: it asks the big file for a name (a request of the fixpoint)
#: and has a finding of its own
OTHER = (
    HEADER
    + "from big import keep\n\n"
    + "def ask(q):\n"
    + "    run = keep(q)\n"
    + "    return client.messages.create(\n"
    + "        model='m', max_tokens=1, system=f'run {uuid.uuid4()}', messages=[run]\n"
    + "    )\n"
)


def _big(entries: int) -> str:
    """A dict of ``entries`` uuid4 ids, each under its own key, passed whole through a call:
    the value the call gives carries one fact per id."""
    ids = "".join(f"        'k{i}': uuid.uuid4(),\n" for i in range(entries))
    return (
        HEADER
        + "\ndef keep(value):\n    return value\n\n"
        + "def build():\n    ids = {\n"
        + ids
        + "    }\n"
        + "    kept = keep(ids)\n"
        + "    return client.messages.create(\n"
        + "        model='m', max_tokens=1, system=f'ids {kept}', messages=[]\n"
        + "    )\n"
    )


def _lint(tmp_path: Path, entries: int) -> dict[str, list[tuple[int, str, str]]]:
    (tmp_path / "big.py").write_text(_big(entries))
    (tmp_path / "other.py").write_text(OTHER)
    config = parse_table({}, tmp_path, KNOWN_CODES)
    found: dict[str, list[tuple[int, str, str]]] = {"big.py": [], "other.py": []}
    for result in lint_paths([tmp_path], config, jobs=1):
        for d in result.diagnostics:
            found[Path(d.location.path).name].append((d.location.line, d.code, d.message))
    return found


def test_values_past_the_bound_make_the_file_pc000_and_the_run_goes_on(tmp_path: Path) -> None:
    found = _lint(tmp_path, MAX_VALUE_FACTS + 1)
    ((line, code, message),) = found["big.py"]
    assert (line, code) == (1, "PC000")
    assert message.startswith(
        "cannot analyse this file: its values carry more facts than the analysis bounds ("
    )
    assert f"carries {MAX_VALUE_FACTS + 1} facts (more than {MAX_VALUE_FACTS})" in message
    # the other file, which asked the abandoned one for ``keep``, is still analysed
    assert [(line, code) for line, code, _ in found["other.py"]] == [(10, "PC002")]


def test_values_at_the_bound_are_analysed(tmp_path: Path) -> None:
    # the look-alike: as many ids as the bound allows, analysed and reported as usual
    found = _lint(tmp_path, MAX_VALUE_FACTS)
    assert [code for _, code, _ in found["big.py"]] == ["PC002"]
    assert [(line, code) for line, code, _ in found["other.py"]] == [(10, "PC002")]
