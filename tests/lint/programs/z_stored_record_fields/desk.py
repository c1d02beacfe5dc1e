"""Help desks that keep their newest conversation record in a field set by one method and
read one field of it when they ask the model in another."""

import dataclasses
import uuid

import anthropic
from records import Ticket


@dataclasses.dataclass
class Talk:
    talk_id: str = ""
    topics: list = dataclasses.field(default_factory=list)


class TopicDesk:
    """The record is built with a uuid; only its topics are sent (silent)."""

    def __init__(self):
        self.client = anthropic.Anthropic()
        self.current = Talk()

    def open(self):
        self.current = Talk(talk_id=str(uuid.uuid1()))

    def ask(self, text):
        system = "Answer briefly. Topics: " + ", ".join(self.current.topics)
        msgs = [{"role": "user", "content": text}]
        return self.client.messages.create(model="m", max_tokens=9, system=system, messages=msgs)


class IdDesk:
    """The same record, whose uuid is sent (found)."""

    def __init__(self):
        self.client = anthropic.Anthropic()
        self.current = Talk()

    def open(self):
        self.current = Talk(talk_id=str(uuid.uuid1()))

    def ask(self, text):
        system = "Answer briefly. Talk " + self.current.talk_id
        msgs = [{"role": "user", "content": text}]
        return self.client.messages.create(model="m", max_tokens=9, system=system, messages=msgs)


class TicketDesk:
    """A record class of another module: its tags are sent (silent), its id too (found)."""

    def __init__(self):
        self.client = anthropic.Anthropic()
        self.ticket = Ticket()

    def open(self):
        self.ticket = Ticket(ticket_id=uuid.uuid4().hex)

    def tags(self, text):
        system = "Tags: " + ", ".join(self.ticket.tags)
        msgs = [{"role": "user", "content": text}]
        return self.client.messages.create(model="m", max_tokens=9, system=system, messages=msgs)

    def ident(self, text):
        system = "Ticket " + self.ticket.ticket_id
        msgs = [{"role": "user", "content": text}]
        return self.client.messages.create(model="m", max_tokens=9, system=system, messages=msgs)


if __name__ == "__main__":
    topic_desk = TopicDesk()
    topic_desk.open()
    print(topic_desk.ask("hi"))
    id_desk = IdDesk()
    id_desk.open()
    print(id_desk.ask("hi"))  # PC002: 10
    ticket_desk = TicketDesk()
    ticket_desk.open()
    print(ticket_desk.tags("hi"))
    print(ticket_desk.ident("hi"))  # PC002: 10
