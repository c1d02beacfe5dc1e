# A demo run once: the tools come from the catalog's own get() method, whose definitions hold
# nothing of the cache folder its downloads helper keeps; the system text read with .get()
# from a dict of templates does name the user's home folder.
import os

import anthropic

from .sdk import Hub

client = anthropic.Anthropic()
hub = Hub(provider="anthropic")
tools = hub.catalog.get("user-1", names=["search", "fetch"])
templates = {"system": f"Files you fetch are saved under {os.path.expanduser('~')}/.hub."}

response = client.messages.create(
    model="claude-sonnet-4-5",
    max_tokens=512,
    tools=tools,
    system=templates.get("system"),  # PC017: 11
    messages=[{"role": "user", "content": "Find the latest release notes."}],
)
