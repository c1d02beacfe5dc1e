"""A request whose tool list is reordered by the hash seed while a later system message also
changes (a random draw) is read as the reordering it is, in one perturbed run with every kind
changed: real child processes through the official openai client (programs/mixed_breakers.py)."""

from __future__ import annotations

from pathlib import Path

from check_support import by_function, check_program, check_source

from promptcache.check.output import render_text


def test_a_reordered_tool_list_beside_a_random_change_is_both_breakers(tmp_path: Path) -> None:
    result, _ = check_program(tmp_path, "mixed_breakers.py")
    found: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}
    for finding in by_function(result)["ask"]:
        assert finding.site is not None and finding.site.callers
        found.setdefault(finding.site.callers[0][2], []).append(
            (finding.rule, finding.path, finding.causes)
        )
    assert {k: sorted(v) for k, v in found.items()} == {
        # the first difference is the tools' order; the whole request's segments are not the
        # same multiset (the system message changed too), yet the tool list alone is. The
        # random draw in the system message after it is a cache breaker of its own: fixing the
        # tool order alone would still leave a prefix that changes on every run
        "set_tools_and_random_system": [
            ("PC002", "messages[0].content", ("random",)),
            ("PC005", "tools[0].function.name", ("hash_seed",)),
        ],
        # the look-alike: the same tools sorted, so only the random draw differs
        "sorted_tools_and_random_system": [("PC002", "messages[0].content", ("random",))],
    }
    [reordered] = [f for f in result.findings if f.rule == "PC005"]
    assert "the tool list is in another order" in reordered.message


def test_a_set_s_order_beside_a_time_in_one_message_is_found_too(tmp_path: Path) -> None:
    # one system message holds the time and then names from a set: the time was PC001, and the
    # reordered names, not the same words as the whole message, were PC002 "caused by random"
    # (merged into the PC002 of an id when the message held one too: examples/lint_app)
    result, _ = check_program(tmp_path, "mixed_breakers.py")
    found: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for finding in by_function(result)["tell"]:
        assert finding.site is not None and finding.site.callers
        found.setdefault(finding.site.callers[0][2], []).append((finding.rule, finding.causes))
    assert {k: sorted(v) for k, v in found.items()} == {
        "time_and_set_in_system": [("PC001", ("clock",)), ("PC004", ("hash_seed",))],
        # the look-alike: the names sorted, only the time differs
        "time_and_sorted_set_in_system": [("PC001", ("clock",))],
    }
    [order] = [f for f in result.findings if f.rule == "PC004"]
    assert "messages[0].content is in another order" in order.message


SET_TOOLS = """
import os, httpx
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
names = {"read_file", "write_file", "list_dir", "grep", "run_tests"}
tools = [{"type": "function", "function": {"name": n, "description": "A tool. " * 100}}
         for n in names]
for turn in range(2):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "go"}]
    body = {"model": "gpt-4o-mini", "tools": tools, "messages": messages}
    httpx.post(url, json=body, timeout=30)
"""


def test_one_tool_list_in_other_orders_is_one_finding_over_the_runs(tmp_path: Path) -> None:
    # each run's hash seed gives the set another order, which first differs from run 0's at
    # another position (tools[0] in one run, tools[1] in another): still one tool list from one
    # set, so one finding seen in every perturbed run, not one per position
    result = check_source(tmp_path, "set_tools.py", SET_TOOLS, runs=4)
    firsts = {
        run.perturbation.run: next(
            i
            for i, tool in enumerate(run.requests[0].json_body["tools"])
            if tool != result.runs[0].requests[0].json_body["tools"][i]
        )
        for run in result.runs[1:]
    }
    assert len(set(firsts.values())) > 1, firsts  # the orders first differ at other positions
    assert [(f.rule, f.causes, f.requests, f.seen_in) for f in result.findings] == [
        ("PC005", ("hash_seed",), 6, (1, 2, 3))
    ]
    assert result.findings[0].moved_in == "tools"


TIME_EVERYWHERE = """
import os, time, httpx
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
history = [{"role": "system", "content": f"Now {time.strftime('%H:%M:%S')}. " + "Rules. " * 600}]
for question in ("one", "two", "three"):
    history.append({"role": "user", "content": f"[{time.strftime('%H:%M:%S')}] {question}"})
    body = {"model": "gpt-4o-mini", "messages": history}
    reply = httpx.post(url, json=body, timeout=30).json()["choices"][0]["message"]["content"]
    history.append({"role": "assistant", "content": reply})
"""


def test_the_questions_carried_as_history_after_a_time_in_the_system_are_not_reported(
    tmp_path: Path,
) -> None:
    # every later differing segment is judged on its own, but each question's time was the
    # dynamic tail when it was asked: carried as history in the next turn (after the system
    # prompt's own time) it is that excused difference again, not a finding
    result = check_source(tmp_path, "time_everywhere.py", TIME_EVERYWHERE)
    assert [(f.rule, f.path, f.causes, f.requests) for f in result.findings] == [
        ("PC001", "messages[0].content", ("clock",), 3)
    ]


TIME_IN_EVERY_TURN = """
import os, time, httpx
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
history = [{"role": "system", "content": "Rules. " * 1200}]
for question in ("one", "two", "three", "four"):
    body = {"model": "gpt-4o-mini", "messages": [*history, {"role": "user", "content": question}]}
    reply = httpx.post(url, json=body, timeout=30).json()["choices"][0]["message"]["content"]
    # the turn is stored with the time it was asked: each run writes other history
    history.append({"role": "user", "content": f"[{time.strftime('%H:%M:%S')}] {question}"})
    history.append({"role": "assistant", "content": reply})
"""


def test_a_time_in_every_stored_turn_is_one_finding_not_one_per_message(tmp_path: Path) -> None:
    # the later differing segments of a request are read too, but the same rule and cause
    # again in a later message is the same bug (one line stores every turn), not one
    # finding per message the conversation has by then
    result = check_source(tmp_path, "time_in_every_turn.py", TIME_IN_EVERY_TURN)
    assert [(f.rule, f.path, f.causes, f.requests) for f in result.findings] == [
        ("PC001", "messages[1].content", ("clock",), 3)
    ]


RAG_QUESTIONS = """
import math, os, httpx
base = os.environ["OPENAI_BASE_URL"]
POLICY = " ".join(f"Rule {i}: answer only from the context and cite its title." for i in range(60))
DOCS = {
    "Refunds": "A refund is issued within 30 days of purchase to the original card. " * 6,
    "Shipping": "Standard shipping takes 3-5 days; express takes 1-2 days for $15. " * 6,
    "Warranty": "Devices carry a two-year warranty for manufacturing defects. " * 6,
    "Accounts": "Reset a password from the login page; use two-factor sign-in. " * 6,
    "Returns": "Return items in their original packaging with the label. " * 6,
}

def embed(texts):
    got = httpx.post(base + "/embeddings", json={"model": "text-embedding-3-small",
                     "input": texts, "encoding_format": "float"}, timeout=30).json()
    return [d["embedding"] for d in got["data"]]

vectors = dict(zip(DOCS, embed(list(DOCS.values()))))

def answer(question, titles):
    [q] = embed([question])
    # the titles whose cosine passes a threshold (every one here), in a set: the bug, its
    # order follows the hash seed
    picked = {t for t in titles if sum(a * b for a, b in zip(q, vectors[t])) > -2}
    context = "\\n\\n".join(f"## {t}\\n{DOCS[t]}" for t in picked)
    system = f"You are a support assistant.\\n{POLICY}\\n\\nContext:\\n{context}"
    body = {"model": "gpt-4o-mini", "messages": [
        {"role": "system", "content": system}, {"role": "user", "content": question}]}
    return httpx.post(base + "/chat/completions", json=body, timeout=30)

for question, titles in [("How long does shipping take?", ["Accounts", "Warranty", "Shipping"]),
                         ("How much is express shipping?", ["Returns", "Shipping", "Accounts"])]:
    answer(question, titles)
"""


def test_two_questions_after_a_reordered_context_are_paired_by_their_questions(
    tmp_path: Path,
) -> None:
    # a RAG script asks two questions from one call site; the documents of each are joined in
    # a set's order, so every system message differs between the runs. Run 0's first request
    # was compared with run 1's second when that one's system text changed fewer characters
    # (the contexts differ in length), and the reordering read as an unexplained PC002; each
    # request is now compared with the one that asked the same question
    result = check_source(tmp_path, "rag_questions.py", RAG_QUESTIONS)
    assert [(f.rule, f.path, f.causes, f.requests) for f in result.findings] == [
        ("PC004", "messages[0].content", ("hash_seed",), 2)
    ]
    [run0, run1] = result.runs
    # 2 chats, 1 embedding of the 5 documents, 1 of each question: all answered
    assert len(run0.requests) == len(run1.requests) == 5
    assert {r.status for r in run0.requests + run1.requests} == {200}
    # the text report's run lines count the embeddings apart from the chats
    counted = "2 LLM request(s) and 3 other request(s) (no prompt to compare) captured"
    text = render_text(result)
    assert f"run 0: baseline; {counted} in " in text
    assert text.count(counted) == 2
