"""The official ``openai`` client against the engine server: same text as the Python API,
streamed or not; usage with cached tokens; n > 1; logprobs; models, health and metrics."""

from __future__ import annotations

import threading
import time

import httpx
import openai
import pytest
from server_support import (
    BLOCK_SIZE,
    CHAT_TEMPLATE,
    LONG_PROMPT,
    MODEL_NAME,
    LiveServer,
    Server,
    load_engine,
)

from promptcache.engine import LLM, SamplingParams
from promptcache.engine.server import create_app

PROMPTS = ["Once upon a time", "The little dog was", "Tom and Sue went to the park. They"]


def _stream_completion(client: openai.OpenAI, **kwargs: object) -> tuple[str, str | None, object]:
    """(joined text, finish_reason, usage) of a streamed completion with one choice."""
    text, finish, usage = "", None, None
    for chunk in client.completions.create(stream=True, **kwargs):  # type: ignore[call-overload]
        for choice in chunk.choices:
            text += choice.text
            finish = choice.finish_reason or finish
        usage = chunk.usage or usage
    return text, finish, usage


@pytest.mark.parametrize("prompt", PROMPTS)
def test_completion_text_equals_python_api_streamed_or_not(
    client: openai.OpenAI, reference: LLM, prompt: str
) -> None:
    [expected] = reference.generate(prompt, SamplingParams(temperature=0, max_tokens=24))
    plain = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=24, temperature=0)
    streamed, finish, _ = _stream_completion(
        client, model=MODEL_NAME, prompt=prompt, max_tokens=24, temperature=0
    )
    assert plain.choices[0].text == expected.text
    assert streamed == expected.text
    assert plain.choices[0].finish_reason == finish == expected.finish_reason
    assert plain.usage is not None
    assert plain.usage.prompt_tokens == expected.num_prompt_tokens
    assert plain.usage.completion_tokens == len(expected.output_token_ids)


def test_stop_string_cut_the_same_way_streamed_or_not(
    client: openai.OpenAI, reference: LLM
) -> None:
    params = SamplingParams(temperature=0, max_tokens=40, stop=["Lily"])
    [expected] = reference.generate("Once upon a time", params)
    assert expected.finish_reason == "stop"  # the story names Lily within 40 tokens
    kwargs = {"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 40}
    plain = client.completions.create(temperature=0, stop=["Lily"], **kwargs)  # type: ignore[arg-type]
    streamed, finish, _ = _stream_completion(client, temperature=0, stop=["Lily"], **kwargs)
    assert plain.choices[0].text == streamed == expected.text
    assert "Lily" not in streamed
    assert finish == "stop"


def test_chat_text_equals_python_api_streamed_or_not(client: openai.OpenAI, reference: LLM) -> None:
    messages = [{"role": "user", "content": "Tell me a story about a cat."}]
    rendered = reference.tokenizer.apply_chat_template(messages)
    ids = reference.tokenizer.encode(rendered, add_special_tokens=False)
    [expected] = reference.generate([ids], SamplingParams(temperature=0, max_tokens=20))
    plain = client.chat.completions.create(
        model=MODEL_NAME,
        messages=messages,  # type: ignore[arg-type]
        max_tokens=20,
        temperature=0,
    )
    chunks = list(
        client.chat.completions.create(
            model=MODEL_NAME,
            messages=messages,  # type: ignore[arg-type]
            max_tokens=20,
            temperature=0,
            stream=True,
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert plain.choices[0].message.content == streamed == expected.text
    assert plain.choices[0].message.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == plain.choices[0].finish_reason == "length"
    assert plain.usage is not None and plain.usage.prompt_tokens == len(ids)


def test_repeated_prompt_reports_cached_tokens(client: openai.OpenAI) -> None:
    prompt = "Ben's turn. " + LONG_PROMPT  # a first block no other test sends: cold first call
    first = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=4, temperature=0)
    second = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=4, temperature=0)
    assert first.usage is not None and second.usage is not None
    assert first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details
    assert cached is not None and cached.cached_tokens is not None
    # Full blocks only, and the last prompt token is always recomputed.
    assert cached.cached_tokens == (second.usage.prompt_tokens - 1) // BLOCK_SIZE * BLOCK_SIZE
    assert cached.cached_tokens > 0
    assert second.choices[0].text == first.choices[0].text


def test_stream_include_usage_sends_a_last_usage_chunk(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": LONG_PROMPT + " laughed."}]

    def run() -> list[object]:
        return list(
            client.chat.completions.create(
                model=MODEL_NAME,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=5,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            )
        )

    cold, warm = run(), run()
    for chunks in (cold, warm):
        *body, last = chunks
        assert all(c.usage is None and c.choices for c in body)  # type: ignore[attr-defined]
        assert last.choices == [] and last.usage is not None  # type: ignore[attr-defined]
        assert last.usage.completion_tokens == 5  # type: ignore[attr-defined]
    cold_usage, warm_usage = cold[-1].usage, warm[-1].usage  # type: ignore[attr-defined]
    assert cold_usage.total_tokens == cold_usage.prompt_tokens + 5
    assert cold_usage.prompt_tokens_details.cached_tokens == 0
    assert warm_usage.prompt_tokens_details.cached_tokens > 0
    without = list(
        client.completions.create(
            model=MODEL_NAME, prompt="Hi", max_tokens=3, temperature=0, stream=True
        )
    )
    assert all(c.usage is None for c in without)


def test_n_samples_match_python_api_and_share_one_prefill(
    client: openai.OpenAI, reference: LLM, server: Server
) -> None:
    params = SamplingParams(n=3, temperature=0.9, seed=11, max_tokens=12)
    expected = reference.generate(LONG_PROMPT, params)
    queries = "promptcache_engine_prefix_cache_queries_tokens_total"
    before = server.wait_idle()[queries]
    reply = client.completions.create(
        model=MODEL_NAME, prompt=LONG_PROMPT, n=3, temperature=0.9, seed=11, max_tokens=12
    )
    # One sequence was admitted (its prompt looked up once), then forked into 3 samples that
    # share its blocks: three separate requests would have looked the prompt up three times.
    assert server.wait_idle()[queries] - before == expected[0].num_prompt_tokens
    assert [c.index for c in reply.choices] == [0, 1, 2]
    assert [c.text for c in reply.choices] == [e.text for e in expected]
    assert len({c.text for c in reply.choices}) > 1  # seed + sample index: samples differ
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == expected[0].num_prompt_tokens
    assert reply.usage.completion_tokens == sum(len(e.output_token_ids) for e in expected)
    streamed: dict[int, str] = {}
    for chunk in client.completions.create(
        model=MODEL_NAME,
        prompt=LONG_PROMPT,
        n=3,
        temperature=0.9,
        seed=11,
        max_tokens=12,
        stream=True,
    ):
        for choice in chunk.choices:
            streamed[choice.index] = streamed.get(choice.index, "") + choice.text
    assert [streamed[i] for i in range(3)] == [e.text for e in expected]


def test_prompt_batch_numbers_choices_by_prompt_then_sample(
    client: openai.OpenAI, reference: LLM
) -> None:
    expected = reference.generate(PROMPTS[:2], SamplingParams(temperature=0, max_tokens=6, n=2))
    reply = client.completions.create(
        model=MODEL_NAME, prompt=PROMPTS[:2], max_tokens=6, temperature=0, n=2
    )
    assert [c.index for c in reply.choices] == [0, 1, 2, 3]
    assert [c.text for c in reply.choices] == [e.text for e in expected]
    token_prompt = reference.tokenizer.encode(PROMPTS[0])
    by_ids = client.completions.create(
        model=MODEL_NAME, prompt=token_prompt, max_tokens=6, temperature=0, echo=True
    )
    assert by_ids.choices[0].text.endswith(expected[0].text)
    assert by_ids.choices[0].text.startswith(PROMPTS[0])


def test_logprobs_have_the_openai_shapes(client: openai.OpenAI) -> None:
    chat = client.chat.completions.create(
        model=MODEL_NAME,
        messages=[{"role": "user", "content": "Hello"}],
        max_tokens=6,
        temperature=0,
        logprobs=True,
        top_logprobs=3,
    )
    content = chat.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content is not None and len(content) == 6
    for entry in content:
        assert len(entry.top_logprobs) == 3
        # greedy: the chosen token is the most likely one
        assert entry.logprob == pytest.approx(entry.top_logprobs[0].logprob)
        assert entry.bytes == list(entry.token.encode())
    assert "".join(e.token for e in content) == chat.choices[0].message.content
    legacy = client.completions.create(
        model=MODEL_NAME, prompt="Once upon a time", max_tokens=5, temperature=0, logprobs=2
    )
    lp = legacy.choices[0].logprobs
    assert lp is not None and lp.tokens is not None and lp.top_logprobs is not None
    assert len(lp.tokens) == len(lp.top_logprobs) == 5
    assert all(len(top) <= 2 for top in lp.top_logprobs)
    assert "".join(lp.tokens) == legacy.choices[0].text
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(5)]


def test_models_health_and_metrics(client: openai.OpenAI, server: Server) -> None:
    assert [m.id for m in client.models.list().data] == [MODEL_NAME]
    assert client.models.retrieve(MODEL_NAME).id == MODEL_NAME
    assert httpx.get(f"{server.url}/health").json() == {"status": "ok"}
    before = server.metrics()
    client.completions.create(model=MODEL_NAME, prompt=LONG_PROMPT, max_tokens=3, temperature=0)
    client.completions.create(model=MODEL_NAME, prompt=LONG_PROMPT, max_tokens=3, temperature=0)
    after = server.wait_idle()
    hits = "promptcache_engine_prefix_cache_hits_tokens_total"
    queries = "promptcache_engine_prefix_cache_queries_tokens_total"
    assert after[hits] > before[hits]
    assert after[queries] > before[queries]
    assert (
        after["promptcache_engine_ttft_seconds_count"]
        >= before.get("promptcache_engine_ttft_seconds_count", 0) + 2
    )
    assert after["promptcache_engine_inter_token_latency_seconds_count"] > 0
    assert after["promptcache_engine_requests_total{outcome=finished}"] >= 2
    assert after["promptcache_engine_kv_cache_usage_ratio"] == 0
    assert after["promptcache_engine_kv_cache_bytes"] > 0
    for name in ("preemptions_total", "swapped_sequences", "generation_tokens_total"):
        assert f"promptcache_engine_{name}" in after


def test_a_queued_streamed_chat_sends_no_byte_before_its_first_token() -> None:
    """The role chunk waits for the first token (as vLLM's does), so a proxy timing the first
    body byte (promptcache proxy's ``ttft_ms``) measures time to first token, not time to an
    empty chunk. With one sequence slot, request B waits in the queue while A generates 120
    tokens: B's first byte may not arrive before most of A's stream has (a role chunk sent at
    once would arrive after A's first few events). Half of A's events is the bar, not its last
    byte: A's and B's reading threads see the end of A and the start of B in either order when
    the machine is loaded."""
    engine = load_engine(max_num_seqs=1)
    app = create_app(engine, served_model_names=[MODEL_NAME], chat_template=CHAT_TEMPLATE)

    def body(max_tokens: int) -> dict[str, object]:
        return {
            "model": MODEL_NAME,
            "messages": [{"role": "user", "content": "Once upon a time"}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
        }

    with LiveServer(app) as live:
        url = f"{live.url}/v1/chat/completions"
        a_started = threading.Event()
        a_done: list[float] = []
        a_events: list[tuple[float, int]] = []  # (arrival, events received so far)

        def run_a() -> None:
            seen = 0
            with httpx.stream("POST", url, json=body(120), timeout=60) as response:
                for n, chunk in enumerate(response.iter_bytes()):
                    seen += chunk.count(b"data: ")
                    a_events.append((time.perf_counter(), seen))
                    if n == 0:
                        a_started.set()
            a_done.append(time.perf_counter())

        thread = threading.Thread(target=run_a)
        thread.start()
        assert a_started.wait(60), "request A never streamed"
        with httpx.stream("POST", url, json=body(2), timeout=60) as response:
            assert response.status_code == 200
            chunks = response.iter_bytes()
            first = next(chunks)
            b_first_byte = time.perf_counter()
            rest = b"".join(chunks)
        thread.join(60)
    assert a_done, "request A did not finish"
    total = a_events[-1][1]
    assert total >= 120  # a role event, 120 token events, [DONE]
    half_of_a = next(t for t, seen in a_events if seen >= total // 2)
    assert b_first_byte >= half_of_a
    events = [line for line in (first + rest).split(b"\n") if line.startswith(b"data: ")]
    assert b'"role":"assistant"' in events[0] and events[-1] == b"data: [DONE]"
