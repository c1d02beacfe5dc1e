"""``promptcache proxy``: run the logging proxy in front of a vendor API or the local engine."""

from __future__ import annotations

import os
from pathlib import Path

import click

from promptcache.folders import folder_problem

from ._log_db import LOG_DB
from ._option_args import OptionArgCommand, looks_like_upstream
from ._server_options import Seconds, client_limit_options

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024


@click.command(
    name="proxy",
    cls=OptionArgCommand,
    value_option="--upstream",
    looks_like=looks_like_upstream,
)
@click.option(
    "--upstream",
    metavar="NAME|URL",
    help="anthropic, openai, gemini, engine (http://127.0.0.1:8000) or a base URL of an "
    "OpenAI-compatible server, or several comma-separated base URLs of replicas (routed by "
    "--routing-policy). With --config, replaces its default_upstream.",
)
@click.option(
    "--routing-policy",
    metavar="POLICY",
    help="How requests spread over the replicas of --upstream URL1,URL2,...: prefix (default: "
    "the replica that served the prompt's prefix, unless it carries more than its share of "
    "the load: over 4 requests in flight above the other replicas' mean and over twice that "
    "mean; load_margin and load_ratio in --config), least_loaded or round_robin.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML file with several upstreams routed by path or model prefix (see docs/proxy.md).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=8787, show_default=True, type=click.IntRange(1, 65535), help="Port."
)
@click.option(
    "--db",
    default=None,
    type=LOG_DB,
    help="SQLite file the requests are recorded in (created if missing), or a "
    "postgresql://user@host/dbname URL: a log several proxies share. Default: the config "
    "file's [log] db, else promptcache.db.",
)
@click.option("--no-log", is_flag=True, help="Record nothing: forward only.")
@click.option(
    "--auth-token",
    envvar="PROMPTCACHE_PROXY_AUTH_TOKEN",
    help="Require this token in the x-promptcache-auth header (stripped before forwarding). "
    "Needed to listen on a non-loopback --host. Env: PROMPTCACHE_PROXY_AUTH_TOKEN.",
)
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    help="Allow a non-loopback --host without --auth-token (trusted networks only).",
)
@click.option(
    "--store-bodies",
    is_flag=True,
    help="Also store request and response bodies (API keys and bearer tokens redacted).",
)
@click.option(
    "--store-prefixes",
    is_flag=True,
    help="Keep the latest request body of each prefix family in the log (redacted like "
    "--store-bodies), for `engine serve --warmup-from-log`. Stores prompt text; also "
    "store_prefixes = true in --config.",
)
@click.option(
    "--max-body-bytes",
    default=DEFAULT_MAX_BODY_BYTES,
    show_default=True,
    type=click.IntRange(min=1),
    help="Larger request bodies get HTTP 413.",
)
@click.option(
    "--price-as",
    metavar="MODEL",
    help="Price requests for models without a price row (a self-hosted model) at MODEL's "
    "rates, e.g. gpt-5; applies to every upstream without its own price_as.",
)
@click.option(
    "--otlp-endpoint",
    metavar="URL",
    help="Export one OpenTelemetry span per request (GenAI semantic conventions) to this "
    "OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (/v1/traces is added to a URL without a "
    "path). Overrides [otel] endpoint in --config. Needs the proxy extra.",
)
@click.option(
    "--vendor-diagnostics",
    is_flag=True,
    help="Add diagnostics.previous_message_id (the previous response in the same prefix "
    "family) to Anthropic Messages requests that carry none, so the vendor's own cache-miss "
    "reason is logged beside ours. Changes the request body; also vendor_diagnostics = true "
    "in --config.",
)
@client_limit_options
@click.option(
    "--shutdown-timeout",
    "graceful_shutdown_s",
    default=30.0,
    show_default=True,
    type=Seconds(min_open=False),
    metavar="SECONDS",
    help="How long a stop (Ctrl-C, SIGTERM) waits for requests still running; then each is "
    "cancelled, logged in one line, and its row written.",
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    help="Server log level; debug also prints one access-log line per request.",
)
def proxy(
    upstream: str | None,
    routing_policy: str | None,
    config_file: Path | None,
    host: str,
    port: int,
    db: Path | str | None,
    no_log: bool,
    auth_token: str | None,
    insecure_no_auth: bool,
    store_bodies: bool,
    store_prefixes: bool,
    max_body_bytes: int,
    price_as: str | None,
    otlp_endpoint: str | None,
    vendor_diagnostics: bool,
    header_timeout_s: float,
    body_timeout_s: float,
    keep_alive_s: float,
    max_client_connections: int | None,
    graceful_shutdown_s: float,
    log_level: str,
) -> None:
    """Run a local proxy that records every request's cache usage, cost and prefix hashes.

    Point a client's base URL at the proxy; requests are forwarded byte for byte (streams chunk
    by chunk) and recorded in the --db log: a SQLite file, or a Postgres database given as a
    postgresql:// URL. API keys are never stored.

    \b
    Example:
        promptcache proxy --upstream anthropic --port 8787
        export ANTHROPIC_BASE_URL=http://127.0.0.1:8787
        promptcache proxy --upstream openai   # OpenAI(base_url="http://127.0.0.1:8787/v1")
        promptcache proxy --upstream http://127.0.0.1:8000 --db engine.db --price-as gpt-5
        promptcache proxy --config upstreams.toml --host 0.0.0.0 --auth-token "$TOKEN"
        promptcache proxy --upstream http://10.0.0.5:8000,http://10.0.0.6:8000 --db fleet.db
    """
    from promptcache.client_limits import ClientLimits
    from promptcache.formatting import plural
    from promptcache.hosts import check_host, http_url
    from promptcache.proxy.config import (
        UpstreamConfig,
        check_bind,
        config_for_upstream,
        load_config_file,
        upstream_from_spec,
    )
    from promptcache.proxy.redact import redact_url
    from promptcache.proxy.serve import serve

    check_host(host)  # an unknown --host is a typo, not a reason to ask for --auth-token
    check_bind(host, auth_token, insecure_no_auth)
    settings: dict[str, object] = {
        "store_bodies": store_bodies,
        "max_body_bytes": max_body_bytes,
        "auth_token": auth_token,
    }
    if no_log or db is not None:  # else the config file's [log] db, or the default file
        settings["db_path"] = None if no_log else db
    if otlp_endpoint is not None:
        settings["otlp_endpoint"] = otlp_endpoint
    if store_prefixes:
        settings["store_prefixes"] = True
    if vendor_diagnostics:
        settings["vendor_diagnostics"] = True
    if routing_policy is not None and upstream is None:
        raise click.UsageError(
            "--routing-policy applies to --upstream URL1,URL2,...; in a --config file set "
            "`policy` in the [upstreams.NAME] table that lists replicas"
        )
    spec = upstream_from_spec(upstream, policy=routing_policy) if upstream is not None else None
    if config_file is not None:
        config = load_config_file(config_file, default=spec, **settings)
    elif spec is not None:
        config = config_for_upstream(spec, **settings)
    else:
        raise click.UsageError("give --upstream NAME|URL or --config FILE")
    config = config.with_price_as(price_as)
    db = config.db_path
    if isinstance(db, Path):
        _check_db(db)  # so a bad --db is the only line printed, not one after the banner

    def where(target: UpstreamConfig) -> str:
        """An upstream as the banner shows it: its URL, or a fleet's replicas and policy (its
        ``url`` is only the first replica's, which a route to it does not go to alone)."""
        if target.replicas and target.routing is not None:
            urls = ", ".join(redact_url(url) for url in target.replicas)
            count = plural(len(target.replicas), "replica")  # a one-replica fleet: "1 replica"
            return f"{count} ({urls}), policy {target.routing.policy}"
        return target.display_url

    shown = where(config.upstreams[config.default_upstream])
    if config.rules:  # a --config file's routes: the default alone would hide where they go
        routes = []
        for rule in config.rules:
            match = " and ".join(
                [f"path {rule.path_prefix}*"] * (rule.path_prefix is not None)
                + [f"model {rule.model_prefix}*"] * (rule.model_prefix is not None)
            )
            routes.append(f"{match} -> {where(config.upstreams[rule.upstream])}")
        # "default upstream:" before it, not "(default)" after: after a fleet's "policy
        # least_loaded" that read as if the policy were the default one
        shown = f"default upstream: {shown}; " + "; ".join(routes)
    banner = f"promptcache proxy on {http_url(host, port)} -> {shown}" + (
        "" if db is None else f", recording to {redact_url(str(db))}"
    )
    if config.otlp_endpoint is not None:
        from promptcache.proxy.otel import traces_url

        banner += f", spans to {redact_url(traces_url(config.otlp_endpoint))}"
    if config.vendor_diagnostics:
        routed = {config.default_upstream, *(rule.upstream for rule in config.rules)}
        if any(config.upstreams[name].vendor == "anthropic" for name in routed):
            banner += ", asking Anthropic for its cache diagnostics"
        else:  # only an Anthropic upstream is asked (docs/proxy.md)
            banner += ", not asking for cache diagnostics (no route leads to Anthropic)"
    if config.store_prefixes:
        banner += ", keeping one request body per prefix family"
    serve(
        config,
        host=host,
        port=port,
        insecure_no_auth=insecure_no_auth,
        log_level=log_level,
        access_log=log_level == "debug",
        banner=banner,  # printed once the port is bound and the log open
        graceful_shutdown_s=graceful_shutdown_s,
        limits=ClientLimits(
            head_timeout_s=header_timeout_s,
            body_timeout_s=body_timeout_s,
            keep_alive_s=keep_alive_s,
            max_connections=max_client_connections,
        ),
    )


#: The first 16 bytes of every SQLite 3 database file.
_SQLITE_HEADER = b"SQLite format 3\x00"


def _check_db(db: Path) -> None:
    """Refuse a --db the log could not be opened at, without creating anything (the port is
    bound first, so a port in use leaves no file behind): a missing or read-only folder, a
    folder given as the file, or an existing file that is not SQLite.

    Raises:
        click.BadParameter: the message says what to change.
    """
    folder = db.parent
    problem = folder_problem(db)
    if problem is not None:
        raise click.BadParameter(
            f"cannot create the request log {db}: {problem}; pick another --db", param_hint="--db"
        )
    if not db.exists():
        if not os.access(folder, os.W_OK | os.X_OK):
            raise click.BadParameter(
                f"cannot create the request log {db}: folder {folder} is not writable; pick "
                "another --db",
                param_hint="--db",
            )
        return
    if db.is_dir():
        raise click.BadParameter(f"{db} is a folder; give a file name", param_hint="--db")
    try:
        with db.open("rb") as file:
            header = file.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise click.BadParameter(
            f"cannot read the request log {db}: {exc.strerror}", param_hint="--db"
        ) from None
    if header and header != _SQLITE_HEADER:
        raise click.BadParameter(
            f"{db} is not a SQLite file (so not a promptcache request log); pick another --db "
            "or move that file away",
            param_hint="--db",
        )
