# The two entry points of the README: `make demo` (the main job) and `make test` (the suite).
# Both create or reuse .venv and install what a fresh machine lacks.

VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint-self typecheck clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || python3 -m venv $(VENV)
	# torch first, from the CPU wheel on disk: otherwise a dependency pulls a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[all,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/sdk_quickstart.py

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
