"""How a tool list's elements carry their name: the ``Value.name_key`` lattice used by PC005.

``name_key`` says which sort key cannot raise on every element of a list:

- ``"elem"`` / ``"attr"``: objects with a ``.name`` (MCP ``Tool``s), key ``tool.name``;
- ``"item"``: dicts that all have a literal ``"name"`` key, key ``tool["name"]``;
- ``"dict"``: dicts, some with a ``"name"`` key and some without (a Responses API built-in
  such as ``{"type": "web_search"}``), key ``tool.get("name", "")``;
- ``""``: unknown elements: no key is known to be safe, so PC005 offers no fix.

Combining two lists (``+``, ``+=``, ``extend``, ``append``) keeps a key only when it is safe
for the elements of both.
"""

from __future__ import annotations

import ast


def combine(a: str, b: str) -> str:
    """The name key of a list holding the elements of lists keyed ``a`` and ``b``."""
    if a == b:
        return a
    if {a, b} <= {"item", "dict"}:
        return "dict"
    return ""


def element_key(node: ast.expr) -> str:
    """The name key of one list element written as ``node``: only dict literals are known."""
    if not isinstance(node, ast.Dict):
        return ""
    named = any(isinstance(k, ast.Constant) and k.value == "name" for k in node.keys)
    return "item" if named else "dict"


def literal_key(elements: list[ast.expr]) -> str:
    """The name key of a list literal: ``"dict"`` needs at least one element with a name."""
    keys = {element_key(e) for e in elements}
    if not keys or "" in keys:
        return ""
    return "item" if keys == {"item"} else "dict"


def mutated_key(old: str, method: str, node: ast.Call, added: list[str]) -> str:
    """The name key after ``lst.<method>(...)``; ``added``: the arguments' own name keys."""
    if method in ("append", "appendleft") and node.args:
        return combine(old, element_key(node.args[0]))
    if method == "insert" and len(node.args) > 1:
        return combine(old, element_key(node.args[1]))
    if method in ("extend", "extendleft") and added:
        return combine(old, added[0])
    return old
