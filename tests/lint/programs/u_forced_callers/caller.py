# No trigger word here: this file is analysed because it calls adcopy's wrapper, and the
# function making the call is analysed with it.
from datetime import datetime

from adcopy import write_whole


def stamped():
    return write_whole(datetime.now().isoformat())  # PC001: 23


def dated():
    # the look-alike: a constant text
    return write_whole("Write short ads.")


def logged():
    # the look-alike: the time is only logged, not passed
    print(datetime.now().isoformat())
    return write_whole("Write long ads.")
