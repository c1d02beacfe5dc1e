"""A prefix that differs between the runs for a reason check does not change (a monotonic
clock, a counter an earlier run left on disk) is reported without naming random, uuid4 and
secrets, which the program never drew from; a draw of the program's own is still named. Real
child processes through the official openai client and the real capture endpoint."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from check_support import check_source

from promptcache.check.output import render

_ASK = """
import os, random, sys, time
from openai import OpenAI

def ask(system):
    OpenAI().chat.completions.create(model="gpt-4o-mini", messages=[
        {"role": "system", "content": system + " You are careful." * 400},
        {"role": "user", "content": "hi"}])

kind = sys.argv[1]
if kind == "monotonic":
    ask(f"Uptime {time.monotonic():.6f} s.")
elif kind == "disk":
    path = sys.argv[2]
    visits = int(open(path).read()) + 1 if os.path.exists(path) else 1
    open(path, "w").write(str(visits))
    ask(f"Visit number {visits}.")
else:
    ask(f"Lucky number {random.randint(1, 10**6)}.")
"""


def _check(
    tmp: Path, *args: str, **options: object
) -> tuple[list[tuple[str, tuple[str, ...]]], str]:
    result = check_source(tmp, "app.py", textwrap.dedent(_ASK), *args, **options)
    return [(f.rule, f.causes) for f in result.findings], render(result, "text")


def test_a_monotonic_clock_reading_is_not_said_to_be_random(tmp_path: Path) -> None:
    found, text = _check(tmp_path, "monotonic")
    assert found == [("PC002", ("unexplained",))]
    assert "caused by random" not in text
    assert "inside the cacheable prefix; unexplained: none of the changes check made shows" in text


_ASK_ANTHROPIC = """
import time
import anthropic

anthropic.Anthropic().messages.create(
    model="claude-sonnet-4-5", max_tokens=10,
    system=[{"type": "text", "text": f"Uptime {time.monotonic():.6f} s." + " Be careful." * 400,
             "cache_control": {"type": "ephemeral"}}],
    messages=[{"role": "user", "content": "hi"}])
"""


def test_the_anthropic_client_s_tracing_import_is_not_a_draw_of_the_program(
    tmp_path: Path,
) -> None:
    # importing anthropic imports opentelemetry (a dependency of the client), whose context
    # module draws a uuid4 per key it creates: every anthropic app was 'caused by random'
    imports = "import sys, anthropic; print('opentelemetry.context' in sys.modules)"
    probe = subprocess.run([sys.executable, "-c", imports], capture_output=True, text=True)
    assert probe.stdout.strip() == "True", (
        "the installed anthropic client does not import opentelemetry: nothing to test"
    )
    result = check_source(tmp_path, "app.py", textwrap.dedent(_ASK_ANTHROPIC))
    text = render(result, "text")
    assert [(f.rule, f.causes) for f in result.findings] == [("PC002", ("unexplained",))]
    assert "caused by random" not in text


def test_a_counter_an_earlier_run_left_on_disk_is_not_said_to_be_random(tmp_path: Path) -> None:
    found, text = _check(tmp_path, "disk", str(tmp_path / "visits.txt"))
    assert found == [("PC002", ("unexplained",))]
    assert "caused by random" not in text


def test_a_draw_of_the_program_s_own_is_still_named(tmp_path: Path) -> None:
    found, text = _check(tmp_path, "draw")
    assert found == [("PC002", ("random",))]
    assert "caused by random, uuid4 and secrets" in text


def test_isolated_runs_that_all_show_a_difference_name_none_of_their_kinds(
    tmp_path: Path,
) -> None:
    # each isolated run changes one kind and named it: the monotonic reading was PC001 "caused
    # by the wall clock", PC004 "caused by PYTHONHASHSEED", ... in five findings. It differs
    # from the baseline's in the run of every kind, so it is none of them: one finding
    found, text = _check(tmp_path, "monotonic", isolate=True)
    assert found == [("PC002", ("unexplained",))]
    assert "inside the cacheable prefix; unexplained: none of the changes check made shows" in text
    assert "in runs 1, 2, 3, 4 and 5" in text


_ASK_THROUGH_HTTPX = """
import time
import httpx
from openai import OpenAI

OpenAI(http_client=httpx.Client(timeout=30)).chat.completions.create(
    model="gpt-4o-mini", messages=[
        {"role": "system", "content": f"Uptime {time.monotonic():.6f} s." + " Be careful." * 400},
        {"role": "user", "content": "hi"}])
"""


def test_a_draw_a_client_s_import_makes_is_not_the_program_s(tmp_path: Path) -> None:
    # httpx imports its command line (httpx._main) wherever click, rich and pygments are
    # installed (typer brings all three), and rich.style draws getrandbits(24) at import: an
    # uptime in the system prompt read 'caused by random, uuid4 and secrets' in such a venv
    imports = "import sys, httpx; print('rich.style' in sys.modules)"
    probe = subprocess.run([sys.executable, "-c", imports], capture_output=True, text=True)
    assert probe.stdout.strip() == "True", (
        "the installed httpx does not import rich: nothing to test"
    )
    result = check_source(tmp_path, "app.py", textwrap.dedent(_ASK_THROUGH_HTTPX))
    text = render(result, "text")
    assert [(f.rule, f.causes) for f in result.findings] == [("PC002", ("unexplained",))]
    assert "caused by random" not in text


def test_an_id_the_program_s_own_module_draws_at_import_is_still_named(tmp_path: Path) -> None:
    # a module's top-level draw counts when the program imports it (a session id made once)
    (tmp_path / "session.py").write_text(
        "import uuid\nSESSION = uuid.uuid4().hex\n", encoding="utf-8"
    )
    source = _ASK_THROUGH_HTTPX.replace(
        "import httpx\n", "import httpx\nfrom session import SESSION\n"
    ).replace("Uptime {time.monotonic():.6f} s.", "Session {SESSION}.")
    result = check_source(tmp_path, "app.py", textwrap.dedent(source))
    assert [(f.rule, f.causes) for f in result.findings] == [("PC002", ("random",))]
    assert "caused by random, uuid4 and secrets" in render(result, "text")


_DATE_AND_UPTIME = """
import time
from datetime import datetime
from openai import OpenAI

up = time.monotonic()
system = (
    f"Current date: {datetime.now():%A, %B %d, %Y}" + " Be careful." * 400
    + f" System uptime: {int(up // 60)} minutes and {up % 60:.2f} seconds. Volume: 5/10."
)
OpenAI().chat.completions.create(model="gpt-4o-mini", messages=[
    {"role": "system", "content": system}, {"role": "user", "content": "hi"}])
"""


def test_isolated_runs_name_no_kind_for_an_uptime_beside_a_date(tmp_path: Path) -> None:
    # a robot agent's system prompt holds the date and the machine's uptime: the clock's run
    # counts the uptime with the date (one PC001), so the uptime did not differ in the runs
    # of every kind, and the hash-seed, listing and pid runs each named their own kind for it
    # (two PC004 and a PC002 'caused by the process id'), though it is none of them
    found, text = _check_source(tmp_path, _DATE_AND_UPTIME, isolate=True)
    assert sorted(found) == [("PC001", ("clock",)), ("PC002", ("unexplained",))]
    assert "PYTHONHASHSEED" not in text.split("\nrun 0:")[0]
    assert "caused by directory-listing order" not in text
    assert "caused by the process id" not in text
    assert "in runs 2, 3, 4 and 5" in text


def _check_source(
    tmp: Path, source: str, **options: object
) -> tuple[list[tuple[str, tuple[str, ...]]], str]:
    result = check_source(tmp, "app.py", textwrap.dedent(source), **options)
    return [(f.rule, f.causes) for f in result.findings], render(result, "text")


_SUMMARY = """
import os, sys
from openai import OpenAI

path = sys.argv[1]
messages = [{"role": "system", "content": "You are careful." * 400}]
if sys.argv[2] == "summary" and os.path.exists(path):  # what the last session left behind
    messages.append({"role": "system", "content": "Summary: " + open(path).read()})
if sys.argv[2] == "set":  # the look-alike: system messages in a set's order
    for name in {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}:
        messages.append({"role": "system", "content": f"Tool {name} is available."})
messages.append({"role": "user", "content": "What is 2+2?"})
OpenAI().chat.completions.create(model="gpt-4o-mini", messages=messages)
open(path, "w").write("the user asked about sums")
"""


def test_a_message_an_earlier_run_left_on_disk_before_the_question_is_no_reordering(
    tmp_path: Path,
) -> None:
    """Run 1 reads the summary run 0 wrote into a system message before the question, so its
    messages[1] is that summary where run 0's is the question. The messages apart from the
    system ones were the same in both runs, which read as 'the same segments of that kind in
    another order': PC004 'is in another order ... caused by PYTHONHASHSEED' (found on a fresh
    CLI app that keeps a rolling summary on disk). It is a value check does not change."""
    result = check_source(
        tmp_path, "app.py", textwrap.dedent(_SUMMARY), str(tmp_path / "s.txt"), "summary"
    )
    text = render(result, "text")
    assert [(f.rule, f.causes) for f in result.findings] == [("PC002", ("unexplained",))]
    assert "messages[1].content differs between run 0 and run 1" in text
    assert "in another order" not in text
    # the look-alike: system messages that are the same items in another order still are
    result = check_source(
        tmp_path, "app.py", textwrap.dedent(_SUMMARY), str(tmp_path / "t.txt"), "set"
    )
    assert [(f.rule, f.causes) for f in result.findings] == [("PC004", ("hash_seed",))]
    assert "is in another order between run 0 and run 1" in render(result, "text")


def test_rich_s_style_id_drawn_when_the_program_imports_rich_is_not_the_program_s(
    tmp_path: Path,
) -> None:
    """A command-line app that imports rich itself, before any client (its console module),
    runs rich.style's import-time getrandbits(24), an id for its styles that is never text:
    every difference check cannot explain read 'caused by random, uuid4 and secrets' (found on
    a fresh CLI app whose rolling summary, read back from disk, was blamed on random)."""
    source = "from rich.console import Console\nConsole()\n" + textwrap.dedent(_ASK_THROUGH_HTTPX)
    result = check_source(tmp_path, "app.py", source)
    text = render(result, "text")
    assert [(f.rule, f.causes) for f in result.findings] == [("PC002", ("unexplained",))]
    assert "caused by random" not in text
    # the look-alike: the program's own draw beside the import is still named
    drawn = source.replace(
        "Uptime {time.monotonic():.6f} s.", "Lucky {__import__('random').randint(1, 10**6)}."
    )
    result = check_source(tmp_path, "app.py", drawn)
    assert [(f.rule, f.causes) for f in result.findings] == [("PC002", ("random",))]
