"""Every node of a parsed module, found once per tree.

Several parts of the analysis look at every node of a module (``sinks.logged_dicts``,
``calls.converted_classes``, ``library.fixed_names``, ``regions``' turn sources, the
breakpoint rules' module tables), and the program driver analyses a file a few times on the
one tree it keeps (``parse.parse_kept``). ``ast.walk`` of a whole module took about a tenth
of a cold run's CPU time on deepagents; ``all_nodes`` walks each tree once, in
``ast.walk``'s order, and keeps the list on the tree (the tree is shared and never changed).
"""

from __future__ import annotations

import ast


def all_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree``, ``tree`` first, in the order ``ast.walk`` yields them
    (breadth first, each node's children in the order of its fields). Kept on the tree:
    callers must not change the list."""
    known: list[ast.AST] | None = tree.__dict__.get("_all_nodes")
    if known is not None:
        return known
    out: list[ast.AST] = [tree]
    node_type = ast.AST
    i = 0
    while i < len(out):
        node = out[i]
        i += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, node_type):
                out.append(value)
            elif isinstance(value, list):
                out.extend([item for item in value if isinstance(item, node_type)])
    tree.__dict__["_all_nodes"] = out
    return out


def name_text(node: ast.Name | ast.Attribute) -> str:
    """``ast.unparse(node)`` of a name or an attribute (``self.client.chat``), the dotted
    names joined without the unparser's per-call setup when the chain ends at a name (its
    output is exactly that); any other chain (``make().client``) is unparsed once and the
    text kept on the node (the trees are shared and never changed)."""
    if node.__class__ is ast.Name:
        return node.id
    parts: list[str] = []
    current: ast.AST = node
    while current.__class__ is ast.Attribute:
        parts.append(current.attr)
        current = current.value
    if current.__class__ is ast.Name:
        parts.append(current.id)
        parts.reverse()
        return ".".join(parts)
    known: str | None = node.__dict__.get("_unparsed")
    if known is None:
        known = node.__dict__["_unparsed"] = ast.unparse(node)
    return known


def tested_subject(test: ast.expr) -> ast.expr | None:
    """The value a condition tests for being set: ``x`` in ``x``, ``not x``, ``x is None``
    and ``x is not None``; None for any other condition."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        test = test.left
    return test if isinstance(test, (ast.Name, ast.Attribute)) else None


__all__ = ["all_nodes", "name_text", "tested_subject"]
