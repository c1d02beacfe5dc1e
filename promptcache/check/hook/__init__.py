"""The folder ``promptcache check`` puts first on the child's ``PYTHONPATH``: it holds only the
``sitecustomize`` module that loads the check hook (``promptcache/check/child.py``)."""
