"""Shared engine fixtures: the real tinystories checkpoint, tiny random checkpoints, HF references.

Tiny checkpoints are built with transformers (random weights, fixed seed), saved as safetensors
next to the tinystories tokenizer files plus a chat template, and loaded by *our* loader in the
tests. Greedy references come from transformers' ``generate`` on the same directory.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

#: Lowest top-1 agreement with fp32 accepted per weight_dtype (test_quant_linear.py's torch
#: paths, test_cpu_decode.py's fused decode; measured values in docs/engine.md).
SMOLLM2_MIN_AGREEMENT = {"int8": 0.92, "int4": 0.93}
TINYSTORIES_MIN_AGREEMENT = {"int8": 0.95, "int4": 0.78}

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
PROMPTS_FILE = Path(__file__).resolve().parents[1] / "data" / "prompts.txt"

# Chat templates in the styles of real checkpoints (shortened), exercising the features
# transformers' renderer provides: bos/eos variables, raise_exception, namespace, loop controls,
# tojson, tools, and named templates.
LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}"
)
CHATML_TEMPLATE = """{%- set ns = namespace(last_user=-1) %}
{%- for message in messages %}
    {%- if message.role == 'user' %}{%- set ns.last_user = loop.index0 %}{%- endif %}
{%- endfor %}
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}{{- messages[0].content }}
    {%- else %}You are helpful.{%- endif %}
    {{- '\\n\\n# Tools\\n<tools>' }}
    {%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}
    {{- '\\n</tools><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'system' and loop.first %}{% continue %}{%- endif %}
    {{- '<|im_start|>' + message.role + '\\n' + message.content }}
    {%- if loop.index0 == ns.last_user %}{{- ' (last)' }}{%- endif %}
    {{- '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"""
MISTRAL_TEMPLATE = """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.last and system_message is defined %}
            {{- '[INST] ' + system_message + '\\n\\n' + message['content'] + '[/INST]' }}
        {%- else %}
            {{- '[INST] ' + message['content'] + '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token }}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported!') }}
    {%- endif %}
{%- endfor %}"""

# Small shapes; initializer_range is raised from transformers' 0.02 so a random model's logits
# have clear winners and greedy decoding is not decided by float rounding between near-ties.
_COMMON = dict(
    vocab_size=2048,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=256,
    initializer_range=0.2,
    bos_token_id=1,
    eos_token_id=2,
)
ARCH_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": dict(num_key_value_heads=2, tie_word_embeddings=False),
    "qwen2": dict(num_key_value_heads=1, tie_word_embeddings=True),
    "mistral": dict(num_key_value_heads=2, sliding_window=8, tie_word_embeddings=False),
}
TEMPLATES = {"llama": LLAMA3_TEMPLATE, "qwen2": CHATML_TEMPLATE, "mistral": MISTRAL_TEMPLATE}


def read_prompts() -> list[str]:
    """The eight prompts of tests/data/prompts.txt (3 to 28 tokens)."""
    return [line for line in PROMPTS_FILE.read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture(scope="session")
def tinystories_dir() -> Path:
    """The real checkpoint; the test fails (never skips) if it is missing."""
    if not (TINYSTORIES / "config.json").is_file():
        pytest.fail(f"test checkpoint missing: {TINYSTORIES.resolve()}")
    return TINYSTORIES.resolve()


def build_tiny_checkpoint(
    out_dir: Path,
    arch: str,
    *,
    dtype: str = "float32",
    seed: int = 0,
    save_kwargs: dict[str, Any] | None = None,
    **overrides: Any,
) -> Path:
    """Save a random ``arch`` model ("llama" / "qwen2" / "mistral") with the tinystories
    tokenizer and a chat template in ``out_dir``; return ``out_dir``."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config

    config_cls = {"llama": LlamaConfig, "qwen2": Qwen2Config, "mistral": MistralConfig}[arch]
    config = config_cls(**{**_COMMON, **ARCH_DEFAULTS[arch], **overrides})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).to(getattr(torch, dtype))
    if arch == "qwen2":  # random q/k/v biases (transformers initialises them to zero)
        with torch.no_grad():
            for layer in model.model.layers:
                for proj in (
                    layer.self_attn.q_proj,
                    layer.self_attn.k_proj,
                    layer.self_attn.v_proj,
                ):
                    proj.bias.normal_(0.0, 0.5)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, **(save_kwargs or {}))
    for name in ("tokenizer.json", "special_tokens_map.json"):
        shutil.copy(TINYSTORIES / name, out_dir / name)
    tok_config = json.loads((TINYSTORIES / "tokenizer_config.json").read_text())
    if arch == "llama":  # transformers 5 style: the template in its own file
        (out_dir / "chat_template.jinja").write_text(TEMPLATES[arch])
    elif arch == "qwen2":  # named templates: default + tool_use
        tok_config["chat_template"] = [
            {"name": "default", "template": TEMPLATES[arch]},
            {"name": "tool_use", "template": TEMPLATES[arch].replace("helpful", "a tool user")},
        ]
    else:
        tok_config["chat_template"] = TEMPLATES[arch]
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2))
    return out_dir


@pytest.fixture(scope="session")
def tiny_checkpoint(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[..., Path]:
    """Factory ``tiny_checkpoint(arch, **config_overrides) -> dir``, cached per arguments."""
    cache: dict[str, Path] = {}

    def make(arch: str, **overrides: Any) -> Path:
        key = json.dumps([arch, sorted(overrides.items(), key=str)], default=str)
        if key not in cache:
            out = tmp_path_factory.mktemp(f"tiny-{arch}")
            cache[key] = build_tiny_checkpoint(out, arch, **overrides)
        return cache[key]

    return make


@pytest.fixture(scope="session")
def prompts() -> list[str]:
    """tests/data/prompts.txt."""
    return read_prompts()


_HF_MODELS: dict[str, Any] = {}


def hf_greedy(model_dir: Path, prompt_ids: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """transformers' greedy continuation of each prompt, one prompt at a time (no padding).

    Generation stops at the model's EOS like ours; the EOS id stays in the output.
    """
    import torch
    from transformers import AutoModelForCausalLM

    key = str(model_dir)
    if key not in _HF_MODELS:
        _HF_MODELS[key] = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model = _HF_MODELS[key]
    outs = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # see _one_torch_thread; this also runs in module-scoped fixtures
    try:
        with torch.no_grad():
            for ids in prompt_ids:
                out = model.generate(
                    torch.tensor([ids]),
                    attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=0,
                )
                outs.append(out[0, len(ids) :].tolist())
    finally:
        torch.set_num_threads(threads)
    return outs


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Run torch single-threaded in engine tests (restored afterwards).

    Tiny models gain nothing from intra-op threads, and on a loaded 2-core machine the thread
    hand-offs made each decode step ~40x slower. Torch-free tests (block manager, scheduler)
    are left alone: torch is only touched if a test module already imported it.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def prefill_logits(
    model: Any,
    config: Any,
    ids: list[int],
    *,
    block_size: int = 16,
    block_table: list[int] | None = None,
) -> Any:
    """Logits ``[len(ids), vocab]`` of one prefill of ``ids`` through ``model``, on a scratch pool.

    ``block_table`` (block ids, ``-1`` padding) defaults to blocks ``0, 1, ...`` in order; a
    shuffled one exercises the paged layout. The pool holds ``max(block_table) + 1`` blocks of
    ``block_size`` tokens in the model's dtype (its final norm's).
    """
    import torch

    from promptcache.engine.attention.base import AttnMetadata, KVCacheLayer

    n = len(ids)
    table = list(range(-(-n // block_size))) if block_table is None else block_table
    used = [b for b in table if b >= 0]
    shape = (max(used) + 1, block_size, config.num_key_value_heads, config.head_dim)
    dtype = model.norm.weight.dtype
    kv = [
        KVCacheLayer(torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype))
        for _ in range(config.num_hidden_layers)
    ]
    slots = [used[i // block_size] * block_size + i % block_size for i in range(n)]
    meta = AttnMetadata(
        phase="prefill",
        slot_mapping=torch.tensor(slots),
        block_tables=torch.tensor([table], dtype=torch.int32),
        context_lens=torch.tensor([n], dtype=torch.int32),
        cu_seqlens_q=torch.tensor([0, n], dtype=torch.int32),
        num_computed_tokens=torch.tensor([0], dtype=torch.int32),
        max_seqlen_q=n,
        max_seqlen_k=n,
    )
    with torch.inference_mode():
        return model.compute_logits(model(torch.tensor(ids), torch.arange(n), kv, meta))


def batch_metadata(
    phase: str,
    slots: list[int],
    tables: list[list[int]],
    cached: list[int],
    new_lens: list[int],
) -> Any:
    """The ``AttnMetadata`` of sequences with ``cached`` tokens in the pool and ``new_lens`` new
    ones at pool slots ``slots`` (in batch order), held in blocks ``tables``."""
    import torch

    from promptcache.engine.attention.base import AttnMetadata

    total = [c + n for c, n in zip(cached, new_lens, strict=True)]
    width = max(len(t) for t in tables)
    return AttnMetadata(
        phase=phase,
        slot_mapping=torch.tensor(slots, dtype=torch.int64),
        block_tables=torch.tensor([t + [-1] * (width - len(t)) for t in tables], dtype=torch.int32),
        context_lens=torch.tensor(total, dtype=torch.int32),
        cu_seqlens_q=torch.tensor(
            [0, *torch.tensor(new_lens).cumsum(0).tolist()], dtype=torch.int32
        ),
        num_computed_tokens=torch.tensor(cached, dtype=torch.int32),
        max_seqlen_q=max(new_lens),
        max_seqlen_k=max(total),
    )
