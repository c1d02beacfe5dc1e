# A sender whose system text is made of the same field of three arguments, each through calls
# of a library the linter cannot see, and a relay that passes one value as all three: a value
# given to the relay is an unproven flow (a note) through one of those calls, always the same
# one (the fewest unseen calls: `keep`), whatever order sets iterate in.
import openai
import vendorlib

client = openai.OpenAI()


def send(first, second, third, question: str):
    kept = vendorlib.keep(third)
    held = vendorlib.hold(second)
    got = vendorlib.get(first)
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {
                "role": "system",
                "content": f"{vendorlib.a(got.note)} {vendorlib.b(held.note)} {kept.note}",
            },
            {"role": "user", "content": question},
        ],
    )


def relay(text: str, question: str):
    return send(text, text, text, question)


def send_plain(note: str, question: str):
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": note}, {"role": "user", "content": question}],
    )
