import anthropic

client = anthropic.Anthropic()


def send(agent, question):
    # reads one field of the agent it is handed: its system prompt
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system=agent.prompt,
        messages=[{"role": "user", "content": question}],
    )


def count(agent, question):
    # a counting helper of the model object, given the prompt by a system_prompt keyword
    return agent.model.estimate(question, system_prompt=agent.prompt)
