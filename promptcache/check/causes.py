"""Which perturbation caused a difference between two runs' prompts: evidence from the text.

A run changes one perturbation kind (``--isolate``) or all of them at once (the default). With
one kind the cause is that kind. With all of them, each differing region of the text is read
for evidence:

- ``listdir`` / ``hash_seed``: the two segments hold the same items in another order (the same
  multiset of segments, or of words inside one segment); ``listdir`` is ruled out when the
  process had reordered no directory listing of the user's code before the request;
- ``pid``: a number in the region is a process id the run's requests reported;
- ``clock``: the region holds a time of day, a date, a weekday's name or abbreviation, a
  month's name or an hour with am or pm changed by as much as the runs' clocks moved ("Sun"
  and "Tue", "11 PM" and "02 AM", also a day the program derives from the clock), the runs'
  own dates in digits without a year or marks (``12/06``, ``6.12``, ``20261206``), a day of
  the month beside a month name ("December 6", also at a sentence's end), or a unix time
  within three days of the run's clock;
- ``random`` (random, uuid4, secrets): any other difference, when the sending process had
  drawn from them before the request (its HTTP and LLM clients' own draws left out);
- ``unexplained`` (:data:`.findings.UNEXPLAINED`): any other difference when it had not (or the
  hook did not say): a value check does not change, such as a monotonic clock or a file an
  earlier run wrote, differs.

A run that changes ``random`` alone names ``unexplained`` in the same way, one that changes
the listing order alone where the process had reordered no listing of the user's code, and one
that changes the process id alone where no reported pid shows in a differing region; one that
changes another kind alone names that kind (``runner`` makes a difference that the runs of two
kinds or more show ``unexplained``).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Final

from promptcache.changed_value import changed_value
from promptcache.fingerprint import RequestFingerprint

from .findings import UNEXPLAINED
from .perturbation import Perturbation

__all__ = ["Region", "differing_regions", "is_reordering", "moved_regions", "region_causes"]

_EXCERPT: Final = 30
#: At most this many characters of a differing stretch are shown (then ``…``): a reordered
#: document can make one stretch thousands of characters long.
_MAX_SHOWN: Final = 80
_MERGE_GAP: Final = 3
_MAX_DIFF_CHARS: Final = 20_000
#: Above this many tokens, a part whose token count changed is one region: a diff of repetitive
#: text grows faster than the square of its length (1,000 tokens of one repeated sentence with
#: inserted words: about 0.1 CPU s; 4,000: about 12 s).
_MAX_DIFF_TOKENS: Final = 1_000
_DIFF_TOKEN: Final = re.compile(r"\w+|\s+|[^\w\s]")
_WORD: Final = re.compile(r"[\w:.+/-]")
_TOKENS: Final = re.compile(r"\w+|[^\w\s]")
_CLOCK: Final = re.compile(r"\d{1,2}:\d{2}|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}")
_NUMBER: Final = re.compile(r"\d+")
#: A weekday's name or abbreviation ("Sunday", "Sun"), its first three letters captured.
_WEEKDAY: Final = re.compile(r"\b(mon|tue|wed|thu|fri|sat|sun)(?:[a-z]*day)?\b", re.IGNORECASE)
#: A date in digits without the marks ``_CLOCK`` knows: ``20261206``, ``12/06``, ``6.12``.
_SHORT_DATE: Final = re.compile(r"(?<![\d/.])(?:\d{8}|\d{1,2}[/.]\d{1,2})(?![\d/]|\.\d)")
_MONTH: Final = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
#: A day of the month is a number of one or two digits written beside a month name
#: ("December 6", "Dec. 6th", "6 December", "6th of December"); the region holds the number
#: alone when the month is the same in both runs.
_DAY_OF_MONTH: Final = re.compile(r"\d{1,2}(?:st|nd|rd|th)?")
_MONTH_NAME: Final = re.compile(rf"\b{_MONTH}\b", re.IGNORECASE)
_EPOCH_WINDOW_S: Final = 3 * 86_400
#: ``promptcache.changed_value`` kinds that are clock readings.
_CLOCK_KINDS: Final = frozenset({"a time", "a date", "a timestamp", "a Unix timestamp"})


@dataclass(frozen=True)
class Region:
    """One differing stretch of a segment's canonical text.

    Attributes:
        before, after: the differing words in the baseline and in the other run.
        before_excerpt, after_excerpt: the same with up to 30 characters around them, on one
            line (newlines shown as ``⏎``, tabs as ``⇥``); a stretch over 80 characters is
            cut there, ending in ``…``.
    """

    before: str
    after: str
    before_excerpt: str
    after_excerpt: str


def _expand(text: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and _WORD.match(text[start - 1]):
        start -= 1
    while end < len(text) and _WORD.match(text[end]):
        end += 1
    return start, end


def _shown(text: str) -> str:
    """An excerpt on one line: newlines and tabs as ``⏎`` and ``⇥`` (as the proxy shows them)."""
    return (
        text.replace("\r\n", "\u23ce")
        .replace("\n", "\u23ce")
        .replace("\r", "\u23ce")
        .replace("\t", "\u21e5")
    )


def _excerpt(text: str, start: int, end: int) -> str:
    """``text[start:end]`` with up to 30 characters around it, on one line; a stretch longer
    than 80 characters is cut there and ends in ``…``."""
    if end - start > _MAX_SHOWN:
        return _shown(text[max(0, start - _EXCERPT) : start + _MAX_SHOWN]) + "\u2026"
    return _shown(text[max(0, start - _EXCERPT) : end + _EXCERPT])


def _edits(a: str, b: str) -> list[tuple[int, int, int, int]]:
    """The edits that turn ``a`` into ``b`` as character spans ``(a_start, a_end, b_start,
    b_end)`` in text order, found on tokens (``_DIFF_TOKEN``): pairwise when both have as many
    tokens, else by ``SequenceMatcher`` on the token lists, else (over ``_MAX_DIFF_CHARS``
    characters or ``_MAX_DIFF_TOKENS`` tokens) one edit of the whole."""
    if max(len(a), len(b)) > _MAX_DIFF_CHARS:
        return [(0, len(a), 0, len(b))]
    tokens_a = [(m.start(), m.end()) for m in _DIFF_TOKEN.finditer(a)]
    tokens_b = [(m.start(), m.end()) for m in _DIFF_TOKEN.finditer(b)]
    texts_a = [a[s:e] for s, e in tokens_a]
    texts_b = [b[s:e] for s, e in tokens_b]
    if len(texts_a) == len(texts_b):
        return [
            (*tokens_a[k], *tokens_b[k])
            for k, (x, y) in enumerate(zip(texts_a, texts_b, strict=True))
            if x != y
        ]
    if max(len(texts_a), len(texts_b)) > _MAX_DIFF_TOKENS:
        return [(0, len(a), 0, len(b))]
    edits = []
    matcher = SequenceMatcher(None, texts_a, texts_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        edits.append(
            (
                tokens_a[i1][0] if i1 < i2 else _at(tokens_a, i1, len(a)),
                tokens_a[i2 - 1][1] if i1 < i2 else _at(tokens_a, i1, len(a)),
                tokens_b[j1][0] if j1 < j2 else _at(tokens_b, j1, len(b)),
                tokens_b[j2 - 1][1] if j1 < j2 else _at(tokens_b, j1, len(b)),
            )
        )
    return edits


def _at(tokens: list[tuple[int, int]], k: int, end: int) -> int:
    """The character offset where token ``k`` starts (``end`` past the last token)."""
    return tokens[k][0] if k < len(tokens) else end


def _word_at(text: str, k: int) -> bool:
    """Whether ``text[k]`` exists and is a word character (a letter, digit or ``_``)."""
    return 0 <= k < len(text) and (text[k].isalnum() or text[k] == "_")


def differing_regions(a: str, b: str) -> list[Region]:
    """Every stretch where ``b`` differs from ``a``, widened to whole words, in text order.

    Edits closer than 3 characters are one region. Only the part between the common prefix
    and the common suffix is compared, token by token (runs of word characters, of spaces, and
    single other characters): when both parts have as many tokens, each differing pair of
    tokens is an edit (linear time: the same template with other values, however repetitive);
    otherwise a diff of the token lists finds the edits, and over 20,000 characters or 1,000
    tokens the part is one region (a diff of repetitive text grows faster than the square of
    its length).
    """
    p = 0
    limit = min(len(a), len(b))
    while p < limit and a[p] == b[p]:
        p += 1
    q = 0
    while q < limit - p and a[len(a) - 1 - q] == b[len(b) - 1 - q]:
        q += 1
    # the compared parts start and end on whole words ("7" against "1007" is one token pair)
    while p > 0 and _word_at(a, p - 1) and (_word_at(a, p) or _word_at(b, p)):
        p -= 1
    while (
        q > 0
        and _word_at(a, len(a) - q)
        and (_word_at(a, len(a) - q - 1) or _word_at(b, len(b) - q - 1))
    ):
        q -= 1
    mid_a, mid_b = a[p : len(a) - q], b[p : len(b) - q]
    if not mid_a and not mid_b:
        return []
    spans: list[tuple[int, int, int, int]] = []
    for i1, i2, j1, j2 in _edits(mid_a, mid_b):
        if spans and i1 - spans[-1][1] <= _MERGE_GAP and j1 - spans[-1][3] <= _MERGE_GAP:
            spans[-1] = (spans[-1][0], i2, spans[-1][2], j2)
        else:
            spans.append((i1, i2, j1, j2))
    regions: list[Region] = []
    seen: set[tuple[int, int]] = set()
    for i1, i2, j1, j2 in spans:
        s_a, e_a = _expand(a, p + i1, p + i2)
        s_b, e_b = _expand(b, p + j1, p + j2)
        if (s_a, e_a) in seen:
            continue
        seen.add((s_a, e_a))
        regions.append(
            Region(
                a[s_a:e_a],
                b[s_b:e_b],
                _excerpt(a, s_a, e_a),
                _excerpt(b, s_b, e_b),
            )
        )
    return regions


def is_reordering(
    old: RequestFingerprint,
    new: RequestFingerprint,
    old_text: str,
    new_text: str,
    kind: str | None = None,
) -> bool:
    """Whether ``new`` holds the same items as ``old`` in another order: the same segments
    reordered, the same segments of the differing segment's ``kind`` reordered (a tool list
    from a set, while a later system text changed too), or the same words inside the differing
    segment."""
    if Counter(s.sha256 for s in old.segments) == Counter(s.sha256 for s in new.segments):
        return True
    if kind is not None:
        same_kind = [Counter(s.sha256 for s in fp.segments if s.kind == kind) for fp in (old, new)]
        if same_kind[0] == same_kind[1]:
            return True
    return Counter(_TOKENS.findall(old_text)) == Counter(_TOKENS.findall(new_text))


def moved_regions(regions: Sequence[Region], pids: set[int], clocks: Sequence[float]) -> list[bool]:
    """For each region, whether it is part of a reordering inside a segment that changed in
    other ways too (a time and a set's order in one system prompt): every word it lost appears
    among the words the segment's other such regions gained, and every word it gained among
    those they lost. Regions holding a clock reading or a process id are left out of it."""
    words = [
        (Counter(_TOKENS.findall(r.before)), Counter(_TOKENS.findall(r.after))) for r in regions
    ]
    plain = [
        not _region_is_clock(r, clocks) and not _is_pid([r.before, r.after], pids) for r in regions
    ]
    lost: Counter[str] = Counter()
    gained: Counter[str] = Counter()
    for (before, after), keep in zip(words, plain, strict=True):
        if keep:
            lost += before
            gained += after
    return [
        keep
        and bool(before or after)
        and all(gained[w] >= n for w, n in before.items())
        and all(lost[w] >= n for w, n in after.items())
        for (before, after), keep in zip(words, plain, strict=True)
    ]


def _is_clock(words: Sequence[str], clocks: Sequence[float]) -> bool:
    if len(words) == 2 and changed_value(words[0], words[1]).kind in _CLOCK_KINDS:
        return True
    for word in words:
        if _CLOCK.search(word):
            return True
        for digits in _NUMBER.findall(word):
            if 9 <= len(digits) <= 13:
                value = int(digits) / (1000 if len(digits) > 10 else 1)
                if any(abs(value - c) <= _EPOCH_WINDOW_S for c in clocks):
                    return True
    return False


def _beside_month(word: str, excerpt: str) -> bool:
    """Whether ``word`` is a day of the month written beside a month name in ``excerpt`` (the
    region's excerpt, which holds the words around it); a full stop after it ends the sentence
    ("Today is December 6.", where the region's word is ``6.``)."""
    word = word.removesuffix(".")
    if not _DAY_OF_MONTH.fullmatch(word):
        return False
    day = re.escape(word)
    pattern = rf"\b{_MONTH}\.?\s+{day}(?!\w)|(?<!\w){day}\s+(?:of\s+)?{_MONTH}\b"
    return re.search(pattern, excerpt, re.IGNORECASE) is not None


def _meridiem_hours(word: str, excerpt: str) -> set[int]:
    """``{hour}`` where ``word`` is an hour written with am or pm (``11 PM``, ``2pm``), or the
    hour alone when the am or pm beside it in ``excerpt`` did not change; empty otherwise."""
    hour = re.fullmatch(r"(\d{1,2})(?:\s?[ap]\.?m\.?)?", word.removesuffix("."), re.IGNORECASE)
    if hour is None:
        return set()
    pattern = rf"(?<![\w:.]){hour.group(1)}\s?[ap]\.?m\b"
    return {int(hour.group(1))} if re.search(pattern, excerpt, re.IGNORECASE) else set()


#: how long after its start a run's clock may still be read by the program, where the run's
#: end is not given (``clocks`` of two readings: a run lasts; under an hour, so its start and
#: this moment show every hour and weekday it passes)
_RUN_S: Final = 1800.0
#: how much later than the end of its run a clock reading is still taken as the run's (the
#: clock the check recorded and the one the program read are a process start apart)
_END_SLACK_S: Final = 5.0
_WEEKDAYS: Final = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
#: the months as ``_months`` reads them, by their index from 0
_MONTHS: Final = (
    "jan",
    "feb",
    "mar",
    "apr",
    "may",
    "jun",
    "jul",
    "aug",
    "sep",
    "oct",
    "nov",
    "dec",
)


def _moved_as_the_clocks(
    before: set[int],
    after: set[int],
    clocks: Sequence[float],
    read: Callable[[time.struct_time], int],
    period: int,
    *,
    derived: bool = True,
) -> bool:
    """Whether a value of ``before`` changed into one of ``after`` by as much as ``read`` (the
    weekday, the month, the hour on a 12-hour dial, counted modulo ``period``) moved from run
    0's clock to the other run's, read in one time zone (UTC or local) at the run's start or at
    its end: ``clocks`` is run 0's start and end, then the other run's (four readings, unix
    seconds; with two, the runs' starts, each run may last :data:`_RUN_S`). A day the clock's
    run moved on by one, also (``derived``) a day the program derives from the clock
    ("tomorrow is Monday"); without ``derived`` the values must be what the two clocks read.
    A run that leaves the clock alone moves it by nothing, or by one where it crossed midnight
    or the hour, so a value drawn from ``random`` that changed there is not the clock's; nor
    is an hour drawn in run 0 that happens to be the hour of its clock, where the other run's
    drawn hour is not one its clock showed while it ran."""
    if not before or not after or before == after or not clocks:
        return False
    if len(clocks) >= 4:
        spans = ((clocks[0], clocks[1] + _END_SLACK_S), (clocks[-2], clocks[-1] + _END_SLACK_S))
    else:
        spans = ((clocks[0], clocks[0] + _RUN_S), (clocks[-1], clocks[-1] + _RUN_S))
    pairs = {
        (read(convert(early)), read(convert(late)))
        for convert in (time.gmtime, time.localtime)
        for early in spans[0]
        for late in spans[1]
    }
    if not derived:
        return any(old in before and new in after and old != new for old, new in pairs)
    moves = {(new - old) % period for old, new in pairs} - {0}
    return any((new - old) % period in moves for old in before for new in after if new != old)


def _clock_dates(clocks: Sequence[float]) -> set[str]:
    """The dates of the runs' clocks (a day either side, in UTC and local time: a run lasts,
    and the program may write either) as ``_SHORT_DATE`` writes them: ``20261206``, and the
    month and day with ``/`` or ``.`` in either order, with and without leading zeros."""
    dates: set[str] = set()
    for clock in clocks:
        for shift in (-86_400, 0, 86_400):
            for moment in (time.gmtime(clock + shift), time.localtime(clock + shift)):
                year, month, day = moment.tm_year, moment.tm_mon, moment.tm_mday
                dates.add(f"{year}{month:02}{day:02}")
                for first, second in ((month, day), (day, month)):
                    for mark in "/.":
                        dates.add(f"{first}{mark}{second}")
                        dates.add(f"{first:02}{mark}{second:02}")
    return dates


def _short_dates(text: str, dates: set[str]) -> set[str]:
    return {word for word in _SHORT_DATE.findall(text) if word in dates}


def _weekdays(text: str) -> set[int]:
    return {_WEEKDAYS.index(m.group(1).lower()) for m in _WEEKDAY.finditer(text)}


def _months(text: str) -> set[int]:
    return {_MONTHS.index(m.group().lower()[:3]) for m in _MONTH_NAME.finditer(text)}


def _region_is_clock(region: Region, clocks: Sequence[float]) -> bool:
    """``_is_clock`` of the region's words (a time of day, a date with its marks, a unix
    time), a weekday's name or abbreviation ("Sunday", "Sun" as ``time.ctime()`` and ``%a``
    write it), a month's name or an hour with am or pm (``11 PM`` and ``02 AM``) changed by as
    much as the runs' clocks moved (``_moved_as_the_clocks``: ``random.choice(["Mon", "Tue"])``,
    ``f"{random.randint(1, 12)} PM"`` or "may" changed into "must" is no clock), a date in
    digits that is a run's clock's date on both sides (``12/06`` and ``12/08``, ``20261206``:
    alone, ``3/4`` is a fraction), or a day of the month that changed beside a month name that
    did not ("Sunday, December 6" and "Monday, December 7": the 6 is the clock's)."""
    if _is_clock([region.before, region.after], clocks):
        return True
    before, after = region.before, region.after
    if _moved_as_the_clocks(
        _weekdays(before), _weekdays(after), clocks, lambda moment: moment.tm_wday, 7
    ):
        return True
    if _moved_as_the_clocks(
        _months(before), _months(after), clocks, lambda moment: moment.tm_mon - 1, 12
    ):
        return True
    dates = _clock_dates(clocks)
    old_dates, new_dates = _short_dates(before, dates), _short_dates(after, dates)
    if old_dates and new_dates and old_dates != new_dates:
        return True
    if _moved_as_the_clocks(
        _meridiem_hours(region.before, region.before_excerpt),
        _meridiem_hours(region.after, region.after_excerpt),
        clocks,
        lambda moment: moment.tm_hour % 12 or 12,
        12,
        derived=False,
    ):
        return True
    return _beside_month(region.before, region.before_excerpt) and _beside_month(
        region.after, region.after_excerpt
    )


def _is_pid(words: Iterable[str], pids: set[int]) -> bool:
    return any(int(d) in pids for w in words for d in _NUMBER.findall(w) if len(d) < 10)


def region_causes(
    region: Region | None,
    run: Perturbation,
    *,
    reordered: bool,
    listings_before: int | None,
    drawn: bool | None,
    pids: set[int],
    clocks: Sequence[float],
) -> tuple[str, ...]:
    """The perturbation kinds a difference comes from; empty when the run did not cause it
    (with one kind changed, not the clock, a time value that differs is the unshifted clock
    having ticked on between the runs: the clock's own run reports it), or ``(UNEXPLAINED,)``
    when the run shows none of its changes in it.

    Args:
        region: the differing words (None for a whole-segment or key difference).
        run: the perturbed run's perturbation (its ``changed`` kinds are the candidates).
        reordered: :func:`is_reordering` of the two requests.
        listings_before: directory listings of user code the sending process had reordered
            before the request (the hook's count), None when unknown.
        drawn: whether the sending process had drawn from random, uuid4/uuid1 or secrets
            before the request, its clients' own draws left out (the hook's header), None when
            unknown: ``random`` is named only when it had.
        pids: process ids the two runs' requests reported.
        clocks: unix seconds of the two runs' clocks: run 0's start and end, then the other
            run's (``_moved_as_the_clocks``).
    """
    changed = run.changed
    words = [region.before, region.after] if region is not None else []
    if len(changed) == 1:
        if (
            changed != ("clock",)
            and not reordered
            and region is not None
            and _region_is_clock(region, clocks)
        ):
            return ()  # the unshifted clock ticked on: the clock run reports this value
        if changed == ("random",) and not drawn:
            return (UNEXPLAINED,)  # nothing was drawn: the seed cannot have changed it
        if changed == ("listdir",) and listings_before == 0:
            return (UNEXPLAINED,)  # no listing of the user's code was reordered before it
        if changed == ("pid",) and region is not None and not _is_pid(words, pids):
            return (UNEXPLAINED,)  # no process id shows in it
        return changed
    if reordered:
        order = [k for k in ("hash_seed", "listdir") if k in changed]
        if listings_before == 0 and "hash_seed" in order:
            order = ["hash_seed"]
        if order:
            return tuple(order)
    if "pid" in changed and _is_pid(words, pids):
        return ("pid",)
    if "clock" in changed and region is not None and _region_is_clock(region, clocks):
        return ("clock",)
    return ("random",) if "random" in changed and drawn else (UNEXPLAINED,)
