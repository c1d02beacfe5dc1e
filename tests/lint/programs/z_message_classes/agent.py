# a history of two message classes, a system note and a timed reply (added to the note with `+`
# or starred into a list): a helper turns each into a role dict from its content alone, so the
# time the reply keeps beside its content is not sent; a helper that sends that time, a class
# whose content is a property made of the time, a starred list of timed dicts and a timed
# string among the messages, are found; a tool agent's caller message and environment results
# beside the replies leave the replies' fields apart
import time

from openai import OpenAI
from pydantic import BaseModel

client = OpenAI()


class SystemNote(BaseModel):
    content: str


class Reply(BaseModel):
    content: str
    took: float


class Stamp(BaseModel):
    at: float

    @property
    def content(self):
        return f"now {self.at}"


def to_wire(messages):
    return [{"role": "system", "content": m.content} for m in messages]


def timings(messages):
    return [{"role": "system", "content": f"took {m.took}"} for m in messages]


def generate(messages):
    start = time.perf_counter()
    response = client.chat.completions.create(model="gpt-4o", messages=to_wire(messages))
    took = time.perf_counter() - start
    return Reply(content=response.choices[0].message.content, took=took)


def respond(history):
    system = SystemNote(content="You are helpful.")
    history.append(generate([system] + history))
    return generate([system] + history)


def spread(history):
    system = SystemNote(content="You are helpful.")
    history.append(generate([system, *history]))
    return generate([system, *history])


def spread_took(history):
    history.append(Reply(content="hi", took=time.time()))
    notes = [SystemNote(content="You are helpful."), *history]
    return client.chat.completions.create(model="gpt-4o", messages=timings(notes))  # PC001: 75


def spread_stamps():
    stamps = [{"role": "system", "content": f"now {time.time()}"}]  # PC001: 51
    notes = [{"role": "system", "content": "You are helpful."}, *stamps]
    return client.chat.completions.create(model="gpt-4o", messages=notes)


class ToolAgent:
    def __init__(self, environment):
        self.environment = environment

    def respond(self, message, history):
        system = SystemNote(content="You are helpful.")
        history.append(message)
        reply = generate([system] + history)
        while reply.content:
            history.append(reply)
            history.append(self.environment.get_response(reply.content))
            reply = generate([system] + history)
        return reply

    def stamped(self, history):
        system = SystemNote(content="You are helpful.")
        history.append(f"[{time.time()}] tool finished")
        return generate([system] + history)  # PC001: 35


def literal():
    notes = [SystemNote(content="You are helpful."), Reply(content="hi", took=time.time())]
    return client.chat.completions.create(model="gpt-4o", messages=to_wire(notes))


def chosen(flag):
    note = SystemNote(content="rules") if flag else Reply(content="hi", took=time.time())
    return client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "system", "content": note.content}]
    )


def sent_took():
    notes = [SystemNote(content="You are helpful."), Reply(content="hi", took=time.time())]
    return client.chat.completions.create(model="gpt-4o", messages=timings(notes))  # PC001: 75


def stamped():
    notes = [SystemNote(content="You are helpful."), Stamp(at=time.time())]
    return client.chat.completions.create(model="gpt-4o", messages=to_wire(notes))  # PC001: 75


def stamped_here(flag):
    note = SystemNote(content="rules") if flag else Stamp(at=time.time())
    return client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "system", "content": note.content}]  # PC001: 64
    )
