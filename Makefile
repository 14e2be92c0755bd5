# The two commands from the README:
#   make serve   set up what the site needs, then serve it on http://127.0.0.1:8000
#   make test    set everything up (test tooling too), then run the whole test suite
# and the one way the site is built, by the Pages workflow too:
#   make site    set up what the site needs, then build it strictly into site/
# Setup (scripts/install.py) is idempotent and runs again only when pyproject.toml or the
# script changes, or when .venv (and the stamp files inside it) is deleted. It has two
# levels: the site's (.site-stamp: the package with the `docs` extra) and the tests'
# (.setup-stamp: every extra, Chromium, mypy's cache), which builds on the first.

PYTHON   ?= python3
VENV     := .venv
PY       := $(VENV)/bin/python
SITE_DIR := site
SERVE_ADDR := 127.0.0.1:8000
SITE_STAMP := $(VENV)/.site-stamp
STAMP      := $(VENV)/.setup-stamp
INSTALL  := scripts/install.py
FIRST_BUILD := the first build draws every figure and runs every notebook, a few minutes; \
	later ones reuse .cache/ and take about 10 s

export NO_MKDOCS_2_WARNING := 1

.PHONY: setup site-setup site serve test bench lint clean mutants

site-setup: $(SITE_STAMP)
setup: $(STAMP)

$(SITE_STAMP): pyproject.toml $(INSTALL)
	@test -x $(PY) || { echo "==> Creating the virtual environment $(VENV)"; $(PYTHON) -m venv $(VENV); }
	$(PY) $(INSTALL) site
	touch $@

$(STAMP): $(SITE_STAMP) package-lock.json
	$(PY) $(INSTALL) test
	touch $@

# The site, built strictly (a broken link or anchor is an error), as the Pages workflow
# publishes it; $SITE_URL (the published address) is read by mkdocs.yml.
site: $(SITE_STAMP)
	@echo "==> Building the site into $(SITE_DIR)/ ($(FIRST_BUILD))"
	$(PY) -m mkdocs build --strict --site-dir $(SITE_DIR)

serve: $(SITE_STAMP)
	@echo "==> Building the site, then serving it on http://$(SERVE_ADDR)/ ($(FIRST_BUILD))"
	$(PY) -m mkdocs serve --dev-addr $(SERVE_ADDR)

# In parallel (pytest-xdist, one worker per core); a page's browser checks stay on one
# worker (--dist loadgroup), so each page is opened once per colour scheme. The odd-numbered
# workers compute with another set of CPU kernels than the machine's own (tests/kernel_settings.py),
# so a page's printed number that hangs on them fails here, as on a reader's machine.
test: setup
	$(PY) -m pytest -n auto --dist loadgroup

bench: setup
	$(PY) -m attnlab.bench --all --output src/attnlab/results
	$(PY) scripts/live_bench.py --output scripts/live_bench.json

# Mutation testing with mutmut (pyproject.toml's [tool.mutmut]; not part of `make test`):
# each mutant of the core modules, in a fresh copy under mutants/, against only the selected
# tests that call its function, one thread per process; then tests/mutants/REPORT.md, which
# fails the target when a mutant the tests do not kill has no reason in survivors.toml.
mutants: setup
	rm -rf mutants
	start=$$(date +%s) && OMP_NUM_THREADS=1 $(VENV)/bin/mutmut run && \
	$(PY) scripts/mutation_report.py --wall-seconds $$(( $$(date +%s) - start ))

lint: setup
	$(PY) -m ruff check src tests hooks scripts
	$(PY) -m mypy
	npm run --silent lint

clean:
	rm -rf site .pytest_cache .mypy_cache .ruff_cache
