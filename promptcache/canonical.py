"""Canonical JSON and frozen-text normalisation: the byte-stable forms a cached prefix needs.

A vendor prompt cache matches an exact prefix of the rendered request, so the same logical prompt
must serialise to the same bytes every time. Two things break that in practice:

* JSON whose key order depends on how a dict was built (tool schemas assembled from several
  places, languages that randomise map order: see "Tool-use JSON: keep key order stable" in
  https://platform.claude.com/docs/en/build-with-claude/prompt-caching , checked 2026-11-30);
* text that differs only in invisible ways (CRLF from a Windows checkout, trailing spaces added by
  an editor).

``canonical_json`` fixes the first; ``normalize_text`` the second. Both are pure functions.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping
from typing import Any, Final

from promptcache.errors import CanonicalizationError, ConfigError

__all__ = [
    "canonical_json",
    "canonical_json_and_bytes",
    "canonical_json_bytes",
    "canonical_tool_schema",
    "normalize_text",
    "sort_keys_deep",
]

#: JSON Schema keywords whose array value is a set (order carries no meaning), sorted by
#: ``canonical_tool_schema``. ``enum`` and ``prefixItems`` are NOT here: their order can matter.
_SET_VALUED_SCHEMA_KEYS = frozenset({"required"})


def _path_str(path: tuple[str | int, ...]) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


#: Bits of an int that every limit on int-to-text conversion lets through (Python's least
#: ``sys.set_int_max_str_digits`` is 640 digits, over 2,100 bits); longer ints are checked.
_INT_BITS_ALWAYS_SHOWN: Final = 2000

#: Deepest nesting ``_plain`` accepts: far beyond any real request or JSON Schema, and well inside
#: Python's recursion limit; deeper (or cyclic) input raises CanonicalizationError.
MAX_DEPTH: Final = 200


def _plain(obj: object, path: tuple[str | int, ...]) -> Any:
    """Return ``obj`` as plain dict/list/str/int/float/bool/None, keys sorted, or raise.

    ``bool`` is checked before ``int`` (it subclasses int); subclasses of str/int/float (enums,
    numpy scalars that subclass float) are converted to the base type so that their custom
    ``__repr__`` cannot leak into the output.
    """
    if obj is None or obj is True or obj is False:
        return obj
    if isinstance(obj, str):
        return str.__str__(obj)  # the plain value, even for str-mixin enums
    if isinstance(obj, int):
        number = int.__int__(obj)
        if number.bit_length() > _INT_BITS_ALWAYS_SHOWN:
            try:
                str(number)
            except ValueError:  # more digits than sys.get_int_max_str_digits()
                raise CanonicalizationError(
                    f"{_path_str(path)} is an integer of more than "
                    f"{sys.get_int_max_str_digits()} digits, more than Python turns into text "
                    "(sys.set_int_max_str_digits): send it as a string"
                ) from None
        return number
    if isinstance(obj, float):
        value = float.__float__(obj)
        if not math.isfinite(value):
            raise CanonicalizationError(
                f"{_path_str(path)} is {value!r}, which JSON cannot represent; "
                "replace it with a finite number, null or a string"
            )
        return value
    if isinstance(obj, (Mapping, list, tuple)) and len(path) >= MAX_DEPTH:
        raise CanonicalizationError(
            f"{_path_str(path[:6])}... is nested more than {MAX_DEPTH} levels deep (or contains "
            "a cycle); flatten it: no vendor accepts such a request"
        )
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for key in obj:
            if not isinstance(key, str):
                raise CanonicalizationError(
                    f"{_path_str(path)} has a key of type {type(key).__name__} ({key!r}); "
                    "JSON object keys must be strings: convert the key with str() yourself so "
                    "the conversion is explicit"
                )
        for key in sorted(obj):
            out[str.__str__(key)] = _plain(obj[key], (*path, key))
        return out
    if isinstance(obj, (list, tuple)):
        return [_plain(item, (*path, i)) for i, item in enumerate(obj)]
    kind = type(obj).__name__
    hint = (
        "sets have no order: pass sorted(...) as a list"
        if isinstance(obj, (set, frozenset))
        else "bytes have no JSON form: decode or base64-encode them first"
        if isinstance(obj, (bytes, bytearray))
        else "convert it to a dict, list, str, int, float, bool or None first"
    )
    raise CanonicalizationError(f"{_path_str(path)} has type {kind}, which is not JSON; {hint}")


def sort_keys_deep(obj: object) -> Any:
    """Return a plain copy of ``obj`` with every mapping's keys in sorted (code-point) order.

    Use this to build request bodies that libraries will later serialise in insertion order (the
    ``anthropic`` and ``openai`` clients do): the wire bytes then no longer depend on how the dicts
    were assembled. Tuples become lists.

    Raises:
        CanonicalizationError: NaN or +/-Infinity, a non-``str`` mapping key, a value that is
            not a mapping, list, tuple, str, int, float, bool or None, or nesting deeper than
            ``MAX_DEPTH`` (200) levels, which includes cycles. The message gives the JSON
            path (``$.tools[0].input_schema``) and what to change.
    """
    return _plain(obj, ())


#: The encoders ``canonical_json`` uses, built once (``json.dumps`` with these options builds a
#: ``JSONEncoder`` per call). ``_ENCODE_SORTED`` sorts keys itself: for a dict whose keys are all
#: exact ``str`` it orders the ``(key, value)`` pairs by key, the order ``sorted(obj)`` gives.
_ENCODE_SORTED: Final = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=True
).encode
_ENCODE: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


# the JSON scalars that serialise the same whatever their context
_LEAF_KINDS = frozenset({str, int, bool, type(None)})


def _is_exact_json(obj: object, depth: int) -> bool:
    """True when ``obj`` is made only of exact ``dict`` (exact ``str`` keys), ``list``, ``str``,
    ``int``, ``bool``, ``None`` and finite ``float``, with no container ``MAX_DEPTH`` or more
    levels down: the values ``json.loads`` returns, for which ``_plain`` would only sort the keys.

    Anything else (subclasses, tuples, other mappings, non-finite floats, deeper nesting) answers
    False and goes through ``_plain``, which converts it or raises.
    """
    kind = type(obj)
    if kind in _LEAF_KINDS:
        return True
    if kind is float:
        return math.isfinite(obj)  # type: ignore[arg-type]
    values: Iterable[object]
    if kind is dict:
        if depth >= MAX_DEPTH:
            return False
        for key in obj:  # type: ignore[attr-defined]
            if type(key) is not str:
                return False
        values = obj.values()  # type: ignore[attr-defined]
    elif kind is list:
        if depth >= MAX_DEPTH:
            return False
        values = obj  # type: ignore[assignment]
    else:
        return False
    for value in values:
        if type(value) in _LEAF_KINDS:
            continue
        if not _is_exact_json(value, depth + 1):
            return False
    return True


def canonical_json_and_bytes(obj: object) -> tuple[str, bytes]:
    """``(canonical_json(obj), canonical_json_bytes(obj))``, serialising ``obj`` once.

    Raises:
        CanonicalizationError: as ``canonical_json``.
    """
    try:
        text = _ENCODE_SORTED(obj) if _is_exact_json(obj, 0) else _ENCODE(_plain(obj, ()))
    except CanonicalizationError:
        raise
    except ValueError:  # an int too long to turn into text: _plain says where it is
        _plain(obj, ())
        raise
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalizationError(_lone_surrogate(_plain(obj, ()), ())) from None
    return text, data


def _surrogate_at(text: str) -> int | None:
    """Index of the first lone surrogate in ``text``, or None when UTF-8 can encode it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _lone_surrogate(plain: Any, path: tuple[str | int, ...]) -> str:
    """The error for the first lone surrogate of ``plain`` (``_plain``'s output, keys sorted)
    in the order of its canonical text, located by its JSON path; '' when there is none."""
    if isinstance(plain, str):
        at = _surrogate_at(plain)
        if at is None:
            return ""
        where = f"{_path_str(path)} holds a lone surrogate ({plain[at]!r} at character {at})"
    elif isinstance(plain, dict):
        for key, value in plain.items():
            at = _surrogate_at(key)
            if at is not None:
                where = (
                    f"{_path_str(path)} has a key holding a lone surrogate ({key[at]!r} at "
                    f"character {at} of {key!r})"
                )
                break
            found = _lone_surrogate(value, (*path, key))
            if found:
                return found
        else:
            return ""
    elif isinstance(plain, list):
        for index, item in enumerate(plain):
            found = _lone_surrogate(item, (*path, index))
            if found:
                return found
        return ""
    else:
        return ""
    return f"{where} that UTF-8 cannot encode; fix the text's decoding"


def canonical_json(obj: object) -> str:
    """Serialise ``obj`` to its one canonical JSON text.

    Rules: keys sorted at every depth; separators ``","`` and ``":"`` with no whitespace;
    ``ensure_ascii=False`` (non-ASCII text stays as UTF-8 characters, never ``\\uXXXX``); floats
    use Python's shortest round-trip ``repr`` (``0.1`` -> ``0.1``, ``1.0`` -> ``1.0``), which is
    stable across platforms; tuples are lists. ``canonical_json(json.loads(canonical_json(x)))``
    equals ``canonical_json(x)`` (idempotent), and two mappings equal as dicts give equal text
    whatever their key order.

    Returns:
        The canonical text (``str``). Encode with UTF-8 for bytes (``canonical_json_bytes``).

    Raises:
        CanonicalizationError: as for ``sort_keys_deep``; also for strings (values or keys)
            holding lone UTF-16 surrogates, which have no UTF-8 encoding, named by their path.
    """
    return canonical_json_and_bytes(obj)[0]


def canonical_json_bytes(obj: object) -> bytes:
    """``canonical_json(obj)`` encoded as UTF-8: the bytes that fingerprints hash."""
    return canonical_json_and_bytes(obj)[1]


def canonical_tool_schema(tool: Mapping[str, Any], *, normalize: bool = True) -> dict[str, Any]:
    """Return a tool definition in canonical form, ready to send (any vendor's tool shape).

    * keys are sorted at every depth (so the client library serialises it byte-identically);
    * arrays under the JSON Schema keyword ``required`` are sorted (the keyword names a set);
      every other array keeps its order (``enum``, ``prefixItems`` and ``anyOf`` may be ordered);
    * with ``normalize=True`` (default) every string stored under a ``description`` key is passed
      through ``normalize_text`` (CRLF -> LF, trailing whitespace stripped per line).

    Tool definitions are the first thing in the Anthropic cache key (tools -> system ->
    messages), so any byte change here invalidates the whole cache; see
    https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30).

    Raises:
        CanonicalizationError: ``tool`` contains a value with no canonical JSON form (a lone
            surrogate included), or a ``required`` array holding something other than strings.
    """
    plain = _plain(tool, ())
    if not isinstance(plain, dict):  # pragma: no cover - _plain keeps mappings as dicts
        raise CanonicalizationError("a tool definition must be a JSON object")
    result: dict[str, Any] = _canonical_schema_node(plain, normalize, ("tool",))
    canonical_json_bytes(result)  # a lone surrogate has no UTF-8 form: no request carries it
    return result


def _canonical_schema_node(node: Any, normalize: bool, path: tuple[str | int, ...]) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():  # already sorted by _plain
            if key in _SET_VALUED_SCHEMA_KEYS and isinstance(value, list):
                if not all(isinstance(item, str) for item in value):
                    raise CanonicalizationError(
                        f"{_path_str((*path, key))} must list property names (strings)"
                    )
                out[key] = sorted(value)
            elif key == "description" and isinstance(value, str) and normalize:
                out[key] = normalize_text(value)
            else:
                out[key] = _canonical_schema_node(value, normalize, (*path, key))
        return out
    if isinstance(node, list):
        return [_canonical_schema_node(item, normalize, (*path, i)) for i, item in enumerate(node)]
    return node


def normalize_text(text: str) -> str:
    """Normalise frozen prompt text so invisible differences cannot break the cache.

    * line endings: ``\\r\\n`` and lone ``\\r`` become ``\\n``;
    * whitespace at the end of every line is stripped (spaces, tabs and other Unicode
      whitespace; the newline itself stays);
    * nothing else changes: leading indentation, blank lines and a final newline are kept.

    The function is idempotent. ``PromptBuilder`` applies it to frozen-layer text by default
    (``PromptBuilder(normalize_frozen=False)`` switches it off); session and dynamic text are sent
    as given.

    Args:
        text: any ``str``.

    Returns:
        The normalised text.

    Raises:
        ConfigError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise ConfigError(f"normalize_text() needs str text, got {type(text).__name__}")
    unified = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in unified.split("\n"))
