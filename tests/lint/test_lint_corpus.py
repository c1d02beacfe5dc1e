"""The labelled corpus of real agent repositories (``tests/lint/corpus/``) and the script that
joins the linter's findings to its labels (``benchmarks/lint_corpus_eval.py``).

The recipes must be well formed (fixed commits, the recorded split reproduced from its seed,
labels with a known rule and verdict on a repository of their half), and the script's numbers
must agree with an independent count: a small tree with planted findings is linted through the
real CLI, labelled, and the printed tp / fp / unlabelled counts and precision are checked.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from promptcache.lint_rules.registry import KNOWN_CODES

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "lint_corpus_eval.py"
CORPUS = Path(__file__).parent / "corpus"
_SHA = re.compile(r"[0-9a-f]{40}")


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lint_corpus_eval", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ev() -> ModuleType:
    return _load()


def test_repos_are_pinned_and_the_split_is_the_seeds(ev: ModuleType) -> None:
    seed, repos = ev.load_repos(CORPUS / "repos.toml")
    assert len(repos) >= 12
    names = [r.repo for r in repos]
    assert len(set(names)) == len(names)
    assert len({r.tree for r in repos}) == len(repos)
    for r in repos:
        assert _SHA.fullmatch(r.commit), r.repo
        assert r.half in ev.HALVES, r.repo
    assert {r.repo: r.half for r in repos} == ev.split(names, seed)
    halves = [r.half for r in repos]
    assert abs(halves.count("tuning") - halves.count("evaluation")) <= 1


@pytest.mark.parametrize("half", ["tuning", "evaluation"])
def test_labels_are_well_formed(ev: ModuleType, half: str) -> None:
    path = CORPUS / f"labels_{half}.toml"
    if not path.exists():
        pytest.skip(f"{path.name} is written once that half is labelled")
    _, repos = ev.load_repos(CORPUS / "repos.toml")
    commit_of = {r.repo: r.commit for r in repos if r.half == half}
    labels = ev.load_labels(path)
    assert labels
    keys = [(lab.repo, lab.file, lab.line, lab.rule) for lab in labels]
    assert len(set(keys)) == len(keys), "one label per (repo, file, line, rule)"
    for lab in labels:
        where = f"{lab.repo} {lab.file}:{lab.line}"
        assert lab.repo in commit_of, f"{where}: not a repository of the {half} half"
        assert lab.commit == commit_of[lab.repo], f"{where}: commit differs from repos.toml"
        assert lab.rule in KNOWN_CODES, where
        assert lab.verdict in ev.VERDICTS, where
        assert re.fullmatch(r"[0-9a-f]{12}", lab.line_sha), where
        assert lab.why.strip() and "\n" not in lab.why, where
        assert lab.line >= 1 and not lab.file.startswith("/"), where


def test_bad_labels_are_one_line_errors(ev: ModuleType, tmp_path: Path) -> None:
    bad = tmp_path / "labels.toml"
    bad.write_text('[[label]]\nrepo = "a/b"\n', encoding="utf-8")
    with pytest.raises(ev.CorpusError, match="has no commit, file, line"):
        ev.load_labels(bad)
    bad.write_text(
        '[[label]]\nrepo="a/b"\ncommit="c"\nfile="f.py"\nline=1\nline_sha="0"\nrule="PC001"\n'
        'verdict="maybe"\nwhy="x"\n',
        encoding="utf-8",
    )
    with pytest.raises(ev.CorpusError, match="verdict 'maybe'"):
        ev.load_labels(bad)
    assert ev.main(["--repos", str(bad), "split"]) == 2  # no seed: a clear error, exit 2


def test_join_prefers_the_line_then_its_text_then_the_nearest(ev: ModuleType) -> None:
    def label(line: int, sha: str, verdict: str) -> object:
        return ev.Label("o/r", "c" * 40, "a.py", line, sha, "PC001", verdict, "why")

    exact, moved, near = (
        label(10, "aaaaaaaaaaaa", "tp"),
        label(50, "bbbbbbbbbbbb", "fp"),
        label(30, "cccccccccccc", "debatable"),
    )
    labels = [exact, moved, near]

    def finding(line: int, sha: str, rule: str = "PC001") -> object:
        return ev.Finding("o/r", "a.py", line, rule, "error", "m", sha)

    joined = ev.join(
        [
            finding(10, "zzzzzzzzzzzz"),  # same line
            finding(70, "bbbbbbbbbbbb"),  # the labelled line moved: its text still matches
            finding(32, "yyyyyyyyyyyy"),  # 2 lines from a label
            finding(40, "xxxxxxxxxxxx"),  # 10 lines from any label: unlabelled
            finding(10, "aaaaaaaaaaaa", "PC002"),  # another rule
        ],
        labels,
        tolerance=3,
    )
    assert [lab for _, lab in joined] == [exact, moved, near, None, None]


def test_lint_command_counts_match_the_labels(
    ev: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "trees" / "demo"
    tree.mkdir(parents=True)
    (tree / "bot.py").write_text(
        textwrap.dedent(
            """\
            from datetime import datetime

            import anthropic

            client = anthropic.Anthropic()


            def ask(question: str) -> str:
                system = f"Now: {datetime.now().isoformat()}"
                reply = client.messages.create(
                    model="claude-sonnet-4-5",
                    max_tokens=256,
                    system=system,
                    messages=[{"role": "user", "content": question}],
                )
                return reply.content[0].text


            def ask_again(question: str) -> str:
                reply = client.messages.create(
                    model="claude-sonnet-4-5",
                    max_tokens=256,
                    system=f"Today: {datetime.now():%H:%M}",
                    messages=[{"role": "user", "content": question}],
                )
                return reply.content[0].text
            """
        ),
        encoding="utf-8",
    )
    commit = "1" * 40
    (tmp_path / "repos.toml").write_text(
        f'seed = 1\n[[repo]]\nrepo = "demo/demo"\ncommit = "{commit}"\ntree = "demo"\n'
        'half = "tuning"\n',
        encoding="utf-8",
    )
    findings, _ = ev.lint_tree(tree, "demo/demo")
    lines = (tree / "bot.py").read_text(encoding="utf-8").splitlines()
    pc001 = sorted(f.line for f in findings if f.rule == "PC001")
    assert len(pc001) == 2, findings  # the two planted time values
    first = pc001[0]
    sha = hashlib.sha256(lines[first - 1].strip().encode()).hexdigest()[:12]
    assert next(f.line_sha for f in findings if f.line == first) == sha
    # label only the first: one tp, the other finding is listed as unlabelled
    (tmp_path / "labels.toml").write_text(
        f'[[label]]\nrepo = "demo/demo"\ncommit = "{commit}"\nfile = "bot.py"\nline = {first}\n'
        f'line_sha = "{sha}"\nrule = "PC001"\nverdict = "tp"\nwhy = "planted"\n',
        encoding="utf-8",
    )
    argv = ["--repos", str(tmp_path / "repos.toml"), "--trees", str(tmp_path / "trees"), "lint"]
    argv += ["--half", "tuning", "--labels", str(tmp_path / "labels.toml")]
    argv += ["--save", str(tmp_path / "saved.json")]
    assert ev.main(argv) == 0
    out = capsys.readouterr().out
    total = len(findings)
    row = next(line for line in out.splitlines() if line.startswith("| demo/demo |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:8] == ["1", str(total), "1", "0", "0", str(total - 1)]
    assert cells[8] == "100.0%"
    assert f"provisional: {total - 1} findings have no label" in out
    assert out.count("  unlabelled: demo/demo bot.py:") == total - 1
    # the saved findings give the same table without linting again
    assert ev.main([*argv[:-2], "--load", str(tmp_path / "saved.json")]) == 0
    assert row in capsys.readouterr().out
