# A set's order stored into one field of a record (its knowledge-base ids): a request that
# reads another field of it (the prompt) does not carry that order; one that lists the ids
# does.
import openai

from chat import ask, ask_listed
from records import Dialog

client = openai.OpenAI()


def complete(dialog_id: str, question: str, extra: list):
    found, dia = Dialog.get_by_id(dialog_id)
    dia.kb_ids = list(set(dia.kb_ids + extra))
    return ask(dia, question)


def complete_inline(dialog_id: str, question: str, extra: list):
    found, dia = Dialog.get_by_id(dialog_id)
    dia.kb_ids = list(set(dia.kb_ids + extra))
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": dia.prompt}, {"role": "user", "content": question}],
    )


def complete_listed(dialog_id: str, question: str, extra: list):
    found, dia = Dialog.get_by_id(dialog_id)
    dia.kb_ids = list(set(dia.kb_ids + extra))
    return ask_listed(dia, question)  # PC004: 22


def complete_listed_inline(dialog_id: str, question: str, extra: list):
    found, dia = Dialog.get_by_id(dialog_id)
    dia.kb_ids = list(set(dia.kb_ids + extra))
    sources = f"{dia.prompt}\nSources: {dia.kb_ids}"
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": sources}, {"role": "user", "content": question}],  # PC004: 48
    )
