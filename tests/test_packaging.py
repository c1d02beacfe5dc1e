"""The wheel installs exactly one top-level import name, `promptcache`, with every folder inside."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_has_one_top_level_name(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        check=True,
    )
    (wheel,) = tmp_path.glob("promptcache-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"promptcache"}
    for sub in ("lint_rules", "proxy", "engine", "kernels"):
        assert f"promptcache/{sub}/__init__.py" in names
    assert "promptcache/py.typed" in names


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
