"""Every error promptcache raises on purpose, in one tree.

Catch ``PromptCacheError`` to handle anything of ours in one clause. Each class says in its
docstring when it is raised; each instance's message says what to change.

::

    PromptCacheError
    ├── ConfigError (also ValueError)        bad option, config file or argument value
    │   └── KVBudgetError                    a KV byte budget holds no block of the model
    ├── PromptError                          building or rendering a prompt
    │   ├── CanonicalizationError (also ValueError)   value with no canonical JSON form
    │   ├── LayerOrderError                  frozen content added after session/dynamic content
    │   ├── BreakpointLimitError             more than 4 cache breakpoints asked for
    │   │   (alias: TooManyBreakpoints)
    │   ├── BreakpointTTLOrderError (also ValueError)  a 1h breakpoint after a 5m one
    │   └── RequestShapeError (also ValueError)   body is not a request of the named API
    ├── PricingError
    │   └── UnknownModelPriceError (also KeyError)   no price row and no user-supplied rates
    ├── UsageParseError (also ValueError)    a vendor usage payload we cannot read
    ├── LintError
    │   ├── UnknownRuleError                 a rule id in config or a suppression does not exist
    │   ├── FixConflictError                 two autofixes overlap
    │   └── LintWorkerError                  a worker process of the analysis died (killed)
    ├── ProxyError
    │   ├── UpstreamError                    the upstream failed (wraps httpx.TransportError)
    │   └── StoreError                       the SQLite log failed (wraps sqlite3.Error)
    ├── EngineError
    │   ├── InvalidRequestError (also ValueError)   -> HTTP 400 from the engine server
    │   │   └── RequestFieldError            one named request field is missing or invalid
    │   ├── ModelLoadError                   checkpoint missing, unreadable or unsupported
    │   ├── KernelInputError (also ValueError)   kernel given a bad tensor shape/dtype/device
    │   └── OutOfBlocksError                 internal: the scheduler preempts, users never see it
    └── DemoError                            `promptcache demo`: a child server or a step failed
"""

from __future__ import annotations

__all__ = [
    "BreakpointLimitError",
    "BreakpointTTLOrderError",
    "CanonicalizationError",
    "ConfigError",
    "DemoError",
    "EngineError",
    "FixConflictError",
    "InvalidRequestError",
    "KVBudgetError",
    "KernelInputError",
    "LayerOrderError",
    "LintError",
    "LintWorkerError",
    "ModelLoadError",
    "OutOfBlocksError",
    "PricingError",
    "PromptCacheError",
    "PromptError",
    "ProxyError",
    "RequestFieldError",
    "RequestShapeError",
    "StoreError",
    "TooManyBreakpoints",
    "UnknownModelPriceError",
    "UnknownRuleError",
    "UpstreamError",
    "UsageParseError",
]


class PromptCacheError(Exception):
    """Base class of every error promptcache raises on purpose."""


class ConfigError(PromptCacheError, ValueError):
    """An option, argument or config file value is invalid; the message names it and the fix."""


class KVBudgetError(ConfigError):
    """A KV byte budget is smaller than one KV block of the model.

    ``setting`` names the budget as an ``EngineConfig``-level setting: ``"kv_cache_bytes"`` (the
    KV pool) or ``"swap_space"`` (the CPU swap pool), so a CLI can name its own option.
    """

    def __init__(self, message: str, *, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


class PromptError(PromptCacheError):
    """A prompt cannot be built or rendered as asked."""


class CanonicalizationError(PromptError, ValueError):
    """A value has no canonical JSON form (NaN, Infinity, a non-string key, an unknown type)."""


class LayerOrderError(PromptError):
    """Frozen content was added after session or dynamic content, which would move the prefix."""


class BreakpointLimitError(PromptError):
    """More cache breakpoints were asked for than the vendor accepts (4 for Anthropic/Bedrock)."""


TooManyBreakpoints = BreakpointLimitError


class BreakpointTTLOrderError(PromptError, ValueError):
    """A 1h cache breakpoint would follow a 5m one; vendors require longer TTLs first (else 400)."""


class RequestShapeError(PromptError, ValueError):
    """A request body does not have the shape of the vendor API it was given as (or detected as)."""


class PricingError(PromptCacheError):
    """A cost cannot be computed."""


class UnknownModelPriceError(PricingError, KeyError):
    """No price row matches the model and no rates were supplied. Never priced as 0."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class UsageParseError(PromptCacheError, ValueError):
    """A vendor usage payload is missing required fields or has values of the wrong type."""


class LintError(PromptCacheError):
    """`promptcache lint` cannot run as configured."""


class UnknownRuleError(LintError):
    """A rule id in config or in a `# promptcache: ignore[...]` comment does not exist."""


class FixConflictError(LintError):
    """Two autofix edits overlap; neither is applied."""


class LintWorkerError(LintError):
    """A worker process of `promptcache lint`'s analysis ended without an answer: the system
    killed it (the out-of-memory killer, a signal, a CPU-time limit). Nothing is reported for
    the run; ``--jobs 1`` analyses in the one process, where the files are taken one at a time."""


class ProxyError(PromptCacheError):
    """The proxy failed for a reason that is not the client's mistake."""


class UpstreamError(ProxyError):
    """The upstream API timed out, refused the connection or broke the stream."""


class StoreError(ProxyError):
    """The SQLite request log could not be opened, migrated or written."""


class EngineError(PromptCacheError):
    """The bundled inference engine failed."""


class InvalidRequestError(EngineError, ValueError):
    """A generation request is invalid (too long, bad sampling values); the server answers 400."""


class RequestFieldError(InvalidRequestError):
    """One field of an engine-server request is missing, of the wrong type or out of range.

    ``param`` names the field as the client sent it ("temperature", "messages[1].content") and
    ``code`` is a short machine-readable reason ("invalid_type", "context_length_exceeded") or
    None; the server copies both into the OpenAI error body's ``param`` and ``code``.
    """

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


class ModelLoadError(EngineError):
    """A checkpoint is missing, unreadable, or of an unsupported architecture."""


class KernelInputError(EngineError, ValueError):
    """A kernel wrapper in promptcache.kernels got a tensor of the wrong shape, dtype or device.

    Raised before anything is launched; the message names the argument, what it got and what it
    needs. A programming error in the caller (the engine), never the end user's request.
    """


class OutOfBlocksError(EngineError):
    """The KV block pool is exhausted. Internal: the scheduler preempts and never lets it escape."""


class DemoError(PromptCacheError):
    """``promptcache demo`` cannot go on: a server it started exited or never became healthy,
    or a step of the workload failed. The message names the step and the log file to read."""
