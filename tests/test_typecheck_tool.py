"""tools/typecheck.py: the link tree mypy checks, and the paths it prints back."""

import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("typecheck", ROOT / "tools" / "typecheck.py")
assert _spec is not None and _spec.loader is not None
typecheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(typecheck)


def test_mapping_is_pyprojects_package_dir() -> None:
    mapping = typecheck.package_dirs(ROOT / "pyproject.toml")
    assert mapping == {
        "lint_rules": "lint_rules",
        "proxy": "proxy",
        "engine": "engine",
        "kernels": "kernels",
    }
    assert typecheck.missing_files(ROOT / "pyproject.toml", mapping) == []


def test_tree_links_each_folder_and_drops_stale_links(tmp_path: Path) -> None:
    (tmp_path / "proxy").mkdir()
    (tmp_path / "proxy" / "report.py").write_text("x = 1\n")
    (tmp_path / "old").mkdir()
    tree = typecheck.build_tree(tmp_path, {"proxy": "proxy", "old": "old"})
    tree = typecheck.build_tree(tmp_path, {"proxy": "proxy"})
    package = tree / "promptcache"
    assert sorted(p.name for p in package.iterdir()) == ["proxy"]
    assert os.readlink(package / "proxy") == os.path.join("..", "..", "..", "proxy")
    assert (package / "proxy" / "report.py").read_text() == "x = 1\n"


def test_link_paths_are_printed_as_the_real_files() -> None:
    line = "build/typecheck/promptcache/proxy/store.py:3: error: boom  [misc]\n"
    mapping = {"proxy": "proxy", "lint_rules": "lint_rules"}
    assert typecheck.real_path(line, mapping) == "proxy/store.py:3: error: boom  [misc]\n"
    sdk = "promptcache/cli.py:1: note: unchanged\n"
    assert typecheck.real_path(sdk, mapping) == sdk


def test_a_folder_missing_from_mypy_files_is_refused(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[tool.setuptools.package-dir]\npromptcache = "promptcache"\n'
        '"promptcache.proxy" = "proxy"\n"promptcache.engine" = "engine"\n'
        '[tool.mypy]\nfiles = ["promptcache", "build/typecheck/promptcache/proxy"]\n'
    )
    mapping = typecheck.package_dirs(pyproject)
    assert typecheck.missing_files(pyproject, mapping) == ["build/typecheck/promptcache/engine"]
