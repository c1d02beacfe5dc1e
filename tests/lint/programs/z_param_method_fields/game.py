# The game's helpers take the sheet without an annotation and call its methods: what a method
# returns is made of the fields it reads, so the inventory and the heading do not carry the time
# the sheet was made, while a method that reads that field, or the sheet shown whole, does.
from anthropic import Anthropic
from sheets import SheetStore

client = Anthropic()
store = SheetStore()


def sheet_context(sheet) -> str:
    items = ", ".join(sheet.inventory_list()) or "nothing"
    return f"{sheet.heading()}\nCarrying: {items}"


def sheet_age(sheet) -> str:
    return f"{sheet.name}, {sheet.age_text()}"


def sheet_whole(sheet) -> str:
    return f"Sheet: {sheet}"


def ask(system: str, text: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=system,
        messages=[{"role": "user", "content": text}],
    )


def play(user_id: int, text: str):
    sheet = store.get_or_create(user_id)
    return ask(f"You run a role-playing game.\n{sheet_context(sheet)}", text)


def play_aged(user_id: int, text: str):
    sheet = store.get_or_create(user_id)
    return ask(f"You run a role-playing game.\n{sheet_age(sheet)}", text)  # PC001: 48


def play_whole(user_id: int, text: str):
    sheet = store.get_or_create(user_id)
    return ask(f"You run a role-playing game.\n{sheet_whole(sheet)}", text)  # PC001: 48
