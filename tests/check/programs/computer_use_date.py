"""A computer-use agent's request, in the shape of Anthropic's computer-use demo loop: the API's
own computer, text editor and bash tools, which the request names in a few bytes and the API
expands into about 1,680 tokens of definitions, before a system prompt of about 800 tokens
that names today's date, with a breakpoint on it. The date's format is the first argument; a
second argument ``short`` sends the bash tool alone and a one-line system prompt instead."""

import sys
from datetime import datetime

import anthropic

CAPABILITIES = [
    "You are utilising an Ubuntu virtual machine using x86_64 architecture with internet access.",
    "You can feel free to install Ubuntu applications with your bash tool. Use curl, not wget.",
    "To open firefox, please just click on the firefox icon. Note, firefox-esr is installed.",
    "Using bash tool you can start GUI applications, but you need to set export DISPLAY=:1 and "
    "use a subshell. GUI apps run with bash tool will appear within your desktop environment, "
    "but they may take some time to appear. Take a screenshot to confirm it did.",
    "When using your bash tool with commands that are expected to output very large quantities "
    "of text, redirect into a tmp file and use str_replace_based_edit_tool or grep -n -B <lines "
    "before> -A <lines after> <query> <filename> to confirm output.",
    "When viewing a page it can be helpful to zoom out so that you can see everything on the "
    "page. Either that, or make sure you scroll down to see everything before deciding "
    "something isn't available.",
    "When using your computer function calls, they take a while to run and send back to you. "
    "Where possible/feasible, try to chain multiple of these calls all into one request.",
    "When using Firefox, if a startup wizard appears, IGNORE IT. Do not even click 'skip this "
    "step'. Instead, click on the address bar where it says 'Search or enter address', and "
    "enter the appropriate search term or URL there.",
    "If the item you are looking at is a pdf, if after taking a single screenshot of the pdf it "
    "seems that you want to read the entire document instead of trying to continue to read the "
    "pdf from your screenshots and navigation, determine the URL, use curl to download the pdf, "
    "install and use pdftotext to convert it to a text file, and then read that text file "
    "directly with your str_replace_based_edit_tool.",
]
TODAY = datetime.today().strftime(sys.argv[1])
SYSTEM = "<SYSTEM_CAPABILITY>\n" + "".join(f"* {line}\n" for line in CAPABILITIES * 2)
SYSTEM += f"* The current date is {TODAY}.\n</SYSTEM_CAPABILITY>"
TOOLS = [
    {"type": "computer_20250124", "name": "computer", "display_width_px": 1024,
     "display_height_px": 768},
    {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    {"type": "bash_20250124", "name": "bash"},
]  # fmt: skip
if sys.argv[2:] == ["short"]:
    SYSTEM, TOOLS = f"Today is {TODAY}.", TOOLS[2:]


def main() -> None:
    client = anthropic.Anthropic()
    client.beta.messages.create(
        model="claude-sonnet-4-5-20250929",
        max_tokens=1024,
        system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        tools=TOOLS,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": "Open firefox and search for the weather."}],
        betas=["computer-use-2025-01-24"],
    )


main()
