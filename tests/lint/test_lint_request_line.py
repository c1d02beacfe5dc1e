"""Where a user puts a suppression, and the PC004 fix of what ``str.join`` iterates.

A finding whose text is built on another line than the request's argument (``s2 =
s.strip()``, then ``s3 = s2`` sent as ``system=s3``) is reported at the line that builds the
text; a ``# promptcache: ignore[...]`` comment on the line where the value enters the request
(``system=s3``, ``messages=msgs`` for a ``{"role": "system"}`` message in ``msgs``) covers it
too, as docs/lint.md says, and one for another rule or one on only some of the requests it
enters does not. ``str.join`` takes only strings, so a set it iterates
is wrapped in ``sorted(...)`` by ``--fix`` whatever the set was built from; a set iterated by a
``for`` loop of elements not known to be strings is not.
"""

from __future__ import annotations

from promptcache.lint_rules import LintConfig, lint_source
from promptcache.lint_rules.fix import fix_source

HEAD = """\
from datetime import datetime

import anthropic

client = anthropic.Anthropic()

"""

#: the text is made two names before the request (``s2``, then ``s3 = s2`` sent as ``system=s3``)
RENAMED = """\
def ask(q: str) -> object:
    now = datetime.now()
    s = f"Now {{now}}"
    s2 = s.strip()
    s3 = s2
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        system=s3,{comment}
        messages=[{{"role": "user", "content": q}}],
    )
"""

#: one text sent in two requests
TWICE = """\
def ask(q: str) -> object:
    s = f"Now {{datetime.now()}}"
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        system=s,{first}
        messages=[{{"role": "user", "content": q}}],
    )
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        system=s,{second}
        messages=[{{"role": "user", "content": q}}],
    )
"""


def _found(source: str) -> list[tuple[str, int]]:
    result = lint_source(HEAD + source, "app.py", LintConfig())
    return [(d.code, d.location.line) for d in result.diagnostics]


def test_a_comment_where_the_value_enters_the_request_suppresses() -> None:
    # reported where the text is built (line 10, `s2 = s.strip()`), not at `system=s3` (12)
    assert _found(RENAMED.format(comment="")) == [("PC001", 10)]
    assert _found(RENAMED.format(comment="  # promptcache: ignore[PC001]")) == []
    # the line-above form, on the line before the argument
    above = RENAMED.format(comment="").replace(
        "        system=s3,", "        # promptcache: ignore[PC001]\n        system=s3,"
    )
    assert _found(above) == []
    # another rule's code does not cover it
    assert _found(RENAMED.format(comment="  # promptcache: ignore[PC002]")) == [("PC001", 10)]
    # the line it is reported at still covers it; the origin's line still does not
    reported = RENAMED.format(comment="").replace(
        "s2 = s.strip()", "s2 = s.strip()  # promptcache: ignore[PC001]"
    )
    assert _found(reported) == []
    origin = RENAMED.format(comment="").replace(
        "now = datetime.now()", "now = datetime.now()  # promptcache: ignore[PC001]"
    )
    assert _found(origin) == [("PC001", 10)]


def test_a_text_sent_in_two_requests_needs_the_comment_on_both() -> None:
    comment = "  # promptcache: ignore[PC001]"
    assert _found(TWICE.format(first="", second="")) == [("PC001", 8)]
    assert _found(TWICE.format(first=comment, second="")) == [("PC001", 8)]
    assert _found(TWICE.format(first="", second=comment)) == [("PC001", 8)]
    assert _found(TWICE.format(first=comment, second=comment)) == []


#: one text sent in a request and handed to a helper that sends it in another
THROUGH_HELPER = """\
def send(system: str, q: str) -> object:
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        system=system,
        messages=[{{"role": "user", "content": q}}],
    )


def ask(q: str) -> object:
    s = f"Now {{datetime.now()}}"
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        system=s,{first}
        messages=[{{"role": "user", "content": q}}],
    )
    return send(s, q){second}
"""


def test_a_text_also_sent_through_a_helper_needs_the_comment_at_the_helpers_call() -> None:
    """The helper's call is where the text enters that other request: a comment on the
    direct request's line alone leaves it reported, as a second request does (``TWICE``);
    with one at each, or one on the line it is reported at, it is covered."""
    comment = "  # promptcache: ignore[PC001]"
    assert _found(THROUGH_HELPER.format(first="", second="")) == [("PC001", 17)]
    assert _found(THROUGH_HELPER.format(first=comment, second="")) == [("PC001", 17)]
    assert _found(THROUGH_HELPER.format(first="", second=comment)) == [("PC001", 17)]
    assert _found(THROUGH_HELPER.format(first=comment, second=comment)) == []
    reported = THROUGH_HELPER.format(first="", second="").replace(
        'datetime.now()}"', 'datetime.now()}"  # promptcache: ignore[PC001]'
    )
    assert _found(reported) == []


#: a text sent through a dict splatted into the request, built on the line of the splat or
#: above it
SPLATTED = """\
def ask(q: str) -> object:
    kwargs = {{"system": f"Now {{datetime.now()}}"}}
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        **kwargs,{comment}
        messages=[{{"role": "user", "content": q}}],
    )


def ask_later(q: str) -> object:
    kwargs = {{"model": "claude-sonnet-4-5", "max_tokens": 1024}}
    kwargs["system"] = f"Now {{datetime.now()}}"
    return client.messages.create(
        **kwargs,{comment}
        messages=[{{"role": "user", "content": q}}],
    )
"""


def test_a_comment_on_the_splat_covers_what_the_dict_sends() -> None:
    """``**kwargs,`` is where the dict's entries enter the request: a comment there covers
    them as one on ``system=s`` does; another rule's code does not."""
    assert _found(SPLATTED.format(comment="")) == [("PC001", 8), ("PC001", 19)]
    assert _found(SPLATTED.format(comment="  # promptcache: ignore[PC001]")) == []
    assert _found(SPLATTED.format(comment="  # promptcache: ignore[PC002]")) == [
        ("PC001", 8),
        ("PC001", 19),
    ]


#: a system message built before the request, and one no request here is seen to send
SYSTEM_MESSAGE = """\
def ask(q: str) -> object:
    msgs = [{{"role": "system", "content": f"Now {{datetime.now()}}"}}]
    msgs.append({{"role": "user", "content": q}})
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        messages=msgs,{comment}
    )


def build() -> list[dict[str, str]]:
    return [{{"role": "system", "content": f"Now {{datetime.now()}}"}}]{comment}
"""


def test_a_system_message_is_covered_where_it_is_sent() -> None:
    assert _found(SYSTEM_MESSAGE.format(comment="")) == [("PC001", 8), ("PC001", 18)]
    # the comment on `messages=msgs` covers the message sent there; `build()`'s, returned
    # for a request this module does not make, only on its own line
    assert _found(SYSTEM_MESSAGE.format(comment="  # promptcache: ignore[PC001]")) == []
    only_sent = SYSTEM_MESSAGE.format(comment="").replace(
        "messages=msgs,", "messages=msgs,  # promptcache: ignore[PC001]"
    )
    assert _found(only_sent) == [("PC001", 18)]


JOINED = """\
def ask(q: str, labels: list[str]) -> object:
    names = set(labels)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        system="Labels: " + ", ".join(set(labels)) + "; " + ", ".join(names),
        messages=[{"role": "user", "content": q}],
    )
"""

LOOPED = """\
def ask(q: str, labels: list[str]) -> object:
    text = ""
    for label in set(labels):
        text += f"{label}\\n"
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        system=text,
        messages=[{"role": "user", "content": q}],
    )
"""


def test_a_set_that_str_join_iterates_is_fixed_with_sorted() -> None:
    result = lint_source(HEAD + JOINED, "app.py", LintConfig())
    assert [(d.code, d.fix is not None) for d in result.diagnostics] == [
        ("PC004", True),
        ("PC004", True),
    ]
    fixed, count = fix_source(HEAD + JOINED, "app.py", LintConfig())
    assert count == 2
    assert (
        '        system="Labels: " + ", ".join(sorted(set(labels))) + "; " + '
        '", ".join(sorted(names)),\n' in fixed
    )
    assert lint_source(fixed, "app.py", LintConfig()).diagnostics == ()


def test_a_set_of_elements_not_known_to_be_strings_gets_no_fix() -> None:
    # a `for` loop takes any element: `labels: list[str]` is an annotation, not a proof
    result = lint_source(HEAD + LOOPED, "app.py", LintConfig())
    assert [(d.code, d.fix) for d in result.diagnostics] == [("PC004", None)]
