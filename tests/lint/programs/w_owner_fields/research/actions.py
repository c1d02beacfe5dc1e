from openai import OpenAI

client = OpenAI()


def write_introduction(query, agent_role_prompt, model):
    return client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": f"{agent_role_prompt}"},
            {"role": "user", "content": query},
        ],
    )
