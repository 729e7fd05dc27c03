# make demo  -> the whole pipeline on the embedded default (no GPU, no server, no account)
# make test  -> the test suite without the slow tests (bootstraps .venv, system packages and services first);
#               it says how many tests it runs, and every tenth of them how many ran with an ETA
# make test-fast -> the same without the product-level (e2e) runs
# make lint  -> ruff, the import-layer contracts and mypy (cache in .mypy_cache)
VENV  ?= .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.skillgate-setup

.PHONY: setup demo test test-fast test-slow lint services clean-state

setup: $(STAMP)

$(STAMP): pyproject.toml infra/requirements-lock.txt infra/constraints-cpu.txt infra/setup.sh
	bash infra/setup.sh
	@touch $(STAMP)

services: setup
	bash infra/services.sh

demo: services
	$(VENV)/bin/skillgate run demo --execute

test: services
	$(PY) -m pytest -q

test-fast: services
	$(PY) -m pytest -q -m "not slow and not e2e"

test-slow: services
	$(PY) -m pytest -q -m slow

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

clean-state:
	rm -rf .skillgate
