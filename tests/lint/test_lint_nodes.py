"""``nodes.all_nodes``: every node of a tree in ``ast.walk``'s order, found once per tree; and
the other answers kept on a tree for later analyses of the file."""

from __future__ import annotations

import ast
from pathlib import Path

from promptcache.lint_rules.config import LintConfig
from promptcache.lint_rules.library import fixed_names
from promptcache.lint_rules.nodes import all_nodes
from promptcache.lint_rules.runner import _kept_triggered, _triggered
from promptcache.lint_rules.sinks import spec_from_config
from promptcache.lint_rules.statements import loop_names

SOURCE = '''
import random as rnd, os.path
from x import (a as b, c)

PROMPTS = ["You are terse.", "You are kind."]
LATER = ("x", 1)


@decorator(arg=[1, {2: 3}])
class Agent(Base, metaclass=Meta):
    """Doc."""

    field: int = 0

    async def run(self, *args, key: str = "k", **kw) -> None:
        global LATER
        async with ctx() as (one, two):
            async for item in stream():
                yield f"{item!r:>{width}}"
        try:
            pass
        except (ValueError, KeyError) as error:
            raise RuntimeError() from error
        else:
            del self.cache[key]
        finally:
            LATER = [lambda y: y ** 2 for y in range(3) if y]
        match args:
            case [1, *rest] | {"k": _}:
                return rest
            case Point(x=0):
                return None


def pick():
    return rnd.choice(PROMPTS)
'''


def test_all_nodes_is_ast_walk_order() -> None:
    tree = ast.parse(SOURCE)
    assert [id(n) for n in all_nodes(tree)] == [id(n) for n in ast.walk(tree)]


def test_all_nodes_of_the_linter_own_sources() -> None:
    root = Path(__file__).resolve().parents[2] / "lint_rules"
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert [id(n) for n in all_nodes(tree)] == [id(n) for n in ast.walk(tree)], path


def test_all_nodes_and_fixed_names_are_found_once_per_tree() -> None:
    tree = ast.parse(SOURCE)
    assert all_nodes(tree) is all_nodes(tree)
    few, once = fixed_names(tree)
    assert fixed_names(tree) is fixed_names(tree)
    assert set(few) == {"PROMPTS"}
    assert "LATER" not in once and "pick" in once
    # a new tree of the same text is walked afresh
    assert all_nodes(ast.parse(SOURCE)) is not all_nodes(tree)


LOOPS = """
def pick(items, limit):
    best = None
    out = []
    for item in items:
        if item.score > limit:
            best = item
        out.append(item)
    for item in items:
        if item.ok:
            return item
    return best, out
"""


def test_loop_names_are_found_once_per_loop() -> None:
    tree = ast.parse(LOOPS)
    first, second = [n for n in ast.walk(tree) if isinstance(n, ast.For)]
    assert loop_names(first) is loop_names(first)
    assert loop_names(first)[:2] == ({"best"}, {"out"})
    picked, gathered, returns = loop_names(second)
    assert (picked, gathered) == (set(), set())
    assert returns == {id(n) for n in ast.walk(second) if isinstance(n, ast.Return)}


def test_trigger_answers_are_kept_per_tree_and_sink_names() -> None:
    source = "def ask(q):\n    return my_llm_call(q)\n"
    tree = ast.parse(source)
    text = source.encode()
    plain = LintConfig()
    with_sink = LintConfig(sinks=(spec_from_config({"call": "app.my_llm_call", "text": 0}),))
    assert _triggered(text, plain) is False and _triggered(text, with_sink) is True
    # one tree, two configs: each keeps its own answer for the same text
    assert _kept_triggered(tree, plain)(text) is False
    assert _kept_triggered(tree, with_sink)(text) is True
    assert _kept_triggered(tree, plain)(text) is False
    assert tree.__dict__["_triggered"][("my_llm_call",)] == {text: True}
