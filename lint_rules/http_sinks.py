"""Raw HTTP posts to vendor endpoints as sinks (mixed into ``taint.Analyzer``).

Agents that skip the SDK post the request body themselves: ``httpx.post(URL, json=body)``,
``requests.post``, or a client's ``.post``. When the URL is a constant naming a vendor endpoint
(``sinks.HTTP_ENDPOINTS``), the body dict's constant keys map onto that SDK call's regions and
parameters, exactly as keyword arguments would (``"system"``, ``"tools"``, ``"messages"``,
``"prompt_cache_key"``, ...). Any other post is an ordinary call.
"""

from __future__ import annotations

import ast

from .events import SinkCall
from .facts import CLEAN, Value
from .frames import EngineState
from .regions import _EXPLICIT_BREAKPOINTS, _REGION_RANK
from .sinks import http_spec


class HttpSinksMixin(EngineState):
    """``http_post``: a post of a JSON body to a vendor endpoint, walked like an SDK call."""

    def http_post(self, node: ast.Call) -> Value | None:
        """The sink for a post to a vendor endpoint; None when the URL is not a known constant
        endpoint or there is no ``json=`` body (the caller then evaluates an ordinary call)."""
        url = node.args[0] if node.args else None
        body = None
        for kw in node.keywords:
            if kw.arg == "url":
                url = kw.value
            elif kw.arg == "json":
                body = kw.value
        if url is None or body is None:
            return None
        spec = http_spec(self.eval(url).const)
        if spec is None:
            return None
        sink = SinkCall(node, spec.api, f"POST {spec.label}")
        first_entry = len(self.entries)
        for kw in node.keywords:
            if kw.value is not body:
                self.eval(kw.value)
        literal, frame = self.deref(body)
        if not isinstance(literal, ast.Dict) or frame is not self.frame:
            self.eval(body)
            sink.complete = False
            self.add_sink(sink)
            return CLEAN
        later = self.frame.dict_keys.get(body.id, {}) if isinstance(body, ast.Name) else {}
        items: list[tuple[str, ast.expr]] = []
        for key, item in zip(literal.keys, literal.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if key.value not in later:
                    items.append((key.value, item))
            else:
                sink.complete = False
        for name, target in later.items():
            value = self.assigned_value(target)
            if value is not None:
                items.append((name, value))
        for name, item in items:
            self.keyword_argument(spec, sink, name, item, f"{sink.label}({name}=)")
        sink.blocks.sort(key=lambda b: _REGION_RANK.get(b.region, 3))
        if spec.api in _EXPLICIT_BREAKPOINTS and "cache_control" not in sink.params:
            self.drop_uncached(sink, first_entry)
        self.add_sink(sink)
        return CLEAN
