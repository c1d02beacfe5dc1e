"""Proxy settings: the upstreams, how a request picks one, and the limits.

An upstream is named either by one of the built-in names (``anthropic``, ``openai``, ``gemini``,
``engine``) or by a base URL (``http://10.0.0.5:8000``, an OpenAI-compatible server such as vLLM or
SGLang). Several upstreams can be routed by request path prefix or by model name prefix from a
TOML file::

    default_upstream = "anthropic"

    [upstreams.local]
    url = "http://127.0.0.1:8000"      # our engine, vLLM, SGLang...
    vendor = "engine"                  # recorded in the `vendor` column
    read_timeout_s = 120
    price_as = "gpt-5"                 # price its unpriced models at gpt-5's rates

    [[routes]]
    model_prefix = "local/"
    upstream = "local"

    [[routes]]
    path_prefix = "/v1/chat/"
    upstream = "openai"

    [otel]
    endpoint = "http://127.0.0.1:4318"  # OTLP/HTTP collector: one span per request (proxy/otel.py)

A top-level ``vendor_diagnostics = true`` (before any table) is ``--vendor-diagnostics``: the
proxy names the previous response in each Anthropic request (``proxy/diagnostics.py``).

A top-level ``store_prefixes = true`` is ``--store-prefixes``: the log keeps the latest request
body of each prefix family, redacted, for ``engine serve --warmup-from-log``
(``proxy/prefix_store.py``).

Rules are tried in file order; the first whose every given condition matches wins, else
``default_upstream``. The built-in names need no ``[upstreams.*]`` table.

``price_as`` names a model of the price table (``promptcache.pricing``) whose rates price the
requests to that upstream whose own model has no price row (a self-hosted model such as
``tinystories-656k``); models with a price row keep their own rates. ``--price-as`` sets it on
every upstream that has none (``with_price_as``).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from promptcache.errors import ConfigError, UnknownModelPriceError
from promptcache.hosts import check_url_port, is_loopback_host
from promptcache.pricing import default_price_table, lookup_price

from .dialect import is_postgres_url, log_url_problem
from .otel import traces_url
from .redact import MIN_SECRET_CHARS, redact_url
from .routing import (
    KNOWN_POLICIES,
    POLICIES,
    ROUTING_KEYS,
    TUNING_KEYS,
    PolicySpec,
    RoutingSettings,
    policy_spec,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: The built-in upstream names: name -> (base URL, vendor column value).
KNOWN_UPSTREAMS: dict[str, tuple[str, str]] = {
    "anthropic": ("https://api.anthropic.com", "anthropic"),
    "openai": ("https://api.openai.com", "openai"),
    "gemini": ("https://generativelanguage.googleapis.com", "gemini"),
    "engine": ("http://127.0.0.1:8000", "engine"),
}

#: Values accepted for an upstream's ``vendor`` (the `vendor` column of the log).
VENDORS = ("anthropic", "openai", "gemini", "engine", "openai_compatible")

#: Default limit on a request body: 32 MiB.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024

#: The name of an upstream given as a URL (``--upstream http://...``): its ``upstream`` column.
URL_UPSTREAM_NAME = "custom"

#: Header a client sends the proxy's own token in when ``--auth-token`` is set; never forwarded.
AUTH_HEADER = "x-promptcache-auth"


@dataclass(frozen=True)
class UpstreamConfig:
    """One upstream API and how to talk to it.

    Attributes:
        name: name used in routing rules and in the `upstream` column.
        url: base URL without the ``/v1`` part (a path prefix such as ``/openai`` is kept).
        vendor: one of ``VENDORS``; recorded per request.
        connect_timeout_s: seconds to open a connection (refused or slower -> 502 / 504).
        read_timeout_s: seconds to wait for each chunk of the response (slower -> 504); long,
            because a non-streaming generation may think for minutes.
        write_timeout_s: seconds to send each chunk of the request body.
        pool_timeout_s: seconds to wait for a free pooled connection.
        max_connections: pooled connections kept open to this upstream at most.
        price_as: a price-table model whose rates price this upstream's requests for models
            without a price row (recorded in the `priced_as` column); None leaves them unpriced.
        replicas: base URLs of interchangeable servers behind this upstream (``url`` is then the
            first); each request goes to one of them, chosen by ``routing`` (proxy/routing/).
        routing: how requests are spread over ``replicas`` (default ``RoutingSettings()``:
            the ``prefix`` policy); None without replicas.

    Raises:
        ConfigError: ``price_as`` is not a model of the bundled price table (the message names
            close matches); routing without replicas, or a policy this build lacks.
    """

    name: str
    url: str
    vendor: str
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 600.0
    write_timeout_s: float = 60.0
    pool_timeout_s: float = 30.0
    max_connections: int = 512
    price_as: str | None = None
    replicas: tuple[str, ...] = ()
    routing: RoutingSettings | None = None

    def __post_init__(self) -> None:
        if self.price_as is not None:
            check_price_as(self.price_as, f"upstream {self.name!r}")
        if self.replicas and self.routing is None:
            object.__setattr__(self, "routing", RoutingSettings())
        if self.routing is not None:
            if not self.replicas:
                raise ConfigError(f"upstream {self.name!r}: routing settings need `replicas`")
            spec = policy_spec(self.routing.policy)
            if spec.check is not None:
                spec.check(self.routing, self.replicas)

    @property
    def display_url(self) -> str:
        """``url`` as shown in messages, the log and the banner: credentials masked."""
        return redact_url(self.url)

    @property
    def described(self) -> str:
        """How messages name this upstream: ``openai (https://api.openai.com)``, or the URL
        alone for an upstream given as a URL (its name, :data:`URL_UPSTREAM_NAME`, is the log's
        ``upstream`` column value, not a name the user chose)."""
        if self.name == URL_UPSTREAM_NAME:
            return self.display_url
        return f"{self.name} ({self.display_url})"

    @property
    def is_loopback(self) -> bool:
        """Whether the upstream lives on this machine (then proxy env variables are ignored)."""
        return is_loopback_host(urlsplit(self.url).hostname or "")


@dataclass(frozen=True)
class RouteRule:
    """Send requests whose path starts with ``path_prefix`` and/or whose model starts with
    ``model_prefix`` to ``upstream``. A rule with neither condition is rejected."""

    upstream: str
    path_prefix: str | None = None
    model_prefix: str | None = None

    def matches(self, path: str, model: str | None) -> bool:
        """True when every condition given in the rule holds for this request."""
        if self.path_prefix is not None and not path.startswith(self.path_prefix):
            return False
        return self.model_prefix is None or (
            model is not None and model.startswith(self.model_prefix)
        )


@dataclass(frozen=True)
class ProxyConfig:
    """Everything ``build_app`` needs.

    Attributes:
        upstreams: upstream name -> settings; at least one.
        default_upstream: name used when no rule matches.
        rules: routing rules, tried in order.
        db_path: SQLite log file, or a ``postgresql://`` URL (a str: a log several proxies
            share, ``proxy/store_postgres.py``; ``--db``, ``[log] db``); ``None`` turns
            recording off (pure forwarding).
        store_bodies: also store request and response bodies, credentials redacted.
        max_body_bytes: request bodies larger than this get 413 (bytes).
        auth_token: when set, clients must send it in ``AUTH_HEADER``; at least
            ``MIN_SECRET_CHARS`` characters, so it can be redacted from stored bodies.
        flush_interval_s: the log writer commits at least this often (seconds).
        batch_rows: the log writer commits as soon as this many rows wait.
        queue_rows: rows allowed to wait for the writer; beyond that rows are dropped and counted
            (forwarding never waits on the disk).
        clock: wall clock for ``started_at`` (unix seconds); tests pass a fake one to simulate
            gaps longer than a cache TTL without sleeping.
        report_refresh_s: the live ``/report`` rebuilds a window's report at most this often
            (seconds; ``report.live.ReportCache``); 0 rebuilds on every request after new rows.
        otlp_endpoint: OTLP/HTTP collector address the proxy exports one span per request to
            (``proxy/otel.py``; ``--otlp-endpoint``, ``[otel] endpoint``); None exports nothing.
        store_prefixes: keep the latest request body of each prefix family in the log, redacted
            like ``store_bodies`` (``proxy/prefix_store.py``; ``--store-prefixes``,
            ``store_prefixes = true``); stores prompt text, so off by default. Needs ``db_path``.
        vendor_diagnostics: add ``diagnostics.previous_message_id`` to Anthropic requests that
            carry no ``diagnostics`` (``proxy/diagnostics.py``; ``--vendor-diagnostics``,
            ``vendor_diagnostics = true``); changes the request body, so off by default.
    """

    upstreams: Mapping[str, UpstreamConfig]
    default_upstream: str
    rules: tuple[RouteRule, ...] = ()
    db_path: Path | str | None = Path("promptcache.db")
    store_bodies: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    auth_token: str | None = None
    flush_interval_s: float = 0.5
    batch_rows: int = 500
    queue_rows: int = 20_000
    clock: Callable[[], float] = time.time
    report_refresh_s: float = 5.0
    otlp_endpoint: str | None = None
    store_prefixes: bool = False
    vendor_diagnostics: bool = False

    def __post_init__(self) -> None:
        if self.default_upstream not in self.upstreams:
            raise ConfigError(
                f"default upstream {self.default_upstream!r} is not defined; "
                f"defined upstreams: {', '.join(sorted(self.upstreams)) or 'none'}"
            )
        for rule in self.rules:
            if rule.upstream not in self.upstreams:
                raise ConfigError(
                    f"a route rule names upstream {rule.upstream!r}, which is not defined; "
                    f"add an [upstreams.{rule.upstream}] table or use one of "
                    f"{', '.join(sorted(self.upstreams))}"
                )
        if self.max_body_bytes < 1:
            raise ConfigError(f"max_body_bytes must be at least 1, got {self.max_body_bytes}")
        if self.auth_token and len(self.auth_token) < MIN_SECRET_CHARS:
            # redact_text skips exact secrets this short, so --store-bodies would keep it
            raise ConfigError(
                f"--auth-token is {len(self.auth_token)} characters; use at least "
                f"{MIN_SECRET_CHARS} (shorter ones cannot be redacted from stored bodies), "
                'e.g. --auth-token "$(openssl rand -hex 32)"'
            )
        if self.store_prefixes and self.db_path is None:
            raise ConfigError(
                "--store-prefixes keeps request bodies in the request log; drop --no-log"
            )
        if self.report_refresh_s < 0:
            raise ConfigError(f"report_refresh_s must be >= 0 seconds, got {self.report_refresh_s}")
        if self.otlp_endpoint is not None:
            traces_url(self.otlp_endpoint)  # raises ConfigError for a non-URL
        if not 0 < self.flush_interval_s <= 1.0:
            raise ConfigError(
                f"flush_interval_s must be in (0, 1] seconds, got {self.flush_interval_s}"
            )

    def with_price_as(self, model: str | None) -> ProxyConfig:
        """This config with ``price_as=model`` on every upstream that sets none (``--price-as``).

        Raises:
            ConfigError: ``model`` has no row in the price table.
        """
        if model is None:
            return self
        check_price_as(model, "--price-as")
        upstreams = {
            name: u if u.price_as is not None else dataclasses.replace(u, price_as=model)
            for name, u in self.upstreams.items()
        }
        return dataclasses.replace(self, upstreams=upstreams)

    def select_upstream(self, path: str, model: str | None) -> UpstreamConfig:
        """The upstream a request for ``path`` with ``model`` goes to (first matching rule)."""
        for rule in self.rules:
            if rule.matches(path, model):
                return self.upstreams[rule.upstream]
        return self.upstreams[self.default_upstream]

    def route_vendor(self, path: str, model: str | None) -> str | None:
        """The ``vendor`` of the upstream a request for ``path`` goes to, read without its
        body: for a request refused before an upstream was chosen (a body too large or not
        JSON), so its row and ``/metrics`` name the vendor it was bound for.

        Args:
            path: the request's path, e.g. ``/v1/chat/completions``.
            model: the model the path names (Gemini, ``GET /v1/models/{model}``); None when
                only the body could name one (it was not read).

        Returns:
            the vendor every upstream the request could go to shares: with ``model`` known,
            that of :meth:`select_upstream`; without it, a rule on the model's prefix may or
            may not match, so both its upstream and the later ones are candidates. None when
            the candidates' vendors differ (the body's model would have chosen).
        """
        if model is not None:
            return self.select_upstream(path, model).vendor
        vendors: set[str] = set()
        for rule in self.rules:
            if rule.path_prefix is not None and not path.startswith(rule.path_prefix):
                continue
            vendors.add(self.upstreams[rule.upstream].vendor)
            if rule.model_prefix is None:  # matches whatever the body holds: later rules never
                return vendors.pop() if len(vendors) == 1 else None
        vendors.add(self.upstreams[self.default_upstream].vendor)
        return vendors.pop() if len(vendors) == 1 else None


def check_price_as(model: object, what: str) -> str:
    """``model`` if the bundled price table has a row for it (``price_as`` / ``--price-as``).

    Raises:
        ConfigError: ``model`` is not a string or has no price row; the message lists close
            matches.
    """
    if not isinstance(model, str) or not model:
        raise ConfigError(f"{what}: price_as must be a model name (a string), got {model!r}")
    try:
        lookup_price(model)
    except UnknownModelPriceError as exc:
        names = sorted(default_price_table().models)
        close = difflib.get_close_matches(model.lower(), names, n=3, cutoff=0.5)
        hint = f"close matches: {', '.join(close)}" if close else f"e.g. {', '.join(names[:3])}"
        raise ConfigError(
            f"{what}: price_as {model!r} has no row in the price table; give a priced model "
            f"({hint})"
        ) from exc
    return model


def _bad_routing_policy(policy: str) -> str:
    """Why ``--routing-policy POLICY`` is refused, naming only the policies it takes: kv_events
    needs per-replica keys that only a config file holds."""
    head = (
        f"routing policy {policy!r} is not available in this promptcache build"
        if policy in KNOWN_POLICIES
        else f"unknown routing policy {policy!r}"
    )
    accepted = ", ".join(sorted(name for name in POLICIES if name != "kv_events"))
    tail = (
        ' (kv_events is set in a --config file: policy = "kv_events" in an [upstreams.NAME] '
        "table; docs/proxy.md, Routing by KV events)"
        if "kv_events" in POLICIES
        else ""
    )
    return f"{head}; --routing-policy takes one of {accepted}{tail}"


def upstream_from_spec(
    spec: str, name: str | None = None, *, policy: str | None = None
) -> UpstreamConfig:
    """An upstream from a built-in name, a base URL, or comma-separated base URLs of replicas
    (``--upstream http://127.0.0.1:8001,http://127.0.0.1:8002``).

    Args:
        spec: what ``--upstream`` names.
        name: the upstream's name (default: the built-in name, or :data:`URL_UPSTREAM_NAME`
            for URLs).
        policy: the routing policy over several replicas (default ``prefix``).

    Raises:
        ConfigError: ``spec`` is neither a built-in name nor http(s) URLs, or ``policy`` is
            given for a single upstream or unknown.
    """
    urls = [part.strip() for part in spec.split(",")] if "," in spec else []
    if urls:
        if not all(urls):
            raise ConfigError(
                f"--upstream {redact_url(spec)!r} has an empty entry; give comma-separated base "
                "URLs such as http://127.0.0.1:8001,http://127.0.0.1:8002"
            )
        named = [url for url in urls if url in KNOWN_UPSTREAMS]
        if named:
            raise ConfigError(
                f"--upstream {redact_url(spec)!r} lists {named[0]!r}, a built-in upstream: a "
                "comma-separated --upstream lists base URLs of replicas of one server (e.g. "
                "http://127.0.0.1:8001,http://127.0.0.1:8002); route to several vendors with "
                "--config (docs/proxy.md, Several upstreams)"
            )
        replicas = tuple(_check_url(url) for url in urls)
        _check_distinct(replicas, "--upstream")
        if policy == "kv_events":  # its per-replica keys have no command-line options
            raise ConfigError(
                "--routing-policy kv_events needs each replica's kv_events_endpoints and the "
                "tokenizer, which only a config file holds: list the replicas in an "
                '[upstreams.NAME] table with policy = "kv_events" and pass --config '
                "(docs/proxy.md, Routing by KV events)"
            )
        if policy is not None and policy not in POLICIES:
            raise ConfigError(_bad_routing_policy(policy))
        routing = RoutingSettings() if policy is None else RoutingSettings(policy=policy)
        return UpstreamConfig(
            name=name or URL_UPSTREAM_NAME,
            url=replicas[0],
            vendor="openai_compatible",
            replicas=replicas,
            routing=routing,
        )
    if policy is not None:
        raise ConfigError(
            "a routing policy needs several replicas: give --upstream URL1,URL2,... (or list "
            "`replicas` in the config file)"
        )
    if spec in KNOWN_UPSTREAMS:
        url, vendor = KNOWN_UPSTREAMS[spec]
        return UpstreamConfig(name=name or spec, url=url, vendor=vendor)
    url = _check_url(spec)
    return UpstreamConfig(name=name or URL_UPSTREAM_NAME, url=url, vendor="openai_compatible")


def config_for_upstream(upstream: str | UpstreamConfig, **overrides: Any) -> ProxyConfig:
    """A config with one upstream (a built-in name, a URL or a ready ``UpstreamConfig``).

    Args:
        upstream: what ``--upstream`` names.
        **overrides: other ``ProxyConfig`` fields.
    """
    if isinstance(upstream, str):
        upstream = upstream_from_spec(upstream)
    return ProxyConfig(
        upstreams={upstream.name: upstream}, default_upstream=upstream.name, **overrides
    )


def _check_url(url: str) -> str:
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError:  # "http://[bad": an unclosed IPv6 bracket...
        hostname = None
    if hostname is None or parts.scheme not in ("http", "https"):
        raise ConfigError(
            f"upstream {shown!r} is neither one of {', '.join(KNOWN_UPSTREAMS)} nor an http(s) "
            "URL; give e.g. --upstream openai or --upstream http://127.0.0.1:8000"
        )
    check_url_port(parts, f"upstream URL {shown!r}", "http://127.0.0.1:8000")
    if parts.query or parts.fragment:
        raise ConfigError(f"upstream URL {shown!r} must not have a query or fragment")
    if parts.path.rstrip("/").endswith("/v1"):
        raise ConfigError(
            f"upstream URL {shown!r} ends in /v1; give the base URL without it "
            "(the proxy forwards the client's full path, /v1/... included)"
        )
    return url.rstrip("/")


def load_config_file(
    path: Path, *, default: UpstreamConfig | None = None, **overrides: Any
) -> ProxyConfig:
    """Read upstreams and routing rules from a TOML file (format in the module docstring).

    Args:
        path: the TOML file.
        default: the upstream given with ``--upstream``; it replaces the file's
            ``default_upstream``.
        **overrides: other ``ProxyConfig`` fields (db_path, store_bodies...), from the CLI.

    Raises:
        ConfigError: unreadable file, not UTF-8, bad TOML, unknown keys, or a rule naming no
            upstream.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read proxy config {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"proxy config {path} is not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"proxy config {path} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "save it as UTF-8"
        ) from None
    return config_from_dict(data, source=str(path), default=default, **overrides)


_UPSTREAM_KEYS = {
    f for f in UpstreamConfig.__dataclass_fields__ if f not in ("name", "routing")
} | ROUTING_KEYS
_RULE_KEYS = set(RouteRule.__dataclass_fields__)


def config_from_dict(
    data: Mapping[str, Any],
    *,
    source: str,
    default: UpstreamConfig | None = None,
    **overrides: Any,
) -> ProxyConfig:
    """Build a ``ProxyConfig`` from parsed TOML (see ``load_config_file``).

    Args:
        data: the file's top-level table (format in the module docstring).
        source: how error messages name the file (its path).
        default: the upstream given with ``--upstream``; it replaces ``default_upstream``.
        **overrides: other ``ProxyConfig`` fields from the command line; ``db_path`` and
            ``otlp_endpoint`` given there win over the file's ``[log]`` and ``[otel]``.

    Raises:
        ConfigError: an unknown top-level key, a ``[log]``, ``[otel]``, ``[upstreams.NAME]``
            or ``[[routes]]`` table that is malformed, a flag that is not true or false, or a
            rule or ``default_upstream`` naming no upstream, or neither ``default_upstream``
            nor ``default``.
    """
    unknown = set(data) - {
        "default_upstream",
        "upstreams",
        "routes",
        "otel",
        "vendor_diagnostics",
        "store_prefixes",
        "log",
    }
    if unknown:
        raise ConfigError(
            f"{source}: unknown top-level keys {sorted(unknown)}; allowed: default_upstream, "
            "upstreams, routes, otel, vendor_diagnostics, store_prefixes, log"
        )
    log = data.get("log", {})
    if not isinstance(log, Mapping) or set(log) - {"db"} or not isinstance(log.get("db", ""), str):
        raise ConfigError(
            f'{source}: [log] may only set db = "FILE" or db = "postgresql://user@host/dbname"'
        )
    if "db" in log and not log["db"].strip():
        raise ConfigError(
            f"{source}: [log] db is empty; give a SQLite file path or a "
            "postgresql://user@host/dbname URL, or leave db out for promptcache.db"
        )
    if log.get("db"):
        db = log["db"]
        problem = log_url_problem(db)
        if problem is not None:
            raise ConfigError(f"{source}: [log] db: {problem}")
        # --db (or --no-log) on the command line wins over the file
        overrides.setdefault("db_path", db if is_postgres_url(db) else Path(db))
    if "store_prefixes" in data:
        if not isinstance(data["store_prefixes"], bool):
            raise ConfigError(f"{source}: store_prefixes must be true or false")
        # --store-prefixes on the command line turns it on whatever the file says
        overrides["store_prefixes"] = (
            overrides.get("store_prefixes", False) or data["store_prefixes"]
        )
    if "vendor_diagnostics" in data:
        if not isinstance(data["vendor_diagnostics"], bool):
            raise ConfigError(f"{source}: vendor_diagnostics must be true or false")
        # --vendor-diagnostics on the command line turns it on whatever the file says
        overrides["vendor_diagnostics"] = (
            overrides.get("vendor_diagnostics", False) or data["vendor_diagnostics"]
        )
    otel = data.get("otel", {})
    if not isinstance(otel, Mapping) or set(otel) - {"endpoint"}:
        raise ConfigError(f'{source}: [otel] may only set endpoint = "http://HOST:4318"')
    if "otel" in data and "endpoint" not in otel and overrides.get("otlp_endpoint") is None:
        raise ConfigError(
            f"{source}: [otel] sets no endpoint, so no span would be exported; add endpoint = "
            f'"http://HOST:4318" (an OTLP/HTTP collector) or remove the [otel] table'
        )
    if "endpoint" in otel:
        if not isinstance(otel["endpoint"], str):
            raise ConfigError(f"{source}: [otel] endpoint must be a URL (a string)")
        traces_url(otel["endpoint"], f"{source}: [otel] endpoint")
        overrides.setdefault("otlp_endpoint", otel["endpoint"])  # --otlp-endpoint wins
    upstreams: dict[str, UpstreamConfig] = {
        name: upstream_from_spec(name) for name in KNOWN_UPSTREAMS
    }
    tables = data.get("upstreams", {})
    if not isinstance(tables, Mapping) or not all(
        isinstance(table, Mapping) for table in tables.values()
    ):
        raise ConfigError(f"{source}: `upstreams` must hold [upstreams.NAME] tables")
    for name, table in tables.items():
        upstreams[name] = _upstream_from_table(name, table, source)
    route_tables = data.get("routes", [])
    if not isinstance(route_tables, list) or not all(
        isinstance(table, Mapping) for table in route_tables
    ):
        raise ConfigError(f"{source}: `routes` must be a list of [[routes]] tables")
    rules = []
    for i, table in enumerate(route_tables):
        bad = set(table) - _RULE_KEYS
        if bad or "upstream" not in table:
            raise ConfigError(
                f"{source}: routes[{i}] needs `upstream` and may have path_prefix, model_prefix; "
                f"unknown keys: {sorted(bad)}"
            )
        if "path_prefix" not in table and "model_prefix" not in table:
            raise ConfigError(f"{source}: routes[{i}] needs path_prefix or model_prefix")
        if not all(isinstance(value, str) for value in table.values()):
            raise ConfigError(f"{source}: routes[{i}] values must be strings")
        rules.append(RouteRule(**table))
    if default is not None:
        upstreams[default.name] = default
        default_name = default.name
    elif "default_upstream" in data:
        default_name = data["default_upstream"]
        if not isinstance(default_name, str):
            raise ConfigError(f"{source}: default_upstream must be an upstream's name (a string)")
    else:
        raise ConfigError(
            f"{source}: set default_upstream (used when no route matches) or --upstream"
        )
    return ProxyConfig(
        upstreams=upstreams, default_upstream=default_name, rules=tuple(rules), **overrides
    )


def _upstream_from_table(name: str, table: Mapping[str, Any], source: str) -> UpstreamConfig:
    where = f"{source}: [upstreams.{name}]"
    table, replicas, routing = _routing_from_table(table, where)
    bad = set(table) - _UPSTREAM_KEYS
    other = {
        key: spec.name for spec in POLICIES.values() for key in spec.keys if key in bad
    }  # another policy's settings: the table names no policy, or another one
    if other and replicas:
        names = sorted(set(other.values()))
        chosen = routing.policy if routing is not None else "prefix"
        raise ConfigError(
            f"{where} sets {', '.join(sorted(other))}, settings of policy "
            f"{' / '.join(repr(n) for n in names)}, but its policy is {chosen!r}; add "
            f'policy = "{names[0]}" to route with them, or remove them'
        )
    if bad:
        raise ConfigError(
            f"{where} has unknown keys {sorted(bad)}; allowed: {', '.join(sorted(_UPSTREAM_KEYS))}"
        )
    known = KNOWN_UPSTREAMS.get(name)
    url = table.get("url", replicas[0] if replicas else known[0] if known else None)
    if url is None:
        raise ConfigError(f"{where} needs a url (or `replicas`, a list of URLs)")
    if not isinstance(url, str):
        raise ConfigError(f"{source}: [upstreams.{name}] url must be a string, got {url!r}")
    vendor = table.get("vendor", known[1] if known else "openai_compatible")
    if vendor not in VENDORS:
        raise ConfigError(
            f"{source}: [upstreams.{name}] vendor {vendor!r} is not one of {', '.join(VENDORS)}"
        )
    rest = {k: v for k, v in table.items() if k not in ("url", "vendor")}
    for key, value in rest.items():
        if key == "price_as":
            check_price_as(value, f"{source}: [upstreams.{name}]")
            continue
        if key == "max_connections":
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
            wanted = "a whole number >= 1"
        else:  # the *_timeout_s settings
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            ok = ok and 0 < value < math.inf
            wanted = "a finite number of seconds > 0"
        if not ok:
            raise ConfigError(f"{source}: [upstreams.{name}] {key} must be {wanted}, got {value!r}")
    try:
        return UpstreamConfig(
            name=name,
            url=_check_url(url),
            vendor=vendor,
            replicas=replicas,
            routing=routing,
            **rest,
        )
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _routing_from_table(
    table: Mapping[str, Any], where: str
) -> tuple[dict[str, Any], tuple[str, ...], RoutingSettings | None]:
    """Split the replica and routing keys off an ``[upstreams.NAME]`` table.

    Returns:
        (the other keys, the replica URLs, the routing settings or None without replicas).

    Raises:
        ConfigError: ``replicas`` is not a non-empty list of distinct http(s) URLs, both
            ``url`` and ``replicas`` are given, or a routing key is bad or given without
            replicas.
    """
    rest = dict(table)
    raw = rest.pop("replicas", None)
    keys = {k: rest.pop(k) for k in list(rest) if k in ROUTING_KEYS}
    if raw is None:
        policy = keys.get("policy")
        if keys:
            raise ConfigError(
                f"{where} sets {', '.join(sorted(keys))} but lists no `replicas`; add "
                'replicas = ["http://host1:8000", "http://host2:8000"]'
                + (f" to route with policy {policy!r}" if isinstance(policy, str) else "")
            )
        return rest, (), None
    if not isinstance(raw, list) or not raw or not all(isinstance(u, str) for u in raw):
        raise ConfigError(
            f'{where} replicas must be a non-empty list of base URLs, e.g. ["http://host1:8000", '
            f'"http://host2:8000"]; got {raw!r}'
        )
    if "url" in rest:
        raise ConfigError(f"{where} has both `url` and `replicas`; keep only `replicas`")
    try:
        replicas = tuple(_check_url(url) for url in raw)
    except ConfigError as exc:
        raise ConfigError(f"{where} replicas: {exc}") from None
    _check_distinct(replicas, where + " replicas")
    try:
        spec = policy_spec(keys.get("policy", "prefix"))
        _check_read(spec, keys)
        options = {k: rest.pop(k) for k in list(rest) if k in spec.keys}
        routing = RoutingSettings(**keys, options=options)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return rest, replicas, routing


def _check_read(spec: PolicySpec, keys: Mapping[str, Any]) -> None:
    """Refuse a tuning key the chosen policy does not read (``load_ratio`` under
    ``kv_events``, ``load_margin`` under ``round_robin``): it would be accepted and do
    nothing, and the user would believe the fleet tuned."""
    unread = sorted((set(keys) & TUNING_KEYS) - spec.reads)
    if not unread:
        return
    readers = sorted({p.name for p in POLICIES.values() if p.reads & set(unread)})
    it = "it" if len(unread) == 1 else "them"
    is_read = "it is read" if len(unread) == 1 else "they are read"
    hint = f"; {is_read} by policy {' / '.join(repr(n) for n in readers)}" if readers else ""
    raise ConfigError(
        f"sets {', '.join(unread)}, which policy {spec.name!r} does not read{hint}: remove "
        f"{it} or choose a policy that reads {it}"
    )


def _check_distinct(urls: tuple[str, ...], what: str) -> None:
    """Refuse one server listed twice, also when spelt two ways (``http://LOCALHOST:8000`` and
    ``http://localhost:8000``, ``http://gpu-1`` and ``http://gpu-1:80``, with and without
    credentials): it would take two replicas' share of the traffic."""
    seen: dict[tuple[str, str, int, str], str] = {}
    for url in urls:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        key = (parts.scheme.lower(), parts.hostname or "", port, parts.path.rstrip("/"))
        first = seen.get(key)
        if first == url:
            raise ConfigError(f"{what} lists {redact_url(url)} twice; list each replica once")
        if first is not None:
            raise ConfigError(
                f"{what} lists {redact_url(first)} and {redact_url(url)}, one server spelt two "
                "ways; list each replica once"
            )
        seen[key] = url


def check_bind(host: str, auth_token: str | None, insecure_no_auth: bool) -> None:
    """Refuse to listen beyond this machine without a token (or an explicit opt-out).

    Raises:
        ConfigError: ``host`` is not a loopback address, no ``auth_token`` is given and
            ``insecure_no_auth`` is false.
    """
    if auth_token or insecure_no_auth or is_loopback_host(host):
        return
    raise ConfigError(
        f"--host {host} would let other machines use your API keys through this proxy; "
        f"pass --auth-token TOKEN (clients then send it in the {AUTH_HEADER} header) "
        "or --insecure-no-auth if the network is trusted"
    )
