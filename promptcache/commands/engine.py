"""``promptcache engine``: serve the bundled engine over an OpenAI-compatible API; size KV caches.

Only click and the standard library are imported here; torch, starlette and the engine load
inside the ``serve`` callback. ``kv-size`` reads nothing but config.json (no torch).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import click

from promptcache.engine.config import DTYPES, KV_CACHE_DTYPES
from promptcache.engine.kv_sizing import KVSize, human_bytes, kv_size
from promptcache.engine.weight_choice import WEIGHT_CHOICES
from promptcache.formatting import plural

from ._option_args import OptionArgCommand, looks_like_model
from ._server_options import client_limit_options

__all__ = ["ByteSize", "KVSize", "engine_group", "kv_size"]

DEFAULT_KV_CACHE_BYTES = 256 * 1024 * 1024  # EngineConfig.kv_cache_bytes
DEFAULT_KV_DISK_BYTES = 16 * 1024**3  # EngineConfig.kv_disk_bytes
DEFAULT_WARMUP_TOP = 10  # --top: prefix families --warmup-from-log prefills

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "k": 1024,
    "m": 1024**2,
    "g": 1024**3,
    "t": 1024**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
MAX_BYTES = 2**63 - 1  # sizes become torch int64 tensor sizes
MAX_THREADS = 1024  # --threads: torch takes an int32; more threads than this never helps
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


class ByteSize(click.ParamType):  # type: ignore[type-arg]
    """A byte count: ``268435456``, ``256MiB``, ``1.5GiB``, ``4GB`` (decimal), ``512M`` (=MiB)."""

    name = "BYTES"

    def __init__(self, minimum: int = 0) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        match = _SIZE.match(str(value).replace("_", ""))
        unit = match.group(2).lower() if match else ""
        if match is None or unit not in _UNITS:
            self.fail(
                f"{value!r} is not a size; write bytes (268435456) or a number with a unit "
                "(256MiB, 1.5GiB, 4GB, 512M)",
                param,
                ctx,
            )
        size = int(Decimal(match.group(1)) * _UNITS[unit])
        if size > MAX_BYTES:
            self.fail(f"{value!r} is more bytes than any machine has (at most 8 EiB)", param, ctx)
        if size < self.minimum:
            self.fail(f"{value!r} is {size} bytes; give at least {self.minimum}", param, ctx)
        return size


BYTES = ByteSize()
POSITIVE_BYTES = ByteSize(minimum=1)


@click.group(name="engine")
def engine_group() -> None:
    """Run the bundled engine (paged KV cache, prefix caching) behind an OpenAI API.

    \b
    Example:
        promptcache engine serve --model ../shared/models/tinystories-656k --port 8000
        promptcache engine kv-size --model ./Qwen2.5-0.5B --tokens 4096 --budget 2GiB
    """


@engine_group.command(
    name="serve", cls=OptionArgCommand, value_option="--model", looks_like=looks_like_model
)
@click.option(
    "--model", required=True, metavar="PATH|HUB_ID", help="Checkpoint dir, .gguf file or hub id."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--served-model-name",
    "served_model_names",
    multiple=True,
    help="Name clients send as `model` (repeatable); default: the --model value.",
)
@click.option("--dtype", type=click.Choice(DTYPES), default="auto", show_default=True)
@click.option(
    "--weight-dtype",
    type=click.Choice(WEIGHT_CHOICES),
    default="auto",
    show_default=True,
    help="Linear-layer weights. auto: the type nearest the checkpoint's own (a GGUF file of "
    "4-bit weights: int4 layers; 5-8-bit: int8; float types and checkpoint directories: "
    "float), float on a GPU; float: --dtype; int8 / int4: weight-only quantised (CPU), faster "
    "decoding, logits no longer equal to the float model's. The banner says which and why.",
)
@click.option(
    "--fused-cpu-decode/--no-fused-cpu-decode",
    default=None,
    help="Every forward pass (prefill and decode) through the compiled C kernel (int4 weights "
    "on an AVX2 CPU; default: when it can run, else the torch path); --fused-cpu-decode fails "
    "at load if it cannot.",
)
@click.option(
    "--kv-cache-bytes",
    type=BYTES,
    default=DEFAULT_KV_CACHE_BYTES,
    show_default="256MiB",
    help="Byte budget of the KV pool (all layers, K and V); must hold at least one block.",
)
@click.option("--block-size", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--max-num-seqs", type=click.IntRange(min=1), default=64, show_default=True)
@click.option(
    "--max-model-len",
    type=click.IntRange(min=2),
    help="Longest prompt + output in tokens; default: the model's max_position_embeddings.",
)
@click.option(
    "--max-num-batched-tokens",
    type=click.IntRange(min=1),
    default=2048,
    show_default=True,
    help="Token budget of one step (prefill chunks + decodes).",
)
@click.option(
    "--attention-backend",
    type=click.Choice(["torch", "triton"]),
    default="torch",
    show_default=True,
)
@click.option(
    "--kv-cache-dtype",
    type=click.Choice(KV_CACHE_DTYPES),
    default="auto",
    show_default=True,
    help="KV cache element type: float16, float32, or quantised with per-head scales (int8, "
    "fp8); auto = float16 where the fused CPU kernel runs, else the model dtype.",
)
@click.option(
    "--swap-space",
    type=BYTES,
    default=0,
    help="CPU memory for swapped-out KV blocks; > 0 preempts by swapping instead of recompute.",
)
@click.option("--enable-prefix-caching/--no-enable-prefix-caching", default=True, show_default=True)
@click.option(
    "--kv-ram",
    "kv_ram",
    type=BYTES,
    default=0,
    help="Host-RAM cache tier under the KV pool (e.g. 2GiB): cached blocks the pool evicts "
    "are kept there, and a prefix that misses the pool hits there (0 = none).",
)
@click.option(
    "--kv-disk",
    "kv_disk",
    metavar="DIR",
    callback=lambda ctx, param, value: _kv_disk_dir(value),
    help="Disk cache tier: blocks evicted from RAM (or from the pool without --kv-ram), and at "
    "shutdown every cached block, are written here; serve again on the same model and KV "
    "settings and the blocks hit again.",
)
@click.option(
    "--kv-disk-bytes",
    type=POSITIVE_BYTES,
    default=DEFAULT_KV_DISK_BYTES,
    show_default="16GiB",
    help="Byte budget of the --kv-disk block files (least recently used out).",
)
@click.option(
    "--speculative-config",
    "speculative_config",
    metavar="JSON",
    help="Speculative decoding by prompt lookup, as vLLM's --speculative-config, e.g. "
    '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3, '
    '"prompt_lookup_min": 2}. Drafts come from n-gram matches in each request\'s own prompt '
    "and output; greedy output is unchanged.",
)
@click.option(
    "--warmup",
    "warmup_file",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSONL of request bodies (chat `messages` or completions `prompt`; `model` optional) "
    "to prefill at start; /health answers 503 until they are cached.",
)
@click.option(
    "--warmup-from-log",
    "warmup_log",
    metavar="PROXY_DB",
    help="Prefill at start the stored bodies of the --top costliest prefix families of this "
    "proxy log (a SQLite file or postgresql:// URL written by `promptcache proxy "
    "--store-prefixes`); /health answers 503 until they are cached.",
)
@click.option(
    "--top",
    "warmup_top",
    type=click.IntRange(min=1),
    metavar="N",
    help="How many prefix families --warmup-from-log prefills (default 10).",
)
@click.option(
    "--chat-template",
    metavar="FILE|JINJA",
    help="Chat template (a .jinja file or the template text) for models without one, or to "
    "replace theirs.",
)
@click.option(
    "--api-key",
    envvar="PROMPTCACHE_ENGINE_API_KEY",
    help="Require this key as the clients' api_key (Authorization: Bearer). Needed to listen "
    "on a non-loopback --host. Env: PROMPTCACHE_ENGINE_API_KEY.",
)
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    help="Allow a non-loopback --host without --api-key (trusted networks only).",
)
@click.option(
    "--device",
    default="cpu",
    show_default=True,
    help="cpu, cuda or cuda:<index> (the engine runs on CPUs and CUDA GPUs).",
)
@click.option(
    "--threads",
    type=click.IntRange(1, MAX_THREADS),
    help="torch CPU threads, 1 to 1024 (default: torch's choice; 1 is fastest on a busy "
    "shared machine).",
)
@click.option(
    "--kv-events-endpoint",
    metavar="ZMQ_URL",
    help="Publish the prefix cache's KV events in vLLM's format (ZeroMQ PUB, msgpack) on this "
    "address, e.g. tcp://127.0.0.1:5557; routers such as `promptcache proxy` (policy "
    "kv_events), llm-d or NVIDIA Dynamo subscribe to it.",
)
@click.option(
    "--kv-events-replay-endpoint",
    metavar="ZMQ_URL",
    help="Answer KV-event replay requests (ZeroMQ ROUTER) on this address, e.g. "
    "tcp://127.0.0.1:5558, so a late or lagging subscriber catches up. Needs "
    "--kv-events-endpoint.",
)
@click.option(
    "--kv-events-topic",
    default="kv-events",
    show_default=True,
    help="Topic frame of every KV-event message (subscribers filter on its prefix).",
)
@client_limit_options
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
def serve(
    model: str,
    host: str,
    port: int,
    served_model_names: tuple[str, ...],
    dtype: str,
    weight_dtype: str,
    fused_cpu_decode: bool | None,
    kv_cache_bytes: int,
    block_size: int,
    max_num_seqs: int,
    max_model_len: int | None,
    max_num_batched_tokens: int,
    attention_backend: str,
    kv_cache_dtype: str,
    swap_space: int,
    enable_prefix_caching: bool,
    kv_ram: int,
    kv_disk: str | None,
    kv_disk_bytes: int,
    speculative_config: str | None,
    warmup_file: Path | None,
    warmup_log: str | None,
    warmup_top: int | None,
    chat_template: str | None,
    api_key: str | None,
    insecure_no_auth: bool,
    device: str,
    threads: int | None,
    kv_events_endpoint: str | None,
    kv_events_replay_endpoint: str | None,
    kv_events_topic: str,
    header_timeout_s: float,
    body_timeout_s: float,
    keep_alive_s: float,
    max_client_connections: int | None,
    log_level: str,
) -> None:
    """Serve a model with an OpenAI-compatible API (/v1/chat/completions, /v1/completions).

    Usage reports prompt_tokens_details.cached_tokens from the engine's prefix cache; /metrics
    exposes Prometheus series, /health the liveness.

    \b
    Example:
        promptcache engine serve --model ../shared/models/tinystories-656k --port 8000
        promptcache engine serve --model Qwen/Qwen2.5-0.5B-Instruct --kv-cache-bytes 2GiB \\
            --kv-cache-dtype int8 --served-model-name qwen
        # then: OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")
    """
    from promptcache.client_limits import ClientLimits
    from promptcache.engine.server.auth import check_bind
    from promptcache.hosts import check_host

    if warmup_top is not None and warmup_log is None:
        raise click.UsageError("--top applies to --warmup-from-log PROXY_DB")
    # Clients must send the name as `model`: an empty one could never be named.
    for name in served_model_names:
        if not name.strip():
            raise click.UsageError(
                f"--served-model-name {name!r} is blank: give the name clients send as `model`"
            )
    budget_source = click.get_current_context().get_parameter_source("kv_disk_bytes")
    if kv_disk is None and budget_source is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError(
            "--kv-disk-bytes is the byte budget of the --kv-disk tier: add --kv-disk DIR"
        )
    for option, given in (("--warmup", warmup_file), ("--warmup-from-log", warmup_log)):
        if given is not None and not enable_prefix_caching:
            raise click.UsageError(
                f"{option} prefills prompts into the prefix cache; it needs prefix caching "
                "(leave out --no-enable-prefix-caching)"
            )

    check_host(host)  # an unknown --host is a typo, not a reason to ask for --api-key
    check_bind(host, api_key, insecure_no_auth)
    template = _read_chat_template(chat_template)
    if kv_events_replay_endpoint is not None and kv_events_endpoint is None:
        raise click.UsageError("--kv-events-replay-endpoint needs --kv-events-endpoint")
    from promptcache.listen import listen_socket

    # Bound before the model loads: a port in use fails at once, in one line.
    sock = listen_socket(host, port)
    kv_events = None
    try:
        if kv_events_endpoint is not None:
            from promptcache.engine.kv_events import KVEventPublisher

            kv_events = KVEventPublisher(
                kv_events_endpoint, kv_events_replay_endpoint, topic=kv_events_topic
            )
        import torch

        from promptcache.engine import EngineConfig, LLMEngine, ModelConfig
        from promptcache.engine.kv_sizing import size_kv_pools
        from promptcache.engine.loader import resolve_model_path
        from promptcache.engine.server import create_app
        from promptcache.engine.server import serve as run_server
        from promptcache.engine.weight_choice import choose_weight_dtype

        # auto reads a local GGUF file's tensor types (a Hub id is a float checkpoint).
        weights = choose_weight_dtype(Path(model).expanduser(), weight_dtype, device)
        # Every setting is checked before anything is loaded (device, block size, ...).
        config = EngineConfig(
            model=model,
            dtype=dtype,
            weight_dtype=weights.engine_weight_dtype,
            fused_cpu_decode=fused_cpu_decode,
            device=device,
            kv_cache_bytes=kv_cache_bytes,
            block_size=block_size,
            max_num_seqs=max_num_seqs,
            max_model_len=max_model_len,
            max_num_batched_tokens=max_num_batched_tokens,
            attention_backend=attention_backend,
            kv_cache_dtype=kv_cache_dtype,
            enable_prefix_caching=enable_prefix_caching,
            kv_ram_bytes=kv_ram,
            kv_disk_dir=kv_disk,
            kv_disk_bytes=kv_disk_bytes,
            speculative_config=speculative_config,
        )
        if threads is not None:
            torch.set_num_threads(threads)

        model_dir = resolve_model_path(model)
        model_config = ModelConfig.from_pretrained(model_dir)
        with _budget_option({"kv_cache_bytes": "--kv-cache-bytes", "swap_space": "--swap-space"}):
            size_kv_pools(config, model_config, swap_space=swap_space)
        config.model = str(model_dir)
        config.validate()
        engine = LLMEngine(config)
        names = list(dict.fromkeys(served_model_names)) or [model]
        warmup = None
        from_log = None
        if warmup_file is not None:
            warmup = _read_warmup(warmup_file, engine, names, template)
        if warmup_log is not None:
            top = DEFAULT_WARMUP_TOP if warmup_top is None else warmup_top
            from_log = _read_warmup_log(warmup_log, top, engine, names, template)
            warmup = [*(warmup or []), *from_log.requests]
        warmed_from = _warmup_source(warmup_file, warmup_log, from_log)
        app = create_app(
            engine,
            # A name given twice is listed once (first occurrence keeps its place).
            served_model_names=names,
            chat_template=template,
            api_key=api_key,
            kv_events=kv_events,
            warmup=warmup,
            on_warmup_done=None if warmup is None else _warmup_banner(warmed_from),
        )
        stats = engine.stats()
        pool = stats.kv_cache_bytes
        pool_text = f"{pool / 2**20:.1f} MiB" if pool >= 2**20 else f"{pool / 2**10:.1f} KiB"
        # max_model_len as the server enforces it: the engine's, capped by the KV pool's tokens.
        click.echo(
            f"promptcache engine: {model} on {_base_url(host, port)} "
            f"({plural(stats.num_total_blocks, 'KV block')} of {plural(block_size, 'token')}, "
            f"{pool_text}, max_model_len {engine.effective_max_model_len})",
            err=True,
        )
        from promptcache.engine.models.quant_linear import Int4Linear, Int8Linear

        kinds = [type(m) for m in engine.runner.model.modules()]
        int4, int8 = kinds.count(Int4Linear), kinds.count(Int8Linear)
        if int4 or int8:
            click.echo(
                f"promptcache engine: weight-only quantised linear layers: {int4} int4, "
                f"{int8} int8 ({weights.reason})",
                err=True,
            )
        else:
            float_type = str(next(engine.runner.model.parameters()).dtype).removeprefix("torch.")
            click.echo(f"promptcache engine: {float_type} weights ({weights.reason})", err=True)
        fused = engine.runner.fused_decode
        if fused is not None:
            click.echo(
                "promptcache engine: prefills and decode steps run in the fused CPU kernel",
                err=True,
            )
        elif weights.name == "int4":
            why = engine.runner.fused_decode_unavailable or "--no-fused-cpu-decode"
            click.echo(f"promptcache engine: the fused CPU kernel is not used: {why}", err=True)
        window_text = _sliding_window_text(engine)
        if window_text is not None:
            click.echo(f"promptcache engine: {window_text}", err=True)
        tiers = engine.kv_tiers
        if tiers is not None:
            click.echo(f"promptcache engine: {_tiers_text(tiers)}", err=True)
        from promptcache.engine.spec_decode import SpeculativeConfig

        spec = engine.config.speculative_config
        if isinstance(spec, SpeculativeConfig):  # validate() turned every form into one
            lookup = plural(spec.prompt_lookup_max, "token")
            if spec.prompt_lookup_min != spec.prompt_lookup_max:
                lookup = f"{spec.prompt_lookup_min} to {spec.prompt_lookup_max} tokens"
            click.echo(
                "promptcache engine: speculative decoding by prompt lookup: up to "
                f"{plural(spec.num_speculative_tokens, 'draft token')} per step from n-gram "
                f"matches of {lookup} in each request's prompt and output",
                err=True,
            )
        if warmup is not None:
            for family, reason in from_log.skipped if from_log is not None else ():
                click.echo(
                    f"promptcache engine: passed over prefix family {family[:8]} of "
                    f"{_shown_log(warmup_log)}: {reason}",
                    err=True,
                )
            prompts = sum(len(r.prompts) for r in warmup)
            click.echo(
                f"promptcache engine: warming up {plural(prompts, 'prompt')} from "
                f"{warmed_from}; /health answers 503 until done",
                err=True,
            )
        if kv_events is not None:
            replay = f", replay on {kv_events.replay_endpoint}" if kv_events.replay_endpoint else ""
            click.echo(
                f"promptcache engine: KV events on {kv_events.endpoint} "
                f"(topic {kv_events.topic!r}{replay})",
                err=True,
            )
        limits = ClientLimits(
            head_timeout_s=header_timeout_s,
            body_timeout_s=body_timeout_s,
            keep_alive_s=keep_alive_s,
            max_connections=max_client_connections,
        )
        run_server(app, host=host, port=port, log_level=log_level, sock=sock, limits=limits)
    finally:
        sock.close()  # the server closes it too; this covers a failure before it starts
        if kv_events is not None:
            kv_events.close()


def _sliding_window_text(engine: Any) -> str | None:
    """The banner's sentence on a sliding-window model's attention and blocks, or None."""
    windows = engine.model_config.sliding_windows
    windowed = [w for w in windows if w is not None]
    if not windowed:
        return None
    if engine.config.max_model_len <= min(windowed):
        return (
            f"the model's {min(windowed)}-token sliding window is never reached "
            f"(max_model_len {engine.config.max_model_len})"
        )
    freed = engine.scheduler.block_manager.sliding_window
    backend = engine.config.attention_backend
    if freed is not None:
        return (
            f"{freed}-token sliding window on every layer, masked by the {backend} attention "
            "path; blocks that fall out of it are freed as sequences grow"
        )
    return (
        f"sliding windows on {len(windowed)} of {len(windows)} layers, masked by the {backend} "
        "attention path; no block is freed early (the other layers attend to the whole context)"
    )


def _tiers_text(tiers: Any) -> str:
    """The banner line of the cache tiers (``KVTiers``): sizes, and blocks found on disk."""
    parts = []
    if tiers.host is not None:
        size = _size(tiers.host.storage.numel() * tiers.host.storage.element_size())
        parts.append(f"RAM tier of {plural(tiers.host.num_slots, 'KV block')} ({size})")
    if tiers.disk is not None:
        disk = tiers.disk
        parts.append(
            f"disk tier {disk.dir} holding {plural(len(disk), 'KV block')} "
            f"({_size(disk.num_bytes)} of {_size(disk.capacity_bytes)})"
        )
        if disk.num_dropped_at_open:
            parts[-1] += (
                f"; {plural(disk.num_dropped_at_open, 'damaged block file')} deleted at start"
            )
        if disk.num_trimmed_at_open:
            parts[-1] += (
                f"; {plural(disk.num_trimmed_at_open, 'least recently used block file')} "
                "deleted at start to fit --kv-disk-bytes"
            )
        if tiers.num_resident_blocks:
            parts[-1] += (
                f"; {plural(tiers.num_resident_blocks, 'pool block')} and "
                f"{plural(tiers.num_resident_buffers, 'disk read buffer')} made resident at "
                f"start ({tiers.startup_seconds * 1000:.0f} ms)"
            )
    return ", ".join(parts)


def _size(n: int) -> str:
    """Bytes in binary units with one decimal: ``12.0 MiB``, ``3.5 KiB``, ``100 B``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _serving_context(engine: Any, names: list[str], template: str | None) -> Any:
    """The live request parser's context, as the server will build it."""
    from promptcache.engine.server.protocol import ServingContext

    if template is not None:
        engine.tokenizer.set_chat_template(template)
    return ServingContext(
        model_names=tuple(names),
        tokenizer=engine.tokenizer,
        max_model_len=engine.effective_max_model_len,
        vocab_size=engine.model_config.vocab_size,
        max_num_seqs=engine.config.max_num_seqs,
    )


def _read_warmup(path: Path, engine: Any, names: list[str], template: str | None) -> Any:
    """Parse ``--warmup`` with the live request parser (errors are one-line usage errors)."""
    from promptcache.engine.server.warmup import read_warmup_file
    from promptcache.errors import ConfigError

    try:
        return read_warmup_file(path, _serving_context(engine, names, template))
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--warmup") from None


def _shown_log(log: str | None) -> str:
    """``--warmup-from-log`` as messages show it (a URL's ``user:password@`` masked)."""
    from promptcache.proxy.redact import redact_url

    return redact_url(str(log))


def _read_warmup_log(
    path: str, top: int, engine: Any, names: list[str], template: str | None
) -> Any:
    """Read ``--warmup-from-log`` (errors are one-line usage errors)."""
    from promptcache.engine.server.warmup import read_warmup_log
    from promptcache.errors import ConfigError

    try:
        return read_warmup_log(path, top, _serving_context(engine, names, template))
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--warmup-from-log") from None


def _warmup_source(file: Path | None, log: str | None, from_log: Any) -> str:
    """Where the warm-up's prompts come from, as the banner says it."""
    parts = [] if file is None else [str(file)]
    if log is not None and from_log is not None:
        count = len(from_log.families)
        ids = ", ".join(family[:8] for family in from_log.families)
        if from_log.skipped:
            n = len(from_log.skipped)
            ids += f"; {n} costlier {'family' if n == 1 else 'families'} passed over"
        what = "costliest prefix family" if count == 1 else f"{count} costliest prefix families"
        parts.append(f"the {what} of {_shown_log(log)} [{ids}]")
    return " and ".join(parts)


def _warmup_banner(source: str) -> Any:
    """The callback that prints what the warm-up did (on the engine thread)."""

    def done(result: Any) -> None:
        if isinstance(result, BaseException):
            click.echo(f"promptcache engine: the warm-up from {source} failed: {result}", err=True)
            return
        if result.stopped:
            click.echo(
                f"promptcache engine: the warm-up from {source} stopped at shutdown after "
                f"{result.seconds:.2f} s ({result.num_finished} of "
                f"{plural(result.num_prompts, 'prompt')} prefilled)",
                err=True,
            )
            return
        cached = plural(result.num_cached_blocks, "KV block") + " cached"
        if result.num_cached_blocks < result.num_blocks:
            cached = (
                f"{result.num_cached_blocks} of {plural(result.num_blocks, 'KV block')} cached; "
                "the others did not fit in the KV cache (--kv-cache-bytes, --kv-ram, --kv-disk)"
            )
        click.echo(
            f"promptcache engine: warmed {plural(result.num_prompts, 'prompt')} from {source} "
            f"({plural(result.num_prompt_tokens, 'token')}, {cached}) in {result.seconds:.2f} s",
            err=True,
        )

    return done


def _base_url(host: str, port: int) -> str:
    """``http://HOST:PORT/v1``, with an IPv6 literal in brackets (RFC 3986: ``[::1]``)."""
    from promptcache.hosts import http_url

    return f"{http_url(host, port)}/v1"


@contextmanager
def _budget_option(options: dict[str, str]) -> Iterator[None]:
    """Report a ``KVBudgetError`` as a usage error of the option that set that budget."""
    from promptcache.errors import KVBudgetError

    try:
        yield
    except KVBudgetError as exc:
        raise click.BadParameter(str(exc), param_hint=options[exc.setting]) from None


def _kv_disk_dir(value: str | None) -> str | None:
    """``--kv-disk``: a directory path, or None without the option.

    Raises:
        click.BadParameter: an empty or blank path (``--kv-disk ""``, an unset shell variable).
    """
    if value is not None and not value.strip():
        raise click.BadParameter(
            f"{value!r} is not a directory path: pass the directory the disk cache tier keeps its "
            "blocks in (e.g. --kv-disk ~/.cache/promptcache/kv), or leave --kv-disk out for none",
            param_hint="--kv-disk",
        )
    return value


def _read_chat_template(value: str | None) -> str | None:
    """The template text of ``--chat-template``: a file's contents, or the value itself.

    The template is compiled here, before the model loads, so a file that is not UTF-8 or a
    template that does not compile is a one-line usage error naming the file.
    """
    if value is None:
        return None
    path = Path(value).expanduser()
    if path.is_file():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise click.BadParameter(
                f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}); save the "
                "template as UTF-8",
                param_hint="--chat-template",
            ) from None
        except OSError as exc:
            raise click.BadParameter(
                f"cannot read {path}: {exc.strerror or exc}", param_hint="--chat-template"
            ) from None
        origin: str | None = str(path)
    elif "{{" in value or "{%" in value:
        text, origin = value, None
    else:
        raise click.BadParameter(
            f"{value!r} is neither a file nor Jinja template text", param_hint="--chat-template"
        )
    from promptcache.engine.chat_template import compile_template
    from promptcache.errors import ModelLoadError

    try:
        compile_template(text, origin)
    except ModelLoadError as exc:
        raise click.BadParameter(str(exc), param_hint="--chat-template") from None
    return text


# kv-size ------------------------------------------------------------------------------------------


@engine_group.command(
    name="kv-size", cls=OptionArgCommand, value_option="--model", looks_like=looks_like_model
)
@click.option(
    "--model",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="Checkpoint directory (or its config.json), or a .gguf file.",
)
@click.option(
    "--tokens",
    type=click.IntRange(min=1),
    help="Tokens per request (prompt + output); default: max_position_embeddings.",
)
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default="auto",
    show_default=True,
    help="The serve --dtype: the KV element type when --kv-cache-dtype is auto.",
)
@click.option(
    "--kv-cache-dtype",
    type=click.Choice(KV_CACHE_DTYPES),
    default="auto",
    show_default=True,
    help="The serve --kv-cache-dtype: auto = float16 where the fused CPU kernel would serve, "
    "else the model dtype.",
)
@click.option(
    "--weight-dtype",
    type=click.Choice(WEIGHT_CHOICES),
    default="auto",
    show_default=True,
    help="The serve --weight-dtype (auto reads a GGUF file's tensor types): the fused CPU "
    "kernel, and so an fp16 pool for --kv-cache-dtype auto, needs int4.",
)
@click.option(
    "--fused-cpu-decode/--no-fused-cpu-decode",
    default=None,
    help="The serve option: --no-fused-cpu-decode keeps --kv-cache-dtype auto at the model dtype.",
)
@click.option(
    "--budget",
    type=BYTES,
    default=DEFAULT_KV_CACHE_BYTES,
    show_default="256MiB",
    help="KV byte budget to fill (the serve --kv-cache-bytes); must hold at least one block.",
)
@click.option("--block-size", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead.")
def kv_size_command(
    model: Path,
    tokens: int | None,
    batch: int,
    dtype: str,
    kv_cache_dtype: str,
    weight_dtype: str,
    fused_cpu_decode: bool | None,
    budget: int,
    block_size: int,
    as_json: bool,
) -> None:
    """Print KV cache bytes per token, per request and per batch, and what a budget holds.

    Reads only config.json (or a GGUF file's metadata): bytes per token = 2 x layers x kv_heads x
    head_dim x bytes per element (the element is --kv-cache-dtype; auto is float16 where the
    fused CPU kernel would serve, as serve's pool, else --dtype, or the checkpoint dtype when
    both are auto; int8 and fp8 take 1 byte). Takes serve's --dtype / --kv-cache-dtype /
    --weight-dtype / --fused-cpu-decode.

    \b
    Example:
        promptcache engine kv-size --model ../shared/models/tinystories-656k
        promptcache engine kv-size --model ./llama --tokens 8192 --batch 16 --kv-cache-dtype fp8
        promptcache engine kv-size --model ./llama/config.json --budget 24GiB --json
        promptcache engine kv-size --model ./SmolLM2-135M-Instruct.Q4_1.gguf --tokens 8192
    """
    from promptcache.engine.gguf_file import is_gguf
    from promptcache.engine.model_config import ModelConfig

    if model.is_file() and not is_gguf(model):
        try:
            raw = json.loads(model.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise click.BadParameter(
                f"{model} is not a config.json (it is not text); pass the checkpoint directory "
                "(the one holding config.json) or its config.json",
                param_hint="--model",
            ) from None
        except (OSError, json.JSONDecodeError) as exc:
            raise click.BadParameter(
                f"cannot read {model} as a config.json ({exc}); pass the checkpoint directory "
                "(the one holding config.json) or its config.json",
                param_hint="--model",
            ) from exc
        if not isinstance(raw, dict):
            raise click.BadParameter(f"{model} must hold a JSON object", param_hint="--model")
        config = ModelConfig.from_dict(raw, source=str(model))
    else:
        config = ModelConfig.from_pretrained(model)
    from promptcache.engine.weight_choice import choose_weight_dtype

    weights = choose_weight_dtype(model, weight_dtype, "cpu")
    with _budget_option({"kv_cache_bytes": "--budget"}):
        size = kv_size(
            config,
            tokens=tokens,
            batch=batch,
            kv_dtype=kv_cache_dtype,
            dtype=dtype,
            weight_dtype=weights.engine_weight_dtype,
            fused_cpu_decode=fused_cpu_decode,
            budget=budget,
            block_size=block_size,
        )
    if as_json:
        click.echo(json.dumps(asdict(size), indent=2))
        return
    s = size
    rows = [
        ("model", f"{model} ({config.architecture})"),
        ("shape", f"{s.layers} layers x {s.kv_heads} KV heads x head_dim {s.head_dim}"),
        ("KV dtype", f"{s.kv_dtype} ({plural(s.bytes_per_element, 'byte')} per element)"),
        (
            "fused kernel",
            "would serve"
            if s.fused_kernel_unavailable is None
            else f"would not serve: {s.fused_kernel_unavailable}",
        ),
        (
            "per token",
            f"2 x {s.layers} x {s.kv_heads} x {s.head_dim} x {s.bytes_per_element} = "
            f"{human_bytes(s.bytes_per_token)}",
        ),
        ("per request", f"{s.tokens:,} tokens = {human_bytes(s.bytes_per_request)}"),
        ("per batch", f"{s.batch} x {s.tokens:,} tokens = {human_bytes(s.bytes_per_batch)}"),
        (
            "budget",
            f"{human_bytes(s.budget)} holds {plural(s.budget_blocks, 'block', grouped=True)} "
            f"of {s.block_size} tokens = {s.budget_tokens:,} tokens = "
            f"{plural(s.budget_requests, 'request', grouped=True)} of {s.tokens:,} tokens",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")
