"""Renderers: turn a ``PromptBuilder`` into one vendor's request parameters.

One module per vendor API; each exposes one ``render_*`` function that ``PromptBuilder.to_*``
calls. All return a ``promptcache.prompt_types.RenderedRequest`` (a ``dict`` with ``warnings`` and
``breakpoints`` attributes). Layer order is the same everywhere: tools, frozen system text,
session text, history, then the dynamic content last.
"""
