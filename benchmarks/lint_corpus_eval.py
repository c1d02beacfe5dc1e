"""Precision of ``promptcache lint`` on real agent projects: the labelled corpus.

``tests/lint/corpus/repos.toml`` names public agent repositories, each at a fixed commit, in a
batch (1 when a row names none) and in one half of its batch's split, made once at random from
that batch's seed (``tuning`` or ``evaluation``). The labels files
(``tests/lint/corpus/labels_<half>.toml`` for batch 1, ``labels_batch<N>_<half>.toml`` for
batch N) give, for each error or warning the linter reported there, a verdict (``tp``, ``fp`` or
``debatable``) and a one-line reason. No third-party code
is kept in this repository: the trees are exported from git at the recorded commits into a
folder outside it (``trees``, below; ``tests/lint/corpus/fetch.md`` says how).

Subcommands::

    split                      redo each batch's split from its seed; exit 1 if repos.toml
                               disagrees
    trees --mirror DIR         export each repository's Python files (and its pyproject.toml and
                               .gitignore files) at its commit from bare git dirs under DIR
    lint --half tuning         lint every tree of a half as a user would (``promptcache lint .
         [--batch N]           --format json --no-cache``, run inside the tree), join each error
                               and warning to its label, print the precision per repository
                               and overall, and list the findings without a label (batch 1
                               unless ``--batch`` names another)

The join: a label matches a finding of the same repository, file and rule whose line is the
label's line, or, failing that, whose stripped line text has the label's ``line_sha`` (the
first 12 hex digits of its SHA-256), or, failing both, the nearest line within ``--tolerance``
lines (default 3). Precision is tp / (tp + fp); debatable findings count in neither. With
unlabelled findings the figure is printed as provisional, and ``--template`` prints a labels
entry for each, to fill in. ``--save FILE`` keeps the findings as JSON and ``--load FILE``
reads them back instead of linting (labelling does not need a second run); each finding keeps
its chain (the linter's ``related`` steps), which ``--template`` prints above the entry.
``--timeout SECONDS`` bounds each tree's run (the linter and its workers are ended past it).

Usage::

    .venv/bin/python benchmarks/lint_corpus_eval.py trees --mirror ../.mirror
    .venv/bin/python benchmarks/lint_corpus_eval.py lint --half tuning --save /tmp/tuning.json
    .venv/bin/python benchmarks/lint_corpus_eval.py lint --half tuning --load /tmp/tuning.json \\
        --template
    .venv/bin/python benchmarks/lint_corpus_eval.py lint --half evaluation --batch 2
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "lint" / "corpus"
REPOS_FILE = CORPUS / "repos.toml"
HALVES = ("tuning", "evaluation")
VERDICTS = ("tp", "fp", "debatable")
#: files exported from each repository: what the linter reads
SUFFIXES = (".py", ".pyi")
CONFIG_NAMES = ("pyproject.toml", ".gitignore")
#: exported trees live beside the checkout (as ../shared does), never inside it
DEFAULT_TREES = Path(os.environ.get("PROMPTCACHE_CORPUS_TREES", ROOT.parent / "corpus-trees"))
LABEL_FIELDS = ("repo", "commit", "file", "line", "line_sha", "rule", "verdict", "why")


class CorpusError(Exception):
    """A corpus file, tree or mirror that is missing or malformed."""


@dataclass(frozen=True)
class Repo:
    repo: str
    commit: str
    tree: str
    half: str
    batch: int = 1


@dataclass(frozen=True)
class Finding:
    repo: str
    file: str  # relative to the tree, POSIX
    line: int
    rule: str
    severity: str
    message: str
    line_sha: str
    #: the finding's chain as the linter reports it (``related``): "file:row: message" per step
    chain: tuple[str, ...] = ()


@dataclass(frozen=True)
class Label:
    repo: str
    commit: str
    file: str
    line: int
    line_sha: str
    rule: str
    verdict: str
    why: str


def load_repos(path: Path = REPOS_FILE) -> tuple[dict[int, int], list[Repo]]:
    """({batch: seed}, repositories) from repos.toml.

    Batch 1's seed is the top-level ``seed``; batch N's is the ``seed`` of the ``[[batch]]``
    table whose ``batch = N``. A ``[[repo]]`` without ``batch`` is in batch 1. ``CorpusError``
    when a field is missing, a seed is not an integer, or a repository names a batch that has
    no seed."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data.get("seed"), int):
        raise CorpusError(f"{path}: no integer seed")
    seeds = {1: data["seed"]}
    for row in data.get("batch", []):
        if not isinstance(row.get("batch"), int) or not isinstance(row.get("seed"), int):
            raise CorpusError(f"{path}: a [[batch]] needs an integer batch and seed")
        if row["batch"] in seeds:
            raise CorpusError(f"{path}: batch {row['batch']} has two seeds")
        seeds[row["batch"]] = row["seed"]
    repos = []
    for row in data.get("repo", []):
        try:
            repo = Repo(row["repo"], row["commit"], row["tree"], row["half"], row.get("batch", 1))
        except KeyError as exc:
            raise CorpusError(f"{path}: a [[repo]] has no {exc.args[0]}") from None
        if repo.batch not in seeds:
            raise CorpusError(f"{path}: {repo.repo} is in batch {repo.batch}, which has no seed")
        repos.append(repo)
    return seeds, repos


def labels_path(half: str, batch: int = 1) -> Path:
    """The labels file of a half of a batch: ``labels_<half>.toml`` for batch 1,
    ``labels_batch<N>_<half>.toml`` for batch N."""
    return CORPUS / (f"labels_{half}.toml" if batch == 1 else f"labels_batch{batch}_{half}.toml")


def split(names: list[str], seed: int) -> dict[str, str]:
    """The split: sorted names shuffled with ``random.Random(seed)``; the first half (rounded
    down) is ``tuning``, the rest ``evaluation``."""
    order = sorted(names)
    random.Random(seed).shuffle(order)
    cut = len(order) // 2
    return {name: ("tuning" if i < cut else "evaluation") for i, name in enumerate(order)}


def line_sha(text: str) -> str:
    """First 12 hex digits of the SHA-256 of a line with surrounding whitespace stripped."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:12]


def load_labels(path: Path) -> list[Label]:
    """Labels of one half; ``CorpusError`` for a missing field or an unknown verdict."""
    if not path.exists():
        return []
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    labels = []
    for row in data.get("label", []):
        missing = [k for k in LABEL_FIELDS if k not in row]
        if missing:
            raise CorpusError(f"{path}: a [[label]] has no {', '.join(missing)}")
        if row["verdict"] not in VERDICTS:
            raise CorpusError(f"{path}: verdict {row['verdict']!r} is not one of {VERDICTS}")
        labels.append(Label(*(row[k] for k in LABEL_FIELDS)))
    return labels


# --------------------------------------------------------------------------------------------
# trees


def git_dir(mirror: Path, repo: str) -> Path:
    """The bare git dir of ``owner/name`` under ``mirror``: ``owner+name/repo`` (as the fetch
    tool lays them out) or ``owner/name.git`` (as ``git clone --bare`` would)."""
    owner, name = repo.split("/")
    for candidate in (mirror / f"{owner}+{name}" / "repo", mirror / owner / f"{name}.git"):
        if candidate.is_dir():
            return candidate
    raise CorpusError(
        f"no git dir for {repo} under {mirror}: "
        f"git clone --bare https://github.com/{repo} {mirror}/{owner}/{name}.git"
    )


def wanted(path: str) -> bool:
    return path.endswith(SUFFIXES) or path.rsplit("/", 1)[-1] in CONFIG_NAMES


def export_tree(gdir: Path, commit: str, dest: Path) -> int:
    """Write the linted files of ``commit`` under ``dest``; returns how many were written."""
    listing = subprocess.run(
        ["git", "--git-dir", str(gdir), "ls-tree", "-r", "-z", commit],
        check=True,
        capture_output=True,
    ).stdout
    blobs = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        mode, kind, sha = meta.split()
        path = name.decode("utf-8", "surrogateescape")
        if kind == b"blob" and mode != b"120000" and wanted(path):
            blobs.append((sha.decode(), path))
    proc = subprocess.run(
        ["git", "--git-dir", str(gdir), "cat-file", "--batch"],
        input="".join(f"{sha}\n" for sha, _ in blobs).encode(),
        check=True,
        capture_output=True,
    )
    out, pos = proc.stdout, 0
    for _, path in blobs:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if header[-1] == b"missing":
            raise CorpusError(f"{gdir}: blob of {path} is missing")
        size = int(header[2])
        body = out[end + 1 : end + 1 + size]
        pos = end + 1 + size + 1
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    return len(blobs)


# --------------------------------------------------------------------------------------------
# linting and joining


def lint_tree(tree: Path, repo: str, timeout: float | None = None) -> tuple[list[Finding], float]:
    """Errors and warnings of ``promptcache lint . --format json`` run in ``tree``, and the
    run's wall seconds; ``CorpusError`` when the run fails or lasts more than ``timeout``
    seconds (None: no limit)."""
    cmd = [
        sys.executable,
        "-c",
        "from promptcache.cli import main; main()",
        "lint",
        ".",
        "--format",
        "json",
        "--no-cache",
        "--fail-on",
        "never",
    ]
    t0 = time.perf_counter()
    # its own process group, so that a timeout ends the linter's worker processes too
    proc = subprocess.Popen(
        cmd,
        cwd=tree,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise CorpusError(f"lint of {tree} ran past the {timeout:g} s timeout") from None
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise CorpusError(f"lint of {tree} exited {proc.returncode}: {stderr.strip()[-400:]}")
    findings = []
    lines_of: dict[str, list[str]] = {}
    for item in json.loads(stdout or "[]"):
        if item["severity"] not in ("error", "warning"):
            continue
        file = Path(item["filename"]).as_posix().removeprefix("./")
        if file not in lines_of:
            try:
                lines_of[file] = (tree / file).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                lines_of[file] = []
        row = item["location"]["row"]
        text = lines_of[file][row - 1] if 0 < row <= len(lines_of[file]) else ""
        code, severity, message = item["code"], item["severity"], item["message"]
        chain = tuple(
            f"{Path(step['filename']).as_posix().removeprefix('./')}:{step['row']}: "
            f"{step['message']}"
            for step in item.get("related") or []
        )
        findings.append(Finding(repo, file, row, code, severity, message, line_sha(text), chain))
    return findings, wall


def join(
    findings: list[Finding], labels: list[Label], tolerance: int = 3
) -> list[tuple[Finding, Label | None]]:
    """Each finding with its label (None: unlabelled); see the module docstring for the rule."""
    by_key: dict[tuple[str, str, str], list[Label]] = collections.defaultdict(list)
    for label in labels:
        by_key[(label.repo, label.file, label.rule)].append(label)
    out = []
    for f in findings:
        candidates = by_key.get((f.repo, f.file, f.rule), [])
        match = next((c for c in candidates if c.line == f.line), None)
        if match is None:
            match = next((c for c in candidates if c.line_sha == f.line_sha), None)
        if match is None:
            near = [c for c in candidates if abs(c.line - f.line) <= tolerance]
            match = min(near, key=lambda c: abs(c.line - f.line)) if near else None
        out.append((f, match))
    return out


def precision(tp: int, fp: int) -> str:
    return f"{tp / (tp + fp):.1%}" if tp + fp else "n/a"


def report(
    repos: list[Repo], joined: dict[str, list[tuple[Finding, Label | None]]], files: dict[str, int]
) -> tuple[int, int, int, int]:
    """Print the per-repository table; returns (tp, fp, debatable, unlabelled) in all."""
    print("| repository | commit | .py files | findings | tp | fp | debatable | unlabelled "
          "| precision |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    totals = collections.Counter[str]()
    for r in repos:
        counts = collections.Counter(
            label.verdict if label else "unlabelled" for _, label in joined[r.repo]
        )
        totals.update(counts)
        print(
            f"| {r.repo} | {r.commit[:10]} | {files[r.repo]} | {len(joined[r.repo])} | "
            f"{counts['tp']} | {counts['fp']} | {counts['debatable']} | {counts['unlabelled']} | "
            f"{precision(counts['tp'], counts['fp'])} |"
        )
    n = sum(totals.values())
    tp, fp = totals["tp"], totals["fp"]
    print(
        f"| all | | {sum(files.values())} | {n} | {tp} | {fp} | "
        f"{totals['debatable']} | {totals['unlabelled']} | {precision(tp, fp)} |"
    )
    return totals["tp"], totals["fp"], totals["debatable"], totals["unlabelled"]


def template(repo: Repo, finding: Finding) -> str:
    message = finding.message.replace("\\", "\\\\").replace('"', '\\"')
    steps = "".join(f"#   {step}\n" for step in finding.chain)
    return (
        f"[[label]]  # {finding.severity}: {message[:150]}\n{steps}"
        f'repo = "{repo.repo}"\ncommit = "{repo.commit}"\nfile = "{finding.file}"\n'
        f'line = {finding.line}\nline_sha = "{finding.line_sha}"\nrule = "{finding.rule}"\n'
        f'verdict = "?"\nwhy = ""\n'
    )


# --------------------------------------------------------------------------------------------
# commands


def cmd_split(args: argparse.Namespace) -> int:
    seeds, repos = load_repos(args.repos)
    wrong = 0
    for batch, seed in sorted(seeds.items()):
        members = [r for r in repos if r.batch == batch]
        want = split([r.repo for r in members], seed)
        print(f"batch {batch} (seed {seed}, {len(members)} repositories)")
        for r in members:
            if r.half != want[r.repo]:
                wrong += 1
                print(f"{r.repo}: repos.toml says {r.half}, the seed gives {want[r.repo]}")
        for half in HALVES:
            names = sorted(n for n, h in want.items() if h == half)
            print(f"{half} ({len(names)}): {', '.join(names)}")
    return 1 if wrong else 0


def cmd_trees(args: argparse.Namespace) -> int:
    _, repos = load_repos(args.repos)
    for r in repos:
        if (args.half and r.half != args.half) or (args.batch and r.batch != args.batch):
            continue
        dest = args.trees / r.tree
        if dest.exists() and any(dest.iterdir()):
            print(f"{r.repo}: {dest} exists, kept")
            continue
        count = export_tree(git_dir(args.mirror, r.repo), r.commit, dest)
        print(f"{r.repo}: {count} files at {r.commit[:10]} -> {dest}")
    return 0


def cmd_lint(args: argparse.Namespace) -> int:
    seeds, repos = load_repos(args.repos)
    if args.batch not in seeds:
        raise CorpusError(f"{args.repos}: no batch {args.batch} (batches: {sorted(seeds)})")
    repos = [
        r
        for r in repos
        if r.half == args.half and r.batch == args.batch and (not args.repo or r.repo in args.repo)
    ]
    labels = load_labels(args.labels or labels_path(args.half, args.batch))
    findings: dict[str, list[Finding]] = {}
    files: dict[str, int] = {}
    if args.load:
        saved = json.loads(args.load.read_text(encoding="utf-8"))
        for r in repos:
            findings[r.repo] = [
                Finding(**{**f, "chain": tuple(f.get("chain", ()))})
                for f in saved["findings"].get(r.repo, [])
            ]
            files[r.repo] = saved["files"].get(r.repo, 0)
    else:
        for r in repos:
            tree = args.trees / r.tree
            if not tree.is_dir():
                raise CorpusError(f"no tree for {r.repo} at {tree}: run the trees subcommand")
            files[r.repo] = sum(1 for _ in tree.rglob("*.py"))
            findings[r.repo], wall = lint_tree(tree, r.repo, args.timeout)
            print(f"linted {r.repo}: {files[r.repo]} .py files, {wall:.1f} s", file=sys.stderr)
        if args.save:
            blob = {
                "findings": {k: [f.__dict__ for f in v] for k, v in findings.items()},
                "files": files,
            }
            args.save.write_text(json.dumps(blob, indent=1, sort_keys=True), encoding="utf-8")
    joined = {r.repo: join(findings[r.repo], labels, args.tolerance) for r in repos}
    of_batch = f" of batch {args.batch}" if args.batch != 1 else ""
    print(f"{args.half} half{of_batch}: {len(repos)} repositories, errors and warnings only")
    tp, fp, _debatable, unlabelled = report(repos, joined, files)
    used = {id(label) for pairs in joined.values() for _, label in pairs if label}
    stale = [lab for lab in labels if id(lab) not in used and lab.repo in {r.repo for r in repos}]
    note = f"; provisional: {unlabelled} findings have no label" if unlabelled else ""
    print(f"strict precision tp/(tp+fp): {precision(tp, fp)} ({tp} tp, {fp} fp){note}")
    print(f"labels that match no finding now: {len(stale)}")
    by_repo = {r.repo: r for r in repos}
    for pairs in joined.values():
        for f, label in pairs:
            if label is None:
                if args.template:
                    print(template(by_repo[f.repo], f))
                else:
                    print(f"  unlabelled: {f.repo} {f.file}:{f.line} {f.rule} {f.message[:120]}")
    if args.show_stale:
        for lab in stale:
            print(f"  stale: {lab.repo} {lab.file}:{lab.line} {lab.rule} {lab.verdict}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=Path, default=REPOS_FILE)
    parser.add_argument("--trees", type=Path, default=DEFAULT_TREES,
                        help="folder of exported trees (env PROMPTCACHE_CORPUS_TREES)")  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("split", help="redo each batch's split from its seed")
    trees = sub.add_parser("trees", help="export the trees from bare git dirs")
    trees.add_argument("--mirror", type=Path, required=True)
    trees.add_argument("--half", choices=HALVES)
    trees.add_argument("--batch", type=int, help="only this batch (default: all)")
    lint = sub.add_parser("lint", help="lint a half and join to its labels")
    lint.add_argument("--half", choices=HALVES, required=True)
    lint.add_argument("--batch", type=int, default=1, help="the batch (default 1)")
    lint.add_argument("--repo", action="append", help="only this repository (repeatable)")
    lint.add_argument(
        "--labels", type=Path, help="default: labels_<half>.toml (batch N: labels_batchN_<half>)"
    )
    lint.add_argument("--tolerance", type=int, default=3, help="lines, for the join")
    lint.add_argument("--timeout", type=float, help="seconds allowed per tree (default: none)")
    lint.add_argument("--save", type=Path, help="write the findings here (JSON)")
    lint.add_argument("--load", type=Path, help="read findings saved by --save; lint nothing")
    lint.add_argument("--template", action="store_true", help="print unlabelled as TOML")
    lint.add_argument("--show-stale", action="store_true", help="list labels matching nothing")
    args = parser.parse_args(argv)
    try:
        return {"split": cmd_split, "trees": cmd_trees, "lint": cmd_lint}[args.command](args)
    except (CorpusError, OSError, subprocess.CalledProcessError, tomllib.TOMLDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
