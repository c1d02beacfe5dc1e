# A file with a trigger word of its own (a message of the "system" role in one function): its
# other functions that call adcopy's wrapper hold none, and are analysed for that call.
from datetime import datetime

from adcopy import write_whole


def greeting() -> dict:
    return {"role": "system", "content": "Greet the user."}


def stamped():
    return write_whole(datetime.now().isoformat())  # PC001: 23


def dated():
    # the look-alike: a constant text
    return write_whole("Write short ads.")


def logged():
    # the look-alike: the time is only logged, not passed
    print(datetime.now().isoformat())
    return write_whole("Write long ads.")
