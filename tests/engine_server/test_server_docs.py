"""docs/engine-server.md lists every ``engine serve`` option and every ``/metrics`` series.

The options come from the click command itself, the series from a real engine's scrape (with
cache tiers, so the tier series are exposed), so an option or series added without its row in
the docs fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
from prometheus_client.parser import text_string_to_metric_families
from server_support import TINYSTORIES

from promptcache.cli import cli
from promptcache.engine import LLMEngine
from promptcache.engine.server.metrics import EngineMetrics

DOCS = Path(__file__).resolve().parents[2] / "docs" / "engine-server.md"


def _section(heading: str) -> str:
    text = DOCS.read_text(encoding="utf-8")
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _documented_names(section: str) -> set[str]:
    """Every name a table row of ``section`` spells in backticks.

    A row may abbreviate: `` `promptcache_engine_running_sequences` / `_waiting_sequences` ``
    names ``promptcache_engine_waiting_sequences``. A token starting with "_" stands for any
    head of the row's first full name cut at an underscore, followed by that token.
    """
    names: set[str] = set()
    for row in re.findall(r"^\|(.*)\|$", section, flags=re.MULTILINE):
        tokens = [re.sub(r"\{.*\}$", "", t) for t in re.findall(r"`([^`]+)`", row.split("|")[0])]
        full = ""
        for token in tokens:
            if token.startswith("_") and full:
                names.update(full[:i] + token for i, c in enumerate(full) if c == "_")
            else:
                full = token
                names.add(token)
    return names


def test_every_serve_option_is_in_the_options_table() -> None:
    group = cli.get_command(click.Context(cli), "engine")
    assert isinstance(group, click.Group)
    serve = group.get_command(click.Context(group), "serve")
    assert serve is not None
    section = _section("`promptcache engine serve`")
    missing = []
    for param in serve.params:
        long = [o for o in param.opts if o.startswith("--")]
        if not long or long[0] == "--help":
            continue
        spellings = long + [o.replace("--", "--[no-]", 1) for o in long]
        if not any(re.search(f"`{re.escape(s)}[` ]", section) for s in spellings):
            missing.append(long[0])
    assert missing == []


def test_every_metrics_series_is_in_the_metrics_table(tmp_path: Path) -> None:
    engine = LLMEngine.from_pretrained(
        TINYSTORIES,
        dtype="float32",
        num_blocks=8,
        kv_ram_bytes=64 * 1024,
        kv_disk_dir=str(tmp_path / "kv"),
    )
    try:
        scrape = EngineMetrics(engine.stats, lambda: 0).render().decode()
    finally:
        engine.close()
    exposed = set()
    for family in text_string_to_metric_families(scrape):
        if family.name.endswith("_created"):  # prometheus_client's creation timestamps
            continue
        suffix = "_total" if family.type == "counter" else ""
        exposed.add(family.name + suffix)
    assert "promptcache_engine_kv_tier_blocks" in exposed  # the tier series are exposed
    documented = _documented_names(_section("Metrics (`GET /metrics`)"))
    assert sorted(exposed - documented) == []
