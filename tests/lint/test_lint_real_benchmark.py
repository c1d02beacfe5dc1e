"""``benchmarks/lint_real.py`` in its small mode: the corpus it generates and the numbers it
prints agree with each other (file counts, rates = files / seconds, planted breakers)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "lint_real.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lint_real_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _load()


def _rows(out: str) -> dict[str, list[str]]:
    rows = {}
    for line in out.splitlines():
        if line.startswith("| ") and not line.startswith("| run "):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def test_generate_is_deterministic_and_parses(bench: ModuleType, tmp_path: Path) -> None:
    a = bench.generate(tmp_path / "a", 70, seed=3)
    b = bench.generate(tmp_path / "b", 70, seed=3)
    files = sorted(p for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) == len(a.files) == 70
    assert [p.relative_to(tmp_path / "a") for p in a.files] == [
        p.relative_to(tmp_path / "b") for p in b.files
    ]
    assert all(x.read_bytes() == y.read_bytes() for x, y in zip(a.files, b.files, strict=True))
    for path in files:
        ast.parse(path.read_bytes(), filename=str(path))
    assert a.kinds["init"] and a.kinds["agent"] and a.kinds["utility"] > a.kinds["agent"]
    assert a.planted_same and a.planted_cross
    bigger = bench.generate(tmp_path / "c", 300, seed=0)
    text = "\n".join(p.read_text() for p in bigger.files)
    for call in ("messages.create(", "chat.completions.create(", "Agent(", "SystemMessage("):
        assert call in text
    assert "from ." in text and "from svc_000." in text  # relative and absolute imports


def _assert_rate_of(rate: float, count: int, seconds: str) -> None:
    """``rate`` (printed to a whole number) is ``count`` over some time that ``seconds``
    (printed to its decimals) rounds from: at 0.04 s that is 0.035-0.045 s, 1,333-1,714 a second."""
    half = 0.5 * 10 ** -len(seconds.partition(".")[2])
    low = count / (float(seconds) + half) - 0.5
    high = count / (float(seconds) - half) + 0.5 if float(seconds) > half else float("inf")
    assert low <= rate <= high, (rate, count, seconds)


def test_small_mode_numbers_are_consistent(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus"
    argv = ["--files", "60", "--repeat", "1", "--warm-files", "60", "--corpus-dir", str(corpus)]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    generated = sum(1 for p in corpus.rglob("*.py") if p.is_file())
    assert generated == 60
    assert re.search(r"^corpus: 60 files, ", out, re.M)
    assert f"linted files: {generated}\n" in out
    rows = _rows(out)
    lint_rows = [k for k in rows if k.startswith(("baseline", "cold lint"))]
    assert len(lint_rows) == 3
    for label in lint_rows:
        count, wall, rate, cpu, per_cpu, _ratio = rows[label]
        assert int(count) == generated
        # printed rates are the printed counts over the seconds the printed (rounded) ones stand for
        _assert_rate_of(float(rate), generated, wall)
        _assert_rate_of(float(per_cpu), generated, cpu)
    same = re.search(r"planted \(same-module\): (\d+) call sites, found (\d+)", out)
    assert same is not None and int(same.group(1)) >= 1
    assert int(same.group(2)) == int(same.group(1))  # the per-module analysis sees these
    assert "files with findings outside the planted ones: 0" in out
    verdicts = re.findall(r"^  (PASS|MISS|N/A ) ", out, re.M)
    assert len(verdicts) == 4
    if bench.cache_parameter() is None:
        assert "warm re-run: not available yet" in out
        assert verdicts[2] == "N/A "


def test_warm_run_only_with_a_cache_parameter(
    bench: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = bench.lint_paths
    seen: list[object] = []

    def cached(
        paths: list[Path],
        config: object,
        jobs: int | None = None,
        force_exclude: bool = False,
        cache_dir: Path | None = None,
    ) -> list[object]:
        seen.append(cache_dir)
        return real(paths, config, jobs=jobs, force_exclude=force_exclude)

    monkeypatch.setattr(bench, "lint_paths", cached)
    assert "cache_dir" in inspect.signature(bench.lint_paths).parameters
    assert bench.main(["--quick", "--no-serial", "--files", "50", "--warm-files", "50"]) == 0
    out = capsys.readouterr().out
    assert "not available" not in out
    assert re.search(r"^\| warm re-run, 50 files, one changed \| - \| [\d.]+ ", out, re.M)
    assert len(re.findall(r"^  (?:PASS|MISS) ", out, re.M)) == 4
    # cold runs get a fresh empty folder each; the warm runs share one
    assert all(isinstance(c, Path) for c in seen) and len(set(seen)) == 2


def test_corpus_mode_rows_match_the_trees(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trees = tmp_path / "trees"
    sizes = {"alpha": 3, "beta": 5}
    for name, count in sizes.items():
        for i in range(count):
            path = trees / name / "pkg" / f"m{i}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            body = "".join(f"def f{i}_{k}(x):\n    return x + {k}\n" for k in range(300))
            path.write_text(body, encoding="utf-8")
        (trees / name / "tests").mkdir()
        (trees / name / "tests" / "test_m.py").write_text("def test_x():\n    pass\n")
    repos = tmp_path / "repos.toml"
    repos.write_text(
        "seed = 1\n"
        + "".join(
            f'[[repo]]\nrepo = "o/{n}"\ncommit = "{"a" * 40}"\ntree = "{n}"\nhalf = "tuning"\n'
            for n in sizes
        ),
        encoding="utf-8",
    )
    argv = ["--corpus", "tuning", "--trees", str(trees), "--repos", str(repos), "--jobs", "1"]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    for name, count in sizes.items():
        row = rows[f"o/{name}"]
        files, lines, parse_s, cold_s, multiple, warm_s, _peak = row[:7]
        parse_cpu, cold_cpu, cpu_multiple, warm_cpu = row[7:]
        assert int(files) == count  # test files are left out, as the CLI does by default
        assert int(lines) == 600 * count
        assert float(parse_s) > 0
        assert float(multiple.rstrip("x")) == pytest.approx(
            float(cold_s) / float(parse_s), rel=0.35, abs=0.2
        )
        assert float(warm_s) > 0
        # CPU seconds: the linter's work in this process and its workers (jobs=1: all here)
        assert float(cold_cpu) > 0 and float(warm_cpu) > 0 and float(parse_cpu) >= 0
        if float(parse_cpu) > 0.0005:  # the multiple, within the rounding of what is printed
            low = (float(cold_cpu) - 0.0005) / (float(parse_cpu) + 0.0005) - 0.05
            high = (float(cold_cpu) + 0.0005) / (float(parse_cpu) - 0.0005) + 0.05
            assert low <= float(cpu_multiple.rstrip("x")) <= high
    assert f"trees: 2, files: {sum(sizes.values())}" in out
    verdicts = re.findall(r"^  (PASS|MISS|N/A ) ", out, re.M)
    assert len(verdicts) == 3
    assert verdicts[2] == "N/A "  # no tree of 1,300 files here


def test_corpus_trees_take_one_batch(bench: ModuleType, tmp_path: Path) -> None:
    """``--corpus`` measures batch 1 unless ``--batch`` names another: a row without a
    ``batch`` field is batch 1, and the halves split each batch."""
    rows = [
        ("a/one", "tuning", None),
        ("b/two", "evaluation", None),
        ("c/three", "tuning", 2),
        ("d/four", "evaluation", 2),
        ("e/five", "tuning", 3),
        ("f/six", "evaluation", 3),
    ]
    text = ""
    for repo, half, batch in rows:
        tree = repo.split("/")[1]
        (tmp_path / "trees" / tree).mkdir(parents=True)
        text += f'[[repo]]\nrepo = "{repo}"\ntree = "{tree}"\nhalf = "{half}"\n'
        text += f"batch = {batch}\n\n" if batch else "\n"
    repos = tmp_path / "repos.toml"
    repos.write_text(text)

    def names(half: str, batch: int) -> list[str]:
        return [r for r, _ in bench.corpus_trees(half, tmp_path / "trees", repos, batch)]

    assert names("all", 1) == ["a/one", "b/two"]
    assert names("evaluation", 1) == ["b/two"]
    assert names("all", 2) == ["c/three", "d/four"]
    assert names("tuning", 2) == ["c/three"]
    assert names("all", 3) == ["e/five", "f/six"]
    assert names("evaluation", 3) == ["f/six"]


def test_parse_only_pass_counts_a_file_it_cannot_parse(bench: ModuleType, tmp_path: Path) -> None:
    """``--tree`` on real code meets files the running Python cannot parse (3.12 type
    parameters on 3.11, a broken file): the parse-only pass tries them, as the linter does,
    and goes on instead of ending the run with a traceback."""
    good = tmp_path / "good.py"
    good.write_text("x = 1\n")
    newer = tmp_path / "newer.py"
    newer.write_text("def first[T](items: list[T]) -> T:\n    return items[0]\n")
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    nul = tmp_path / "nul.py"
    nul.write_bytes(b"x = 1\x00\n")
    parsed = 2 if sys.version_info >= (3, 12) else 1  # good.py, and newer.py from 3.12 on
    assert bench.parse_all([good, newer, broken, nul]) == parsed


def test_measure_tree_repeats_the_warm_run_from_the_cold_cache(
    bench: ModuleType, tmp_path: Path
) -> None:
    """``--warm-repeat 3``: three warm re-runs after the one edit, each from the cache as the
    cold run left it (each analyses the edited file again), and the medians reported."""
    tree = tmp_path / "tree"
    for i in range(3):
        path = tree / "pkg" / f"m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{i}(x):\n    return x + {i}\n", encoding="utf-8")
    m = bench.measure_tree(tree, 1, warm_repeat=3)
    walls = [w for w, _ in m["warm_runs"]]
    cpus = [c for _, c in m["warm_runs"]]
    assert len(walls) == 3 and m["warm_analyses"] >= 1
    assert m["warm_s"] == sorted(walls)[1] and m["warm_cpu_s"] == sorted(cpus)[1]
