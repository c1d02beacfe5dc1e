"""Install commands in the docs install this project, never the unrelated `promptcache` on PyPI."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    [
        ROOT / "README.md",
        ROOT / ".pre-commit-hooks.yaml",
        *(ROOT / "docs").rglob("*.md"),
        *(p for p in (ROOT / "examples").rglob("*") if p.suffix in {".md", ".py", ".txt", ".toml"}),
    ]
)
#: `pip install` naming the distribution `promptcache` (bare, quoted, with extras or a version).
FROM_THE_INDEX = re.compile(r"""pip3? install\b[^\n`]*?(?<![\w./-])['"]?promptcache\b(?!/)""")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_install_command_takes_promptcache_from_the_index(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for line in text.splitlines():
        if "pip install" not in line:
            continue
        # A sentence may name the wrong command to warn against it, in backticks after "not".
        warned = re.sub(r"[Nn]ot `pip install promptcache`", "", line)
        assert not FROM_THE_INDEX.search(warned), f"{path.name}: {line.strip()}"


def test_the_pattern_catches_the_forms_that_install_from_the_index() -> None:
    for bad in [
        "pip install promptcache",
        "pip install 'promptcache[all]'",
        'pip install "promptcache[proxy]"',
        "pip install -U promptcache==0.1.0",
    ]:
        assert FROM_THE_INDEX.search(bad), bad
    for good in ["pip install '.[all]'", "pip install ./.promptcache", "pip install tokenizers"]:
        assert not FROM_THE_INDEX.search(good), good


def test_readme_says_where_torch_comes_from() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "PyTorch's CPU index, https://download.pytorch.org/whl/cpu" in readme
    assert "tools/torch_source.py" in readme and "TORCH_INDEX=URL" in readme


def test_readme_names_every_extra_of_pyproject() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"# extras: ([\w, ]+)", readme)
    assert listed is not None
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = pyproject["project"]["optional-dependencies"]
    assert sorted(listed.group(1).replace(" ", "").split(",")) == sorted(extras)


def test_readme_says_to_activate_the_venv_before_its_first_bare_command() -> None:
    """`make` installs `promptcache` into .venv/bin only: a command shown as `promptcache ...`
    (and `promptcache check -- python app.py`, whose `python` comes from PATH) needs the venv
    active, and the README says so before it shows the first such command."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    after_make = readme.index("\n```\n", readme.index("make test")) + 5
    first_bare = re.search(r"(?<![\w/.`-])`promptcache (?!demo`)\w", readme[after_make:])
    assert first_bare is not None
    assert "source .venv/bin/activate" in readme[after_make : after_make + first_bare.start()]


def test_readme_says_what_each_extra_of_all_is_for() -> None:
    """The prose that says `all` is 'those four' names each extra `all` holds."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    prose = readme[readme.index("The core (`pip install .`") : readme.index("`all` is")]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    held = re.fullmatch(
        r"promptcache\[([\w,]+)\]", pyproject["project"]["optional-dependencies"]["all"][0]
    )
    assert held is not None
    extras = held.group(1).split(",")
    assert "`all` is those four" in readme and len(extras) == 4
    assert [e for e in extras if f"`{e}` extra" not in prose] == []
