"""``promptcache engine serve`` / ``kv-size`` start-up checks a new user hits.

Bad settings end in one clear line and exit status 2, never a traceback and never a server that
answers every request with an error. These tests drive the real CLI (click's CliRunner, or a
subprocess where the environment must differ) against the real tinystories checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch  # noqa: F401 (loaded up front so the autouse fixture restores its threads)
from click.testing import CliRunner, Result

from promptcache.cli import cli
from promptcache.engine import EngineConfig
from promptcache.engine.model_config import SHAPE_LIMITS
from promptcache.errors import ConfigError

PROMPTCACHE = Path(sys.executable).with_name("promptcache")


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["engine", *args])


def _assert_clean_error(result: Result, *needles: str) -> str:
    """Exit 2 with a message holding every needle, and no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in result.output, result.output
    return result.output


def _serve(model: Path, *args: str) -> Result:
    return _invoke("serve", "--model", str(model), "--threads", "1", *args)


def _run_cli(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PROMPTCACHE), "engine", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def _env_without(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}


# 1. Settings that could never serve ----------------------------------------------------------


def test_triton_backend_on_a_cpu_is_refused_unless_the_interpreter_is_on(
    tinystories_dir: Path,
) -> None:
    env = _env_without("TRITON_INTERPRET")
    args = ("serve", "--model", str(tinystories_dir), "--threads", "1")
    refused = _run_cli(*args, "--attention-backend", "triton", env=env)
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert "attention_backend='triton' runs its kernels on CUDA" in refused.stderr
    assert "--attention-backend torch" in refused.stderr
    assert "TRITON_INTERPRET=1" in refused.stderr
    # Under the interpreter (as the test suite runs it) the backend passes this check: start-up
    # goes on to the next one, here an impossible KV pool, checked right after it.
    interpreted = _run_cli(
        *args, "--attention-backend", "triton", "--kv-cache-bytes", "1024TiB",
        env={**env, "TRITON_INTERPRET": "1"},
    )  # fmt: skip
    assert interpreted.returncode == 2, interpreted.stderr
    assert "triton" not in interpreted.stderr
    assert "the KV cache would take" in interpreted.stderr


@pytest.mark.parametrize("device", ["meta", "mps", "cuda:x", "CPU"])
def test_devices_the_engine_cannot_run_on_are_refused(tinystories_dir: Path, device: str) -> None:
    result = _serve(tinystories_dir, "--device", device)
    _assert_clean_error(result, "error: device must be 'cpu', 'cuda' or 'cuda:<index>'", device)
    with pytest.raises(ConfigError, match="device must be"):
        EngineConfig(device=device)
    EngineConfig(device="cuda:1")  # a valid spelling; whether the GPU exists is checked at load


# 2. Tracebacks --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "what"),
    [("--kv-cache-bytes", "the KV cache"), ("--swap-space", "the CPU swap pool")],
)
def test_a_pool_larger_than_the_machine_is_a_one_line_error(
    tinystories_dir: Path, option: str, what: str
) -> None:
    result = _serve(tinystories_dir, option, "1024TiB")
    _assert_clean_error(result, f"error: {what} would take 1,125,899,906,842,624 bytes", option)
    for absurd in ("99999999999999TiB", "9" * 400):
        too_big = _serve(tinystories_dir, option, absurd)
        _assert_clean_error(too_big, "more bytes than any machine has", option)


def test_a_disk_tier_budget_of_no_bytes_names_its_option(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    for size in ("0", "0.4"):
        result = _serve(tinystories_dir, "--kv-disk", str(tmp_path), "--kv-disk-bytes", size)
        _assert_clean_error(result, "--kv-disk-bytes", "is 0 bytes; give at least 1")


def test_a_disk_tier_budget_without_a_disk_tier_is_refused(tinystories_dir: Path) -> None:
    """``--kv-disk-bytes`` alone would be ignored: it names the option it needs instead."""
    result = _serve(tinystories_dir, "--kv-disk-bytes", "1GiB")
    _assert_clean_error(result, "--kv-disk-bytes", "add --kv-disk DIR")


def _available_memory() -> int:
    """MemAvailable in bytes (Linux), which the engine's up-front size check compares with."""
    with open("/proc/meminfo", encoding="ascii") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
@pytest.mark.parametrize(
    ("option", "what"),
    [("--kv-cache-bytes", "the KV cache"), ("--swap-space", "the CPU swap pool")],
)
def test_an_allocation_the_allocator_refuses_is_a_one_line_error(
    tinystories_dir: Path, option: str, what: str
) -> None:
    # 4 GiB fits this machine's free RAM, so only the allocator can refuse it: the child caps its
    # address space at 512 MiB above what it uses once torch and the engine are imported, and
    # each of the pool's 4 tensors (K and V of 2 layers) takes 1 GiB.
    if _available_memory() < 8 * 2**30:
        pytest.skip("needs 8 GiB of free RAM, so that a 4 GiB pool passes the up-front check")
    code = (
        "import resource, sys\n"
        "import torch, torch._dynamo, uvicorn, starlette\n"
        "import promptcache.engine.server, promptcache.engine.llm_engine\n"
        "from promptcache.cli import main\n"
        "used = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (used + 2**29, used + 2**29))\n"
        "main(sys.argv[1:])\n"
    )
    args = ["engine", "serve", "--model", str(tinystories_dir), "--threads", "1"]
    args += ["--kv-cache-bytes", "1MiB", option, "4GiB"]  # the swap pool's case: a small KV pool
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "enforce fail" not in proc.stderr
    assert f"could not allocate 4,294,967,296 bytes (4.0 GiB) for {what} on cpu" in proc.stderr
    assert f"({option})" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_hub_id_that_cannot_be_fetched_is_a_one_line_error(tmp_path: Path) -> None:
    """huggingface_hub's messages span several lines ('Got: ConnectError: ...\nAn error
    happened while trying to locate the files on the Hub, ...'); the error quotes it on one."""
    with socket.socket() as probe:  # a port on this machine that nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    env = _env_without("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{closed}", HF_HUB_CACHE=str(tmp_path / "hub"))
    proc = _run_cli("serve", "--model", "promptcache-tests/absent-model", env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "error: cannot fetch 'promptcache-tests/absent-model' from the Hugging Face Hub" in (
        proc.stderr
    )
    assert "`hf download promptcache-tests/absent-model`" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize("threads", ["0", "1025", "99999999999"])
def test_threads_out_of_range_is_a_usage_error(tinystories_dir: Path, threads: str) -> None:
    result = _invoke("serve", "--model", str(tinystories_dir), "--threads", threads)
    _assert_clean_error(result, "--threads", "1<=x<=1024")


@pytest.mark.parametrize("path", ["", "  "])
def test_an_empty_kv_disk_path_names_the_flag(tinystories_dir: Path, path: str) -> None:
    """``--kv-disk ""`` (an unset shell variable) is refused before the model loads, naming the
    flag and what to pass, not the engine setting behind it."""
    output = _assert_clean_error(
        _serve(tinystories_dir, "--kv-disk", path), "--kv-disk", "directory", "leave --kv-disk out"
    )
    assert "kv_disk_dir" not in output


def test_kv_size_on_a_weights_file_says_to_pass_the_checkpoint(tinystories_dir: Path) -> None:
    result = _invoke("kv-size", "--model", str(tinystories_dir / "model.safetensors"))
    _assert_clean_error(result, "is not a config.json", "pass the checkpoint directory")


@pytest.fixture
def checkpoint_copy(tinystories_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tinystories_dir, tmp_path / "ckpt"))


def _edit_config(model_dir: Path, **changes: Any) -> Path:
    path = model_dir / "config.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw.update(changes)
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _positive(field: str) -> str:
    return f"{field} must be a positive integer at most {SHAPE_LIMITS[field]}, got"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_attention_heads": 0}, f"{_positive('num_attention_heads')} 0"),
        ({"num_attention_heads": "abc"}, f"{_positive('num_attention_heads')} 'abc'"),
        ({"num_hidden_layers": {}}, f"{_positive('num_hidden_layers')} {{}}"),
        ({"num_hidden_layers": -2}, f"{_positive('num_hidden_layers')} -2"),
        ({"num_key_value_heads": 0}, f"{_positive('num_key_value_heads')} 0"),
        ({"hidden_size": True}, f"{_positive('hidden_size')} True"),
        ({"intermediate_size": -1}, f"{_positive('intermediate_size')} -1"),
        ({"vocab_size": 1.5}, f"{_positive('vocab_size')} 1.5"),
        ({"head_dim": 0}, f"{_positive('head_dim')} 0"),
        ({"max_position_embeddings": 0}, f"{_positive('max_position_embeddings')} 0"),
        ({"hidden_size": 100}, "hidden_size=100 is not a multiple of num_attention_heads=8"),
        ({"rms_norm_eps": "abc"}, "rms_norm_eps must be a number above 0 and below 1"),
        ({"rope_theta": "abc"}, "rope_theta must be a positive number, got 'abc'"),
        ({"rope_scaling": "linear"}, "rope_scaling must be an object or null, got 'linear'"),
        ({"eos_token_id": "x"}, "eos_token_id must be a token id"),
        ({"bos_token_id": -1}, "bos_token_id must be a token id"),
        ({"architectures": 5}, "architectures must be a list of class names"),
        ({"architectures": "GPT2LMHeadModel"}, "architecture ['GPT2LMHeadModel'] is not supported"),
    ],
)
def test_malformed_config_values_name_the_field_value_and_file(
    checkpoint_copy: Path, changes: dict[str, Any], message: str
) -> None:
    config = _edit_config(checkpoint_copy, **changes)
    for command in ("kv-size", "serve"):
        result = _invoke(command, "--model", str(checkpoint_copy))
        _assert_clean_error(result, f"error: {config}: {message}")


def test_a_lone_architecture_string_is_read_as_a_one_item_list(checkpoint_copy: Path) -> None:
    _edit_config(checkpoint_copy, architectures="LlamaForCausalLM")
    result = _invoke("kv-size", "--model", str(checkpoint_copy))
    assert result.exit_code == 0, result.output
    assert "(LlamaForCausalLM)" in result.output


# 7. Block size --------------------------------------------------------------------------------


def test_a_block_larger_than_max_model_len_is_refused(tinystories_dir: Path) -> None:
    result = _serve(tinystories_dir, "--block-size", "100000")
    _assert_clean_error(
        result, "block_size=100000 is larger than max_model_len=512", "block_size to 512 or less"
    )
    explicit = _serve(tinystories_dir, "--max-model-len", "64", "--block-size", "128")
    _assert_clean_error(explicit, "block_size=128 is larger than max_model_len=64")
    # beyond the model's positions: the flag to lower and the most it takes
    beyond = _serve(tinystories_dir, "--max-model-len", "100000")
    _assert_clean_error(
        beyond, "max_model_len=100000 exceeds the 512 positions", "(--max-model-len) to 512 or less"
    )
    with pytest.raises(ConfigError, match="block_size=16 is larger than max_model_len=8"):
        EngineConfig(max_model_len=8)
    assert EngineConfig(max_model_len=16, block_size=16).max_blocks_per_seq() == 1


# 8. kv-size --budget validated as serve --kv-cache-bytes --------------------------------------


@pytest.mark.parametrize("budget", ["0", "1", "0.1", "16383"])
def test_kv_size_refuses_a_budget_serve_refuses(tinystories_dir: Path, budget: str) -> None:
    # tinystories: 1,024 B per token, so one 16-token block takes 16,384 B.
    kv_size = _invoke("kv-size", "--model", str(tinystories_dir), "--budget", budget)
    _assert_clean_error(kv_size, "--budget", "holds no KV block", "give at least 16,384 bytes")
    serve = _serve(tinystories_dir, "--kv-cache-bytes", budget)
    assert serve.exit_code == 2 and "Traceback" not in serve.output
    assert "holds no KV block" in serve.output or "kv_cache_bytes must be >= 1" in serve.output
    exact = _invoke("kv-size", "--model", str(tinystories_dir), "--budget", "16384", "--json")
    assert exact.exit_code == 0 and json.loads(exact.output)["budget_blocks"] == 1


# 10. Absurd shapes, RoPE parameters and eps in config.json ------------------------------------


def _both_commands_refuse(model_dir: Path, *needles: str) -> None:
    """kv-size and serve report the same one-line error (serve before loading any weight)."""
    for command in ("kv-size", "serve"):
        result = _invoke(command, "--model", str(model_dir))
        _assert_clean_error(result, *needles)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_hidden_layers", 10**29),  # was an OverflowError from [None] * num_layers
        ("num_hidden_layers", 10**12),  # was a MemoryError
        ("num_hidden_layers", 10**9),  # was ~8 GB allocated for a list of Nones
        *[(field, limit + 1) for field, limit in SHAPE_LIMITS.items()],
    ],
)
def test_shape_fields_above_their_limit_are_refused_before_any_allocation(
    checkpoint_copy: Path, field: str, value: int
) -> None:
    changes: dict[str, Any] = {field: value}
    if field == "sliding_window":
        changes["architectures"] = ["MistralForCausalLM"]
    if field == "original_max_position_embeddings":
        changes = {
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                field: value,
            }
        }
    config = _edit_config(checkpoint_copy, **changes)
    _both_commands_refuse(
        checkpoint_copy, f"error: {config}: ", "must be a positive integer at most", str(value)
    )


def test_shape_fields_at_their_limit_are_accepted(checkpoint_copy: Path) -> None:
    _edit_config(checkpoint_copy, num_hidden_layers=SHAPE_LIMITS["num_hidden_layers"])
    result = _invoke("kv-size", "--model", str(checkpoint_copy), "--budget", "1GiB")
    assert result.exit_code == 0, result.output
    assert "1024 layers" in result.output


_LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


@pytest.mark.parametrize(
    ("rope", "message"),
    [
        (
            {"rope_type": "llama3", "factor": 8},  # was a KeyError in serve
            "rope_type 'llama3' needs 'low_freq_factor', 'high_freq_factor', "
            "'original_max_position_embeddings' in rope_scaling",
        ),
        (
            {**_LLAMA3, "high_freq_factor": None},
            "rope_type 'llama3' needs 'high_freq_factor'",
        ),
        (
            {"rope_type": "linear", "factor": 1e308},  # was an OverflowError in serve
            "rope_scaling factor must be a number from 1 up to 1024, got 1e+308",
        ),
        ({"rope_type": "linear", "factor": 10**400}, "rope_scaling factor must be a number"),
        (
            {"rope_type": "dynamic", "factor": float("nan")},
            "rope_scaling factor must be a number from 1 up",
        ),
        (
            {"rope_type": "dynamic", "factor": float("inf")},
            "rope_scaling factor must be a number from 1 up",
        ),
        (
            {"rope_type": "linear", "factor": 0},
            "rope_scaling factor must be a number from 1 up to 1024",
        ),
        (
            {"rope_type": "linear", "factor": "2"},
            "rope_scaling factor must be a number from 1 up to 1024",
        ),
        ({"rope_type": "linear"}, "rope_type 'linear' needs 'factor'"),
        (
            {**_LLAMA3, "low_freq_factor": -1.0},
            "rope_scaling low_freq_factor must be a number above 0 and up to 1024, got -1.0",
        ),
        (
            {**_LLAMA3, "high_freq_factor": 1.0},
            "rope_scaling high_freq_factor (1) must be larger than low_freq_factor (1)",
        ),
        (
            {**_LLAMA3, "original_max_position_embeddings": 0},
            "rope_scaling original_max_position_embeddings must be a positive integer at most",
        ),
        (
            {"rope_type": "yarn", "factor": 4.0},
            "rope_type 'yarn' is not supported; supported: default, linear, dynamic, llama3",
        ),
    ],
)
def test_bad_rope_scaling_is_the_same_clean_error_in_kv_size_and_serve(
    checkpoint_copy: Path, rope: dict[str, Any], message: str
) -> None:
    config = _edit_config(checkpoint_copy, rope_scaling=rope)
    _both_commands_refuse(checkpoint_copy, f"error: {config}: {message}")


def test_bad_rope_parameters_in_the_transformers_5_dialect_are_refused(
    checkpoint_copy: Path,
) -> None:
    config = _edit_config(
        checkpoint_copy, rope_parameters={"rope_type": "llama3", "rope_theta": 5e5, "factor": 8}
    )
    _both_commands_refuse(checkpoint_copy, f"error: {config}: rope_type 'llama3' needs")


def test_complete_llama3_rope_scaling_is_accepted(checkpoint_copy: Path) -> None:
    _edit_config(checkpoint_copy, rope_scaling=_LLAMA3)
    result = _invoke("kv-size", "--model", str(checkpoint_copy))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("eps", [-1, 0, 0.0, 1, 5.0, float("nan"), float("inf"), 10**400])
def test_rms_norm_eps_must_be_a_small_positive_number(checkpoint_copy: Path, eps: Any) -> None:
    config = _edit_config(checkpoint_copy, rms_norm_eps=eps)
    _both_commands_refuse(
        checkpoint_copy, f"error: {config}: rms_norm_eps must be a number above 0 and below 1"
    )


# 11. Chat templates that are not UTF-8 or do not compile --------------------------------------

_NOT_UTF8 = b'{{ "caf\xe9" }}'
_HUGE_CONSTANT = "{{ 10 ** 5000 }}"  # jinja constant-folds it; codegen hits the digits limit


def test_a_chat_template_file_that_is_not_utf8_is_a_usage_error(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    template = tmp_path / "t.jinja"
    template.write_bytes(_NOT_UTF8)
    result = _serve(tinystories_dir, "--chat-template", str(template))
    _assert_clean_error(result, "--chat-template", f"{template} is not UTF-8 text")


def test_a_chat_template_that_fails_to_compile_is_a_usage_error(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    inline = _serve(tinystories_dir, "--chat-template", _HUGE_CONSTANT)
    _assert_clean_error(inline, "--chat-template", "the chat template does not compile")
    template = tmp_path / "t.jinja"
    template.write_text(_HUGE_CONSTANT, encoding="utf-8")
    from_file = _serve(tinystories_dir, "--chat-template", str(template))
    _assert_clean_error(from_file, f"{template}: the chat template does not compile")
    syntax = _serve(tinystories_dir, "--chat-template", "{% if %}")
    _assert_clean_error(syntax, "--chat-template", "the chat template does not compile")


def _tokenizer_config(model_dir: Path) -> Path:
    return model_dir / "tokenizer_config.json"


def test_a_model_chat_template_jinja_that_is_not_utf8_names_the_file(
    checkpoint_copy: Path,
) -> None:
    (checkpoint_copy / "chat_template.jinja").write_bytes(_NOT_UTF8)
    result = _serve(checkpoint_copy)
    _assert_clean_error(result, f"cannot read {checkpoint_copy / 'chat_template.jinja'}", "UTF-8")


def test_a_tokenizer_config_that_is_not_utf8_names_the_file(checkpoint_copy: Path) -> None:
    path = _tokenizer_config(checkpoint_copy)
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["chat_template"] = "PLACEHOLDER"
    path.write_bytes(json.dumps(raw).encode().replace(b"PLACEHOLDER", _NOT_UTF8))
    result = _serve(checkpoint_copy)
    _assert_clean_error(result, f"cannot read {path}: it is not UTF-8 text")


def test_a_tokenizer_config_template_that_fails_to_compile_names_the_file(
    checkpoint_copy: Path,
) -> None:
    path = _tokenizer_config(checkpoint_copy)
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["chat_template"] = _HUGE_CONSTANT
    path.write_text(json.dumps(raw), encoding="utf-8")
    result = _serve(checkpoint_copy)
    _assert_clean_error(result, f"error: {path}: the chat template does not compile")


# 12. kv-size applies serve's block-size rule --------------------------------------------------


def test_kv_size_refuses_a_block_larger_than_max_model_len_as_serve_does(
    tinystories_dir: Path,
) -> None:
    message = "block_size=100000 is larger than max_model_len=512"
    kv_size = _invoke("kv-size", "--model", str(tinystories_dir), "--block-size", "100000")
    _assert_clean_error(kv_size, message, "block_size to 512 or less")
    serve = _serve(tinystories_dir, "--block-size", "100000")
    _assert_clean_error(serve, message)
    largest = _invoke("kv-size", "--model", str(tinystories_dir), "--block-size", "512")
    assert largest.exit_code == 0, largest.output
    # A request longer than max_position_embeddings needs a longer max_model_len anyway.
    long = ("--tokens", "4096", "--block-size", "1024", "--budget", "1GiB")
    assert _invoke("kv-size", "--model", str(tinystories_dir), *long).exit_code == 0


def test_serve_and_kv_size_take_the_same_dtypes(tinystories_dir: Path) -> None:
    """One set of --dtype / --kv-cache-dtype values (engine/config.py) for both commands, and
    one bytes-per-token rule: kv-size --dtype bfloat16 halves fp32's, as serve would allocate."""
    from promptcache.commands.engine import engine_group

    def choices(command: str) -> dict[str, list[str]]:
        params = engine_group.commands[command].params
        return {
            p.name: list(p.type.choices)
            for p in params
            if p.name in ("dtype", "kv_cache_dtype") and hasattr(p.type, "choices")
        }

    assert choices("serve") == choices("kv-size")
    assert choices("serve")["kv_cache_dtype"] == ["auto", "float16", "float32", "int8", "fp8"]
    _assert_clean_error(_serve(tinystories_dir, "--kv-cache-dtype", "bfloat16"), "bfloat16")
    _assert_clean_error(
        _invoke("kv-size", "--model", str(tinystories_dir), "--kv-cache-dtype", "bfloat16"),
        "bfloat16",
    )

    def per_token(*args: str) -> int:
        result = _invoke("kv-size", "--model", str(tinystories_dir), "--json", *args)
        assert result.exit_code == 0, result.output
        return int(json.loads(result.output)["bytes_per_token"])

    assert per_token() == 2 * 2 * 4 * 16 * 4
    assert per_token("--dtype", "bfloat16") == per_token() // 2
    assert per_token("--dtype", "bfloat16", "--kv-cache-dtype", "int8") == per_token() // 4
    assert per_token("--kv-cache-dtype", "float16") == per_token() // 2
    text = _invoke("kv-size", "--model", str(tinystories_dir), "--kv-cache-dtype", "int8")
    assert "int8 (1 byte per element)" in text.output
    assert (
        "float32 (4 bytes per element)"
        in _invoke("kv-size", "--model", str(tinystories_dir)).output
    )
