"""A solver that talks with the model over a sample's history (invented)."""

import datetime
import time

from openai import OpenAI

from .messages import Message, State

client = OpenAI()


def _ask(messages):
    out = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": m.role, "content": m.content} for m in messages]
    )
    return out.choices[0].message.content


def browse(sample, doc):
    # the table of contents is told after the model's reply: a turn of the history, kept
    state = State([Message(**m) for m in sample["input"]])
    done = False
    while not done:
        output = _ask(state.messages)
        state.messages += [Message(role="assistant", content=output)]
        sections = set(doc.keys())
        state.messages += [Message(role="system", content=f"Table of contents: {sections}")]
        done = "DONE" in output


def chat(history, question):
    history.append({"role": "user", "content": question})
    reply = client.chat.completions.create(model="gpt-4o", messages=history)
    history.append({"role": "assistant", "content": reply.choices[0].message.content})
    history.append({"role": "system", "content": f"Checked at {datetime.datetime.now()}"})
    return history


def review(sample, doc):
    # the reply added with ``+=``, the notes with ``append`` and ``+``: turns of the history
    messages = [Message(**m) for m in sample["input"]]
    messages += [Message("assistant", _ask(messages))]
    messages.append(Message("system", f"Sections: {set(doc.keys())}"))
    messages = messages + [Message("system", f"Checked at {datetime.datetime.now()}")]
    return _ask(messages)


def browse_head(sample, doc):
    # the table of contents opens the list: the system prompt
    sections = set(doc.keys())
    messages = [Message(role="system", content=f"Table of contents: {sections}")]  # PC015: 69
    messages += [Message(**m) for m in sample["input"]]
    return _ask(messages)


def chat_head(history, question):
    system = {"role": "system", "content": f"Now: {datetime.datetime.now()}"}  # PC001: 51
    return client.chat.completions.create(
        model="gpt-4o", messages=[system, *history, {"role": "user", "content": question}]
    )


def browse_first(sample, doc):
    # appended first, to an empty list: the head of the request
    messages = []
    sections = set(doc.keys())
    messages.append(Message("system", f"Table of contents: {sections}"))  # PC015: 60
    messages += [Message(**m) for m in sample["input"]]
    return _ask(messages)


def browse_example(sample, doc):
    # after a written example answer, not the model's reply: rebuilt for every request
    messages = [Message("user", "What is 2 + 2?")]
    messages.append(Message("assistant", "4"))
    sections = set(doc.keys())
    messages.append(Message("system", f"Table of contents: {sections}"))  # PC015: 60
    messages.append(Message("user", sample["question"]))
    return _ask(messages)


def browse_maybe(sample, doc, output):
    # the reply is appended only under a condition: it may not be there (and the question
    # follows the contents, so they are not the request's newest message either)
    messages = [Message(**m) for m in sample["input"]]
    if output:
        messages.append(Message(role="assistant", content=output))
    sections = set(doc.keys())
    messages.append(Message(role="system", content=f"Table of contents: {sections}"))  # PC015: 73
    messages.append(Message("user", sample["question"]))
    return _ask(messages)


def browse_other_list(sample, doc, output):
    # the reply went into another list (and the question follows the contents)
    messages = [Message(**m) for m in sample["input"]]
    notes = []
    notes.append(Message(role="assistant", content=output))
    sections = set(doc.keys())
    messages.append(Message(role="system", content=f"Table of contents: {sections}"))  # PC015: 73
    messages.append(Message("user", sample["question"]))
    return _ask(messages)


def countdown(task, deadline, steps):
    # the time left is told before each request, the reply appended after it: the list only
    # grows, so from the second pass on the note follows the last reply, and it stays where
    # it was written (the newest message of the request that first sends it)
    history = [{"role": "system", "content": "Solve the task."}, {"role": "user", "content": task}]
    for _ in range(steps):
        left = deadline - time.time()
        history.append({"role": "system", "content": f"You have {left:.2f} seconds left."})
        reply = client.chat.completions.create(model="gpt-4o", messages=history)
        history.append({"role": "assistant", "content": reply.choices[0].message.content})


def countdown_head(task, deadline, steps):
    # the same note rebuilt at the head of every request: the system prompt changes
    turns = [{"role": "user", "content": task}]
    for _ in range(steps):
        left = deadline - time.time()  # PC001: 15
        note = {"role": "system", "content": f"You have {left:.2f} seconds left."}
        reply = client.chat.completions.create(model="gpt-4o", messages=[note, *turns])
        turns.append({"role": "assistant", "content": reply.choices[0].message.content})


def countdown_cut(task, deadline, steps):
    # the list is cut to its newest turns on every pass: the note written once moves to the
    # head of the request and on, so the prefix is rewritten
    history = [{"role": "user", "content": task}]
    for _ in range(steps):
        history = history[-6:]  # PC016: 8
        left = deadline - time.time()  # PC001: 15
        history.append({"role": "system", "content": f"You have {left:.2f} seconds left."})
        reply = client.chat.completions.create(model="gpt-4o", messages=history)
        history.append({"role": "assistant", "content": reply.choices[0].message.content})


def countdown_maybe(task, deadline, steps):
    # the reply is appended only under a condition: it may never follow the note
    history = [{"role": "user", "content": task}]
    for _ in range(steps):
        left = deadline - time.time()  # PC001: 15
        history.append({"role": "system", "content": f"You have {left:.2f} seconds left."})
        reply = client.chat.completions.create(model="gpt-4o", messages=history)
        if reply.choices:
            history.append({"role": "assistant", "content": reply.choices[0].message.content})
