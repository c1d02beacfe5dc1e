"""Answers found by one walk of a function or class and kept on its node: the dicts whose
values are sets (``frames._set_values_in``, for ``set_values_birth``) and the locals bound once
to a literal (``statements.fixed_locals``). Each is compared here with what a separate walk
per question finds (``ast.walk``, as the answers are specified)."""

from __future__ import annotations

import ast

from promptcache.lint_rules.frames import _set_expr, _set_values_in
from promptcache.lint_rules.statements import fixed_locals

SETS = """
class Index:
    def __init__(self):
        self.by_scope = {}
        self.by_name: dict = {}
        self.counts = defaultdict(set)
        self.lists = defaultdict(list)
        self.nums = {}

    def add(self, scope, name, key):
        self.by_scope.setdefault(scope, set()).add(name)
        self.by_name[name] = {scope, key}
        self.by_name[scope] = set()
        self.lists.setdefault(scope, [])
        self.nums[key] = {1, 2}
        self.nums[1:2] = set()
        self.by_scope[key] = frozenset()
        a = b[key] = set(name)
"""


def _first_set(scope: ast.AST, text: str) -> tuple[int, int, str] | None:
    """The first set stored as a value of ``text`` in ``scope``, by one ``ast.walk`` per
    question (the specification of ``_set_values_in``'s answers)."""
    for node in ast.walk(scope):
        found = None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "setdefault"
            and len(node.args) == 2
            and ast.unparse(node.func.value) == text
        ):
            found = _set_expr(node.args[1])
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Subscript)
                    and not isinstance(target.slice, ast.Slice)
                    and ast.unparse(target.value) == text
                ):
                    found = found or _set_expr(node.value)
                elif (
                    ast.unparse(target) == text
                    and isinstance(node.value, ast.Call)
                    and ast.unparse(node.value.func) in ("defaultdict", "collections.defaultdict")
                    and node.value.args
                    and isinstance(node.value.args[0], ast.Name)
                    and node.value.args[0].id in ("set", "frozenset")
                ):
                    arg = node.value.args[0]
                    found = found or (arg.lineno, arg.col_offset, f"{arg.id}()")
        if found is not None:
            return found
    return None


def test_set_values_one_walk_answers_every_dict_text() -> None:
    cls = ast.parse(SETS).body[0]
    known = _set_values_in(cls)
    # the first set of each dict in ``ast.walk``'s order (breadth first: the statement
    # ``self.by_scope[key] = frozenset()`` before the call nested in an earlier statement)
    assert known["self.by_scope"] == (17, 29, "frozenset()")
    assert known["self.by_name"] == (12, 29, "a set literal")
    assert known["self.counts"] == (6, 34, "set()")
    assert known["b"] == (18, 21, "set()")
    # look-alikes: a list default, a defaultdict of lists, a set of numbers, a slice store
    for text in ("self.lists", "self.nums", "a", "self.missing"):
        assert text not in known
    texts = {ast.unparse(n) for n in ast.walk(cls) if isinstance(n, (ast.Name, ast.Attribute))}
    for text in texts | {"self.missing"}:
        assert known.get(text) == _first_set(cls, text), text


FIXED = """
def f(flag):
    precise = False
    limit = 3
    limit += 1
    mode = "a"
    shared = 1
    outer = 2
    for item in []:
        pass
    import os as mode2

    def inner():
        nonlocal shared
        shared = 5

    class Local:
        def m(self):
            global outer
    return precise, limit, mode, shared, outer, flag, item
"""


def test_fixed_locals_bound_once_and_not_rebound_anywhere() -> None:
    func = ast.parse(FIXED).body[0]
    assert isinstance(func, ast.FunctionDef)
    # ``limit += 1``, ``nonlocal shared`` in a nested function, ``global outer`` in a method
    # of a nested class: bound again, so not fixed
    assert dict(fixed_locals(func)) == {"precise": False, "mode": "a"}
    assert fixed_locals(func) is fixed_locals(func)  # found once, kept on the node
