"""Whole-program analysis: module names, exported summaries, the fixpoint driver, the cache.

The taint engine (``..taint``) analyses one module at a time. This package joins the modules of
one run into a program: ``modules`` names each file and resolves qualified names to the file
that defines them; ``exports`` turns a module's function, class and value summaries into JSON
and back; ``program`` iterates the per-file analyses to a fixpoint, each file seeing the
summaries of what it imports; ``cache`` keeps each file's results keyed by its content hash, the
linter version and the settings, so a re-run analyses only what changed.
"""
