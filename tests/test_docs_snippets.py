"""Every ```python block in README.md and docs/*.md runs as shown, or is marked as not runnable.

A marker is an HTML comment (invisible on GitHub) on the line right before the opening fence:

- ``<!-- fragment: why -->``: a partial shown for illustration (a signature, calls taken out of
  the code around them, ``[...]`` placeholders), or a client of a server or vendor API that the
  test does not start. It is not run; the reason is required. If it parses, its top-level
  imports are run, so a renamed module or name still fails here.
- ``<!-- continues -->``: the block continues the file's previous ```python block (which must be
  runnable or continue one itself): both run in one process and namespace, in file order, e.g.
  ``params = b.to_anthropic()`` after the block that built ``b``.
- ``<!-- output -->`` before a plain fenced block right after a runnable python block: what that
  python block prints. The test compares it with what the block printed in the run, line by
  line (trailing spaces ignored), so shown output cannot drift from the code.

Every other block runs in a fresh ``python`` subprocess with a timeout, no API keys in its
environment and the Hugging Face Hub offline. Its working directory is a fresh temporary
``<tmp>/work`` beside ``<tmp>/shared``, a link to the repository's ``../shared``, so the docs'
``../shared/models/tinystories-656k`` resolves as it does from a checkout. The working directory
holds the user files the snippets open (``USER_FILES`` below: ``CODING_RULES.md``, ``app.py``...).
A comment after a call (``# 6 (cl100k_base)``) is not checked (show checked output in an
``output`` block); an exception is a failure.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHARED = ROOT.parent / "shared"
TIMEOUT_S = 60

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<lang>[^`\s]*)")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>[a-z-]+)\s*(?::\s*(?P<reason>.*?))?\s*-->\s*$")
KINDS = {"fragment", "continues"}
OUTPUT = "output"
#: Printed before each block of a chain, so each block's own output can be told apart.
SENTINEL = "\x00promptcache-docs-block "

# Files the snippets read, as a user of the docs would have them in the working directory.
_APP = """\
from datetime import datetime

import openai

client = openai.OpenAI()


def ask(question: str) -> str:
    system = f"You are a helpful assistant. Current time: {datetime.now()}"
    reply = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
    )
    return reply.choices[0].message.content or ""
"""
USER_FILES = {
    # Long enough (about 2,000 tokens) that sdk.md's frozen breakpoint is placed, as shown there.
    "CODING_RULES.md": "# House coding rules\n\n"
    + "".join(
        f"{i}. Name the columns in every SELECT of module {i}, and give every query that lists "
        "rows a LIMIT, so that a slow query never reaches production unreviewed.\n"
        for i in range(1, 61)
    ),
    "schema.sql": "CREATE TABLE invoices (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL,\n"
    "                       total_cents INTEGER NOT NULL, issued_at TEXT NOT NULL);\n",
    "app.py": _APP,
    "src/app.py": _APP,
    "my_minimums.toml": """\
[[models]]
name = "My model"
vendor = "self-hosted"
patterns = ["my-model*"]
min_tokens = 256
source_url = "https://example.com/my-model"
checked = "2026-11-30"
""",
    "my-prices.toml": """\
[models."acme-1"]
family = "anthropic"
input = "2"
output = "8"

[models."claude-sonnet-4-5"]
input = "2.4"
output = "12"
cache_read = "0.24"
cache_write_5m = "3"
cache_write_1h = "4.8"
source_url = "https://example.com/our-contract"
checked = "2026-11-30"
""",
}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    kind: str  # "run", "fragment" or "continues"
    reason: str
    output: str | None = None  # the ``<!-- output -->`` block shown right after it, if any

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def extract(path: Path) -> list[Block]:
    """The ```python blocks of one Markdown file, with the marker on the line before each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, ticks, indent = i, m["ticks"], m["indent"]
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].strip().startswith(ticks):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        marker = MARKER.match(lines[start - 1]) if start else None
        if m["lang"].lower() not in {"python", "py", "python3"}:
            if marker and marker["kind"] == OUTPUT:
                previous = blocks[-1] if blocks else None
                if previous is None or previous.kind == "fragment" or previous.output is not None:
                    raise AssertionError(
                        f"{path.name}:{start + 1}: an output block must follow a runnable "
                        "python block"
                    )
                blocks[-1] = replace(previous, output="\n".join(body) + "\n")
            continue
        kind, reason = "run", ""
        if marker:
            if marker["kind"] not in KINDS:
                raise AssertionError(
                    f"{path.name}:{start + 1}: unknown marker {marker['kind']!r}; "
                    f"use one of {sorted(KINDS)}"
                )
            kind, reason = marker["kind"], (marker["reason"] or "").strip()
        blocks.append(Block(path, start + 1, "\n".join(body) + "\n", kind, reason))
    return blocks


ALL_BLOCKS = [b for doc in DOCS for b in extract(doc)]


def chains() -> list[list[Block]]:
    """Runnable blocks, each with the ``continues`` blocks that follow it in its file."""
    out: list[list[Block]] = []
    prev: Block | None = None
    for block in ALL_BLOCKS:
        if block.kind == "continues":
            assert prev is not None and prev.path == block.path and prev.kind != "fragment", (
                f"{block.where}: `continues` needs a runnable python block before it in the file"
            )
            out[-1].append(block)
        elif block.kind == "run":
            out.append([block])
        prev = block
    return out


CHAINS = chains()
FRAGMENTS = [b for b in ALL_BLOCKS if b.kind == "fragment"]


def _run(code: str, tmp_path: Path, where: str) -> str:
    """Run ``code`` as a user would (see the module docstring); returns its stdout."""
    work = tmp_path / "work"
    work.mkdir()
    if SHARED.exists():
        (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    for name, text in USER_FILES.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text, encoding="utf-8")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_BASE_URL")) and not k.startswith("PYTEST")
    }
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    env.update(PYTHONIOENCODING="utf-8", COLUMNS="100")
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=TIMEOUT_S,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{where} failed (exit {proc.returncode}); mark it `<!-- fragment: why -->` only if "
            f"it is a genuine partial\n--- code ---\n{code}--- stderr ---\n{proc.stderr[-4000:]}",
            pytrace=False,
        )
    return proc.stdout


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip("\n").split("\n")]


def run_chain(chain: list[Block], tmp_path: Path) -> None:
    """Run ``chain`` in one process; each block's ``output`` must be what that block printed."""
    code = "".join(
        f"print({SENTINEL + str(i)!r}, flush=True)\n{b.code}" for i, b in enumerate(chain)
    )
    stdout = _run(code, tmp_path, " + ".join(b.where for b in chain))
    printed = dict.fromkeys(range(len(chain)), "")
    current = None
    for line in stdout.splitlines(keepends=True):
        if line.startswith(SENTINEL):
            current = int(line[len(SENTINEL) :])
        elif current is not None:
            printed[current] += line
    for i, block in enumerate(chain):
        if block.output is not None and _lines(printed[i]) != _lines(block.output):
            pytest.fail(
                f"{block.where}: the output shown after this block is not what it prints\n"
                f"--- shown ---\n{block.output}--- printed ---\n{printed[i]}",
                pytrace=False,
            )


@pytest.mark.parametrize("chain", CHAINS, ids=[c[0].where for c in CHAINS])
def test_snippet_runs(chain: list[Block], tmp_path: Path) -> None:
    if any("../shared/" in b.code for b in chain) and not SHARED.exists():
        pytest.skip(f"{SHARED} (the test models) is missing")
    run_chain(chain, tmp_path)


@pytest.mark.parametrize("block", FRAGMENTS, ids=[b.where for b in FRAGMENTS])
def test_fragment_has_a_reason_and_its_imports_work(block: Block, tmp_path: Path) -> None:
    assert block.reason, f"{block.where}: say why it is a fragment: <!-- fragment: why -->"
    try:
        tree = ast.parse(block.code)
    except SyntaxError:
        return  # a signature or pseudo-code: nothing to import
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    if imports:
        _run(ast.unparse(ast.Module(body=imports, type_ignores=[])) + "\n", tmp_path, block.where)


def test_the_docs_have_python_blocks_and_most_run() -> None:
    # Guards the extractor itself: a fence regex that matched nothing would pass every test above.
    assert len(ALL_BLOCKS) >= 20
    assert len(CHAINS) > len(FRAGMENTS)


def test_a_broken_snippet_fails(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match="NameError: name 'undefined_name'"):
        _run("print(undefined_name)\n", tmp_path, "self-test")


@pytest.mark.parametrize(("shown", "matches"), [("42", True), ("41", False)])
def test_shown_output_is_compared_with_what_the_block_prints(
    tmp_path: Path, shown: str, matches: bool
) -> None:
    doc = ROOT / "docs" / f"self-test-{shown}.md"  # never written: extract() reads `text`
    text = (
        "```python\nprint('setup')\n```\n\n<!-- continues -->\n```python\nprint(6 * 7)\n```\n"
        f"<!-- output -->\n```\n{shown}\n```\n"
    )
    source = tmp_path / "doc.md"
    source.write_text(text, encoding="utf-8")
    first, second = (replace(b, path=doc) for b in extract(source))
    assert first.output is None and second.output == f"{shown}\n"
    if matches:
        run_chain([first, second], tmp_path)
    else:
        with pytest.raises(pytest.fail.Exception, match="is not what it prints"):
            run_chain([first, second], tmp_path)


def test_every_output_block_is_checked() -> None:
    shown = [b for b in ALL_BLOCKS if b.output is not None]
    assert shown and all(b.kind != "fragment" for b in shown)
