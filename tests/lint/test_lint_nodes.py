"""``nodes.all_nodes``: every node of a tree in ``ast.walk``'s order, found once per tree."""

from __future__ import annotations

import ast
from pathlib import Path

from promptcache.lint_rules.library import fixed_names
from promptcache.lint_rules.nodes import all_nodes

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
