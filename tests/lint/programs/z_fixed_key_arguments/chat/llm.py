import openai
import tokentrim as tt

from chat.convert import to_chat, to_chat_rekeyed, to_chat_stored

client = openai.OpenAI()


def trimmed(history):
    messages = to_chat(history)
    system_message = messages[0]["content"]
    messages = messages[1:]
    return tt.trim(messages, system_message=system_message, max_tokens=8000)


def send(history, question):
    messages = [*to_chat(history), {"role": "user", "content": question}]
    return client.chat.completions.create(model="gpt-4o", messages=messages)


def send_stored(history, question):
    messages = [*to_chat_stored(history), {"role": "user", "content": question}]  # PC003: 16
    return client.chat.completions.create(model="gpt-4o", messages=messages)


def send_rekeyed(history, question):
    messages = [*to_chat_rekeyed(history), {"role": "user", "content": question}]  # PC003: 16
    return client.chat.completions.create(model="gpt-4o", messages=messages)
