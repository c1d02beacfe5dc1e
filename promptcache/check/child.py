"""The in-process hook of ``promptcache check``: loaded into every Python process of COMMAND.

``hook/sitecustomize.py`` (put first on the child's ``PYTHONPATH``) loads this file by path, so
it needs nothing but the standard library (and ``time-machine`` for the clock, when the child's
Python has it). It reads the run's plan from ``PROMPTCACHE_CHECK_PLAN`` (JSON, written by
``promptcache.check.perturbation.Perturbation.plan``) and then:

- **perturbs** what the plan says: the wall clock (``time_machine.travel`` to the plan's
  instant, ticking; ``time.ctime()`` and ``time.asctime()`` are given its time); ``random``
  (seeded), ``uuid.uuid4``/``uuid1`` and ``secrets`` (a run-specific deterministic stream);
  the order of ``os.listdir`` and ``os.scandir`` (which ``glob``, ``os.walk`` and
  ``Path.iterdir`` call); ``os.getpid`` (a run-specific number, kept
  distinct per process; ``os.kill`` of it is mapped back to the real pid). ``PYTHONHASHSEED``
  is set by the parent in the environment, since only the interpreter's start can apply it;
- **tags** every HTTP request that ``httpx``, ``httpx2`` (the official ``anthropic`` and
  ``openai`` clients' HTTP layer), ``requests``, ``aiohttp`` or ``urllib.request`` sends to the
  capture endpoint with the call site (the first stack frame in the user's code; in a worker
  thread that runs only library code, the one that submitted its task), the run, the
  (reported) pid,
  how many directory listings of the user's code it has reordered so far and whether the
  program (not its HTTP and LLM clients, nor OpenTelemetry) has drawn from ``random``,
  ``uuid4``/``uuid1`` or ``secrets``;
- **reroutes** posts those libraries send straight to a vendor host (``api.anthropic.com``,
  ``api.openai.com``, ``generativelanguage.googleapis.com``) to the capture endpoint, the
  original URL in a header, so clients that ignore the ``*_BASE_URL`` variables are captured;
- **records** each request to an LLM API route (``/chat/completions``, ``/messages``, ...)
  that goes to any other host, a client given its own ``base_url``, as a line in the file
  ``PROMPTCACHE_CHECK_PASSED`` names, so that check can say what it did not capture.

Forked processes inherit all of it; processes started anew load it again through
``PYTHONPATH``. Patching happens once per process; ``httpx``/``httpx2``/``requests``/
``aiohttp``/``urllib.request`` are patched when first imported (an import hook), so a program
that never imports them pays nothing for them.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.abc
import importlib.machinery
import json
import os
import random
import secrets
import site
import sys
import sysconfig
import threading
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable, Iterator
from types import FrameType, ModuleType, TracebackType
from typing import Any
from urllib.parse import quote

PLAN_ENV = "PROMPTCACHE_CHECK_PLAN"
ROOT_PID_ENV = "PROMPTCACHE_CHECK_ROOT_PID"
HEADER_RUN = "x-promptcache-check-run"
HEADER_SITE = "x-promptcache-check-site"
HEADER_PID = "x-promptcache-check-pid"
HEADER_LISTINGS = "x-promptcache-check-listings"
HEADER_DRAWN = "x-promptcache-check-drawn"
HEADER_UPSTREAM = "x-promptcache-check-upstream"
HEADER_NO_CLOCK = "x-promptcache-check-no-clock"
#: A file the hook appends one JSON line to for each LLM request that went to another host
#: than the capture endpoint (a client given its own ``base_url``): check reads it per run.
PASSED_ENV = "PROMPTCACHE_CHECK_PASSED"

#: How the path of an LLM API call ends (OpenAI-compatible servers, Anthropic, Gemini).
LLM_PATH_ENDS = ("/chat/completions", "/completions", "/responses", "/messages")
LLM_PATH_METHODS = (":generateContent", ":streamGenerateContent")

#: The variables check points at its endpoint (``CaptureServer.base_urls``): a program that
#: sets one of them itself (``load_dotenv(override=True)`` and a ``.env`` file that names a
#: gateway) sends past the endpoint, and the record of such a request names the variable.
BASE_URL_VARIABLES = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL")

#: Vendor API hosts whose requests are rerouted to the capture endpoint, and the endpoint's
#: mount for each.
VENDOR_HOSTS = {
    "api.anthropic.com": "anthropic",
    "api.openai.com": "openai",
    "generativelanguage.googleapis.com": "gemini",
}


class _DrawNoting(random.Random):
    """``random.Random`` that notes in ``S.drawn`` the first value the program draws (not its
    HTTP and LLM clients: :func:`_note_draw`).

    Every draw (``choice``, ``sample``, ``shuffle``, ``uniform``, ``randbytes``...) goes
    through :meth:`random` or :meth:`getrandbits`, so these two see them all; the values are
    ``random.Random``'s own for the same seed.
    """

    def random(self) -> float:
        if not S.drawn:
            _note_draw(sys._getframe(1))
        return super().random()

    def getrandbits(self, k: int, /) -> int:
        if not S.drawn:
            _note_draw(sys._getframe(1))
        return super().getrandbits(k)


class _State:
    """Everything the patches need, set once by :func:`install`."""

    endpoint = ""
    run = 0
    plan: dict[str, Any] = {}  # noqa: RUF012 - one process-wide instance
    listings = 0
    drawn = False  # the program drew from random, uuid4/uuid1 or secrets (_note_draw)
    forks = 0
    not_user: tuple[str, ...] = ()
    stdlib: tuple[str, ...] = ()
    user_cache: dict[str, bool] = {}  # noqa: RUF012
    rng: random.Random = _DrawNoting(0)
    real_getpid: Callable[[], int] = os.getpid
    root_pid = 0
    clock_problem = ""
    passed_log = ""


S = _State()


# ------------------------------------------------------------------------------- call sites
def _is_user_file(filename: str) -> bool:
    cached = S.user_cache.get(filename)
    if cached is None:
        cached = not (
            filename.startswith("<")
            or os.path.abspath(filename).startswith(S.not_user)
            or filename == __file__
        )
        S.user_cache[filename] = cached
    return cached


#: Where a forked ``multiprocessing`` child starts: the frames below it are the parent's at the
#: fork (``with Pool(3) as pool:``), copied with its memory, not the worker's callers.
_PROCESS_START = os.path.join("multiprocessing", "process.py")


#: Where the event loop runs a step of an asyncio task (``Handle._run``): the frames below it
#: are the loop's and its caller's (``asyncio.run(main())``), not the callers of the task.
_LOOP_STEP = os.path.join("asyncio", "events.py")


def _first_user_frame(frame: FrameType | None) -> tuple[FrameType | None, FrameType | None]:
    """The first user frame at or above ``frame`` (None where there is none), and the event
    loop's step of a task where the walk stopped there instead (None otherwise)."""
    while frame is not None:
        code = frame.f_code
        if _is_user_file(code.co_filename):
            return frame, None
        if code.co_name == "_bootstrap" and code.co_filename.endswith(_PROCESS_START):
            return None, None
        if code.co_name == "_run" and code.co_filename.endswith(_LOOP_STEP):
            return None, frame
        frame = frame.f_back
    return None, None


def _is_stdlib_file(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(S.stdlib) and "-packages" + os.sep not in path


def _called_from_user_code(frame: FrameType | None) -> bool:
    """Whether the first frame outside the standard library (``glob``, ``pathlib`` and ``os``
    call the listing functions for their callers) is the user's code."""
    while frame is not None and _is_stdlib_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None and _is_user_file(frame.f_code.co_filename)


#: User frames named above the call site (the callers of a helper that wraps the client).
MAX_CALLERS = 2


#: The user frames (:func:`_site_parts`) of the code that created the running asyncio task
#: (:func:`_patch_event_loop`), for the frames below the loop's step of that task.
_TASK_SITE: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "promptcache_check_task_site", default=()
)


def _site_parts(frame: FrameType | None) -> list[str]:
    """``PATH\\tLINE\\tQUALNAME`` of the first user frame at or above ``frame`` and of up to
    :data:`MAX_CALLERS` user frames that called it; in an asyncio task, the frames of the code
    that created the task follow its own (the frames below the loop, where that is not known)."""
    parts: list[str] = []
    while len(parts) <= MAX_CALLERS:
        user, loop_step = _first_user_frame(frame)
        if user is None and loop_step is not None:
            created_by = _TASK_SITE.get()
            if created_by:
                parts += created_by[: MAX_CALLERS + 1 - len(parts)]
                break
            frame = loop_step.f_back
            continue
        if user is None:
            break
        code = user.f_code
        name = getattr(code, "co_qualname", code.co_name)
        parts.append(f"{os.path.abspath(code.co_filename)}\t{user.f_lineno}\t{name}")
        frame = user.f_back
    return parts


def call_site(frame: FrameType | None) -> str:
    """:func:`_site_parts` of ``frame``, tab-separated and URL-quoted (header values are
    Latin-1); ``""`` when every frame is library code."""
    return quote("\t".join(_site_parts(frame)), safe="/")


#: The call site of the user's code that handed the running task to this worker thread
#: (:func:`_patch_executor`), for a request sent from a thread that runs only library code.
_HANDED = threading.local()


def request_site(frame: FrameType | None) -> str:
    """:func:`call_site` of ``frame``, else (no user frame in this thread) the one that handed
    this thread its task: ``await asyncio.to_thread(client.chat.completions.create, ...)``."""
    return call_site(frame) or str(getattr(_HANDED, "site", ""))


def _not_user_prefixes(extra: list[str]) -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    # "scripts": the console-script wrappers pip writes (bin/pytest, bin/uvicorn), never the
    # user's code, so a test is not said to be "called from .venv/bin/pytest:8"
    keys = ("stdlib", "platstdlib", "purelib", "platlib", "scripts")
    found = {paths.get(key, "") for key in keys}
    found.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    user_site = site.getusersitepackages() if hasattr(site, "getusersitepackages") else ""
    found.update([user_site, os.path.dirname(os.path.abspath(__file__)), *extra])
    return tuple(sorted(os.path.join(os.path.abspath(p), "") for p in found if p))


# ------------------------------------------------------------------------------ HTTP patches
def _tag(url: str, set_header: Callable[[str, str], None], frame: FrameType | None) -> str:
    """Reroute a vendor URL to the endpoint and add the check headers to endpoint requests.

    Returns the URL the request should go to (``url`` itself when unchanged)."""
    rest = url.partition("://")[2]
    host_port, slash, path = rest.partition("/")
    host = host_port.rsplit("@", 1)[-1].split(":", 1)[0].lower()
    vendor = VENDOR_HOSTS.get(host)
    target = url
    if vendor is not None:
        target = f"{S.endpoint}/{vendor}{slash}{path}"
        set_header(HEADER_UPSTREAM, url)
        set_header("host", S.endpoint.partition("://")[2])
    if not target.startswith(S.endpoint + "/"):
        _note_passed(url, host_port, path, frame)
    else:
        set_header(HEADER_RUN, str(S.run))
        set_header(HEADER_PID, str(os.getpid()))
        set_header(HEADER_LISTINGS, str(S.listings))
        set_header(HEADER_DRAWN, "1" if S.drawn else "0")
        if S.clock_problem:
            set_header(HEADER_NO_CLOCK, quote(S.clock_problem))
        site_value = request_site(frame)
        if site_value:
            set_header(HEADER_SITE, site_value)
    return target


def _note_passed(url: str, host_port: str, path: str, frame: FrameType | None) -> None:
    """Record an LLM API call that goes past the capture endpoint (its URL without the query
    or user info, which may hold a key, and its call site) in the run's passed file."""
    route = "/" + path.partition("?")[0].partition("#")[0].rstrip("/")
    if not S.passed_log or not (route.endswith(LLM_PATH_ENDS) or route.endswith(LLM_PATH_METHODS)):
        return
    scheme = url.partition("://")[0]
    line = {
        "run": S.run,
        "url": f"{scheme}://{host_port.rsplit('@', 1)[-1]}{route}",
        "site": request_site(frame),
    }
    variable = _set_over(url)
    if variable:
        line["variable"] = variable
    try:
        with open(S.passed_log, "a", encoding="utf-8") as log:
            log.write(json.dumps(line) + "\n")
    except OSError:
        pass  # the note is lost, never the program's request


def _set_over(url: str) -> str:
    """The base-URL variable that check set and this process holds another value in, which
    ``url`` is under: the program replaced check's endpoint with its own URL there (a
    ``.env`` file loaded with ``override=True``); ``""`` where none is."""
    for name in BASE_URL_VARIABLES:
        value = os.environ.get(name, "").rstrip("/")
        if not value or value == S.endpoint or value.startswith(S.endpoint + "/"):
            continue
        if url.startswith(value) and url[len(value) : len(value) + 1] in ("", "/", "?"):
            return name
    return ""


def _patch_httpx_like(module: ModuleType) -> None:
    """Wrap ``Client.send`` and ``AsyncClient.send`` of ``httpx`` or ``httpx2``."""
    url_type = module.URL

    def prepare(request: Any, frame: FrameType | None) -> None:
        def set_header(name: str, value: str) -> None:
            request.headers[name] = value

        url = str(request.url)
        target = _tag(url, set_header, frame)
        if target != url:
            request.url = url_type(target)

    sync_send = module.Client.send
    async_send = module.AsyncClient.send

    def send(self: Any, request: Any, **kwargs: Any) -> Any:
        prepare(request, sys._getframe(1))
        return sync_send(self, request, **kwargs)

    async def asend(self: Any, request: Any, **kwargs: Any) -> Any:
        prepare(request, sys._getframe(1))
        return await async_send(self, request, **kwargs)

    module.Client.send = send
    module.AsyncClient.send = asend


def _patch_requests(module: ModuleType) -> None:
    """Wrap ``requests.Session.send`` (every ``requests`` call goes through it)."""
    session_type = module.Session
    original = session_type.send

    def send(self: Any, request: Any, **kwargs: Any) -> Any:
        def set_header(name: str, value: str) -> None:
            request.headers[name] = value

        request.url = _tag(str(request.url), set_header, sys._getframe(1))
        return original(self, request, **kwargs)

    session_type.send = send


def _patch_aiohttp(module: ModuleType) -> None:
    """Wrap ``aiohttp.ClientSession._request`` (``get``, ``post`` and ``request`` go through
    it): the headers merged into the call's own, the URL resolved against the session's
    ``base_url`` first."""
    from multidict import CIMultiDict

    session_type = module.ClientSession
    original = session_type._request

    async def _request(self: Any, method: str, str_or_url: Any, **kwargs: Any) -> Any:
        added: dict[str, str] = {}
        build = getattr(self, "_build_url", None)
        url = str(build(str_or_url) if build is not None else str_or_url)
        target = _tag(url, added.__setitem__, sys._getframe(1))
        if added:
            headers = CIMultiDict(kwargs.get("headers") or {})
            for name, value in added.items():
                headers[name] = value
            kwargs["headers"] = headers
        return await original(self, method, target if target != url else str_or_url, **kwargs)

    session_type._request = _request


def _patch_executor(module: ModuleType) -> None:
    """Wrap ``concurrent.futures.ThreadPoolExecutor.submit`` (``asyncio.to_thread`` and
    ``loop.run_in_executor`` hand their calls to it) so that the task runs with the call site
    of the code that submitted it: a client method handed straight to a worker thread leaves
    no frame of the user's code on that thread's stack."""
    executor_type = module.ThreadPoolExecutor
    original = executor_type.submit

    def submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        site = request_site(sys._getframe(1))
        if not site:
            return original(self, fn, *args, **kwargs)

        def handed(*inner_args: Any, **inner_kwargs: Any) -> Any:
            before = getattr(_HANDED, "site", "")
            _HANDED.site = site
            try:
                return fn(*inner_args, **inner_kwargs)
            finally:
                _HANDED.site = before

        return original(self, handed, *args, **kwargs)

    executor_type.submit = submit


def _patch_event_loop(module: ModuleType) -> None:
    """Wrap ``asyncio.BaseEventLoop.create_task`` (``asyncio.create_task``, ``gather`` and
    ``TaskGroup`` call it) so that the task runs with the user frames of the code that created
    it: a task a library makes for the model call (LangChain's ``astream``) holds no frame of
    the user's code, and below the loop's step lies only ``asyncio.run(main())``. A context the
    caller passes (LangChain passes one) gets the site beside its own variables."""
    if sys.version_info < (3, 11):
        return  # no context argument before 3.11
    loop_type = module.BaseEventLoop
    original = loop_type.create_task

    def create_task(self: Any, coro: Any, *args: Any, **kwargs: Any) -> Any:
        parts = tuple(_site_parts(sys._getframe(1)))
        if parts:
            context = kwargs.get("context")
            if context is None:
                kwargs["context"] = context = contextvars.copy_context()
            with contextlib.suppress(RuntimeError):  # a context being run now: left as it is
                context.run(_TASK_SITE.set, parts)
        return original(self, coro, *args, **kwargs)

    loop_type.create_task = create_task


def _patch_urllib(module: ModuleType) -> None:
    """Wrap ``urllib.request.OpenerDirector.open`` (``urlopen`` and the openers of
    ``build_opener`` go through it, redirects too), as ``open`` itself makes a URL string into a
    ``Request``: a standard-library script's post is tagged, or rerouted from a vendor host,
    like one an HTTP library sends."""
    opener_type = module.OpenerDirector
    request_type = module.Request
    original = opener_type.open

    def open_(self: Any, fullurl: Any, data: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(fullurl, str):
            fullurl = request_type(fullurl, data)
            data = None
        if isinstance(fullurl, request_type) and fullurl.type in ("http", "https"):
            request = fullurl

            def set_header(name: str, value: str) -> None:
                request.add_header(name, value)

            target = _tag(request.full_url, set_header, sys._getframe(1))
            if target != request.full_url:
                request.full_url = target
        return original(self, fullurl, data, *args, **kwargs)

    opener_type.open = open_


_PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "httpx": _patch_httpx_like,
    "httpx2": _patch_httpx_like,
    "requests": _patch_requests,
    "aiohttp": _patch_aiohttp,
    "urllib.request": _patch_urllib,
    "concurrent.futures.thread": _patch_executor,
    "asyncio.base_events": _patch_event_loop,
}


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, name: str) -> None:
        self.loader = loader
        self.name = name

    def __getattr__(self, attr: str) -> Any:  # get_resource_reader, is_package...
        return getattr(self.loader, attr)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        _PATCHES[self.name](module)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches the HTTP libraries right after their first import."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, fullname)
                return spec
        return None


# ------------------------------------------------------------------------------ perturbation
def _reorder(names: list[Any]) -> list[Any]:
    """The plan's listing order: as listed (mode 0) or a seeded shuffle that always differs
    from the listed order when there are two entries or more."""
    mode = int(S.plan.get("listdir", 0))
    if mode == 0 or len(names) < 2:
        return names
    shuffled = list(names)
    random.Random(mode).shuffle(shuffled)
    if shuffled == names:
        shuffled.reverse()
    if _called_from_user_code(sys._getframe(2)):
        S.listings += 1
    return shuffled


class _ScandirIterator:
    """``os.scandir``'s iterator, with the entries in the plan's order."""

    def __init__(self, entries: list[Any], inner: Any) -> None:
        self._entries = iter(entries)
        self._inner = inner

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return next(self._entries)

    def __enter__(self) -> _ScandirIterator:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._inner.close()


def _patch_listings() -> None:
    listdir, scandir = os.listdir, os.scandir

    def patched_listdir(*args: Any, **kwargs: Any) -> list[Any]:
        return _reorder(listdir(*args, **kwargs))

    def patched_scandir(*args: Any, **kwargs: Any) -> _ScandirIterator:
        inner = scandir(*args, **kwargs)
        return _ScandirIterator(_reorder(list(inner)), inner)

    os.listdir = patched_listdir
    os.scandir = patched_scandir  # type: ignore[assignment]


#: Modules whose own draws are not the program's: the HTTP and LLM clients, retry helpers and
#: tracing (a retry's jitter; the ``openai`` and ``anthropic`` clients' idempotency key, a uuid4
#: per request; OpenTelemetry, which the ``anthropic`` client imports, draws a uuid4 per context
#: key at import and trace and span ids per span), whose values never go into a prompt; and
#: rich, which command-line apps import for their output: ``rich.style`` numbers its styles
#: from a ``getrandbits(24)`` drawn at import, an id that is never text.
CLIENT_MODULES = (
    "opentelemetry",
    "openai",
    "anthropic",
    "google.genai",
    "google.auth",
    "botocore",
    "httpx",
    "httpx2",
    "httpcore",
    "requests",
    "urllib3",
    "aiohttp",
    "tenacity",
    "backoff",
    "rich",
)
_CLIENT_PREFIXES = tuple(f"{name}." for name in CLIENT_MODULES)


def _is_client_frame(frame: FrameType) -> bool:
    module = str(frame.f_globals.get("__name__", ""))
    return module in CLIENT_MODULES or module.startswith(_CLIENT_PREFIXES)


def _outside_hook_and_stdlib(frame: FrameType | None) -> FrameType | None:
    """``frame`` or the first of its callers that is neither this hook nor the standard library
    (frozen ``importlib`` frames included)."""
    while frame is not None and (
        frame.f_code.co_filename == __file__
        or frame.f_code.co_filename.startswith("<frozen ")
        or _is_stdlib_file(frame.f_code.co_filename)
    ):
        frame = frame.f_back
    return frame


def _imported_by_client(frame: FrameType) -> bool:
    """Whether ``frame``, a module's top-level code, runs because a client module imports it,
    directly or through other modules' imports: ``httpx`` imports its command line's ``rich``
    wherever click, rich and pygments are installed, and ``rich.style`` draws an id at import."""
    while frame.f_code.co_name == "<module>":
        importer = _outside_hook_and_stdlib(frame.f_back)
        if importer is None:
            return False
        if _is_client_frame(importer):
            return True
        frame = importer
    return False


def _note_draw(frame: FrameType | None) -> None:
    """Set ``S.drawn`` unless the first frame outside the standard library and this hook (whose
    ``uuid4`` and ``secrets`` draw for their callers) is in one of :data:`CLIENT_MODULES`, or is
    a module's top-level code that a client module's import runs: the program's code, or a
    library drawing for it (a pydantic ``default_factory=uuid4``, a module of the program's
    drawing an id at import)."""
    frame = _outside_hook_and_stdlib(frame)
    if frame is None or _is_client_frame(frame) or _imported_by_client(frame):
        return
    S.drawn = True


def _draw_noting_module() -> None:
    """Point ``random``'s module functions (``random.random``, ``random.choice``...: methods
    of one hidden instance) at a :class:`_DrawNoting` instance."""
    hidden = random._inst
    noting = _DrawNoting()
    for name in dir(random):
        if getattr(getattr(random, name), "__self__", None) is hidden:
            setattr(random, name, getattr(noting, name))
    random._inst = noting


def _seed_streams(seed: int, salt: str) -> None:
    random.seed(f"{seed}-{salt}")
    S.rng.seed(f"promptcache-check-{seed}-{salt}")


def _patch_random(seed: int) -> None:
    _draw_noting_module()
    _seed_streams(seed, "0")

    def uuid4() -> uuid.UUID:
        return uuid.UUID(int=S.rng.getrandbits(128), version=4)

    def uuid1(node: int | None = None, clock_seq: int | None = None) -> uuid.UUID:
        return uuid.UUID(int=S.rng.getrandbits(128), version=1)

    def token_bytes(nbytes: int | None = None) -> bytes:
        return S.rng.randbytes(32 if nbytes is None else nbytes)

    def token_hex(nbytes: int | None = None) -> str:
        return token_bytes(nbytes).hex()

    def token_urlsafe(nbytes: int | None = None) -> str:
        return urlsafe_b64encode(token_bytes(nbytes)).rstrip(b"=").decode("ascii")

    uuid.uuid4 = uuid4
    uuid.uuid1 = uuid1
    secrets.token_bytes = token_bytes
    secrets.token_hex = token_hex
    secrets.token_urlsafe = token_urlsafe
    secrets.choice = S.rng.choice
    secrets.randbelow = S.rng.randrange  # type: ignore[assignment]
    secrets.randbits = S.rng.getrandbits  # type: ignore[assignment]

    def count_fork() -> None:
        S.forks += 1

    def reseed_child() -> None:  # the nth fork of a process gets the nth stream, every run
        _seed_streams(seed, f"{os.getpid()}-{S.forks}")

    os.register_at_fork(after_in_parent=count_fork, after_in_child=reseed_child)


def _patch_pid(base: int) -> None:
    real = S.real_getpid
    S.root_pid = int(os.environ.setdefault(ROOT_PID_ENV, str(real())))
    kill = os.kill

    def getpid() -> int:
        return base + real() - S.root_pid

    def patched_kill(pid: int, sig: int) -> None:
        kill(real() if pid == getpid() else pid, sig)

    os.getpid = getpid
    os.kill = patched_kill


def _start_clock(instant: float) -> str | None:
    """Travel to ``instant`` (unix seconds), ticking; the reason when it cannot."""
    blocked = [] if any("pytest" in arg for arg in sys.orig_argv) else ["pytest", "dateutil"]
    hidden = [name for name in blocked if name not in sys.modules]
    for name in hidden:  # time-machine imports them only for its own pytest plugin
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import time_machine
    except ImportError:
        return "time-machine is not installed in this Python"
    finally:
        for name in hidden:
            sys.modules.pop(name, None)
    time_machine.travel(instant, tick=True).start()
    _patch_clock_texts()
    return None


def _patch_clock_texts() -> None:
    """``time.ctime()`` and ``time.asctime()`` without an argument read the C clock, which
    time-machine does not move: give them the travelled time, as ``time.strftime`` has it. An
    explicit instant (``time.ctime(0)``) is left as it is."""
    import time

    ctime, asctime = time.ctime, time.asctime

    def travelled_ctime(seconds: Any = None) -> str:
        return ctime(time.time() if seconds is None else seconds)

    def travelled_asctime(moment: Any = None) -> str:
        return asctime(time.localtime() if moment is None else moment)

    time.ctime = travelled_ctime
    time.asctime = travelled_asctime


def install() -> None:
    """Apply the plan in ``PROMPTCACHE_CHECK_PLAN`` to this process (no-op without one)."""
    raw = os.environ.get(PLAN_ENV)
    if not raw or S.endpoint:
        return
    plan = json.loads(raw)
    S.plan = plan
    S.endpoint = str(plan["endpoint"]).rstrip("/")
    S.run = int(plan["run"])
    S.passed_log = os.environ.get(PASSED_ENV, "")
    S.not_user = _not_user_prefixes(list(plan.get("not_user", [])))
    paths = sysconfig.get_paths()
    S.stdlib = tuple(
        os.path.join(os.path.abspath(paths[key]), "") for key in ("stdlib", "platstdlib")
    )
    if plan.get("clock") is not None:
        problem = _start_clock(float(plan["clock"]))
        if problem is not None:
            S.clock_problem = problem
            sys.stderr.write(f"promptcache check: the clock is not shifted: {problem}\n")
    _patch_random(int(plan["seed"]))
    _patch_listings()
    _patch_pid(int(plan["pid"]))
    for name, patch in _PATCHES.items():
        module = sys.modules.get(name)
        if module is not None:
            patch(module)
    sys.meta_path.insert(0, _PatchOnImport())
