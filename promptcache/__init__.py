"""promptcache: make LLM prompt caching work and pay off.

The public SDK is re-exported here; see docs/sdk.md. Subpackages: ``promptcache.lint_rules``
(the linter), ``promptcache.proxy`` (logging proxy), ``promptcache.engine`` (inference engine),
``promptcache.kernels`` (Triton kernels).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
