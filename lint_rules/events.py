"""What the taint engine reports to the rules: prefix entries and recognised LLM calls.

The engine walks a module once and records

- a ``PrefixEntry`` each time a value enters a cached-prefix region (tools, system, earlier
  messages, the SDK's frozen or session layer, a message dict with a system role, the return
  value of a function that builds the system prompt, ...);
- a ``SinkCall`` for each recognised vendor call, with its cache blocks in prefix order
  (tools -> system -> messages), the values of its cache-relevant parameters and the loops
  around it.

Rules read these instead of walking the tree again.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .facts import Fact, Value


@dataclass(frozen=True)
class PrefixEntry:
    """A value that enters a cached-prefix region at ``node``.

    ``region``: "tools", "system", "messages" (a message before the newest one), "frozen" or
    "session" (SDK layers). ``sink``: a short label of the sink (``messages.create(system=)``).
    ``once``: recorded where code runs once (module level outside loops, ``__init__``).
    ``parts``: for text built from pieces (f-string, ``+``, ``join``), each piece in order as
    (node, varies per call, length in characters when constant, the piece's facts).
    ``function``: the function whose body records the entry (None at module level).
    ``arg``: the request's argument the value enters through (``system=s3``'s ``s3``, also
    where ``node`` is the text a name holds, ``s3 = f"Now {now}"``), or None where the entry
    is recorded outside a request's arguments (a helper's call that sends its parameter).
    """

    region: str
    value: Value
    node: ast.AST
    sink: str
    once: bool
    parts: tuple[tuple[ast.AST, bool, int | None, frozenset[Fact]], ...] = ()
    function: ast.AST | None = None
    arg: ast.AST | None = field(default=None, compare=False)
    #: system text whose pieces ``parts`` does not show, each as ``parts`` would: the text a
    #: name holds (``{"role": "system", "content": system}``), or each text a helper of this
    #: module returns (``system=system_prompt(user)``), its parameters' pieces taking the
    #: arguments' facts (for PC010 only: a fact's place stays ``node``)
    texts: tuple[tuple[tuple[ast.AST, bool, int | None, frozenset[Fact]], ...], ...] = field(
        default=(), compare=False
    )


@dataclass
class Block:
    """One element of a request's prefix, in order: a tool, a system block or a message.

    ``breakpoint`` is the ``cache_control``/``cachePoint`` dict literal that marks this block
    (``bp_node`` locates it); ``ttl_node`` is the ``"ttl"`` value expression when present.
    ``length`` is the text length in characters when statically known, else None;
    ``non_ascii`` how many of those characters are not ASCII. ``tail``: part of the newest
    message (written to the cache now, read on the next turn). ``opaque``: a part of the
    request that is not a literal (a history variable, ``*tools``): its blocks are unknown.
    """

    region: str
    node: ast.AST
    value: Value
    length: int | None
    breakpoint: ast.Dict | None = None
    bp_node: ast.AST | None = None
    ttl_node: ast.expr | None = None
    non_ascii: int = 0
    tail: bool = False
    opaque: bool = False


@dataclass(frozen=True)
class TurnContext:
    """A system message's ``content`` ahead of a stored ``history`` in a request's message
    list whose ``newest`` message holds the same parameter (``shared``, the PARAM fact the
    content holds, with the calls that passed it on): text made from each turn's input
    placed before the turns that the cache would otherwise keep. ``grown``: a statement of
    the function that appends to the history."""

    content: ast.expr
    history: ast.expr
    newest: ast.expr
    grown: ast.expr | ast.stmt
    shared: Fact


@dataclass(frozen=True)
class TurnCount:
    """A system text's ``content`` ahead of a ``history`` that a loop around the request
    appends to, holding a ``count`` that changes on every pass of that loop: a counter
    stepped by a constant (``remaining -= 1``) or ``len()`` of a list appended to on every
    pass, as the statement ``changed`` does. ``grown``: where the history is appended to."""

    content: ast.expr
    count: ast.expr
    changed: ast.stmt
    history: ast.expr
    grown: ast.expr | ast.stmt


@dataclass(frozen=True)
class HandedHistory:
    """In a function's summary: system text made from the turn's input (parameter
    ``name``) ahead of a history the function is given as its parameter ``param`` and sends
    without appending to it (``TurnContext`` without ``grown``): its ``content`` (as
    written, at ``line``/``col`` of ``path``, "" for the file being linted), the ``history``
    as written, the ``newest`` message's line, and the searches (``steps``, each a chain
    step) the input went through. A caller that passes the history its client sent with
    the request (``RegionsMixin.note_handed_turns``) reports it."""

    param: int
    content: str
    line: int
    col: int
    path: str
    history: str
    newest: int
    name: str
    steps: tuple[tuple[str, int, str, str], ...] = ()


@dataclass(frozen=True)
class HandedTurn:
    """A call (``call``) of a function whose summary notes a ``HandedHistory`` (``noted``),
    passing at ``argument`` the history its client sent with the request; ``callee`` names
    the function."""

    call: ast.Call
    argument: ast.expr
    noted: HandedHistory
    callee: str


@dataclass
class SinkCall:
    """A recognised LLM API call (or SDK render) and what the rules need to know about it.

    ``blocks``: the prefix in order; ``complete`` is false when some part of the prefix is not
    a literal (then sizes and breakpoint counts are lower bounds). ``params``: the keyword
    arguments that select cache behaviour (model, tool_choice, thinking, reasoning_effort,
    reasoning, prompt_cache_key, cache_control) as (expression, value). ``messages``: the
    expression passed as the conversation history. ``loops``: enclosing loop statements in the
    same function, outermost first; ``function``: the enclosing function or None.
    """

    node: ast.Call
    api: str
    label: str
    blocks: list[Block] = field(default_factory=list)
    complete: bool = True
    params: dict[str, tuple[ast.expr, Value]] = field(default_factory=dict)
    messages: ast.expr | None = None
    loops: tuple[ast.stmt, ...] = ()
    function: ast.AST | None = None
    once: bool = False
    #: system message contents ahead of a stored history that the same function grows, made
    #: from what its newest user message holds: (the content, the history, the newest
    #: message, the parameter they share), for PC010
    turn_context: list[TurnContext] = field(default_factory=list)
    #: system texts ahead of a history a loop around the request grows, holding a count the
    #: same loop changes on every pass, for PC010
    turn_counts: list[TurnCount] = field(default_factory=list)
