"""A date written by ``time.ctime()`` or ``time.asctime()`` (no argument: the clock) is moved in
the perturbed run and found, while one of a fixed instant (``time.ctime(0)``) stays the same and
is not reported. Real child processes through the official openai client and the real capture
endpoint."""

from __future__ import annotations

from pathlib import Path

from check_support import check_source

_PROGRAM = """
import time
from openai import OpenAI

RULES = " You are careful." * 400

def today():  # the month and day only ("Dec  6"): the same all day long
    OpenAI().chat.completions.create(model="gpt-4o-mini", messages=[
        {"role": "system", "content": "Today is " + time.ctime()[4:10] + ", all day." + RULES},
        {"role": "user", "content": "hi"}])

def stamped():
    OpenAI().chat.completions.create(model="gpt-4o-mini", messages=[
        {"role": "system", "content": "Date: " + time.asctime()[4:10] + ", local." + RULES},
        {"role": "user", "content": "hi"}])

def epoch():  # a fixed instant, not the clock
    OpenAI().chat.completions.create(model="gpt-4o-mini", messages=[
        {"role": "system", "content": "Epoch: " + time.ctime(0)[4:10] + ", 1970." + RULES},
        {"role": "user", "content": "hi"}])

today()
stamped()
epoch()
"""


def test_a_day_from_ctime_or_asctime_is_found_and_a_fixed_instant_is_not(tmp_path: Path) -> None:
    result = check_source(tmp_path, "clock_text.py", _PROGRAM)
    found = sorted((f.site.function if f.site else "", f.rule, f.causes) for f in result.findings)
    assert found == [("stamped", "PC001", ("clock",)), ("today", "PC001", ("clock",))]
    assert result.exit_code == 1


_DATES = """
import random, time
from datetime import datetime
from openai import OpenAI

RULES = " You are careful." * 400

def ask(system):
    OpenAI().chat.completions.create(model="gpt-4o-mini", messages=[
        {"role": "system", "content": system + RULES}, {"role": "user", "content": "hi"}])

def sentence_end():  # the day ends the sentence: the changed word is "6."
    ask("Today is " + datetime.now().strftime("%B %-d") + ".")

def weekday_abbreviation():  # "Sun Dec  6" against "Tue Dec  8", as ctime() writes it
    ask("Today is " + time.ctime()[:10] + ".")

def compact():  # "20261206", as in a log file's or a session's name
    ask("Session " + datetime.now().strftime("%Y%m%d") + " notes.")

def month_day():  # "12/06": month and day, no year
    ask("Today is " + datetime.now().strftime("%m/%d") + ".")

def hour():  # "11 PM": the hour with am or pm, no minutes
    ask("It is " + datetime.now().strftime("%I %p") + " here.")

def ratio():  # "3/4" is no date: only the runs' own dates are the clock's
    ask("Mix them " + str(random.randint(1, 9)) + "/" + str(random.randint(1, 9)) + ".")

def room_number():  # a number at a sentence's end, beside no month name
    ask("Your room is " + str(random.randint(1, 99)) + ".")

def sky():  # "sun" is a weekday's abbreviation only beside another one
    ask("Look at the " + random.choice(["sun", "moon", "stars"]) + " tonight.")

sentence_end()
weekday_abbreviation()
compact()
month_day()
hour()
ratio()
room_number()
sky()
"""


def test_a_date_at_a_sentence_end_or_with_a_short_weekday_is_the_clock(tmp_path: Path) -> None:
    # "Today is December 6." and "Today is Sun Dec  6." were reported as PC002, "unexplained":
    # the changed word was "6." (not a bare day beside its month) and "Sun" (not "Sunday"); so
    # were the digits-only dates "20261206" and "12/06", and the hour "11 PM"
    result = check_source(tmp_path, "dates.py", _DATES)
    found = {
        (f.site.callers[0][2] if f.site and f.site.callers else "", f.rule, f.causes)
        for f in result.findings
    }
    assert found == {
        ("sentence_end", "PC001", ("clock",)),
        ("weekday_abbreviation", "PC001", ("clock",)),
        ("compact", "PC001", ("clock",)),
        ("month_day", "PC001", ("clock",)),
        ("hour", "PC001", ("clock",)),
        ("ratio", "PC002", ("random",)),
        ("room_number", "PC002", ("random",)),
        ("sky", "PC002", ("random",)),
    }


_DRAWN_LIKE_THE_CLOCK = """
import random, time
from datetime import datetime, timedelta
from openai import OpenAI

RULES = " You are careful." * 400

def ask(system):
    OpenAI().chat.completions.create(model="gpt-4o-mini", messages=[
        {"role": "system", "content": system + RULES}, {"role": "user", "content": "hi"}])

def drawn_hour():  # an hour with pm drawn from random, not read from the clock
    ask("The shop opens at " + str(random.randint(1, 12)) + " PM.")

DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]

def drawn_weekday():  # a weekday's abbreviation drawn from random
    ask("Your shift is on " + random.choice(DAYS) + ".")

NAMES = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

def drawn_weekday_name():  # a weekday's name drawn from random
    ask("Your shift is on " + random.choice(NAMES) + ".")

def drawn_month():  # a month's name drawn from random
    ask("Plan for " + random.choice(["January", "March", "May", "July", "October"]) + ".")

def hour():
    ask("It is " + datetime.now().strftime("%I %p") + " here.")

def weekday():
    ask("Today is " + time.ctime()[:3] + ".")

def tomorrow():  # a weekday the program derives from the clock
    ask("Tomorrow is " + (datetime.now() + timedelta(days=1)).strftime("%A") + ".")

drawn_hour()
drawn_weekday()
drawn_weekday_name()
drawn_month()
hour()
weekday()
tomorrow()
"""


def test_an_hour_or_weekday_drawn_from_random_is_not_the_clock(tmp_path: Path) -> None:
    # "7 PM" against "3 PM", "Tue" against "Fri", "Wednesday" against "Friday" and "March"
    # against "July" from random were read as the clock: PC001 'caused by the wall clock', and
    # with --isolate the random run took them for the clock having ticked on and left them to
    # the clock's run, which does not change them: no finding
    for isolate in (False, True):
        result = check_source(tmp_path, "drawn.py", _DRAWN_LIKE_THE_CLOCK, isolate=isolate)
        found = {
            (f.site.callers[0][2] if f.site and f.site.callers else "", f.rule, f.causes)
            for f in result.findings
        }
        assert found == {
            ("drawn_hour", "PC002", ("random",)),
            ("drawn_weekday", "PC002", ("random",)),
            ("drawn_weekday_name", "PC002", ("random",)),
            ("drawn_month", "PC002", ("random",)),
            ("hour", "PC001", ("clock",)),
            ("weekday", "PC001", ("clock",)),
            ("tomorrow", "PC001", ("clock",)),
        }, (isolate, found)
