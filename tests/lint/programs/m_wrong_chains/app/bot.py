import anthropic

from .session import Session

client = anthropic.Anthropic()


def ask(session: Session, question: str):
    session.touch()
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=session.prompt(),
        extra_headers={"x-request-id": session.request_id},
        messages=[{"role": "user", "content": question}],
    )


def ask_stamped(session: Session, question: str):
    session.stamp()
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=session.stamped_prompt(),  # PC001: 15
        messages=[{"role": "user", "content": question}],
    )


class Bot:
    def __init__(self, name: str):
        self.session = Session(name)

    def ask(self, question: str):
        self.session.touch()
        return client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            system=self.session.prompt(),
            messages=[{"role": "user", "content": question}],
        )

    def ask_stamped(self, question: str):
        self.session.stamp()
        return client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            system=self.session.stamped_prompt(),  # PC001: 19
            messages=[{"role": "user", "content": question}],
        )
