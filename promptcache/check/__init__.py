"""``promptcache check``: run a program twice, perturbed, and prove what breaks its cached prefix.

The program runs once as a baseline and once more per perturbation (the clock, the hash seed,
random/uuid/secrets, directory-listing order, the process id; ``promptcache.check.perturbation``)
against a local capture endpoint that speaks the vendors' wire formats
(``promptcache.check.capture``). An in-process hook (``promptcache.check.child``) applies the
perturbation and reports each request's call site. Requests are paired across runs and their
cacheable prefixes compared with the SDK's fingerprint core (``promptcache.check.pairing``);
each request is also checked against the vendors' breakpoint rules
(``promptcache.check.structure``). A difference is a real cache break: the same code sent
different prefixes only because the environment changed.

Entry points: ``promptcache check -- COMMAND`` (``promptcache.commands.check``), ``pytest
--promptcache-check`` (``promptcache.check.pytest_plugin``) and :func:`run_check`.
"""

from .runner import CheckResult, CommandFailedError, RunResult, run_check

__all__ = ["CheckResult", "CommandFailedError", "RunResult", "run_check"]
