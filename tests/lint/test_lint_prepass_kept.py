"""The summaries the class pre-pass keeps for the recording pass (``taint.Analyzer._take``)
change nothing: a module analysed with them gives the same prefix entries, sink calls,
breakpoint calls, wanted names and exports as when every summary the recording pass asks for
is computed again. Run on every test program and on the linter's own modules (real classes
whose methods read, store and call each other), and some summaries must be taken."""

from __future__ import annotations

import ast
from pathlib import Path

from analysis_outcome import FILES, analyse

from promptcache.lint_rules.taint import Analyzer, Summary


class Recomputing(Analyzer):
    """Takes none of the pre-pass's summaries: the recording pass computes each again."""

    def _take(self, func: ast.AST) -> Summary | None:
        return None


class Counting(Analyzer):
    """Counts the pre-pass's summaries that the recording pass takes."""

    taken = 0

    def _take(self, func: ast.AST) -> Summary | None:
        found = super()._take(func)
        if found is not None:
            self.taken += 1
        return found


def test_kept_summaries_give_what_computing_them_again_gives() -> None:
    assert len(FILES) > 50
    taken = 0
    for path in FILES:
        raw = path.read_bytes()
        # one tree for both: facts name functions by the id of their node
        tree = ast.parse(raw)
        again, _ = analyse(Recomputing, tree, raw, path)
        kept, counting = analyse(Counting, tree, raw, path)
        assert kept == again, path
        assert isinstance(counting, Counting)
        taken += counting.taken
    assert taken > 100


class Naming(Analyzer):
    """Names the functions whose pre-pass summaries the recording pass takes."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.taken_names: list[str] = []

    def _take(self, func: ast.AST) -> Summary | None:
        found = super()._take(func)
        if found is not None and isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.taken_names.append(func.name)
        return found


BOT = """\
import time

from openai import OpenAI

client = OpenAI()


class Bot:
    def __init__(self):
        self.mode = "fast"
        self.started = time.time()

    def reset(self):
        self.mode = "fast"
        return self.mode

    def restart(self):
        self.started = time.time()
        return self.started

    def greet(self):
        return self.ping() is not None

    def ping(self):
        hello = [{"role": "user", "content": "hi"}]
        return client.chat.completions.create(model="m", messages=hello)

    def health(self):
        return self.ping() is not None

    def send(self, question):
        return client.chat.completions.create(
            model="m",
            messages=[
                {"role": "system", "content": f"mode {self.reset()} up {self.restart()}"},
                {"role": "user", "content": question},
            ],
        )
"""


def test_equal_store_and_equal_summary_used_are_taken(tmp_path: Path) -> None:
    """``reset`` stores the value ``mode`` holds (a read of it): taken; ``restart`` stores a
    new time into ``started``: computed again. ``health`` uses ``ping``'s summary, which sends
    a request (so is computed again) and comes out equal: taken; ``greet`` uses it before the
    recording pass has computed it: computed again. Either way the outcome is the one of
    computing every summary again."""
    path = tmp_path / "bot.py"
    path.write_text(BOT)
    raw = path.read_bytes()
    tree = ast.parse(raw)
    again, _ = analyse(Recomputing, tree, raw, path)
    kept, naming = analyse(Naming, tree, raw, path)
    assert kept == again
    assert isinstance(naming, Naming)
    assert sorted(naming.taken_names) == ["health", "reset"]
