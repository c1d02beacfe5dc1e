"""`promptcache.folders.folder_problem`: the words every command uses for a file's folder that
cannot hold it (lint -o, report -o, check -o, proxy --db and log copy each test them too)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from promptcache.folders import folder_problem, is_python_source


def test_an_existing_folder_has_no_problem(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    assert folder_problem(tmp_path / "out.json") is None
    assert folder_problem(str(tmp_path / "out.json")) is None  # a str as well as a Path
    assert folder_problem(tmp_path / "link" / "out.json") is None  # a link to a folder
    assert folder_problem(tmp_path / "real") is None  # the file itself is not looked at


def test_a_bare_file_name_is_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert folder_problem("out.json") is None
    assert folder_problem(Path("no", "out.json")) == f"folder {Path('no')} does not exist"


def test_a_missing_folder_is_named_as_given(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "out.json"
    assert folder_problem(target) == f"folder {tmp_path / 'no' / 'such'} does not exist"
    (tmp_path / "dangling").symlink_to("nowhere")
    assert folder_problem(tmp_path / "dangling" / "out.json") == (
        f"folder {tmp_path / 'dangling'} does not exist (a symbolic link to 'nowhere')"
    )
    assert not (tmp_path / "no").exists()  # nothing is created


def test_a_file_where_a_folder_should_be_is_named(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("x")
    for target in (
        tmp_path / "a_file" / "out.json",
        tmp_path / "a_file" / "sub" / "out.json",
        tmp_path / "a_file" / "sub" / "deeper" / "out.json",
    ):
        assert folder_problem(target) == f"{tmp_path / 'a_file'} is not a folder"
    assert (tmp_path / "a_file").read_text() == "x"


def test_a_link_loop_is_the_systems_words(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to("loop")
    assert folder_problem(tmp_path / "loop" / "out.json") == os.strerror(errno.ELOOP)


def test_a_python_source_name_is_one_whether_or_not_the_file_exists(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\n")
    for name in ("app.py", "new.py", "stubs.PYI", "gui.pyw", "sub/report.Py"):
        assert is_python_source(tmp_path / name), name
    for name in ("report.json", "report.sarif", "py", "report.py.txt", "report.pyc"):
        assert not is_python_source(name), name
