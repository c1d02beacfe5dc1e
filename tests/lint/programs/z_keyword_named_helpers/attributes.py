# Helpers of their own module that take keywords named like a system prompt: one only puts
# what it is given on a tracing span, one sends it as the system message of a request.
def apply_agent_version_attributes(span, *, system_instructions=None, primary_model=None):
    span.set_attribute("agent.version", hash(str(system_instructions)))
    return {"model": primary_model}


def ask_with_instructions(client, question, *, system_instructions=None):
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": system_instructions},
            {"role": "user", "content": question},
        ],
    )


class SpanRecorder:
    def apply(self, span, *, system_instructions=None):
        span.set_attribute("agent.instructions.hash", hash(str(system_instructions)))


class InstructedAsker:
    def __init__(self, client):
        self.client = client

    def ask(self, question, *, system_instructions=None):
        return self.client.chat.completions.create(
            model="gpt-4o",
            messages=[
                {"role": "system", "content": system_instructions},
                {"role": "user", "content": question},
            ],
        )
