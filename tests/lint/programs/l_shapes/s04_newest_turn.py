# Shape 4: a set joined into the newest user turn is outside the cached prefix; the same set
# joined into the system prompt is inside it.
import anthropic

client = anthropic.Anthropic()


def ask(history: list, question: str, urls: list[str]):
    user_text = question
    user_text += "\n".join(set(urls))
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system="Summarise the pages.",
        messages=[*history, {"role": "user", "content": user_text}],
    )


def ask_with_sources(history: list, question: str, urls: list[str]):
    system = "Sources:\n"
    system += "\n".join(set(urls))
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=system,  # PC004: 15
        messages=[*history, {"role": "user", "content": question}],
    )


def ask_appended(history: list, question: str, urls: list[str]):
    messages = list(history)
    user_text = question
    user_text += "\n".join(set(urls))
    messages.append({"role": "user", "content": user_text})
    return client.messages.create(
        model="claude-sonnet-4-5", max_tokens=256, system="Summarise.", messages=messages
    )


class Session:
    def __init__(self):
        self.messages: list = []

    def ask(self, question: str, urls: list[str]):
        user_text = question + "\n" + "\n".join(set(urls))
        self.messages.append({"role": "user", "content": user_text})
        reply = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=256, system="Summarise.", messages=self.messages
        )
        self.messages.append({"role": "assistant", "content": reply.content})
        return reply
