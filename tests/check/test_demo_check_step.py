"""The demo's check step: both apps checked at once against check's own endpoint."""

from __future__ import annotations

from pathlib import Path

from check_support import REPO

from promptcache.demo.check_step import check_apps


def test_check_step_finds_the_naive_apps_clock_and_id_and_nothing_in_the_layered_app(
    tmp_path: Path,
) -> None:
    apps = {
        "naive": REPO / "examples" / "naive_app.py",
        "layered": REPO / "examples" / "layered_app.py",
    }
    found = check_apps(apps, tmp_path)
    assert found["layered"] == []
    assert sorted((f.code, f.causes, f.function) for f in found["naive"]) == [
        ("PC001", ("clock",), "StoryTime.ask"),
        ("PC002", ("random",), "StoryTime.ask"),
    ]
    assert (tmp_path / "check-naive.json").is_file()
    assert (tmp_path / "check-layered.txt").read_text().count("canned reply") == 6
