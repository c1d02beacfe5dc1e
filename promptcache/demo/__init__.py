"""``promptcache demo``: the whole toolkit on a real instruct model (SmolLM2-135M-Instruct), end
to end, in under two minutes on 2 CPU cores.

The demo lints two versions of one chat app (``examples/naive_app.py`` and
``examples/layered_app.py``), starts the bundled engine (``promptcache engine serve``) and the
logging proxy in front of it (``promptcache proxy``) as child processes, replays the same
multi-user, multi-turn workload through each app with the official ``openai`` client, and prints
what prompt caching did for each: hit rate from the engine's own ``cached_tokens``, time to first
token, cost at a vendor's rates, and why the cache broke. It also writes the proxy's HTML reports.

Modules: :mod:`.model` (which checkpoint), :mod:`.processes` (child servers, no orphans),
:mod:`.workload` (children, story arcs, concurrent users), :mod:`.instructions` (how much
of the system prompt fits the model's context), :mod:`.summary` (numbers and the final
printout), :mod:`.runner` (the steps in order). ``promptcache/commands/demo.py`` is the CLI.
"""
