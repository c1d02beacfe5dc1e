"""The wheel installs exactly one top-level import name, `promptcache`, with every folder inside."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
    )
    (wheel,) = out.glob("promptcache-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def test_wheel_has_one_top_level_name(wheel_names: set[str]) -> None:
    top = {n.split("/")[0] for n in wheel_names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"promptcache"}
    for sub in ("lint_rules", "proxy", "engine", "kernels"):
        assert f"promptcache/{sub}/__init__.py" in wheel_names
    assert "promptcache/py.typed" in wheel_names


def test_wheel_ships_data_tables(wheel_names: set[str]) -> None:
    """Price and model-minimum tables are package data: a wheel without them cannot price."""
    assert "promptcache/data/prices.toml" in wheel_names
    assert "promptcache/data/model_minimums.toml" in wheel_names


def test_wheel_ships_the_fused_decode_source(wheel_names: set[str]) -> None:
    """The fused CPU decode compiles its C source at first use: a wheel without it falls back."""
    assert "promptcache/engine/cpu_decode/decode_step.c" in wheel_names


def test_editable_install_maps_every_folder() -> None:
    import promptcache.engine
    import promptcache.kernels
    import promptcache.lint_rules
    import promptcache.proxy

    for module, folder in [
        (promptcache.lint_rules, "lint_rules"),
        (promptcache.proxy, "proxy"),
        (promptcache.engine, "engine"),
        (promptcache.kernels, "kernels"),
    ]:
        assert Path(module.__file__ or "").parent == ROOT / folder


def test_the_build_raises_no_setuptools_deprecation(tmp_path: Path) -> None:
    """setuptools says a deprecated pyproject.toml form (a license table, ...) stops building
    on a set date; the metadata build must pass with those warnings turned into errors."""
    code = (
        "import os, sys, warnings\n"
        "from setuptools.warnings import SetuptoolsDeprecationWarning\n"
        "warnings.simplefilter('error', SetuptoolsDeprecationWarning)\n"
        "from setuptools import build_meta\n"
        "os.chdir(sys.argv[1])\n"
        "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[2]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, str(ROOT), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    metadata = (tmp_path / done.stdout.strip().splitlines()[-1] / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata
