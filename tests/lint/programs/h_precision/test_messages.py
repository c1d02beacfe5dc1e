# A test that reads messages back: no sink is guessed from a variable's name.
from datetime import datetime


def test_reads_back(recorded):
    system_messages = [m for m in recorded if m["role"] == "system"]
    stamp = datetime.now()
    system_prompt_seen = f"{system_messages[0]['content']} at {stamp}"
    assert system_prompt_seen
