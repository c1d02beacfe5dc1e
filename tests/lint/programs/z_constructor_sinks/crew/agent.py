# An agent whose constructor already sends its system prompt (a warm-up call), and a method
# that appends what it is given to that prompt.
import anthropic


class Agent:
    system_prompt = "You are terse."

    def __init__(self, name: str) -> None:
        self.name = name
        self.client = anthropic.Anthropic()
        self.warmup = self.build()

    def build(self):
        return self.client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=16,
            system=self.system_prompt,
            messages=[{"role": "user", "content": "ready?"}],
        )

    def learn(self, skills: str) -> None:
        self.system_prompt = f"{self.system_prompt}\n{skills}"
