"""Parse a module with ``ast``, accepting Python 3.12-3.14 syntax whatever Python runs the linter.

``ast.parse`` of the running Python is tried first (the common, fast path). Only when it raises
``SyntaxError`` is the file handed to libcst's native parser, which knows newer syntax. A file
libcst accepts is valid newer Python: it is rewritten into code the running ``ast`` accepts,
keeping every line and, where possible, every column of the remaining code:

- type parameter lists (PEP 695, with PEP 696 defaults) of classes and functions become spaces
  of the same width (a multi-line list keeps its lines through ``\\`` continuations);
- ``type X[T] = value`` (PEP 695) becomes ``X = value``, with ``=`` and the value in place;
- ``except A, B:`` (PEP 758) becomes ``except(A,B):``, the parentheses taking the place of
  spaces so that the colon and the handler keep their columns (``B`` may move left by one);
  ``except*`` (3.11) becomes ``except`` on an older Python;
- a t-string (PEP 750) is analysed as the f-string with the same text;
- a string inside an f-string's replacement field that repeats the f-string's own quote
  (PEP 701, ``f"{d["key"]}"``) gets the other quote, when it holds neither quote nor ``\\``.

A file whose only newer syntax is simple type parameter lists (names, bounds and defaults
without strings or comments) is rewritten the same way without libcst (``_type_params_blanked``:
libcst's parse and rewrite of deepagents' 1.2 MB ``app.py``, one generic method, took about 4 s).

A file libcst accepts that cannot be rewritten this way (say, a backslash inside an f-string's
replacement field on Python 3.11, or a file libcst does not reproduce byte for byte, so that
positions would be wrong) raises ``NewerSyntaxError``: it is valid Python, just not
analysable here, so it is no PC000 finding.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import re
import sys
import threading
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

#: the newest grammar libcst's native parser is asked for
LIBCST_VERSION = "3.14"
#: CPython's parser limit on nested brackets: deeper files are invalid on every version, and
#: libcst's native parser is not given them (it can overflow its stack on very deep nesting)
MAX_NESTING = 200
#: stack for the thread that runs libcst's native parser (virtual memory, touched as needed)
PARSER_STACK = 256 * 1024 * 1024
#: what a syntax error of the running Python near newer syntax looks like: a type parameter
#: list, a ``type`` statement, an ``except`` clause, an f-string or a t-string
_NEWER = re.compile(
    rb"\b(?:class|def)\s+\w+\s*\[|^\s*type\s+\w|^\s*except\b"
    rb"|(?<![\w.])(?:[fFtT][rR]?|[rR][fFtT])[\"']",
    re.MULTILINE,
)

#: the line ends Python's tokenizer counts (``str.splitlines`` also ends lines at ``\x0c``,
#: ``\x1c``-``\x1e``, ``\x85``, U+2028 and U+2029, which may sit inside a string or comment)
_LINE_END = re.compile(r"\r\n|\r|\n")


#: the lines of the sources split last (``source_lines``), up to this many characters of
#: source in all: the program driver analyses a file a few times, and each analysis asks for
#: its lines (splitting deepagents' sources took about 1% of a cold run's CPU time)
LINES_KEPT_CHARS = 4_000_000
_LINES: OrderedDict[str, list[str]] = OrderedDict()
_LINES_SIZE = [0]


def source_lines(text: str) -> list[str]:
    """The lines of Python source ``text`` as the parser numbers them (``lines[n - 1]`` is line
    ``n`` of an ``ast`` node), without their line ends. The list is kept for the next call
    with the same text (``LINES_KEPT_CHARS``) and shared: callers must not change it."""
    lines = _LINES.get(text)
    if lines is not None:
        _LINES.move_to_end(text)
        return lines
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    if len(text) <= LINES_KEPT_CHARS:
        _LINES[text] = lines
        _LINES_SIZE[0] += len(text)
        while _LINES_SIZE[0] > LINES_KEPT_CHARS:
            oldest, _ = _LINES.popitem(last=False)
            _LINES_SIZE[0] -= len(oldest)
    return lines


#: rewritten sources kept per process: the program driver analyses a file up to 5 times, and
#: libcst's parse and rewrite of each took about a quarter of a cold run's CPU time on
#: langchain-ai/deepagents; the oldest goes first
REWRITTEN_KEPT = 64
_REWRITTEN: dict[str | bytes, str] = {}
#: a folder that the processes of one program run share rewritten sources through
#: (``share_rewrites``): the driver's worker processes and its own each analyse the same file,
#: and a large module's rewrite (deepagents' 1.2 MB ``app.py``) took libcst seconds in each
_SHARED: Path | None = None


def share_rewrites(folder: str | os.PathLike[str] | None) -> None:
    """Keep the sources rewritten in this process in ``folder`` too, and look there before
    rewriting one (a file per source, named by its hash); None: this process's own only.
    ``folder`` is created (mode 0700) when the first rewrite is stored, so a run without newer
    syntax creates nothing."""
    global _SHARED
    _SHARED = Path(folder) if folder is not None else None


def _shared_file(source: str | bytes) -> Path | None:
    if _SHARED is None:
        return None
    data = source if isinstance(source, bytes) else b"s" + source.encode("utf-8", "surrogatepass")
    return _SHARED / f"{hashlib.blake2b(data, digest_size=16).hexdigest()}.py"


def _shared_rewrite(source: str | bytes) -> str | None:
    """A rewrite of ``source`` another process of this run stored, or None."""
    path = _shared_file(source)
    if path is None:
        return None
    try:
        return path.read_bytes().decode("utf-8", "surrogatepass")
    except (OSError, UnicodeDecodeError):
        return None


def _share_rewrite(source: str | bytes, rewritten: str) -> None:
    """Store ``rewritten`` for the other processes of this run (atomically; best effort)."""
    path = _shared_file(source)
    if path is None:
        return
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        tmp.write_bytes(rewritten.encode("utf-8", "surrogatepass"))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


#: parsed trees kept per process (``parse_kept``), at most this many bytes of their sources
#: together, the least recently used going first: the program driver analyses a file up to 5
#: times, and parsing took about a seventh of langroid's serial cold run; a tree takes about
#: 20 times its source's size in memory. A wave of the fixpoint analyses again most of the
#: files analysed before it, in the same order, so the trees kept must hold them all: with
#: less, the least recently used is always the next one wanted and none is found (a serial
#: cold run of deepagents asks for 823 trees: with 2 MB 778 are parsed, with 8 MB 426, about
#: one per file; a fresh tree also costs the collector a pass over it). 2 MB -> 8 MB,
#: serial cold CPU on 2 shared cores (load 3-5): deepagents 26.0 -> 23.6 s, hindsight 18.2 ->
#: 15.7 s, openai-agents-python 18.6 -> 15.7 s, browser-use 10.7 -> 9.9 s; peak RSS 211 ->
#: 377, 195 -> 331, 162 -> 288, 155 -> 166 MiB (open-chat-studio, 1,312 files: 118 -> 132)
TREES_KEPT_BYTES = 8_000_000
_TREES: OrderedDict[str | bytes, ast.Module] = OrderedDict()
_TREES_SIZE = [0]


class NewerSyntaxError(Exception):
    """The file is valid newer Python (libcst parses it) that the running ``ast`` cannot read."""


def parse_module(source: str | bytes, path: str) -> ast.Module:
    """The ``ast`` tree of ``source``; positions are those of ``source``.

    Raises ``SyntaxError`` (the running ``ast``'s own error) when neither ``ast`` nor libcst
    accepts the file, ``NewerSyntaxError`` when only libcst does and the file cannot be
    rewritten for the running ``ast``, and whatever ``ast.parse`` raises for other bad input
    (``ValueError`` for a null byte, ``UnicodeDecodeError``, ``RecursionError``,
    ``MemoryError``).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings are about the linted file
        # a source rewritten before failed the running ``ast`` then: parse the rewrite alone
        rewritten = _REWRITTEN.get(source)
        if rewritten is None:
            try:
                return ast.parse(source, filename=path)
            except SyntaxError as error:
                rewritten = _shared_rewrite(source)
                parsed: list[ast.Module] = []
                if rewritten is None:
                    rewritten = _rewrite(source, error, parsed)
                    _share_rewrite(source, rewritten)
            if len(_REWRITTEN) >= REWRITTEN_KEPT:
                del _REWRITTEN[next(iter(_REWRITTEN))]
            _REWRITTEN[source] = rewritten
            if parsed:
                return parsed[0]  # the rewrite was parsed to check it: the same tree
        try:
            return ast.parse(rewritten, filename=path)
        except SyntaxError:
            raise NewerSyntaxError(path) from None


def parse_kept(source: str | bytes, path: str) -> ast.Module:
    """``parse_module(source, path)``, the tree kept for the next analysis of the same source
    in this process (``TREES_KEPT_BYTES``). The tree is shared: callers must not change it.
    Raises what ``parse_module`` raises (a source that does not parse is not kept)."""
    tree = _TREES.get(source)
    if tree is not None:
        _TREES.move_to_end(source)
        return tree
    tree = parse_module(source, path)
    constant_keys_spelled_out(tree)
    size = len(source)
    if size <= TREES_KEPT_BYTES:
        _TREES[source] = tree
        _TREES_SIZE[0] += size
        while _TREES_SIZE[0] > TREES_KEPT_BYTES:
            oldest, dropped = _TREES.popitem(last=False)
            _TREES_SIZE[0] -= len(oldest)
            # the list of its nodes kept on the tree (``nodes.all_nodes``) holds the tree
            # itself: without it, the tree is freed by its reference count, even where the
            # collector no longer sees it (``gc.freeze``)
            dropped.__dict__.pop("_all_nodes", None)
    return tree


#: the methods whose first argument is a key of the mapping they are called on
_KEY_METHODS = frozenset({"get", "setdefault", "pop"})


def constant_keys_spelled_out(tree: ast.Module) -> None:
    """Rewrite, in place, a key spelled by a module constant into the literal it names:
    ``state[STARTED_AT]``, ``state.get(STARTED_AT)``, ``.setdefault``/``.pop`` where
    ``STARTED_AT = "_started_at"`` is assigned once at module level, a str literal, and the
    name is bound nowhere else in the module (no other assignment, ``global``, parameter,
    import, loop or ``except`` name, definition). The key is then that literal's, as if
    written out: a time stored under it is that entry's, not the whole dict's (a computed key
    stands for any key). The new node keeps the name's position. Done once, before the tree
    is shared (``parse_kept``)."""
    constants: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Constant)
            and isinstance(value.value, str)
        ):
            # a second module-level assignment of the name is found below as another binding
            constants[target.id] = value.value
    if not constants:
        return
    keys: list[tuple[ast.AST, str, int | None, ast.Name]] = []
    bindings: dict[str, int] = {}

    def bound(name: str | None) -> None:
        if name in constants:
            bindings[name] = bindings.get(name, 0) + 1

    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                bound(node.id)
        elif isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Name) and key.id in constants:
                keys.append((node, "slice", None, key))
        elif isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in _KEY_METHODS
                and node.args
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in constants
            ):
                keys.append((node, "args", 0, node.args[0]))
        elif isinstance(node, ast.arg):
            bound(node.arg)
        elif isinstance(node, ast.alias):
            bound(node.asname or node.name.partition(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                bound(name)
                bound(name)  # rebound in a function: never a constant
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            bound(node.name)
        elif isinstance(node, ast.MatchMapping):
            bound(node.rest)
    for holder, field, index, used in keys:
        if bindings.get(used.id, 0) != 1:
            continue
        literal = ast.copy_location(ast.Constant(value=constants[used.id]), used)
        if index is None:
            setattr(holder, field, literal)
        else:
            getattr(holder, field)[index] = literal


def is_newer_python(source: str | bytes, error: SyntaxError) -> bool:
    """True when ``source``, which the running Python rejected with ``error``, is valid newer
    Python (libcst's native parser accepts it)."""
    return _libcst_module(source, error) is not None


def where_broken(source: str | bytes, error: SyntaxError) -> SyntaxError:
    """The error to report for ``source``, which the running Python rejected with ``error``
    and which is not valid newer Python either: ``error``, or one further on when ``error``
    is at a type parameter list that newer Pythons accept (``_where_broken``)."""
    later: list[SyntaxError] = []
    _type_params_blanked(source, error, later)
    return _where_broken(source, error, later)


def _rewrite(
    source: str | bytes, error: SyntaxError, parsed: list[ast.Module] | None = None
) -> str:
    """``source`` rewritten for the running ``ast`` (see the module's docstring). A rewrite
    that was parsed to check it (``_type_params_blanked``) has its tree appended to
    ``parsed``. Raises ``SyntaxError`` (where the file is broken) when libcst rejects it too,
    ``NewerSyntaxError`` when libcst does not reproduce it."""
    later: list[SyntaxError] = []
    fast = _type_params_blanked(source, error, later, parsed)
    if fast is not None:
        return fast
    module = _libcst_module(source, error)
    if module is None:
        raise _where_broken(source, error, later)
    exact = module.code == source if isinstance(source, str) else module.bytes == source
    if not exact and not (isinstance(source, bytes) and b"\xef\xbb\xbf" + module.bytes == source):
        raise NewerSyntaxError("libcst does not reproduce the file: positions would be wrong")
    return str(module.visit(_older(module)).code)


#: a class or function with a type parameter list (the keyword, the name, the ``[``)
_TYPE_PARAMS = re.compile(r"\b(def|class)[ \t]+(\w+)[ \t]*\[")
#: what a simple type parameter list holds: names, bounds and defaults without strings,
#: comments or backslashes
_SIMPLE_PARAMS = re.compile(r"[\w\s,.:=*|()\[\]]*")


def _where_broken(source: str | bytes, error: SyntaxError, later: list[SyntaxError]) -> SyntaxError:
    """The error to report for a file neither parser accepts: ``error``, the running
    ``ast``'s first, unless the file with its type parameter lists blanked (same positions)
    failed further on (``later``) on a line without other newer syntax: the lists before that
    point are valid newer Python, and the error there is the file's."""
    if later:
        blanked = later[0]
        if (blanked.lineno or 0, blanked.offset or 0) > (
            error.lineno or 0,
            error.offset or 0,
        ) and not _newer_on_line(source, blanked.lineno or 0):
            blanked.filename = error.filename
            return blanked
    return error


def _type_params_blanked(
    source: str | bytes,
    error: SyntaxError,
    later: list[SyntaxError] | None = None,
    parsed: list[ast.Module] | None = None,
) -> str | None:
    """``_rewrite``'s output without libcst, for the common case of a file whose only newer
    syntax is simple type parameter lists of classes and functions: each list, with the
    spaces around it, becomes spaces of the same width (as libcst's rewrite makes it). None
    when the file is not such a file, or is one that libcst would not be asked about
    (``_libcst_module``): the caller then asks libcst. When the blanked file does not parse,
    its ``SyntaxError`` is appended to ``later``; when it is the rewrite, its tree is
    appended to ``parsed``."""
    if "too many" in str(error.msg) or "too complex" in str(error.msg):
        return None
    if not _near_newer_syntax(source, error) or _too_deep(source):
        return None
    if isinstance(source, bytes):
        if source.startswith(b"\xef\xbb\xbf") or b"coding" in b"\n".join(source.splitlines()[:2]):
            return None
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError:
            return None
    else:
        text = source
    if "\r" in text or "\f" in text or "\x00" in text:
        return None
    parts: list[str] = []
    names: set[tuple[int, str]] = set()
    done = 0
    for match in _TYPE_PARAMS.finditer(text):
        if match.start() < done:
            return None
        depth, end = 0, match.end() - 1
        while end < len(text):
            char = text[end]
            if char in "([":
                depth += 1
            elif char in ")]":
                depth -= 1
                if depth == 0:
                    break
            end += 1
        else:
            return None
        inner = text[match.end() : end]
        if not inner.strip() or _SIMPLE_PARAMS.fullmatch(inner) is None:
            return None
        try:
            params = ast.parse(f"def _f({inner}): pass").body[0].args  # type: ignore[attr-defined]
        except SyntaxError:
            return None
        if (
            params.posonlyargs
            or params.kwonlyargs
            or (params.vararg is not None and params.vararg.annotation is not None)
            or (params.kwarg is not None and params.kwarg.annotation is not None)
        ):
            return None
        after = end + 1
        while after < len(text) and text[after] in " \t":
            after += 1
        if after >= len(text) or text[after] not in "(:":
            return None
        name_end = match.end(2)
        parts += [text[done:name_end], _blank(text[name_end:after])]
        names.add((text.count("\n", 0, match.start()) + 1, match.group(2)))
        done = after
    if not parts:
        return None
    rewritten = "".join(parts) + text[done:]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(rewritten)
    except SyntaxError as blanked_error:
        if later is not None:
            later.append(blanked_error)
        return None
    except ValueError:
        return None
    # every list blanked was one of a definition (not text in a string)
    if not names <= _definitions(tree):
        return None
    if parsed is not None:
        parsed.append(tree)
    return rewritten


def _definitions(tree: ast.Module) -> set[tuple[int, str]]:
    """(line, name) of every ``def`` and ``class`` in ``tree``. Definitions are statements,
    so only statement lists are visited (the bodies, ``else`` and ``finally`` blocks, the
    handlers and the ``case`` blocks), not expressions (deepagents' 1.2 MB ``app.py``: 0.015 s;
    ``ast.walk`` over its 90,000 nodes took 0.1 s, half as long as parsing it)."""
    found: set[tuple[int, str]] = set()
    todo: list[list[Any]] = [tree.body]
    while todo:
        for node in todo.pop():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add((node.lineno, node.name))
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                block = getattr(node, name, None)
                if isinstance(block, list) and block:
                    todo.append(block)
    return found


#: every byte but the brackets (``bytes.translate``'s ``delete``)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"()[]{}")


def _too_deep(source: str | bytes) -> bool:
    """Brackets nested deeper than any Python accepts (counted roughly, strings included)."""
    data = source.encode("utf-8", "replace") if isinstance(source, str) else source
    if data.count(b"(") + data.count(b"[") + data.count(b"{") <= MAX_NESTING:
        return False
    depth = 0
    opening, closing = frozenset(b"([{"), frozenset(b")]}")
    for byte in data.translate(None, _NOT_BRACKETS):  # the brackets alone, in order
        if byte in opening:
            depth += 1
            if depth > MAX_NESTING:
                return True
        elif byte in closing and depth:
            depth -= 1
    return False


def _newer_on_line(source: str | bytes, line: int) -> bool:
    """Whether line ``line`` (1-based) of ``source`` holds a construct newer Pythons added."""
    data = source if isinstance(source, bytes) else source.encode("utf-8", "replace")
    lines = data.splitlines()
    return 1 <= line <= len(lines) and _NEWER.search(lines[line - 1]) is not None


def _near_newer_syntax(source: str | bytes, error: SyntaxError) -> bool:
    """Whether the lines around ``error`` hold a construct newer Pythons added, or ``error``
    is one of Python 3.11's f-string errors (``f-string expression part cannot include a
    backslash``, ``f-string: expecting '}'``): those are raised at the replacement field, which
    can be many lines below the prefix of a triple-quoted f-string, and PEP 701 lifted them."""
    if str(error.msg).startswith("f-string"):
        return True
    data = source if isinstance(source, bytes) else source.encode("utf-8", "replace")
    lines = data.splitlines()
    line = error.lineno or 0
    window = b"\n".join(lines[max(0, line - 2) : line + 1])
    return _NEWER.search(window) is not None


def _libcst_module(source: str | bytes, error: SyntaxError) -> Any:
    """libcst's tree of ``source``, or None when it rejects it or must not be asked: a file
    whose syntax error is not near a newer construct, or that nests beyond CPython's limits
    (libcst's native parser is slow on, and can overflow its stack for, pathological input)."""
    if "too many" in str(error.msg) or "too complex" in str(error.msg):
        return None  # nesting limits: no Python version accepts the file
    if not _near_newer_syntax(source, error) or _too_deep(source):
        return None
    import libcst

    found: list[Any] = []

    def parse() -> None:
        # ParserSyntaxError, and whatever else it raises for bad input: not accepted
        with contextlib.suppress(Exception):
            config = libcst.PartialParserConfig(python_version=LIBCST_VERSION)
            found.append(libcst.parse_module(source, config=config))

    # the native parser recurses on the calling thread's stack: give it a large one
    old = threading.stack_size(PARSER_STACK)
    try:
        worker = threading.Thread(target=parse, name="promptcache-libcst-parse")
        worker.start()
    finally:
        threading.stack_size(old)
    worker.join()
    return found[0] if found else None


def _blank(text: str) -> str:
    """Whitespace as wide as ``text`` in UTF-8 bytes, keeping its lines with ``\\``."""
    lines = text.splitlines(keepends=True)
    out = []
    for line in lines:
        body = line.rstrip("\r\n")
        newline = line[len(body) :]
        width = len(body.encode("utf-8"))
        out.append(" " * width + ("\\" + newline if newline else ""))
    return "".join(out)


def _older_transformer() -> type:
    import libcst as cst

    def ws(text: str) -> cst.SimpleWhitespace:
        return cst.SimpleWhitespace(text)

    def shorter(node: Any) -> tuple[Any, bool]:
        """``node`` (a SimpleWhitespace) one space shorter, and whether it was."""
        if isinstance(node, cst.SimpleWhitespace) and node.value.endswith(" "):
            return ws(node.value[:-1]), True
        return node, False

    class Older(cst.CSTTransformer):
        def __init__(self, module: cst.Module) -> None:
            super().__init__()
            self.module = module

        def code(self, *nodes: Any) -> str:
            return "".join(
                self.module.code_for_node(n) for n in nodes if isinstance(n, cst.CSTNode)
            )

        def _drop_type_params(self, original: Any, updated: Any) -> Any:
            params = updated.type_parameters
            if params is None:
                return updated
            text = self.code(
                updated.whitespace_after_name, params, updated.whitespace_after_type_parameters
            )
            return updated.with_changes(
                type_parameters=None,
                whitespace_after_name=ws(_blank(text)),
                whitespace_after_type_parameters=ws(""),
            )

        def leave_ClassDef(self, original: Any, updated: Any) -> Any:
            return self._drop_type_params(original, updated)

        def leave_FunctionDef(self, original: Any, updated: Any) -> Any:
            return self._drop_type_params(original, updated)

        def leave_TypeAlias(self, original: Any, updated: Any) -> Any:
            after_name = updated.whitespace_after_name
            after_params = updated.whitespace_after_type_parameters
            gap = "type" + self.code(updated.whitespace_after_type)
            gap += self.code(after_name) if isinstance(after_name, cst.CSTNode) else " "
            if updated.type_parameters is not None:
                gap += self.code(updated.type_parameters)
                gap += self.code(after_params) if isinstance(after_params, cst.CSTNode) else " "
            return cst.Assign(
                targets=[
                    cst.AssignTarget(
                        target=updated.name,
                        whitespace_before_equal=ws(_blank(gap)),
                        whitespace_after_equal=updated.whitespace_after_equals,
                    )
                ],
                value=updated.value,
                semicolon=updated.semicolon,
            )

        def _parenthesize(self, updated: Any, before: str) -> Any:
            kind = updated.type
            if not isinstance(kind, cst.Tuple) or kind.lpar:
                return updated
            space, _ = shorter(getattr(updated, before))
            colon, done = shorter(updated.whitespace_before_colon)
            elements = list(kind.elements)
            for index in reversed(range(len(elements))):
                comma = elements[index].comma
                if done or not isinstance(comma, cst.Comma):
                    continue  # else: the ")" takes a space after a comma, the colon stays
                after, done = shorter(comma.whitespace_after)
                if done:
                    elements[index] = elements[index].with_changes(
                        comma=comma.with_changes(whitespace_after=after)
                    )
            return updated.with_changes(
                type=kind.with_changes(
                    elements=elements, lpar=[cst.LeftParen()], rpar=[cst.RightParen()]
                ),
                whitespace_before_colon=colon,
                **{before: space},
            )

        def leave_ExceptHandler(self, original: Any, updated: Any) -> Any:
            return self._parenthesize(updated, "whitespace_after_except")

        def leave_ExceptStarHandler(self, original: Any, updated: Any) -> Any:
            updated = self._parenthesize(updated, "whitespace_after_star")
            if sys.version_info >= (3, 11):
                return updated
            space = self.code(updated.whitespace_after_except) + " "
            return cst.ExceptHandler(
                body=updated.body,
                type=updated.type,
                name=updated.name,
                leading_lines=updated.leading_lines,
                whitespace_after_except=ws(space + self.code(updated.whitespace_after_star)),
                whitespace_before_colon=updated.whitespace_before_colon,
            )

        def leave_TryStar(self, original: Any, updated: Any) -> Any:
            if sys.version_info >= (3, 11):
                return updated
            return cst.Try(
                body=updated.body,
                handlers=updated.handlers,
                orelse=updated.orelse,
                finalbody=updated.finalbody,
                leading_lines=updated.leading_lines,
                whitespace_before_colon=updated.whitespace_before_colon,
            )

        def leave_TemplatedString(self, original: Any, updated: Any) -> Any:
            prefix = updated.start.replace("t", "f").replace("T", "F")
            return self._unquote(
                cst.FormattedString(
                    parts=[_formatted(p) for p in updated.parts],
                    start=prefix,
                    end=updated.end,
                    lpar=updated.lpar,
                    rpar=updated.rpar,
                )
            )

        def leave_FormattedString(self, original: Any, updated: Any) -> Any:
            return self._unquote(updated)

        def _unquote(self, node: Any) -> Any:
            quote = node.end
            if len(quote) != 1:
                return node  # triple-quoted: older Pythons accept the other quotes inside
            swap = _Swap(quote)
            parts = [
                p.visit(swap) if isinstance(p, cst.FormattedStringExpression) else p
                for p in node.parts
            ]
            return node.with_changes(parts=parts)

    def _formatted(part: Any) -> Any:
        if isinstance(part, cst.TemplatedStringText):
            return cst.FormattedStringText(value=part.value)
        spec = part.format_spec
        return cst.FormattedStringExpression(
            expression=part.expression,
            conversion=part.conversion,
            format_spec=None if spec is None else [_formatted(p) for p in spec],
            whitespace_before_expression=part.whitespace_before_expression,
            whitespace_after_expression=part.whitespace_after_expression,
            equal=part.equal,
        )

    class _Swap(cst.CSTTransformer):
        """Strings quoted like the enclosing f-string get the other quote (same width)."""

        def __init__(self, quote: str) -> None:
            super().__init__()
            self.quote = quote
            self.other = "'" if quote == '"' else '"'

        def leave_SimpleString(self, original: Any, updated: Any) -> Any:
            value = updated.value
            prefix = value[: len(value) - len(value.lstrip("rRbBuU"))]
            body = value[len(prefix) :]
            if body[:1] != self.quote or body[:3] == self.quote * 3:
                return updated
            inner = body[1:-1]
            if self.other in inner or self.quote in inner or "\\" in inner:
                return updated
            return updated.with_changes(value=prefix + self.other + inner + self.other)

        def leave_FormattedString(self, original: Any, updated: Any) -> Any:
            if updated.end != self.quote:
                return updated
            return updated.with_changes(start=updated.start[:-1] + self.other, end=self.other)

    return Older


_OLDER: type | None = None


def _older(module: Any) -> Any:
    """The transformer for ``module`` (its class is built on first use: libcst loads late)."""
    global _OLDER
    if _OLDER is None:
        _OLDER = _older_transformer()
    return _OLDER(module)
