"""LLM call sites ("sinks") recognised by exact call chains, and how their arguments map to regions.

A chain is matched on its trailing attribute names (``*.messages.create`` matches
``client.messages.create`` and ``self.llm.beta.messages.create``) or on the fully qualified name
after import resolution (``litellm.completion``). Never on substrings: pcdlint's history shows
what substring matching catches (``update_messages``, ``message_create_view``). Each vendor call
also needs one of its required keywords (or a ``**kwargs`` splat), so an unrelated
``self.messages.create(text)`` in an ORM does not count. ``count_tokens`` is never a sink.

Region kinds:
``tools`` a list of tool definitions; ``system`` a string or a list of text blocks; ``messages``
a message list whose last element is the newest (tail) message; ``text`` plain prefix text;
``gemini_config`` a ``GenerateContentConfig(...)`` or dict with system_instruction/tools;
``bedrock_tools`` a ``toolConfig`` dict; ``json_body`` an ``invoke_model`` body;
``lc_messages`` LangChain ``(role, text)`` tuples; ``cache_contents`` contents cached as a whole.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field

from .nodes import all_nodes

_BUILDER_NAME = re.compile(
    r"(^|_)(system_?prompts?|system_?messages?|system_?instructions?|sys_?prompt)($|_)"
)


#: words after a system-prompt name that make it a measure of the prompt, not its text
#: (``system_prompt_tokens``, ``system_prompt_len``, ``SYSTEM_PROMPT_MAX_CHARS``)
_MEASURES = frozenset(
    {
        "tokens",
        "token",
        "len",
        "length",
        "count",
        "size",
        "chars",
        "characters",
        "bytes",
        "words",
        "lines",
    }
)


#: classes that set up a live session rather than a request: Gemini's Live API sends its setup
#: (``system_instruction``, ``tools``) in the first client message of a connection only, and
#: each turn after it sends only its new content, so nothing of the setup is resent as a
#: prefix per request (``BidiGenerateContentClientMessage.setup``,
#: https://pub.dev/documentation/google_cloud_ai_generativelanguage_v1beta/latest/generativelanguage/BidiGenerateContentClientMessage-class.html,
#: checked 2026-12-07). Their system-prompt-named keywords are no sink.
SESSION_SETUPS = frozenset({"google.genai.types.LiveConnectConfig"})


@functools.lru_cache(maxsize=65536)
def is_system_prompt_name(name: str) -> bool:
    """True for names like ``build_system_prompt``, ``SYSTEM_PROMPT``, ``system_message``;
    False for a count or size of one (a word of ``_MEASURES`` after it:
    ``system_prompt_tokens``, ``system_prompt_char_count``), which is a number, not text.
    Remembered per name (the same names and keys are asked about at every call)."""
    lowered = name.lower()
    for match in _BUILDER_NAME.finditer(lowered):
        if not _MEASURES.intersection(lowered[match.end() :].split("_")):
            return True
    return False


#: first words of a function named for what it counts (``count_tokens``, ``num_tokens_from``,
#: ``estimate_message_tokens``); ``get`` counts only with a measure as its last word
_COUNTING = frozenset(
    {"count", "num", "number", "estimate", "calc", "calculate", "compute", "measure"}
)


def is_measure_name(name: str) -> bool:
    """True for a function named for a count or size of what it is given: ``len``,
    ``count_tokens``, ``num_tokens_from_messages``, ``_estimate_message_tokens``,
    ``get_token_count``; False for one named for returning it cut to a size
    (``trim_to_max_tokens``, ``fit_to_context_length``, ``get_token_limited_message``), whose
    first word is no counting verb."""
    words = [w for w in name.lower().split("_") if w]
    if words == ["len"]:
        return True
    if len(words) < 2:
        return False
    if words[0] == "get":
        return words[-1] in _MEASURES
    return words[0] in _COUNTING and bool(_MEASURES.intersection(words[1:]))


#: methods of a logger that write a record (``logger.info(...)``, ``logging.debug(...)``)
_LOG_LEVELS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}
)


def _is_logger(node: ast.expr) -> bool:
    """``logging``, or a name or field named for a logger: ``logger``, ``log``, ``_LOGGER``,
    ``self.logger``, ``app_logger``."""
    name = (
        node.id
        if isinstance(node, ast.Name)
        else node.attr
        if isinstance(node, ast.Attribute)
        else ""
    )
    words = [w for w in name.lower().split("_") if w]
    return bool(words) and words[-1] in ("logging", "logger", "log")


def logged_dicts(tree: ast.AST) -> frozenset[int]:
    """The ids of the dict displays inside the arguments of a logging call in ``tree``
    (``logger.info("built", extra={"system_prompt": prompt})``, ``log.debug({"role":
    "system", ...})``): a log record, never a request, so a system-prompt key or a system
    message there is no sink. Found once per tree (kept on the node)."""
    known: frozenset[int] | None = tree.__dict__.get("_logged_dicts")
    if known is None:
        out: set[int] = set()
        for node in all_nodes(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _LOG_LEVELS
                and _is_logger(node.func.value)
            ):
                for arg in [*node.args, *(kw.value for kw in node.keywords)]:
                    out.update(id(n) for n in ast.walk(arg) if isinstance(n, ast.Dict))
        known = tree.__dict__["_logged_dicts"] = frozenset(out)
    return known


def _live_connect(node: ast.AST) -> bool:
    """``<client>.live.connect``, the call that opens a Gemini Live session."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "connect"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "live"
    )


def live_setup_dicts(tree: ast.AST) -> frozenset[int]:
    """The ids of the dict displays given as the setup of a Gemini Live session
    (``client.aio.live.connect(model=..., config={"system_instruction": ...})``, the dict
    written in the call or bound once to a name of the same function that the call is given):
    sent once per connection (``SESSION_SETUPS``), so a system-prompt key there is no sink.
    Found once per tree (kept on the node)."""
    known: frozenset[int] | None = tree.__dict__.get("_live_setup_dicts")
    if known is None:
        out: set[int] = set()
        live = any(_live_connect(node) for node in all_nodes(tree))
        for func in all_nodes(tree) if live else ():
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                continue
            bound: dict[str, list[ast.expr]] = {}
            configs: list[ast.expr] = []
            for node in ast.walk(func):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    if isinstance(target, ast.Name):
                        bound.setdefault(target.id, []).append(node.value)
                elif isinstance(node, ast.Call) and _live_connect(node.func):
                    configs.extend(kw.value for kw in node.keywords if kw.arg == "config")
            for config in configs:
                if isinstance(config, ast.Name) and len(bound.get(config.id, ())) == 1:
                    config = bound[config.id][0]
                if isinstance(config, ast.Dict):
                    out.update(id(n) for n in ast.walk(config) if isinstance(n, ast.Dict))
        known = tree.__dict__["_live_setup_dicts"] = frozenset(out)
    return known


#: the serializers' functions that write their first argument to the file or stream they are
#: given (module, function) -> the keyword of that stream; the text they return without one
#: (``yaml.dump(data)``) may still be sent, so a call of one counts only with its stream
_FILE_DUMPS = {
    ("json", "dump"): "fp",
    ("pickle", "dump"): "file",
    ("toml", "dump"): "f",
    ("tomli_w", "dump"): "fp",
    ("yaml", "dump"): "stream",
    ("yaml", "safe_dump"): "stream",
    ("yaml", "dump_all"): "stream",
    ("yaml", "safe_dump_all"): "stream",
}

#: builtins that reach a function's local variables by name, not by a read of the name
_LOCALS_BY_NAME = frozenset({"locals", "vars", "eval", "exec"})


def _display_dicts(node: ast.expr) -> list[ast.Dict]:
    """The dict displays of ``node`` reached through displays alone (a dict, list, tuple or
    set display and the displays inside it, not a call, comprehension or name)."""
    out: list[ast.Dict] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Dict):
            out.append(current)
            stack.extend(v for v in current.values if v is not None)
        elif isinstance(current, (ast.List, ast.Tuple, ast.Set)):
            stack.extend(e for e in current.elts if not isinstance(e, ast.Starred))
    return out


def _is_open(node: ast.expr | None) -> bool:
    """``open(...)`` or a method named ``open`` (``path.open("w")``, ``io.open(...)``,
    ``gzip.open(...)``): a file."""
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == "open")
        or (isinstance(node.func, ast.Attribute) and node.func.attr == "open")
    )


def _file_names(scope: ast.AST) -> set[str]:
    """The names that hold a file everywhere in ``scope``: bound by ``with open(...) as f``
    (or ``path.open(...)``) and by no other store there."""
    opened: set[str] = set()
    other: set[str] = set()
    targets: set[int] = set()
    for node in ast.walk(scope):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                var = item.optional_vars
                if isinstance(var, ast.Name) and _is_open(item.context_expr):
                    opened.add(var.id)
                    targets.add(id(var))
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.Name)
            and not isinstance(node.ctx, ast.Load)
            and node.id in opened
            and id(node) not in targets
        ):
            other.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            other.update(node.names)
        elif isinstance(node, (ast.arg)):
            other.add(node.arg)
    return opened - other


def _dumped_object(node: ast.AST, modules: dict[str, str], files: set[str]) -> ast.expr | None:
    """The object ``node`` writes to a file, where it is a call of a serializer of
    ``_FILE_DUMPS`` (``yaml.dump(data, f)``, ``json.dump(report, fp=f)``) given a file
    (``open(...)`` or a name of ``files``); None for any other node."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.args
        and not isinstance(node.args[0], ast.Starred)
    ):
        return None
    stream = _FILE_DUMPS.get((modules.get(node.func.value.id, ""), node.func.attr))
    if stream is None:
        return None
    given = node.args[1] if len(node.args) > 1 else None
    for kw in node.keywords:
        if kw.arg == stream:
            given = kw.value
    if not (_is_open(given) or (isinstance(given, ast.Name) and given.id in files)):
        return None
    return node.args[0]


def written_dicts(tree: ast.AST) -> frozenset[int]:
    """The ids of the dict displays of ``tree`` that are only written to a file by a
    serializer (``_FILE_DUMPS``) given the file a function opened (``with open(path, "w")
    as f``, or ``open(...)`` itself): a display inside the object argument
    (``json.dump({"system_prompt": p}, f)``), or inside the value of a plain assignment to a
    local name of that function whose every read is such an argument (``data = {...}`` then
    ``yaml.dump(data, f)``). A history or report file, never a request, so a system-prompt
    key or a system message there is no sink; a name read anywhere else (sent, returned,
    stored, changed, captured by a nested function), assigned to more than one target, or
    declared global or nonlocal keeps its dicts sinks, and so does a dump into any other
    stream (a buffer whose text may be posted). Found once per tree (kept on the node)."""
    known: frozenset[int] | None = tree.__dict__.get("_written_dicts")
    if known is not None:
        return known
    nodes = all_nodes(tree)
    modules = {
        alias.asname or alias.name: alias.name
        for node in nodes
        if isinstance(node, ast.Import)
        for alias in node.names
        if any(alias.name == m for m, _ in _FILE_DUMPS)
    }
    out: set[int] = set()
    if modules:
        for func in nodes:
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            files = _file_names(func)
            dumped: dict[int, ast.expr] = {}
            for node in ast.walk(func):
                obj = _dumped_object(node, modules, files)
                if obj is not None:
                    dumped[id(obj)] = obj
            if not dumped:
                continue
            for obj in dumped.values():
                out.update(id(d) for d in _display_dicts(obj))
            out.update(_dicts_of_dumped_names(func, dumped))
    known = tree.__dict__["_written_dicts"] = frozenset(out)
    return known


def _dicts_of_dumped_names(
    func: ast.FunctionDef | ast.AsyncFunctionDef, dumped: dict[int, ast.expr]
) -> list[int]:
    """The ids of the dict displays assigned in ``func``'s own body to a local name that is
    read nowhere in ``func`` (nested functions included) but as the object of a file dump
    (``written_dicts``)."""
    assigned: dict[str, list[ast.expr]] = {}
    reads: dict[str, list[ast.Name]] = {}
    shared: set[str] = set()
    nested: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            shared.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in _LOCALS_BY_NAME:
                return []
            reads.setdefault(node.id, []).append(node)
        elif node is not func and isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
        ):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name):
                    nested.add(inner.id)
    for node in _own_statements(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None and node.simple:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and _display_dicts(value):
            assigned.setdefault(target.id, []).append(value)
    out: list[int] = []
    for name, values in assigned.items():
        if name in shared or name in nested or not reads.get(name):
            continue
        if all(id(read) in dumped for read in reads[name]):
            for value in values:
                out.extend(id(d) for d in _display_dicts(value))
    return out


def _own_statements(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """The statements of ``func``'s body at any depth of its blocks, not those of a function
    or class defined inside it."""
    out: list[ast.stmt] = []
    stack: list[ast.stmt] = list(func.body)
    while stack:
        stmt = stack.pop()
        out.append(stmt)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody"):
            stack.extend(getattr(stmt, name, None) or [])
        for handler in getattr(stmt, "handlers", None) or []:
            stack.extend(handler.body)
        for case in getattr(stmt, "cases", None) or []:
            stack.extend(case.body)
    return out


@dataclass(frozen=True)
class SinkSpec:
    """How one API is called: match rule, required keywords, and argument regions.

    ``suffixes``: trailing attribute chains that match (``("messages", "create")``).
    ``qualnames``: fully qualified names that match after import resolution.
    ``guard``: the call must pass one of these keywords or a ``**`` splat.
    ``regions``: keyword -> region kind; ``positional``: argument index -> region kind.
    ``params``: keywords recorded for parameter rules (model, tool_choice, ...).
    ``root_ok``: a suffix may start at the chain's root name (``provider.complete`` matches
    ``*.provider.complete``); vendor specs need a receiver before it.
    """

    api: str
    label: str
    suffixes: tuple[tuple[str, ...], ...] = ()
    qualnames: frozenset[str] = frozenset()
    guard: tuple[str, ...] = ()
    regions: dict[str, str] = field(default_factory=dict)
    positional: dict[int, str] = field(default_factory=dict)
    params: tuple[str, ...] = ()
    messages_kw: str = ""
    root_ok: bool = False


_ANTHROPIC_PARAMS = ("model", "tool_choice", "thinking", "cache_control", "output_config")
_OPENAI_PARAMS = (
    "model",
    "tool_choice",
    "reasoning_effort",
    "reasoning",
    "prompt_cache_key",
    "extra_body",
)

SPECS: tuple[SinkSpec, ...] = (
    SinkSpec(
        "anthropic",
        "messages.create",
        suffixes=(("messages", "create"), ("messages", "stream")),
        guard=("messages", "system", "model"),
        regions={"tools": "tools", "system": "system", "messages": "messages"},
        params=_ANTHROPIC_PARAMS,
        messages_kw="messages",
    ),
    SinkSpec(
        "openai.chat",
        "chat.completions.create",
        suffixes=(
            ("chat", "completions", "create"),
            ("chat", "completions", "parse"),
            ("chat", "completions", "stream"),
        ),
        guard=("messages", "model"),
        regions={"tools": "tools", "messages": "messages", "response_format": "tools"},
        params=_OPENAI_PARAMS,
        messages_kw="messages",
    ),
    # the pre-1.0 openai SDK's ``openai.ChatCompletion.create/acreate`` (or
    # ``from openai import ChatCompletion``): the same POST to /v1/chat/completions, so the
    # same automatic prefix caching. ``functions`` is the list of tool definitions that
    # ``tools`` replaced, ``function_call`` the choice ``tool_choice`` replaced, and Azure
    # names the deployment with ``engine`` or ``deployment_id`` instead of ``model``
    # (openai-python v0.28 ``openai/api_resources/chat_completion.py`` and
    # ``engine_api_resource.py``). Matched after ``openai.chat`` above, so a raw post to that
    # endpoint keeps its label
    SinkSpec(
        "openai.chat",
        "ChatCompletion.create",
        suffixes=(("ChatCompletion", "create"), ("ChatCompletion", "acreate")),
        qualnames=frozenset({"openai.ChatCompletion.create", "openai.ChatCompletion.acreate"}),
        guard=("messages", "model"),
        regions={
            "tools": "tools",
            "functions": "tools",
            "messages": "messages",
            "response_format": "tools",
        },
        params=(*_OPENAI_PARAMS, "function_call", "engine", "deployment_id"),
        messages_kw="messages",
    ),
    SinkSpec(
        "openai.responses",
        "responses.create",
        suffixes=(("responses", "create"), ("responses", "parse"), ("responses", "stream")),
        guard=("input", "instructions", "model"),
        regions={"instructions": "system", "tools": "tools", "input": "messages"},
        params=_OPENAI_PARAMS,
        messages_kw="input",
    ),
    SinkSpec(
        "bedrock",
        "converse",
        suffixes=(("converse",), ("converse_stream",)),
        guard=("modelId", "messages"),
        regions={"system": "system", "toolConfig": "bedrock_tools", "messages": "messages"},
        params=("modelId",),
        messages_kw="messages",
    ),
    SinkSpec(
        "bedrock.invoke",
        "invoke_model",
        suffixes=(("invoke_model",), ("invoke_model_with_response_stream",)),
        guard=("modelId", "body"),
        regions={"body": "json_body"},
        params=("modelId",),
    ),
    SinkSpec(
        "gemini",
        "models.generate_content",
        suffixes=(("models", "generate_content"), ("models", "generate_content_stream")),
        guard=("contents", "model", "config"),
        regions={"config": "gemini_config", "contents": "messages"},
        params=("model",),
        messages_kw="contents",
    ),
    SinkSpec(
        "gemini.config",
        "GenerateContentConfig",
        qualnames=frozenset(
            {
                "google.genai.types.GenerateContentConfig",
                "google.genai.types.CreateCachedContentConfig",
            }
        ),
        regions={"system_instruction": "system", "tools": "tools", "contents": "cache_contents"},
    ),
    SinkSpec(
        "gemini.legacy",
        "GenerativeModel",
        qualnames=frozenset({"google.generativeai.GenerativeModel"}),
        regions={"system_instruction": "system", "tools": "tools"},
        params=("model_name",),
    ),
    # the google.generativeai SDK's ``GenerativeModel(...).generate_content(contents=...)``
    # (also on a model kept in a field, or one built from the module kept in one,
    # ``self.client.GenerativeModel(...)``): ``contents`` is the conversation sent, history
    # then newest turn last, as the new SDK's ``models.generate_content`` above ("the content
    # of the current conversation with the model ... conversation history + latest request":
    # GenerateContentRequest.contents,
    # https://www.rubydoc.info/gems/google-cloud-ai_platform-v1/0.41.0/Google/Cloud/AIPlatform/V1/GenerateContentRequest),
    # and Gemini 2.5 and newer cache its common prefix implicitly
    # (https://ai.google.dev/gemini-api/docs/caching, both checked 2026-12-05). Matched on the
    # ``contents`` keyword (or a ``**`` splat) only: ``model.generate_content(prompt)`` with a
    # positional prompt is not a sink
    SinkSpec(
        "gemini.legacy",
        "GenerativeModel.generate_content",
        suffixes=(("generate_content",), ("generate_content_async",)),
        guard=("contents",),
        regions={"contents": "messages"},
        messages_kw="contents",
    ),
    SinkSpec(
        "gemini.caches",
        "caches.create",
        suffixes=(("caches", "create"),),
        guard=("config", "model"),
        regions={"config": "gemini_config"},
        params=("model",),
    ),
    SinkSpec(
        "litellm",
        "litellm.completion",
        qualnames=frozenset({"litellm.completion", "litellm.acompletion"}),
        regions={"tools": "tools", "messages": "messages", "system": "system"},
        params=(*_OPENAI_PARAMS, "cache_control"),
        messages_kw="messages",
    ),
    SinkSpec(
        "langchain",
        "SystemMessage",
        qualnames=frozenset(
            {
                "langchain_core.messages.SystemMessage",
                "langchain.schema.SystemMessage",
                "langchain.schema.messages.SystemMessage",
                "langchain_core.messages.system.SystemMessage",
                "langchain.messages.SystemMessage",
                "langchain_core.prompts.SystemMessagePromptTemplate.from_template",
                "langchain.prompts.SystemMessagePromptTemplate.from_template",
            }
        ),
        regions={"content": "system", "template": "system"},
        positional={0: "system"},
    ),
    SinkSpec(
        "langchain.prompt",
        "ChatPromptTemplate.from_messages",
        qualnames=frozenset(
            {
                "langchain_core.prompts.ChatPromptTemplate.from_messages",
                "langchain.prompts.ChatPromptTemplate.from_messages",
                "langchain_core.prompts.chat.ChatPromptTemplate.from_messages",
            }
        ),
        regions={"messages": "lc_messages"},
        positional={0: "lc_messages"},
    ),
    SinkSpec(
        "langchain.tools",
        "bind_tools",
        suffixes=(("bind_tools",),),
        regions={"tools": "tools"},
        positional={0: "tools"},
        params=("tool_choice",),
    ),
    # LangChain v1's agent factory, ``create_agent(model, tools=None, *, system_prompt=None,
    # ...)``: the tools (second positional or ``tools=``) are bound to the model in that order
    # and the system prompt opens every request of the agent
    # (https://docs.langchain.com/oss/python/releases/langchain-v1 and
    # https://docs.langchain.com/oss/python/langchain/agents, checked 2026-12-05)
    SinkSpec(
        "langchain.agent",
        "create_agent",
        qualnames=frozenset(
            {"langchain.agents.create_agent", "langchain.agents.factory.create_agent"}
        ),
        regions={"tools": "tools", "system_prompt": "system"},
        positional={1: "tools"},
        params=("model",),
    ),
    SinkSpec(
        "agent",
        "Agent",
        qualnames=frozenset({"pydantic_ai.Agent", "pydantic_ai.agent.Agent", "agents.Agent"}),
        regions={"system_prompt": "system", "instructions": "system", "tools": "tools"},
        params=("model",),
    ),
)

#: The tool classes of the agent SDKs whose ``Agent`` is a sink above, by the qualified name
#: of their definition, and the fields of each that the SDK sends as the tool's definition.
#: Any other field (the function or executor that runs the tool, approval callbacks, timeouts,
#: whatever state those keep) never leaves the process, so what it holds is not in the
#: prefix. A dotted name sends one field of the object that field holds: a computer tool
#: sends its computer's ``environment`` and ``dimensions``, not the browser it drives.
#: openai-agents: ``FunctionTool`` as ``Converter.tool_to_openai`` (chat completions) and
#: ``Converter._convert_function_tool`` (responses) build it, the hosted tools as
#: ``Converter._convert_tool`` (``models/openai_responses.py``) does, field by field.
#: pydantic-ai: ``Tool.tool_def`` and each model's ``_map_tool_definition`` (name, description,
#: the function's parameter schema, strict); the fields that shape that schema are kept too.
SENT_TOOL_FIELDS: dict[str, frozenset[str]] = {
    "agents.tool.FunctionTool": frozenset(
        {
            "name",
            "description",
            "params_json_schema",
            "strict_json_schema",
            "defer_loading",
            "allowed_callers",
            "output_json_schema",
            "_tool_namespace",
            "_tool_namespace_description",
        }
    ),
    "agents.tool.WebSearchTool": frozenset(
        {"filters", "user_location", "search_context_size", "external_web_access"}
    ),
    "agents.tool.FileSearchTool": frozenset(
        {
            "vector_store_ids",
            "max_num_results",
            "ranking_options",
            "filters",
            "include_search_results",
        }
    ),
    "agents.tool.ComputerTool": frozenset({"computer.environment", "computer.dimensions"}),
    "agents.tool.CustomTool": frozenset(
        {"name", "description", "format", "defer_loading", "allowed_callers", "tool_config"}
    ),
    "agents.tool.HostedMCPTool": frozenset({"tool_config"}),
    "agents.tool.ApplyPatchTool": frozenset({"tool_config", "allowed_callers"}),
    "agents.tool.ShellTool": frozenset({"environment", "allowed_callers"}),
    "agents.tool.ImageGenerationTool": frozenset({"tool_config"}),
    "agents.tool.CodeInterpreterTool": frozenset({"tool_config"}),
    "agents.tool.LocalShellTool": frozenset(),
    "agents.tool.ToolSearchTool": frozenset({"description", "execution", "parameters"}),
    "agents.tool.ProgrammaticToolCallingTool": frozenset(),
    "pydantic_ai.tools.Tool": frozenset(
        {
            "function",
            "function_schema",
            "takes_ctx",
            "name",
            "description",
            "prepare",
            "docstring_format",
            "require_parameter_descriptions",
            "strict",
            "defer_loading",
            "include_return_schema",
        }
    ),
}


def sent_tool_fields(qualname: str) -> dict[str, frozenset[str] | None] | None:
    """The fields of the SDK tool class ``qualname`` that its SDK sends (``SENT_TOOL_FIELDS``),
    each with the fields of what it holds that are sent (None: all of it); None for a class
    that is not such a tool class."""
    names = SENT_TOOL_FIELDS.get(qualname)
    if names is None:
        return None
    out: dict[str, frozenset[str] | None] = {}
    for name in sorted(names):
        head, _, rest = name.partition(".")
        if not rest:
            out[head] = None
        elif head not in out or out[head] is not None:
            out[head] = (out.get(head) or frozenset()) | {rest}
    return out


#: methods whose name says "count tokens": never sinks, even on a matching chain
NOT_SINKS = frozenset({"count_tokens"})


def call_chain(func: ast.expr) -> tuple[str, ...]:
    """Attribute names of a call target, root first: ``a.b.c`` -> ("a", "b", "c"). Kept on
    the node (every analysis of a file evaluates its calls again; trees are never changed)."""
    known: tuple[str, ...] | None = func.__dict__.get("_call_chain")
    if known is None:
        known = func.__dict__["_call_chain"] = _call_chain(func)
    return known


def _call_chain(func: ast.expr) -> tuple[str, ...]:
    parts: list[str] = []
    node = func
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    else:
        parts.append("<expr>")
    parts.reverse()
    return tuple(parts)


def _has_kw(call: ast.Call, names: tuple[str, ...]) -> bool:
    return any(kw.arg is None or kw.arg in names for kw in call.keywords)


_LAST_NAMES = frozenset(suffix[-1] for spec in SPECS for suffix in spec.suffixes)
_QUALNAMES = frozenset(name for spec in SPECS for name in spec.qualnames)


def match(
    call: ast.Call,
    chain: tuple[str, ...],
    qualname: str | None,
    extra: tuple[SinkSpec, ...] = (),
) -> SinkSpec | None:
    """The spec of the API this call is, or None."""
    if not extra and chain[-1] not in _LAST_NAMES and qualname not in _QUALNAMES:
        return None
    if chain[-1] in NOT_SINKS:
        return None
    for spec in (*extra, *SPECS):
        hit = False
        if qualname and qualname in spec.qualnames:
            hit = True
        else:
            for suffix in spec.suffixes:
                n = len(suffix)
                if (len(chain) > n or spec.root_ok) and chain[-n:] == suffix:
                    hit = True
                    break
        if hit and (not spec.guard or _has_kw(call, spec.guard)):
            return spec
    return None


def spec_from_config(entry: dict[str, object]) -> SinkSpec:
    """Build a user sink from ``[[tool.promptcache.lint.sinks]]``.

    Keys: ``call`` (qualified name such as ``myapp.llm.ask``, or ``*.ask``/``*.llm.ask`` for a
    trailing attribute chain), and any of ``system``, ``tools``, ``messages``, ``text`` mapping to
    a keyword name (an identifier) or positional index (an int from 0), or a list of them;
    ``model`` names the model keyword. Raises ``ValueError`` with the fix on anything else.
    """
    allowed = {"call", "system", "tools", "messages", "text", "model"}
    unknown = set(entry) - allowed
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(sorted(unknown))} in a sinks entry; allowed: "
            f"{', '.join(sorted(allowed))}"
        )
    call = entry.get("call")
    if not isinstance(call, str) or not call.strip("*."):
        raise ValueError('each sinks entry needs call = "package.module.function" or "*.method"')
    regions: dict[str, str] = {}
    positional: dict[int, str] = {}
    for region in ("system", "tools", "messages", "text"):
        raw = entry.get(region)
        if raw is None:
            continue
        items = raw if isinstance(raw, list) else [raw]
        for item in items:
            if isinstance(item, bool) or not isinstance(item, (str, int)):
                raise ValueError(
                    f"sinks entry {call!r}: {region} must be a keyword name or an argument index"
                )
            if isinstance(item, int) and item < 0:
                raise ValueError(
                    f"sinks entry {call!r}: {region} = {item} is not an argument index (0 or "
                    "more, counted from the first argument)"
                )
            if isinstance(item, str) and not item.isidentifier():
                raise ValueError(
                    f"sinks entry {call!r}: {region} = {item!r} is not a keyword name "
                    '(a parameter name such as "system_prompt")'
                )
            if isinstance(item, int):
                positional[item] = "system" if region == "text" else region
            else:
                regions[item] = "system" if region == "text" else region
    model = entry.get("model")
    if model is not None and not (isinstance(model, str) and model.isidentifier()):
        raise ValueError(
            f"sinks entry {call!r}: model = {model!r} is not a keyword name (the parameter "
            'that takes the model, such as "model")'
        )
    params = (model,) if isinstance(model, str) else ()
    if call.startswith("*."):
        return SinkSpec(
            "custom",
            call[2:],
            suffixes=(tuple(call[2:].split(".")),),
            regions=regions,
            positional=positional,
            params=params,
            messages_kw=next((k for k, v in regions.items() if v == "messages"), ""),
            root_ok=True,
        )
    return SinkSpec(
        "custom",
        call,
        qualnames=frozenset({call}),
        regions=regions,
        positional=positional,
        params=params,
        messages_kw=next((k for k, v in regions.items() if v == "messages"), ""),
    )


#: vendor endpoints that a raw HTTP post of a JSON body reaches, and the SDK call it stands for
#: (paths from the vendors' API references: docs.anthropic.com/en/api/messages and
#: platform.openai.com/docs/api-reference, checked 2026-12-01)
HTTP_ENDPOINTS: tuple[tuple[str, str], ...] = (
    ("/v1/messages", "anthropic"),
    ("/v1/chat/completions", "openai.chat"),
    ("/v1/responses", "openai.responses"),
)
#: methods that post a body: ``httpx.post``, ``requests.post``, ``client.post``
HTTP_POSTS = frozenset({"post", "apost"})


def http_spec(url: str | None) -> SinkSpec | None:
    """The SDK spec whose request a raw post to ``url`` sends, or None (``count_tokens`` and
    other endpoints are not sinks)."""
    if not url or "count_tokens" in url:
        return None
    path = url.split("?", 1)[0].rstrip("/")
    for suffix, api in HTTP_ENDPOINTS:
        if path.endswith(suffix):
            return next(s for s in SPECS if s.api == api)
    return None
