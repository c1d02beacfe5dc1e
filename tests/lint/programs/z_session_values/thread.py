# A value made once per conversation and reused for each of its requests is the session's: it
# does not change between the requests of that thread. Made per request, it is an error.
import uuid

from openai import OpenAI

client = OpenAI()


class ChatThread:
    def __init__(self, user: str):
        self.user = user
        self.thread_id = ""

    def start(self) -> None:
        # when the thread starts; every request of the thread reuses the id
        self.thread_id = str(uuid.uuid7())

    def ask(self, text: str):
        system = f"You help {self.user} in thread {self.thread_id}."
        return client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "system", "content": system}, {"role": "user", "content": text}],
        )


class TurnThread:
    """The look-alike: the id is made by the method that then sends the request."""

    def __init__(self, user: str):
        self.user = user
        self.turn_id = ""

    def on_message(self, text: str):
        self.turn_id = uuid.uuid4().hex
        return self.reply(text)

    def reply(self, text: str):
        return client.chat.completions.create(
            model="gpt-4o",
            messages=[
                {"role": "system", "content": f"Turn {self.turn_id} for {self.user}."},  # PC002: 54
                {"role": "user", "content": text},
            ],
        )


class RestartingThread:
    """The look-alike: the request itself starts the thread again."""

    def __init__(self, user: str):
        self.user = user
        self.thread_id = ""

    def start(self) -> None:
        self.thread_id = uuid.uuid4().hex

    def ask(self, text: str):
        self.start()
        return client.chat.completions.create(
            model="gpt-4o",
            messages=[
                {"role": "system", "content": f"Thread {self.thread_id}."},  # PC002: 56
                {"role": "user", "content": text},
            ],
        )


def handle(thread: ChatThread, text: str):
    # a caller that starts the thread before every request: each request has a new id
    thread.start()
    return thread.ask(text)  # PC002: 11
