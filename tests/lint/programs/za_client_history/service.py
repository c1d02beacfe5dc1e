# Context searched for each question, written into the system message ahead of the history
# the function is given (and never writes back: the web client keeps the conversation).
from openai import OpenAI
from store import Store

client = OpenAI()
PROMPT = "Answer from these notes:\n{context}"


def chat(question: str, history: list[dict]):
    chunks = Store().query(question)
    context = "\n\n".join(chunks)
    messages = [{"role": "system", "content": PROMPT.format(context=context)}]
    for msg in history[-20:]:
        messages.append({"role": msg["role"], "content": msg["content"]})
    messages.append({"role": "user", "content": question})
    for _ in range(3):
        reply = client.chat.completions.create(model="gpt-4o", messages=messages)
        if not reply.choices[0].message.tool_calls:
            return reply
        messages.append(reply.choices[0].message)
    return None


def chat_in_newest(question: str, history: list[dict]):
    # the look-alike: the context goes into the newest message, after the history
    context = "\n\n".join(Store().query(question))
    messages = [{"role": "system", "content": PROMPT.format(context="")}]
    for msg in history:
        messages.append({"role": msg["role"], "content": msg["content"]})
    messages.append({"role": "user", "content": f"{context}\n\n{question}"})
    return client.chat.completions.create(model="gpt-4o", messages=messages)
