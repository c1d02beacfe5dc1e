"""How fast ``promptcache lint`` is on agent-style code: a generated tree of a few thousand files.

Generates (seeded, deterministic) a tree of ``--files`` Python files (default 3,000) laid out
like a company's agent monorepo: packages with ``__init__.py``, utility and core modules,
prompt builders, tool registries, agents calling ``client.messages.create(...)``,
``client.chat.completions.create(...)``, ``Agent(instructions=...)`` and LangChain messages,
and tests. Most files make no LLM call. Relative and absolute imports connect them, and a
handful of real cache breakers are planted: ``datetime.now()`` reaching a system prompt, some
in the same module as the call and some through a helper in another module (which only a
whole-program analysis can see). ``--tree PATH`` lints an existing tree instead, and
``--installed`` the installed ``openai`` and ``anthropic`` SDKs.

Reports, as medians over ``--repeat`` runs in this one process:

- the baseline measured in the same run: ``ast.parse`` of every file, serially;
- cold ``lint_paths`` with the default jobs (worker processes) and with ``jobs=1``: wall-clock
  files/s and files per CPU-second (this process and its finished children, from
  ``resource.getrusage``);
- a warm re-run on a 1,000-file tree (``--warm-files``) with one file changed, only when
  ``lint_paths`` takes a cache (a ``cache_dir`` or ``cache`` parameter in its signature);
  otherwise it says the measurement is not available;
- peak memory (max RSS) of this process and of its largest child;

then PASS or MISS for each target: cold >= 300 files/s wall with the default jobs, >= 150
files per CPU-second, warm re-run < 1 s, peak memory < 200 MiB. ``--profile`` adds a
``cProfile`` of one cold ``jobs=1`` run (top functions by cumulative and by own time).

``--corpus [tuning|evaluation|all]`` measures the real agent repositories of the labelled corpus
instead (``tests/lint/corpus/repos.toml``; the trees are exported by
``benchmarks/lint_corpus_eval.py trees``, under ``--trees`` or env ``PROMPTCACHE_CORPUS_TREES``).
Each tree is measured in a fresh child process, on a copy of its linted files: a parse-only pass
(read + ``ast.parse`` of every file, serially), a cold lint with an empty cache (default jobs),
a warm re-run with that cache after one file was edited, and the peak memory (max RSS) of the
child and of its largest worker. It prints one row per tree, the cold time as a multiple of the
parse-only pass, and PASS or MISS for: cold <= 3x parse-only on every tree, every warm re-run
< 1 s, and peak < 300 MiB on every tree of at least 1,300 files. ``--warm-repeat N`` runs the
warm re-run N times per tree, each from the cache as the cold run left it, and reports the
medians. Findings are not printed (the
evaluation half's findings are read only when its labels are made).

Usage::

    .venv/bin/python benchmarks/lint_real.py
    .venv/bin/python benchmarks/lint_real.py --files 60 --repeat 1 --warm-files 60   # quick
    .venv/bin/python benchmarks/lint_real.py --quick
    .venv/bin/python benchmarks/lint_real.py --profile --repeat 1
    .venv/bin/python benchmarks/lint_real.py --installed
    .venv/bin/python benchmarks/lint_real.py --corpus tuning
    .venv/bin/python benchmarks/lint_real.py --corpus all --trees ../corpus-trees
"""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import cProfile
import importlib.util
import inspect
import io
import json
import os
import platform
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptcache.lint_rules import LintConfig, lint_paths
from promptcache.lint_rules.analysis.program import lint_program
from promptcache.lint_rules.files import discover
from promptcache.lint_rules.runner import _display

TARGET_WALL = 300.0  # files/s, cold, default jobs
TARGET_CPU = 150.0  # files per CPU-second, cold, default jobs
TARGET_WARM = 1.0  # seconds, warm re-run of the 1,000-file tree with one file changed
TARGET_MIB = 200.0  # peak RSS of any one process
# real trees (--corpus)
TARGET_PARSE_MULTIPLE = 3.0  # cold lint wall / parse-only wall, every tree
TARGET_CORPUS_MIB = 300.0  # peak RSS of any one process, trees of TARGET_BIG_TREE files or more
TARGET_BIG_TREE = 1300
ROOT = Path(__file__).resolve().parents[1]
CORPUS_REPOS = ROOT / "tests" / "lint" / "corpus" / "repos.toml"
#: exported corpus trees live beside the checkout (as ../shared does), never inside it
DEFAULT_TREES = ROOT.parent / "corpus-trees"

# --------------------------------------------------------------------------------------------
# corpus


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


NOUNS = _words(
    "account order invoice ticket user session document report query result record event "
    "payload chunk vector index embedding customer product catalog inventory shipment refund "
    "policy contract claim note summary task plan step memory context profile channel thread "
    "message file page section table column metric alert incident review "
)
VERBS = _words(
    "load parse normalize validate merge split render format fetch store index score rank "
    "filter group collect resolve build compute convert encode decode clean extract summarize "
    "chunk dedupe sync refresh "
)
ADJ = _words("raw clean active pending stale cached local remote primary recent final ")
MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5", "gpt-4.1", "gpt-4o-mini", "o4-mini")


@dataclass
class Module:
    """One generated module: dotted name, path, and what it defines (for others to import)."""

    dotted: str
    path: Path
    kind: str
    functions: list[str] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)
    constants: list[str] = field(default_factory=list)
    volatile: str = ""  # a helper module whose time value this module's builder uses


@dataclass
class Corpus:
    root: Path
    files: list[Path]
    lines: int
    kinds: collections.Counter[str]
    #: breakers the current per-module analysis can see: (description, files a PC001 in
    #: which counts as finding it)
    planted_same: list[tuple[str, list[Path]]]
    #: breakers that go through a helper in another module
    planted_cross: list[tuple[str, list[Path]]]
    helpers: int  # packages whose system prompt builder calls a time helper in another module


class Gen:
    """Writes the modules of one tree; every choice comes from one seeded ``random.Random``."""

    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.modules: list[Module] = []
        self.by_pkg: dict[str, dict[str, list[Module]]] = collections.defaultdict(
            lambda: collections.defaultdict(list)
        )
        self.used: set[str] = set()
        self.planted_same: list[tuple[str, list[Path]]] = []
        self.planted_cross: list[tuple[str, list[Path]]] = []

    # names ---------------------------------------------------------------------------------
    def ident(self, *parts: str) -> str:
        base = "_".join(parts)
        name, n = base, 2
        while name in self.used:
            name, n = f"{base}_{n}", n + 1
        self.used.add(name)
        return name

    def fname(self) -> str:
        r = self.rng
        return self.ident(r.choice(VERBS), r.choice(NOUNS))

    def cname(self, suffix: str = "") -> str:
        r = self.rng
        word = r.choice(NOUNS).title() + r.choice(("", "Store", "Manager", "Service", "Index"))
        return self.ident(word + suffix).replace("_", "")

    def target_lines(self) -> int:
        """50-400 lines, most files around 100-150 (a log-normal, clipped)."""
        return int(min(400, max(50, self.rng.lognormvariate(4.85, 0.5))))

    # blocks --------------------------------------------------------------------------------
    def util_function(self, mod: Module, helpers: list[str]) -> str:
        r = self.rng
        name = self.fname()
        mod.functions.append(name)
        noun, adj = r.choice(NOUNS), r.choice(ADJ)
        call = f"{r.choice(helpers)}(item)" if helpers and r.random() < 0.6 else "item.strip()"
        body = r.choice(
            (
                f"""
                def {name}(items: list[str], limit: int = {r.randint(5, 500)}) -> list[str]:
                    \"\"\"Return the {adj} {noun} keys, at most ``limit``.\"\"\"
                    seen: set[str] = set()
                    out: list[str] = []
                    for item in items:
                        key = {call}
                        if not key or key in seen:
                            continue
                        seen.add(key)
                        out.append(key)
                        if len(out) >= limit:
                            break
                    return out
                """,
                f"""
                def {name}(record: dict[str, object], *, strict: bool = False) -> dict[str, object]:
                    \"\"\"Normalise one {noun} record.\"\"\"
                    result = dict(record)
                    for key in list(result):
                        value = result.pop(key)
                        if value is None and not strict:
                            continue
                        if isinstance(value, str):
                            value = value.strip()
                        result[key.lower().replace("-", "_")] = value
                    if strict and "{noun}_id" not in result:
                        raise ValueError("missing {noun}_id")
                    return result
                """,
                f"""
                def {name}(text: str, width: int = {r.randint(40, 120)}) -> str:
                    \"\"\"Wrap and clean {adj} {noun} text.\"\"\"
                    words = text.split()
                    lines, current = [], []
                    for word in words:
                        if sum(len(w) + 1 for w in current) + len(word) > width:
                            lines.append(" ".join(current))
                            current = []
                        current.append(word)
                    if current:
                        lines.append(" ".join(current))
                    return "\\n".join(lines)
                """,
                f"""
                def {name}(values: list[float]) -> tuple[float, float]:
                    \"\"\"Mean and spread of {noun} scores.\"\"\"
                    if not values:
                        return 0.0, 0.0
                    mean = sum(values) / len(values)
                    spread = max(values) - min(values)
                    return round(mean, {r.randint(2, 6)}), spread
                """,
            )
        )
        return textwrap.dedent(body)

    def util_class(self, mod: Module, helpers: list[str]) -> str:
        r = self.rng
        name = self.cname()
        mod.classes.append(name)
        noun = r.choice(NOUNS)
        methods = []
        for _ in range(r.randint(2, 5)):
            m = self.ident(r.choice(VERBS), noun)
            use = f"{r.choice(helpers)}(" if helpers and r.random() < 0.4 else "str("
            methods.append(
                f"""
                    def {m}(self, key: str, default: object = None) -> object:
                        \"\"\"{m.replace("_", " ").capitalize()}.\"\"\"
                        if key not in self._items:
                            self.misses += 1
                            return default
                        self.hits += 1
                        value = self._items[key]
                        return {use}value) if value is not None else default
                """
            )
        return textwrap.dedent(
            f"""
            class {name}:
                \"\"\"In-memory {noun} store with hit counters.\"\"\"

                def __init__(self, items: dict[str, object] | None = None) -> None:
                    self._items = dict(items or {{}})
                    self.hits = 0
                    self.misses = 0

                def __len__(self) -> int:
                    return len(self._items)

                def put(self, key: str, value: object) -> None:
                    self._items[key] = value
            """
        ) + textwrap.dedent("".join(methods))

    def realistic_noise(self) -> str:
        """Trigger words in code that makes no LLM call (ORMs, parsers): real trees have them."""
        r = self.rng
        return textwrap.dedent(
            r.choice(
                (
                    f"""
                    def create_{r.choice(NOUNS)}_row(session, **fields):
                        row = session.query_model().objects.create(**fields)
                        return row
                    """,
                    f"""
                    def parse_{r.choice(NOUNS)}_url(url: str) -> str:
                        from urllib import parse
                        return parse.urlparse(url).netloc
                    """,
                    """
                    def run_command(argv: list[str]) -> int:
                        import subprocess
                        return subprocess.run(argv, check=False).returncode
                    """,
                )
            )
        )

    def imports_for(
        self, mod: Module, sources: list[Module], absolute: bool = False
    ) -> tuple[list[str], list[str]]:
        """Import lines (relative or absolute) and the imported function names."""
        r = self.rng
        lines, names = [], []
        picks = [m for m in sources if m.functions and m.dotted != mod.dotted]
        for src in r.sample(picks, min(len(picks), r.randint(1, 3))):
            chosen = r.sample(src.functions, min(len(src.functions), r.randint(1, 2)))
            name = src.dotted if absolute else self.relative(mod, src)
            lines.append(f"from {name} import {', '.join(chosen)}")
            names += chosen
        return lines, names

    def relative(self, mod: Module, src: Module) -> str:
        """``src`` as named from ``mod``: relative inside the same package (half the time)."""
        a, b = mod.dotted.split("."), src.dotted.split(".")
        if a[0] != b[0] or self.rng.random() < 0.5:
            return src.dotted
        common = 0
        while common < min(len(a), len(b)) - 1 and a[common] == b[common]:
            common += 1
        up = len(a) - common
        return "." * up + ".".join(b[common:])

    def pad(self, mod: Module, parts: list[str], helpers: list[str], target: int) -> None:
        while sum(p.count("\n") for p in parts) < target:
            block = (
                self.util_class(mod, helpers)
                if self.rng.random() < 0.3
                else self.util_function(mod, helpers)
            )
            parts.append(block)

    # modules -------------------------------------------------------------------------------
    def write(self, mod: Module, parts: list[str]) -> None:
        mod.path.parent.mkdir(parents=True, exist_ok=True)
        text = "\n\n".join(p.strip("\n") + "\n" for p in parts)
        mod.path.write_text(text)
        self.modules.append(mod)
        names = mod.dotted.split(".")
        self.by_pkg[names[0]][names[1] if len(names) > 1 else ""].append(mod)

    def new(self, dotted: str, kind: str) -> Module:
        rel = dotted.replace(".", "/")
        path = self.root / (rel + "/__init__.py" if kind == "init" else rel + ".py")
        return Module(dotted, path, kind)

    def init(self, dotted: str) -> None:
        mod = self.new(dotted, "init")
        doc = f'"""{dotted.rsplit(".", 1)[-1]} package."""\n'
        subs = [m for m in self.modules if m.dotted.startswith(dotted + ".") and m.functions]
        lines = [f"from .{m.dotted[len(dotted) + 1 :]} import {m.functions[0]}" for m in subs[:3]]
        self.write(mod, [doc, "\n".join(lines)] if lines else [doc])

    def utility(self, pkg: str, sub: str, extra: list[Module]) -> None:
        mod = self.new(f"{pkg}.{sub}.{self.ident('m', self.rng.choice(NOUNS))}", "utility")
        sources = self.by_pkg[pkg]["utils"] + extra
        imports, helpers = self.imports_for(mod, sources) if sources else ([], [])
        header = [
            f'"""{self.rng.choice(VERBS).title()} helpers for {self.rng.choice(NOUNS)} data."""',
            "from __future__ import annotations\n\nimport logging\nimport re\n"
            + "\n".join(imports),
            "log = logging.getLogger(__name__)\n_SPACES = re.compile(r'\\s+')",
        ]
        parts = header[:]
        if self.rng.random() < 0.1:
            parts.append(self.realistic_noise())
        self.pad(mod, parts, helpers, self.target_lines())
        self.write(mod, parts)

    def test_module(self, pkg: str) -> None:
        mod = self.new(f"{pkg}.tests.{self.ident('test', self.rng.choice(NOUNS))}", "test")
        targets = [m for sub in ("utils", "core") for m in self.by_pkg[pkg][sub] if m.functions]
        imports, names = self.imports_for(mod, targets, absolute=True) if targets else ([], [])
        parts = ["import pytest\n" + "\n".join(imports)]
        target = self.target_lines()
        n = 0
        while sum(p.count("\n") for p in parts) < target:
            n += 1
            fn = self.rng.choice(names) if names else "str"
            parts.append(
                textwrap.dedent(
                    f"""
                    @pytest.mark.parametrize("value", ["a", "b c", "  d  ", ""])
                    def test_{fn}_{n}(value):
                        try:
                            result = {fn}([value]) if callable({fn}) else None
                        except (TypeError, AttributeError, ValueError):
                            pytest.skip("shape not supported")
                        assert result is None or result == result


                    def test_{fn}_{n}_empty():
                        with pytest.raises((TypeError, ValueError, AttributeError, KeyError)):
                            {fn}(None)
                    """
                )
            )
        self.write(mod, parts)

    def clock_helper(self, pkg: str) -> Module:
        """A helper module with the volatile value, for a cross-module breaker."""
        mod = self.new(f"{pkg}.utils.clock", "utility")
        fn = self.ident("current", "stamp")
        mod.functions.append(fn)
        parts = [
            '"""Time helpers."""\nfrom datetime import datetime, timezone',
            textwrap.dedent(
                f"""
                def {fn}() -> str:
                    \"\"\"The time now, for humans.\"\"\"
                    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
                """
            ),
        ]
        self.pad(mod, parts, [], 50)
        self.write(mod, parts)
        return mod

    def prompts(self, pkg: str, clock: Module | None) -> Module:
        mod = self.new(f"{pkg}.prompts.base", "prompts")
        builder = self.ident("build", "system", "prompt")
        rules = self.ident("render", "rules")
        mod.functions += [builder, rules]
        mod.constants.append("BASE_INSTRUCTIONS")
        utils = [m for m in self.by_pkg[pkg]["utils"] if m.functions and m is not clock]
        imports, helpers = self.imports_for(mod, utils) if utils else ([], [])
        clock_line, clock_use = "", ""
        if clock is not None:
            clock_line = f"from {self.relative(mod, clock)} import {clock.functions[0]}"
            clock_use = f'\n    parts.append(f"Current time: {{{clock.functions[0]}()}}")'
            mod.volatile = clock.dotted
        persona = self.rng.choice(NOUNS)
        parts = [
            '"""Prompt text and builders."""\nfrom __future__ import annotations\n'
            + "\n".join([*imports, clock_line]),
            f'BASE_INSTRUCTIONS = """You are a careful assistant for {persona} questions.\n'
            "Answer from the provided context. Say when you do not know.\n"
            'Use the tools when a lookup is needed."""',
            textwrap.dedent(
                f"""
                def {rules}(rules: list[str]) -> str:
                    return "\\n".join(f"- {{rule}}" for rule in sorted(rules))


                def {builder}(rules: list[str], persona: str = "{persona}") -> str:
                    parts = [BASE_INSTRUCTIONS, f"Persona: {{persona}}", {rules}(rules)]"""
            )
            + clock_use
            + '\n    return "\\n\\n".join(parts)\n',
        ]
        self.pad(mod, parts, helpers, self.target_lines() // 2)
        self.write(mod, parts)
        return mod

    def tools(self, pkg: str) -> Module:
        mod = self.new(f"{pkg}.tools.registry", "tools")
        mod.functions += ["register", "tool_specs"]
        mod.constants.append("TOOLS")
        parts = [
            '"""Tool registry: functions the agents may call."""\n'
            "from __future__ import annotations\n\nfrom collections.abc import Callable",
            "TOOLS: dict[str, dict] = {}\n_HANDLERS: dict[str, Callable[..., object]] = {}",
            textwrap.dedent(
                """
                def register(name: str, description: str, schema: dict):
                    def wrap(fn):
                        TOOLS[name] = {
                            "name": name,
                            "description": description,
                            "input_schema": schema,
                        }
                        _HANDLERS[name] = fn
                        return fn

                    return wrap


                def tool_specs() -> list[dict]:
                    return [TOOLS[name] for name in sorted(TOOLS)]


                def dispatch(name: str, arguments: dict) -> object:
                    return _HANDLERS[name](**arguments)
                """
            ),
        ]
        for _ in range(self.rng.randint(3, 8)):
            noun = self.rng.choice(NOUNS)
            fn = self.ident("lookup", noun)
            parts.append(
                textwrap.dedent(
                    f"""
                    @register(
                        "{fn}",
                        "Look up a {noun} by id.",
                        {{"type": "object", "properties": {{"{noun}_id": {{"type": "string"}}}},
                         "required": ["{noun}_id"]}},
                    )
                    def {fn}({noun}_id: str) -> dict:
                        return {{"id": {noun}_id, "kind": "{noun}"}}
                    """
                )
            )
        self.write(mod, parts)
        return mod

    def agent(self, pkg: str, prompts: Module, tools: Module, same_breaker: bool) -> None:
        r = self.rng
        style = r.choice(("anthropic", "openai", "agents", "langchain", "anthropic"))
        mod = self.new(f"{pkg}.agents.{self.ident(r.choice(NOUNS), 'agent')}", "agent")
        builder = prompts.functions[0]
        utils = [m for m in self.by_pkg[pkg]["utils"] + self.by_pkg[pkg]["core"] if m.functions]
        imports, helpers = self.imports_for(mod, utils) if utils else ([], [])
        imports.append(f"from {self.relative(mod, prompts)} import BASE_INSTRUCTIONS, {builder}")
        imports.append(f"from {self.relative(mod, tools)} import dispatch, tool_specs")
        model = r.choice(MODELS)
        cls = self.cname("Agent")
        mod.classes.append(cls)
        rule_list = [f"Never reveal {r.choice(NOUNS)} internals.", "Cite sources."]
        system_expr = f"{builder}({rule_list!r})"
        extra_import = ""
        if same_breaker:
            extra_import = "from datetime import datetime\n"
            system_expr = f'f"Now: {{datetime.now():%H:%M}}\\n" + {builder}({rule_list!r})'
            self.planted_same.append((f"{mod.dotted}.{cls}", [mod.path]))
        if prompts.volatile:
            self.planted_cross.append(
                (f"{mod.dotted}.{cls} <- {prompts.dotted} <- {prompts.volatile}",
                 [mod.path, prompts.path])
            )  # fmt: skip
        if style == "anthropic":
            head = "import anthropic"
            body = f"""
            class {cls}:
                def __init__(self, client=None, model: str = "{model}") -> None:
                    self.client = client or anthropic.Anthropic()
                    self.model = model
                    self.history: list[dict] = []

                def system_blocks(self) -> list[dict]:
                    text = {system_expr}
                    cache = {{"type": "ephemeral"}}
                    return [{{"type": "text", "text": text, "cache_control": cache}}]

                def ask(self, question: str) -> str:
                    self.history.append({{"role": "user", "content": question}})
                    while True:
                        response = self.client.messages.create(
                            model=self.model,
                            max_tokens=2048,
                            system=self.system_blocks(),
                            tools=tool_specs(),
                            messages=self.history,
                        )
                        self.history.append({{"role": "assistant", "content": response.content}})
                        calls = [b for b in response.content if b.type == "tool_use"]
                        if not calls:
                            return "".join(b.text for b in response.content if b.type == "text")
                        results = [
                            {{"type": "tool_result", "tool_use_id": c.id,
                              "content": str(dispatch(c.name, c.input))}}
                            for c in calls
                        ]
                        self.history.append({{"role": "user", "content": results}})
            """
        elif style == "openai":
            head = "from openai import OpenAI"
            body = f"""
            class {cls}:
                def __init__(self, model: str = "{model}") -> None:
                    self.client = OpenAI()
                    self.model = model
                    self.history: list[dict] = []

                def ask(self, question: str) -> str:
                    self.history.append({{"role": "user", "content": question}})
                    messages = [{{"role": "system", "content": {system_expr}}}, *self.history]
                    tools = [
                        {{"type": "function", "function": {{"name": t["name"],
                          "description": t["description"], "parameters": t["input_schema"]}}}}
                        for t in tool_specs()
                    ]
                    completion = self.client.chat.completions.create(
                        model=self.model, messages=messages, tools=tools
                    )
                    reply = completion.choices[0].message
                    self.history.append({{"role": "assistant", "content": reply.content or ""}})
                    return reply.content or ""
            """
        elif style == "agents":
            head = "from agents import Agent, Runner, function_tool"
            body = f"""
            @function_tool
            def lookup(name: str, arguments: str) -> str:
                return str(dispatch(name, {{"query": arguments}}))


            class {cls}:
                def __init__(self, model: str = "{model}") -> None:
                    self.model = model

                def build(self) -> Agent:
                    return Agent(
                        name="{cls}",
                        instructions={system_expr},
                        model=self.model,
                        tools=[lookup],
                    )

                async def ask(self, question: str) -> str:
                    result = await Runner.run(self.build(), question)
                    return str(result.final_output)
            """
        else:
            head = (
                "from langchain_anthropic import ChatAnthropic\n"
                "from langchain_core.messages import AIMessage, HumanMessage, SystemMessage"
            )
            body = f"""
            class {cls}:
                def __init__(self) -> None:
                    self.llm = ChatAnthropic(model="{model}").bind_tools(tool_specs())
                    self.history: list = []

                def ask(self, question: str) -> str:
                    system = SystemMessage(content={system_expr})
                    self.history.append(HumanMessage(content=question))
                    reply = self.llm.invoke([system, *self.history])
                    self.history.append(AIMessage(content=reply.content))
                    return str(reply.content)
            """
        parts = [
            f'"""{cls}: answers {r.choice(NOUNS)} questions with tools."""\n'
            "from __future__ import annotations\n\n"
            + extra_import
            + head
            + "\n\n"
            + "\n".join(imports),
            textwrap.dedent(body),
        ]
        self.pad(mod, parts, helpers, self.target_lines())
        self.write(mod, parts)


def package(gen: Gen, p: int, same: bool, cross: bool, per_pkg: int = 32) -> Iterator[None]:
    """Write package ``svc_<p>`` one file at a time (yields after each, so a caller can stop)."""
    pkg = f"svc_{p:03d}"
    for _ in range(10):
        yield gen.utility(pkg, "utils", [])
    clock = None
    if cross:
        clock = gen.clock_helper(pkg)
        yield
    yield gen.init(f"{pkg}.utils")
    other = [m for q in list(gen.by_pkg) if q != pkg for m in gen.by_pkg[q]["utils"][:2]][-4:]
    for _ in range(7):
        yield gen.utility(pkg, "core", other)  # absolute imports from earlier packages
    yield gen.init(f"{pkg}.core")
    prompts = gen.prompts(pkg, clock)
    yield
    yield gen.init(f"{pkg}.prompts")
    tools = gen.tools(pkg)
    yield
    yield gen.init(f"{pkg}.tools")
    for a in range(gen.rng.randint(2, 4)):
        yield gen.agent(pkg, prompts, tools, same_breaker=same and a == 0)
    yield gen.init(f"{pkg}.agents")
    yield gen.init(pkg)
    while sum(map(len, gen.by_pkg[pkg].values())) < per_pkg - 1:
        yield gen.test_module(pkg)
    yield gen.init(f"{pkg}.tests")


def generate(root: Path, n_files: int, seed: int = 0, breakers: int = 6) -> Corpus:
    """Write exactly ``n_files`` files under ``root``; planted breakers spread over packages."""
    gen = Gen(root, seed)
    n_pkgs = max(1, -(-n_files // 32))
    # which packages get a breaker: a third same-module, the rest through another module; the
    # last package may be cut short, so it gets none unless it is the only one
    candidates = range(max(1, n_pkgs - 1))
    chosen = sorted(gen.rng.sample(candidates, min(breakers, len(candidates))))
    same = set(chosen[: max(1, len(chosen) // 3)])
    p = 0
    while len(gen.modules) < n_files:
        for _ in package(gen, p, p in same, p in set(chosen) - same):
            if len(gen.modules) >= n_files:
                break
        p += 1
    files = sorted(m.path for m in gen.modules)
    lines = sum(m.path.read_text().count("\n") for m in gen.modules)
    kinds = collections.Counter(m.kind for m in gen.modules)
    helpers = sum(1 for m in gen.modules if m.volatile)
    return Corpus(root, files, lines, kinds, gen.planted_same, gen.planted_cross, helpers)


# --------------------------------------------------------------------------------------------
# measuring


def cpu_seconds() -> float:
    """CPU time of this process and its finished children, in seconds."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def peak_mib() -> tuple[float, float]:
    """Max RSS of this process and of its largest finished child, MiB (Linux: KiB units)."""
    scale = 1 / (1024 * 1024) if sys.platform == "darwin" else 1 / 1024
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale
    return own, kids


def timed(
    run: Callable[[], object], repeats: int, before: Callable[[], None] | None = None
) -> tuple[float, float, object]:
    """Median wall seconds, median CPU seconds and the last result of ``run()``."""
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        if before is not None:
            before()
        cpu0, wall0 = cpu_seconds(), time.perf_counter()
        result = run()
        walls.append(time.perf_counter() - wall0)
        cpus.append(cpu_seconds() - cpu0)
    return statistics.median(walls), statistics.median(cpus), result


def parse_all(files: list[Path]) -> int:
    """``ast.parse`` every file; returns how many parsed (a file this Python cannot parse, such
    as 3.12 syntax on 3.11, counts its read and failed parse, as the linter reports it)."""
    parsed = 0
    for path in files:
        with contextlib.suppress(SyntaxError, ValueError):
            ast.parse(path.read_bytes())
            parsed += 1
    return parsed


def cache_parameter() -> str | None:
    """The name of ``lint_paths``'s cache parameter (``cache_dir`` or ``cache``), if it has one."""
    params = inspect.signature(lint_paths).parameters
    for name in ("cache_dir", "cache"):
        if name in params:
            return name
    return None


def cache_kwargs(folder: Path | None) -> dict[str, Any]:
    """Keyword arguments that point ``lint_paths`` at ``folder`` (None: no cache), and that
    lint test files too (``include_tests``, when ``lint_paths`` leaves them out by default):
    the generated tree's test modules are part of what is measured."""
    extra: dict[str, Any] = {}
    if "include_tests" in inspect.signature(lint_paths).parameters:
        extra["include_tests"] = True
    name = cache_parameter()
    if name is None:
        return extra
    param = inspect.signature(lint_paths).parameters[name]
    if isinstance(param.default, bool):  # ``cache: bool``: on or off, in its own folder
        return {name: folder is not None, **extra}
    return {name: folder, **extra}


def count_triggered(files: list[Path], config: LintConfig) -> int | None:
    """How many files the runner's trigger-word test lets through (None: no such test)."""
    from promptcache.lint_rules import runner

    test = getattr(runner, "_triggered", None)
    if test is None:
        return None
    try:
        return sum(1 for f in files if test(Path(f).read_bytes(), config))
    except TypeError:  # its signature changed
        return None


def installed_dirs(names: tuple[str, ...] = ("openai", "anthropic")) -> list[Path]:
    """Folders of installed packages, found without importing them."""
    folders = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(f"package {name!r} is not installed here")
        folders.append(Path(next(iter(spec.submodule_search_locations))))
    return folders


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, "
        f"load average (1 min) {os.getloadavg()[0]:.2f}"
    )


def profile_serial(roots: list[Path], config: LintConfig, top: int, out: Path | None) -> None:
    """cProfile one cold ``jobs=1`` lint; print the top functions both ways."""
    profiler = cProfile.Profile()
    profiler.enable()
    lint_paths(roots, config, jobs=1, **cache_kwargs(None))
    profiler.disable()
    if out is not None:
        profiler.dump_stats(out)
        print(f"profile written to {out}")
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    total = stats.total_tt  # type: ignore[attr-defined]
    print(f"\nprofile, cold lint jobs=1: {total:.2f} s in the profiler")
    entries = stats.stats  # type: ignore[attr-defined]
    for key, label in (("cumulative", "cumulative"), ("tottime", "own time")):
        index = 3 if key == "cumulative" else 2
        rows = sorted(entries.items(), key=lambda kv: kv[1][index], reverse=True)[:top]
        print(f"\ntop {top} by {label}:")
        print("| share | s | calls | function | where |")
        print("|---:|---:|---:|---|---|")
        for (filename, line, func), (_cc, calls, tt, ct, _callers) in rows:
            spent = ct if key == "cumulative" else tt
            where = _short(filename)
            print(f"| {spent / total:.1%} | {spent:.2f} | {calls} | {func} | {where}:{line} |")


def _short(filename: str) -> str:
    for marker in ("lint_rules/", "site-packages/", "/lib/python"):
        if marker in filename:
            return filename[filename.index(marker) :]
    return filename


def change_one_file(files: list[Path], round_: int) -> Path:
    """Change one file's content (a new function at the end), differently each round."""
    target = files[(round_ * 7919) % len(files)]
    with target.open("a") as handle:
        handle.write(f"\n\ndef _bench_edit_{round_}() -> int:\n    return {round_}\n")
    return target


def measure_tree(tree: Path, jobs: int | None, warm_repeat: int = 1) -> dict[str, Any]:
    """Parse-only, cold and warm lint of a copy of ``tree``'s linted files (run in a child).

    Returns files, lines, wall and CPU seconds of the parse-only pass, of the cold lint (empty
    cache) and of the warm re-run after one edited file (CPU: this process and its finished
    children, the worker processes), and the peak RSS (MiB) of this process and of its largest
    finished child. With ``warm_repeat`` above 1 the warm re-run is repeated, each time from
    the cache as the cold run left it, and its times are the medians (``warm_runs``: each
    run's wall and CPU seconds).
    """
    scratch = Path(tempfile.mkdtemp(prefix="lint_tree_"))
    try:
        copy = scratch / tree.name
        config = LintConfig(root=copy, respect_gitignore=False)
        found = discover([tree], LintConfig(root=tree, respect_gitignore=False))
        for path in found:
            dest = copy / Path(path).resolve().relative_to(tree.resolve())
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
        files = [Path(p) for p in discover([copy], config)]
        lines = sum(p.read_bytes().count(b"\n") for p in files)
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        for path in files:
            # a file that does not parse still costs its try, as in the linter
            with contextlib.suppress(SyntaxError, ValueError):
                ast.parse(path.read_bytes())
        parse_wall, parse_cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
        cache = scratch / "cache"
        # what lint_paths does (discover, then lint the files as one program), keeping the
        # driver's counts: analyses run and fixpoint rounds
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        names = [_display(p) for p in discover([copy], config)]
        results, cold = lint_program(names, config, jobs, cache)
        cold_wall, cold_cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
        edited = change_one_file(files, 1)
        cold_cache = scratch / "cold-cache"
        if warm_repeat > 1:
            shutil.copytree(cache, cold_cache)
        runs = []
        for repeat in range(warm_repeat):
            if repeat:
                shutil.rmtree(cache)
                shutil.copytree(cold_cache, cache)
            cpu0, t0 = cpu_seconds(), time.perf_counter()
            names = [_display(p) for p in discover([copy], config)]
            _, warm = lint_program(names, config, jobs, cache)
            runs.append((time.perf_counter() - t0, cpu_seconds() - cpu0))
        warm_wall = statistics.median(w for w, _ in runs)
        warm_cpu = statistics.median(c for _, c in runs)
        own, kids = peak_mib()
        return {
            "files": len(files),
            "linted": len(results),
            "lines": lines,
            "parse_s": parse_wall,
            "cold_s": cold_wall,
            "warm_s": warm_wall,
            "parse_cpu_s": parse_cpu,
            "cold_cpu_s": cold_cpu,
            "warm_cpu_s": warm_cpu,
            "warm_runs": runs,
            "cold_analyses": cold.analysed,
            "warm_analyses": warm.analysed,
            "edited": edited.relative_to(copy).as_posix(),
            "peak_mib": own,
            "peak_child_mib": kids,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def corpus_trees(
    half: str, trees: Path, repos: Path = CORPUS_REPOS, batch: int = 1
) -> list[tuple[str, Path]]:
    """(repository, tree folder) of the corpus's repositories of ``batch`` in ``half`` ("all":
    both), as ``repos`` (a repos.toml; a row without ``batch`` is batch 1) lists them."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    data = tomllib.loads(repos.read_text(encoding="utf-8"))
    out = []
    for row in data["repo"]:
        if row.get("batch", 1) == batch and half in ("all", row["half"]):
            folder = trees / row["tree"]
            if not folder.is_dir():
                raise SystemExit(
                    f"no tree for {row['repo']} at {folder}: "
                    "run benchmarks/lint_corpus_eval.py trees --mirror DIR"
                )
            out.append((row["repo"], folder))
    return out


def run_corpus(args: argparse.Namespace) -> int:
    """One child process per tree (``--measure-tree``), then the table and the targets."""
    rows = []
    for repo, folder in corpus_trees(args.corpus, args.trees, args.repos, args.batch):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--measure-tree", str(folder)]
        cmd += ["--warm-repeat", str(args.warm_repeat)]
        if args.jobs is not None:
            cmd += ["--jobs", str(args.jobs)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"measuring {repo} failed: {proc.stderr.strip()[-500:]}")
        m = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append((repo, m))
        print(f"measured {repo}: {m['files']} files", file=sys.stderr)
    jobs = args.jobs if args.jobs is not None else f"default ({os.cpu_count()})"
    warm_runs = "one run" if args.warm_repeat == 1 else f"median of {args.warm_repeat} runs"
    print(
        f"corpus trees ({args.corpus}), jobs={jobs}, cold = empty cache, one run each; "
        f"warm = {warm_runs}"
    )
    print(
        "| repository | files | lines | parse-only s | cold s | cold / parse | warm s "
        "| peak MiB (main, worker) | parse-only CPU s | cold CPU s | cold / parse, CPU "
        "| warm CPU s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for repo, m in rows:
        multiple = m["cold_s"] / m["parse_s"] if m["parse_s"] else float("inf")
        cpu_multiple = m["cold_cpu_s"] / m["parse_cpu_s"] if m["parse_cpu_s"] else float("inf")
        print(
            f"| {repo} | {m['files']} | {m['lines']} | {m['parse_s']:.3f} | {m['cold_s']:.3f} | "
            f"{multiple:.1f}x | {m['warm_s']:.3f} | "
            f"{m['peak_mib']:.0f}, {m['peak_child_mib']:.0f} | {m['parse_cpu_s']:.3f} | "
            f"{m['cold_cpu_s']:.3f} | {cpu_multiple:.1f}x | {m['warm_cpu_s']:.3f} |"
        )
    total_files = sum(m["files"] for _, m in rows)
    print(f"trees: {len(rows)}, files: {total_files}")
    multiples = [(m["cold_s"] / m["parse_s"] if m["parse_s"] else float("inf")) for _, m in rows]
    worst = max(multiples) if multiples else 0.0
    warm = max((m["warm_s"] for _, m in rows), default=0.0)
    big = [(r, max(m["peak_mib"], m["peak_child_mib"])) for r, m in rows
           if m["files"] >= TARGET_BIG_TREE]  # fmt: skip
    big_peak = max((p for _, p in big), default=None)
    checks = [
        (f"cold <= {TARGET_PARSE_MULTIPLE:.0f}x parse-only on every tree",
         worst <= TARGET_PARSE_MULTIPLE, f"worst {worst:.1f}x"),
        (f"warm re-run after one edit < {TARGET_WARM:.0f} s on every tree",
         warm < TARGET_WARM, f"worst {warm:.3f} s"),
        (f"peak < {TARGET_CORPUS_MIB:.0f} MiB on trees of >= {TARGET_BIG_TREE} files",
         None if big_peak is None else big_peak < TARGET_CORPUS_MIB,
         "no such tree" if big_peak is None else f"worst {big_peak:.0f} MiB ({len(big)} trees)"),
    ]  # fmt: skip
    print("\ntargets:")
    for label, ok, value in checks:
        verdict = "N/A " if ok is None else ("PASS" if ok else "MISS")
        print(f"  {verdict} {label}: {value}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=3000, help="files to generate")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--breakers", type=int, default=6, help="planted cache breakers")
    parser.add_argument("--warm-files", type=int, default=1000, help="size of the warm tree")
    parser.add_argument("--jobs", type=int, default=None, help="default: lint_paths' default")
    parser.add_argument("--tree", type=Path, action="append", help="lint this tree instead")
    parser.add_argument("--installed", action="store_true", help="lint installed openai+anthropic")
    parser.add_argument("--corpus-dir", type=Path, help="generate here and keep it (empty dir)")
    parser.add_argument(
        "--quick", action="store_true", help="defaults of 60 files, 1 repeat, 60 warm"
    )
    parser.add_argument("--no-serial", action="store_true", help="skip the jobs=1 run")
    parser.add_argument("--profile", action="store_true", help="cProfile a cold jobs=1 run")
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--profile-out", type=Path, help="also write the pstats file here")
    parser.add_argument("--show", type=int, default=10, help="findings to print")
    parser.add_argument(
        "--corpus",
        nargs="?",
        const="all",
        choices=("tuning", "evaluation", "all"),
        help="measure the labelled corpus's real trees instead (default: all of them)",
    )
    parser.add_argument(
        "--trees",
        type=Path,
        default=Path(os.environ.get("PROMPTCACHE_CORPUS_TREES", DEFAULT_TREES)),
        help="folder of the exported corpus trees",
    )
    parser.add_argument("--repos", type=Path, default=CORPUS_REPOS, help="the corpus's repos.toml")
    parser.add_argument("--batch", type=int, default=1, help="the corpus batch (default 1)")
    parser.add_argument(
        "--warm-repeat",
        type=int,
        default=1,
        help="--corpus: warm re-runs per tree, each from the cold run's cache (median)",
    )
    parser.add_argument("--measure-tree", type=Path, help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args(argv)
    if args.measure_tree is not None:
        print(json.dumps(measure_tree(args.measure_tree, args.jobs, args.warm_repeat)))
        return 0
    if args.quick:  # smaller defaults; flags given explicitly still win
        parser.set_defaults(files=60, repeat=1, warm_files=60)
        args = parser.parse_args(argv)

    print(f"machine: {machine()}")
    if args.corpus:
        return run_corpus(args)
    scratch = Path(tempfile.mkdtemp(prefix="lint_real_"))
    try:
        return run(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(args: argparse.Namespace, scratch: Path) -> int:
    config = LintConfig(root=scratch, respect_gitignore=False)
    corpus: Corpus | None = None
    if args.tree or args.installed:
        roots = list(args.tree or []) + (installed_dirs() if args.installed else [])
        files = discover(roots, config, include_tests=True)
        print(f"tree: {len(files)} files under {', '.join(map(str, roots))}")
    else:
        root = args.corpus_dir or scratch / "corpus"
        root.mkdir(parents=True, exist_ok=True)
        if any(root.iterdir()):
            raise SystemExit(f"{root} is not empty")
        t0 = time.perf_counter()
        corpus = generate(root, args.files, args.seed, args.breakers)
        roots, files = [root], corpus.files
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(corpus.kinds.items()))
        print(
            f"corpus: {len(files)} files, {corpus.lines} lines ({kinds}) in {root}, "
            f"generated in {time.perf_counter() - t0:.1f} s"
        )
        print(
            f"planted breakers: {len(corpus.planted_same)} same-module, "
            f"{corpus.helpers} through a helper in another module "
            f"(reaching {len(corpus.planted_cross)} call sites)"
        )
    n = len(files)
    triggered = count_triggered(files, config)
    if triggered is not None:
        print(f"files with a trigger word (analysed, not only compiled): {triggered} of {n}")
    cache_name = cache_parameter()
    jobs_label = args.jobs if args.jobs is not None else f"default ({os.cpu_count()})"
    caches: list[Path] = []

    def fresh_cache() -> None:  # a new empty cache folder per cold run, if there is a cache
        caches.append(Path(tempfile.mkdtemp(prefix="cache_", dir=scratch)))

    def cold(jobs: int | None) -> Callable[[], object]:
        return lambda: lint_paths(
            roots, config, jobs=jobs, **cache_kwargs(caches[-1] if caches else None)
        )

    rows: list[tuple[str, float, float, int]] = []
    wall, cpu, _ = timed(lambda: parse_all(files), args.repeat)
    rows.append(("baseline: read + ast.parse, serial", wall, cpu, n))
    wall, cpu, results = timed(cold(args.jobs), args.repeat, fresh_cache)
    rows.append((f"cold lint, jobs={jobs_label}", wall, cpu, n))
    cold_wall, cold_cpu = wall, cpu
    assert isinstance(results, list)
    if not args.no_serial:
        wall, cpu, _ = timed(cold(1), args.repeat, fresh_cache)
        rows.append(("cold lint, jobs=1", wall, cpu, n))

    warm: float | None = None
    if cache_name is None:
        print(
            "warm re-run: not available yet (lint_paths has no cache_dir/cache parameter); skipped"
        )
    else:
        warm_root = scratch / "warm"
        if corpus is not None:
            generate(warm_root, args.warm_files, args.seed + 1, args.breakers)
        else:  # a copy of the first files of the tree, so that one can be changed
            for i, path in enumerate(files[: args.warm_files]):
                dest = warm_root / f"t{i // 100}" / f"{i}_{Path(path).name}"
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest)
        warm_files = discover([warm_root], config, include_tests=True)
        warm_cache = scratch / "warm_cache"
        kwargs = cache_kwargs(warm_cache)
        lint_paths([warm_root], config, jobs=args.jobs, **kwargs)  # fill the cache
        rounds = iter(range(1, 1_000_000))
        wall, cpu, _ = timed(
            lambda: lint_paths([warm_root], config, jobs=args.jobs, **kwargs),
            args.repeat,
            lambda: change_one_file([Path(f) for f in warm_files], next(rounds)),
        )
        warm = wall
        rows.append((f"warm re-run, {len(warm_files)} files, one changed", wall, cpu, 0))
    own_mib, kids_mib = peak_mib()

    base_wall = rows[0][1]
    print(f"\ncache: {cache_name or 'none'}; medians of {args.repeat} run(s)")
    print("| run | files | wall s | files/s | CPU s | files per CPU-s | wall vs parse |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, wall, cpu, count in rows:
        if count:
            print(
                f"| {label} | {count} | {wall:.2f} | {count / wall:.0f} | {cpu:.2f} | "
                f"{count / cpu:.0f} | {wall / base_wall:.2f}x |"
            )
        else:
            print(f"| {label} | - | {wall:.3f} | - | {cpu:.3f} | - | - |")
    print(f"peak memory: this process {own_mib:.0f} MiB, largest child {kids_mib:.0f} MiB")
    print(f"linted files: {len(results)}")

    findings = [(r, d) for r in results for d in r.diagnostics]
    by_code = collections.Counter(d.code for _, d in findings)
    print(f"findings: {len(findings)} {dict(sorted(by_code.items()))}")
    for result, d in findings[: args.show]:
        print(f"  {result.path}:{d.location.line}:{d.location.col + 1}: {d.code} {d.message}")
    if corpus is not None:
        flagged = {Path(r.path).resolve() for r in results if r.diagnostics}
        pc001 = {
            Path(r.path).resolve() for r in results for d in r.diagnostics if d.code == "PC001"
        }
        planted_paths: set[Path] = set()
        for label, planted in (
            ("same-module", corpus.planted_same),
            ("through another module", corpus.planted_cross),
        ):
            found = [w for w, paths in planted if any(p.resolve() in pc001 for p in paths)]
            missed = [w for w, paths in planted if w not in found]
            planted_paths |= {p.resolve() for _, paths in planted for p in paths}
            print(f"planted ({label}): {len(planted)} call sites, found {len(found)}")
            for where in missed[:3]:
                print(f"  not found: {where}")
        print(f"files with findings outside the planted ones: {len(flagged - planted_paths)}")

    checks = [
        ("cold, default jobs, >= 300 files/s wall", n / cold_wall >= TARGET_WALL,
         f"{n / cold_wall:.0f}"),
        ("cold, default jobs, >= 150 files per CPU-second", n / cold_cpu >= TARGET_CPU,
         f"{n / cold_cpu:.0f}"),
        ("warm re-run, one file changed, < 1 s", None if warm is None else warm < TARGET_WARM,
         "n/a" if warm is None else f"{warm:.3f} s"),
        ("peak memory < 200 MiB (each process)", max(own_mib, kids_mib) < TARGET_MIB,
         f"{max(own_mib, kids_mib):.0f} MiB"),
    ]  # fmt: skip
    print("\ntargets:")
    for label, ok, value in checks:
        verdict = "N/A " if ok is None else ("PASS" if ok else "MISS")
        print(f"  {verdict} {label}: {value}")

    if args.profile:
        profile_serial(roots, config, args.profile_top, args.profile_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
