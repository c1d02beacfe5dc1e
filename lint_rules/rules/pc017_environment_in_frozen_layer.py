r"""Machine or environment values in the global frozen layer.

Severity: info
Fix: none

## What it does
Reports the current directory, host name, user name, environment variables or temp dir
(`os.getcwd()`, `socket.gethostname()`, `getpass.getuser()`, `os.environ[...]`,
`tempfile.gettempdir()`) in the SDK's frozen layer or in a system prompt or tool list built once
at import.

## Why is this bad?
The frozen layer is meant to be byte-identical everywhere. A host name or home directory in it
gives each machine, user or container its own prefix, so a fleet of workers shares no cache.
This is informational: some single-machine tools want the working directory in the prompt;
put it in the session layer then.

## Example
```python
SYSTEM_PROMPT = f"You run on {socket.gethostname()} in {os.getcwd()}.\n{RULES}"
```

## Use instead
```python
SYSTEM_PROMPT = RULES
session_note = f"You run on {socket.gethostname()} in {os.getcwd()}."  # session layer
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

from collections.abc import Iterator

from .._base import Diagnostic, Severity
from ..context import ModuleContext
from ..facts import Kind


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for entry, fact in ctx.facts_in_prefix(
        lambda f, e: (
            f.kind is Kind.ENV
            and (e.region == "frozen" or (e.region in ("system", "tools") and (e.once or f.pinned)))
        )
    ):
        yield ctx.diagnostic(
            "PC017",
            f"machine-specific `{fact.detail}` in the global frozen prefix ({entry.sink}); "
            "each machine or user gets its own cache: move it to the session layer",
            entry.node,
            Severity.INFO,
            ctx.chain(fact),
        )
