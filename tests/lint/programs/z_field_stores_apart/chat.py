# Requests built from a dialog: one reads only its prompt into the system message (its
# knowledge bases only filter a search whose hits go in the user turn), one lists them.
import openai
import vectordb

client = openai.OpenAI()


def ask(dialog, question: str):
    hits = vectordb.query(dialog.kb_ids, question)
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": dialog.prompt},
            {"role": "user", "content": f"{question}\n{hits}"},
        ],
    )


def ask_listed(dialog, question: str):
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": f"{dialog.prompt}\nSources: {dialog.kb_ids}"},
            {"role": "user", "content": question},
        ],
    )
