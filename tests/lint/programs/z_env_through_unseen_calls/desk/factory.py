# Helpers given a value from the environment: one hands it to a library's constructor (what the
# object's fields hold is not known), one writes it into text.
import crewlib


def make_member(token: str):
    return crewlib.Member(token=token)


def signature(user: str) -> str:
    return f"Signed by {user}."
