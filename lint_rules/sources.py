"""Where volatile values are born: exact, fully qualified call names, resolved through imports.

Matching is on the qualified name (``datetime.datetime.now`` whether the code wrote
``datetime.now()`` after ``from datetime import datetime`` or ``dt.datetime.now()`` after
``import datetime as dt``), never on substrings: a method called ``now`` on an unknown object is
not a time source.
"""

from __future__ import annotations

import re

from .facts import Kind, Shape

#: qualified call -> (kind, granularity or "", shape of the result)
CALL_SOURCES: dict[str, tuple[Kind, str, Shape]] = {}


def _add(kind: Kind, granularity: str, shape: Shape, *names: str) -> None:
    for name in names:
        CALL_SOURCES[name] = (kind, granularity, shape)


_add(
    Kind.TIME,
    "subday",
    Shape.DATETIME,
    "datetime.datetime.now",
    "datetime.datetime.utcnow",
    "datetime.datetime.today",
    "arrow.now",
    "arrow.utcnow",
    "pendulum.now",
    "django.utils.timezone.now",
    "django.utils.timezone.localtime",
    "pandas.Timestamp.now",
    "pandas.Timestamp.utcnow",
    "pandas.Timestamp.today",
)
_add(Kind.TIME, "day", Shape.DATE, "datetime.date.today", "pendulum.today")
_add(
    Kind.TIME,
    "subday",
    Shape.NUM,
    "time.time",
    "time.time_ns",
    "time.monotonic",
    "time.monotonic_ns",
    "time.perf_counter",
    "time.perf_counter_ns",
)
#: unique values fixed for the life of the process (one prefix per worker process, the same on
#: every request it serves): born pinned, like a value computed at import
PER_PROCESS_SOURCES = frozenset({"os.getpid", "os.getppid"})
#: time.localtime()/gmtime()/ctime()/asctime() are sources only when called without a time.
NO_ARG_TIME_SOURCES = frozenset({"time.localtime", "time.gmtime", "time.ctime", "time.asctime"})

_add(
    Kind.UNIQUE,
    "",
    Shape.UNKNOWN,
    "uuid.uuid1",
    "uuid.uuid4",
    "uuid.uuid6",
    "uuid.uuid7",
    "uuid6.uuid6",
    "uuid6.uuid7",
    "uuid_utils.uuid4",
    "uuid_utils.uuid7",
    "os.urandom",
    "os.getpid",
    "os.getppid",
    "ulid.new",
    "ulid.ULID",
    "ulid.ulid",
    "ulid.generate",
    "nanoid.generate",
    "shortuuid.uuid",
    "shortuuid.random",
    "cuid.cuid",
    "builtins.id",
)
_RANDOM_FUNCS = [
    "random",
    "randint",
    "randrange",
    "choice",
    "choices",
    "sample",
    "uniform",
    "gauss",
    "getrandbits",
    "randbytes",
    "triangular",
    "betavariate",
    "expovariate",
    "normalvariate",
    "lognormvariate",
    "shuffle",
]
_add(Kind.UNIQUE, "", Shape.UNKNOWN, *(f"random.{f}" for f in _RANDOM_FUNCS))
_add(
    Kind.UNIQUE,
    "",
    Shape.UNKNOWN,
    *(
        f"secrets.{f}"
        for f in ["token_hex", "token_bytes", "token_urlsafe", "choice", "randbelow", "randbits"]
    ),
)
_add(
    Kind.UNIQUE,
    "",
    Shape.UNKNOWN,
    *(f"numpy.random.{f}" for f in ["rand", "randn", "randint", "random", "choice", "permutation"]),
)

_add(
    Kind.ENV,
    "",
    Shape.STR,
    "os.getcwd",
    "os.getcwdb",
    "os.getenv",
    "os.getlogin",
    "os.uname",
    "os.path.expanduser",
    "pathlib.Path.cwd",
    "pathlib.Path.home",
    "socket.gethostname",
    "socket.getfqdn",
    "platform.node",
    "platform.platform",
    "platform.uname",
    "getpass.getuser",
    "tempfile.gettempdir",
    "tempfile.mkdtemp",
    "tempfile.mkstemp",
    "os.environ.get",
    "os.environ.copy",
)
#: attribute reads (not calls) that are environment values: ``os.environ["HOME"]``
ENV_ATTRS = frozenset({"os.environ", "os.environb", "sys.argv"})

#: qualified calls whose result is a collection in an unstable order
UNORDERED_SOURCES: dict[str, bool] = {
    # name -> whether the elements are orderable (str or Path), so sorted() is a safe fix
    "os.listdir": True,
    "os.scandir": False,
    "os.walk": False,
    "glob.glob": True,
    "glob.iglob": True,
    "asyncio.as_completed": False,
    "concurrent.futures.as_completed": False,
}
#: of those, the ones whose order is the order tasks finish in (it changes from run to run, not
#: only between machines): https://docs.python.org/3/library/asyncio-task.html#asyncio.as_completed
#: (checked 2026-12-03)
COMPLETION_ORDER_SOURCES = frozenset({"asyncio.as_completed", "concurrent.futures.as_completed"})
#: methods of pathlib.Path whose result is in filesystem order (matched by method name on a
#: receiver that is a ``Path(...)`` call or a name bound to one)
UNORDERED_PATH_METHODS = frozenset({"iterdir", "glob", "rglob"})

#: producers of tool lists whose order someone else controls (PC005). Not
#: ``pkgutil.iter_modules``: it lists each folder's (or zip's) names sorted
#: (``pkgutil._iter_file_finder_modules`` sorts ``os.listdir``), so the modules of a plugin
#: folder come in name order on every machine
TOOL_PRODUCERS_METHODS = frozenset({"list_tools"})
TOOL_PRODUCERS: frozenset[str] = frozenset(
    {
        "langchain_mcp_adapters.tools.load_mcp_tools",
        "importlib.metadata.entry_points",
        "importlib_metadata.entry_points",
        "pkg_resources.iter_entry_points",
    }
)
#: of those, the ones that list one MCP server's tools (``facts.ONE_SERVER``)
MCP_TOOL_PRODUCERS = frozenset({"langchain_mcp_adapters.tools.load_mcp_tools"})

#: calls whose result carries none of the argument's facts
SANITIZERS = frozenset(
    {
        "builtins.len",
        "builtins.bool",
        "builtins.isinstance",
        "builtins.issubclass",
        "builtins.callable",
        "builtins.type",
        "builtins.print",
        "builtins.hasattr",
        "builtins.min",
        "builtins.max",
        "builtins.any",
        "builtins.all",
        "builtins.sum",
        # a file object: what is read from it is the file's contents, not its name
        "builtins.open",
        "io.open",
        "builtins.frozenset",
        "builtins.set",
        "promptcache.canonical_json",
        "promptcache.canonical.canonical_json",
    }
)

#: library calls documented to return their arguments' contents (a copy, or text rendered
#: from them): a chain through them is proven, not assumed
#: (https://docs.python.org/3/library/copy.html, .../dataclasses.html#dataclasses.asdict,
#: .../html.html#html.escape, .../textwrap.html, .../os.path.html#os.path.join; checked
#: 2026-12-03); and the numeric conversions ``int()``, ``float()``, ``round()`` and ``abs()``,
#: whose result is the argument's number (``int(time.time())`` is still the time,
#: ``float(os.getenv("TIMEOUT"))`` still the environment's value); and the in-memory streams
#: ``io.StringIO``/``io.BytesIO``, whose buffer is the initial value given
#: (https://docs.python.org/3/library/io.html#io.StringIO, checked 2026-12-04); and the Google Gen
#: AI SDK's tool objects ``types.Tool(function_declarations=[...])``, ``types.ToolDict`` and
#: ``types.FunctionDeclaration(...)``: the SDK sends them as the request's ``tools``, field by
#: field, declarations in the list's order
#: (https://www.mintlify.com/googleapis/python-genai/concepts/types, https://cloud.google.com/
#: vertex-ai/generative-ai/docs/model-reference/function-calling, checked 2026-12-05)
PASS_THROUGH_FUNCTIONS = frozenset(
    {
        "google.genai.types.Tool",
        "google.genai.types.ToolDict",
        "google.genai.types.FunctionDeclaration",
        "google.genai.types.FunctionDeclarationDict",
        "io.StringIO",
        "io.BytesIO",
        "builtins.int",
        "builtins.float",
        "builtins.round",
        "builtins.abs",
        "copy.copy",
        "copy.deepcopy",
        "dataclasses.asdict",
        "dataclasses.astuple",
        "html.escape",
        "textwrap.indent",
        "textwrap.fill",
        "textwrap.shorten",
        "os.path.join",
    }
)
#: methods, on any receiver, that render a prompt template from their arguments: Jinja's
#: ``Template.render``/``render_async`` (https://jinja.palletsprojects.com/en/stable/api/
#: #jinja2.Template.render) and LangChain's prompt templates ``format``/``format_messages``/
#: ``format_prompt`` (https://reference.langchain.com/python/langchain-core/prompts/string/
#: StringPromptTemplate/format); checked 2026-12-03
PASS_THROUGH_METHODS = frozenset(
    {"render", "render_async", "format", "format_messages", "format_prompt"}
)

# strftime directives: any of these makes the text change within a day
#: ``%z`` (the UTC offset) and ``%Z`` (the zone's name) are neither: they change with the zone's
#: rules, at summer time (https://docs.python.org/3/library/datetime.html#format-codes,
#: checked 2026-12-07)
_SUBDAY = set("HIMSfpXcTRrkls")
_DAY = set("djaAwuxDFe")
_DIRECTIVE = re.compile(r"%[-_0^#]?([a-zA-Z%])")


def format_granularity(fmt: str) -> str:
    """Granularity of ``strftime(fmt)`` output: "subday", "day", or "" (a month or coarser).

    >>> [format_granularity(f) for f in ("%Y-%m-%d %H:%M", "%A %d %B", "%Y")]
    ['subday', 'day', '']
    """
    found = set(_DIRECTIVE.findall(fmt))
    if found & _SUBDAY:
        return "subday"
    if found & _DAY:
        return "day"
    return ""


#: attributes of a datetime whose value changes less than daily (or per day)
DATETIME_ATTR_GRANULARITY = {
    "year": "",
    "month": "",
    "day": "day",
    "weekday": "day",
    "isoweekday": "day",
    "date": "day",
    "hour": "subday",
    "minute": "subday",
    "second": "subday",
    "microsecond": "subday",
    "timestamp": "subday",
    "time": "subday",
    "timetz": "subday",
    # ``time.struct_time``'s fields (``time.localtime().tm_hour``)
    "tm_year": "",
    "tm_mon": "",
    "tm_mday": "day",
    "tm_wday": "day",
    "tm_yday": "day",
    "tm_hour": "subday",
    "tm_min": "subday",
    "tm_sec": "subday",
}
#: a time's zone, no part of the moment: a datetime's ``tzinfo``, a ``struct_time``'s zone name
#: and UTC offset (``time.localtime().tm_zone``, ``.tm_gmtoff``)
ZONE_ATTRS = frozenset({"tzinfo", "tm_zone", "tm_gmtoff"})
