# A chat service's request code: each message of the history is copied by its role and
# content alone, and the newest question's content goes into a keyword-extraction prompt.
import openai

client = openai.AsyncOpenAI()


async def keywords(content: str) -> str:
    msg = [
        {"role": "system", "content": f"Extract keywords from: {content}"},
        {"role": "user", "content": "Output:"},
    ]
    reply = await client.chat.completions.create(model="gpt-4o", messages=msg)
    return reply.choices[0].message.content


async def chat_solo(system: str, messages: list):
    msg = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
    return await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "system", "content": system}, *msg]
    )


async def chat(system: str, messages: list):
    questions = [m["content"] for m in messages if m["role"] == "user"][-3:]
    found = await keywords(questions[-1])
    msg = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
    return await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "system", "content": system + found}, *msg]
    )


async def agent(system: str, messages: list, reasoning: bool):
    # the message list handed on whole to the helper that reads each message's content
    if not reasoning:
        return await chat(system, messages)
    return await chat_solo(system, messages)
