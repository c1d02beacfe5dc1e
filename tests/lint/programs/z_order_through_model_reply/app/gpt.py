import openai


def query(system_message: str, model: str):
    reply = openai.OpenAI().chat.completions.create(
        model=model,
        max_tokens=500,
        messages=[
            {"role": "system", "content": system_message},
            {"role": "user", "content": "Go."},
        ],
    )
    return reply.choices[0].message.parsed
