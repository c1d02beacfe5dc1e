"""ModuleIndex: the module names of a run's files, as Python would import them.

Real files in a temporary tree; each case is a layout a project declares in its pyproject.toml
(or a ``src`` folder), with the names that must resolve and those that must not.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from promptcache.lint_rules.analysis.modules import ModuleIndex, relative_path


def _tree(root: Path, files: dict[str, str]) -> list[str]:
    paths = []
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.endswith(".py"):
            paths.append(str(path))
    return sorted(paths)


def _claims(index: ModuleIndex, root: Path) -> dict[str, list[str]]:
    return {
        name: sorted(Path(f).relative_to(root).as_posix() for f in files)
        for name, files in index.files.items()
    }


def test_monorepo_pyprojects_declare_their_package_roots(tmp_path: Path) -> None:
    files = _tree(
        tmp_path,
        {
            "libs/poet/pyproject.toml": (
                '[tool.poetry]\npackages = [{ include = "ppkg", from = "source" }]\n'
            ),
            "libs/poet/source/ppkg/a.py": "",
            "libs/hatched/pyproject.toml": (
                '[tool.hatch.build.targets.wheel]\npackages = ["code/hpkg"]\n'
            ),
            "libs/hatched/code/hpkg/m.py": "",
            "libs/found/pyproject.toml": '[tool.setuptools.packages.find]\nwhere = ["lib"]\n',
            "libs/found/lib/wpkg/m.py": "",
            "libs/mapped/pyproject.toml": '[tool.setuptools.package-dir]\n"" = "python"\n',
            "libs/mapped/python/rpkg/m.py": "",
            "libs/broken/pyproject.toml": "[tool.setuptools\n",
            "libs/broken/bpkg/m.py": "",
        },
    )
    index = ModuleIndex.build(files, tmp_path)
    claims = _claims(index, tmp_path)
    assert claims["ppkg.a"] == ["libs/poet/source/ppkg/a.py"]
    assert claims["hpkg.m"] == ["libs/hatched/code/hpkg/m.py"]
    assert claims["wpkg.m"] == ["libs/found/lib/wpkg/m.py"]
    assert claims["rpkg.m"] == ["libs/mapped/python/rpkg/m.py"]
    # inside a package root's package, a bare stem is no name of the file
    assert "a" not in claims
    assert "m" in claims and claims["m"] == ["libs/broken/bpkg/m.py"]
    # a pyproject.toml that is not TOML declares nothing; its file keeps the run-root name
    assert claims["libs.broken.bpkg.m"] == ["libs/broken/bpkg/m.py"]
    by_file = {Path(f).relative_to(tmp_path).as_posix(): n for f, n in index.names.items()}
    assert by_file["libs/poet/source/ppkg/a.py"] == ("ppkg.a", False)
    assert by_file["libs/broken/bpkg/m.py"] == ("m", False)


def test_src_namespace_package_and_script_folder(tmp_path: Path) -> None:
    files = _tree(
        tmp_path,
        {
            "src/pkg/utils.py": "",
            "src/pkg/sub/deep.py": "",
            "src/pkg/sub/__init__.py": "",
            "src/top.py": "",
            "scripts/run.py": "",
            "scripts/helpers.py": "",
            "vendor/src/__init__.py": "",
            "vendor/src/lib.py": "",
        },
    )
    index = ModuleIndex.build(files, tmp_path)
    names = {Path(f).relative_to(tmp_path).as_posix(): n for f, n in index.names.items()}
    # the name from src/ (relative imports climb from it), not the stem or a chain below it
    assert names["src/pkg/utils.py"] == ("pkg.utils", False)
    assert names["src/pkg/sub/deep.py"] == ("pkg.sub.deep", False)
    assert names["src/pkg/sub/__init__.py"] == ("pkg.sub", True)
    assert names["src/top.py"] == ("top", False)
    # a script folder's files keep their stems; a package named src is no source root
    assert names["scripts/helpers.py"] == ("helpers", False)
    assert names["vendor/src/lib.py"] == ("src.lib", False)
    claims = _claims(index, tmp_path)
    assert "utils" not in claims and "sub.deep" not in claims and "lib" not in claims
    run = str(tmp_path / "scripts" / "run.py")
    assert index.file_of("helpers", run) == str(tmp_path / "scripts" / "helpers.py")
    assert index.file_of("pkg.utils", run) == str(tmp_path / "src" / "pkg" / "utils.py")
    assert index.file_of("src.pkg.utils", run) == str(tmp_path / "src" / "pkg" / "utils.py")
    assert index.split("pkg.sub.deep.answer", run) == (
        str(tmp_path / "src" / "pkg" / "sub" / "deep.py"),
        "answer",
    )


def test_a_name_two_roots_claim_resolves_only_from_its_folder(tmp_path: Path) -> None:
    files = _tree(
        tmp_path,
        {
            "src/common/fmt.py": "",
            "src/common/user.py": "",
            "plugins/src/common/fmt.py": "",
            "src/shop/app.py": "",
        },
    )
    index = ModuleIndex.build(files, tmp_path)
    assert index.file_of("common.fmt", str(tmp_path / "src" / "shop" / "app.py")) is None
    assert index.file_of("common.fmt", str(tmp_path / "src" / "common" / "user.py")) == str(
        tmp_path / "src" / "common" / "fmt.py"
    )


def test_files_outside_the_run_root_are_named_from_their_common_folder(tmp_path: Path) -> None:
    files = _tree(
        tmp_path / "project",
        {
            "pyproject.toml": '[tool.setuptools.package-dir]\n"pkg" = "src/pkg"\n',
            "src/pkg/utils.py": "",
        },
    )
    (tmp_path / "elsewhere").mkdir()
    index = ModuleIndex.build(files, tmp_path / "elsewhere")
    assert index.names[files[0]] == ("pkg.utils", False)


def test_a_pyproject_nested_too_deeply_for_tomllib_declares_nothing(tmp_path: Path) -> None:
    deep = "x = " + "[" * 5000 + "]" * 5000 + "\n"  # valid TOML; tomllib recurses per level
    files = _tree(tmp_path, {"libs/deep/pyproject.toml": deep, "libs/deep/src/dpkg/m.py": ""})
    index = ModuleIndex.build(files, tmp_path)
    claims = _claims(index, tmp_path)
    assert claims["dpkg.m"] == ["libs/deep/src/dpkg/m.py"]  # src/ is still a source root
    assert claims["libs.deep.src.dpkg.m"] == ["libs/deep/src/dpkg/m.py"]


CLI = (sys.executable, "-c", "from promptcache.cli import main; main()", "lint")


def test_a_script_folder_under_src_imports_its_siblings(tmp_path: Path) -> None:
    """``python src/tools/app.py`` puts ``src/tools/`` on ``sys.path``: its ``import clock``
    is the sibling ``clock.py``, though ``src`` names that file ``tools.clock``. A standard
    library name, a name with dots and an importer inside a package keep their meaning."""
    files = _tree(
        tmp_path,
        {
            "src/tools/app.py": "",
            "src/tools/clock.py": "",
            "src/tools/string.py": "",
            "src/pkg/__init__.py": "",
            "src/pkg/run.py": "",
            "src/pkg/clock.py": "",
        },
    )
    index = ModuleIndex.build(files, tmp_path)
    app = str(tmp_path / "src" / "tools" / "app.py")
    assert "clock" not in _claims(index, tmp_path)
    assert index.file_of("clock", app) == str(tmp_path / "src" / "tools" / "clock.py")
    assert index.split("clock.stamp", app) == (
        str(tmp_path / "src" / "tools" / "clock.py"),
        "stamp",
    )
    assert index.file_of("string", app) is None  # the standard library's
    assert index.file_of("tools.clock", app) == str(tmp_path / "src" / "tools" / "clock.py")
    assert index.file_of("app.clock", app) is None
    assert index.file_of("clock", str(tmp_path / "src" / "pkg" / "run.py")) is None


def test_lint_of_a_script_folder_under_src_follows_its_sibling_import(tmp_path: Path) -> None:
    """The real CLI, given ``src/p_many_paths`` (``app.py`` imports ``clock``), reports the
    clock's chain as it does for the same folder elsewhere."""
    source = Path(__file__).parent / "programs" / "p_many_paths"
    outputs = []
    for parent in ("src", "scripts"):
        folder = tmp_path / parent / "p_many_paths"
        shutil.copytree(source, folder)
        done = subprocess.run(
            [*CLI, "--no-cache", "--jobs", "1", "--format", "json", f"{parent}/p_many_paths"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        (finding,) = json.loads(done.stdout)
        outputs.append([(Path(r["filename"]).name, r["row"]) for r in finding["related"]])
    assert (
        outputs[0]
        == outputs[1]
        == [("clock.py", 8), ("clock.py", 12), ("app.py", 11), ("app.py", 18)]
    )


def test_relative_path_is_relpath_for_normalised_absolute_paths() -> None:
    """``relative_path`` cuts a path below the folder from its text; every other pair (the
    folder itself, a sibling whose name extends the folder's, the root folder, a folder
    written with ``.``, ``..``, a doubled or a trailing separator) gives ``os.path.relpath``'s
    answer too."""
    import os

    folders = ["/a", "/a/b", "/a/b/", "/a/./b", "/a/x/../b", "//a", "/", "/a/bc"]
    paths = ["/a/b/c.py", "/a/b", "/a/bc/d.py", "/a/..x.py", "/z/y.py", "/a/b/c/d/e.py"]
    for folder in folders:
        for path in map(os.path.abspath, paths):
            assert relative_path(path, folder) == os.path.relpath(path, folder), (path, folder)
