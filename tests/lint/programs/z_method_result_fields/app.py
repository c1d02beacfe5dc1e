from anthropic import Anthropic
from runner import Runner

client = Anthropic()


def answer(task: str) -> str:
    runner = Runner("planner")
    result = runner.run(task)
    print(f"run took {result.took_ms} ms")
    notes = dict(result.notes)
    response = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Plan notes: {notes}\nEarlier reply: {result.reply}",
        messages=[{"role": "user", "content": task}],
    )
    return response.content[0].text


def answer_timed(task: str) -> str:
    result = Runner("planner").run(task)
    response = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"The last run took {result.took_ms} ms.",  # PC001: 36
        messages=[{"role": "user", "content": task}],
    )
    return response.content[0].text


def answer_stamped(task: str) -> str:
    result = Runner("planner").run_stamped(task)
    response = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Earlier reply: {result.reply}",  # PC001: 33
        messages=[{"role": "user", "content": task}],
    )
    return response.content[0].text
