"""``python -m promptcache``: the same command line as the ``promptcache`` console script.

For environments where the script's folder is not on ``PATH`` (a virtual environment used
without activating it, ``pipx run --spec``, CI images that install with ``--user``).
"""

from promptcache.cli import main

if __name__ == "__main__":
    main()
