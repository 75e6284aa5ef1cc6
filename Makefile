# make run: the whole service on the embedded default.  make test: the full suite.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
ENV_FILE ?= .env
# The web port of make run: PORT=... on the command line or in the environment, else the PORT=
# line of ENV_FILE (.env), else 8000.
PORT ?= $(or $(shell sed -n 's/^PORT=\([0-9][0-9]*\)[[:space:]]*$$/\1/p' '$(ENV_FILE)' 2>/dev/null | tail -n 1),8000)
# The suite runs against this machine's real PostgreSQL and Redis (override to point elsewhere).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/eds
TEST_BROKER_URL ?= redis://127.0.0.1:6379/0
# One more test process than cores: the end-to-end tests spend much of their time waiting on the
# servers and workers they start, and a third process fills that time (8.7 min against 11.6 for
# the PostgreSQL pass on a 2-core VM).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 1 )))

.PHONY: help run test lint bench migrate clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(BIN)/.installed: requirements.txt requirements-dev.txt
	@command -v $(PY) >/dev/null || { echo "Python 3.11 is required ($(PY) not found)"; exit 1; }
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

run: $(BIN)/.installed ## Start web (127.0.0.1:8000; PORT=... or .env's PORT to change), workers (ingestion+scoring, marketplace) and scheduler on SQLite, print a demo key
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	# honcho gives each process its own PORT, so the web port travels as WEB_PORT. honcho reads
	# no .env (-e /dev/null): its values would override the command line's; the service reads
	# .env itself, below the process's environment (config/env.py).
	PATH=$(CURDIR)/$(BIN):$$PATH WEB_PORT=$(PORT) $(BIN)/honcho start -f Procfile -e /dev/null

# The second pass runs on SQLite, the embedded mode's database, every test marked
# `both_databases` (those that apply or score data mark their module so). Each pass spreads over
# TEST_WORKERS processes (pytest-xdist), each with a data directory of its own (broker files,
# metrics) and, from pytest-django, a database of its own; tests that start real servers and
# workers all run in one of them (tests/conftest.py), since their workers share the broker.
test_workers = data=$$(mktemp -d); for n in $$(seq 1 $(TEST_WORKERS)); do \
	printf -- "--tx popen//env:DATA_DIR=$$data/$$n//env:PROMETHEUS_MULTIPROC_DIR=$$data/$$n/metrics "; \
	done
test: $(BIN)/.installed ## Run the full test suite (real PostgreSQL, Redis, RabbitMQ; then SQLite)
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) \
		$(BIN)/pytest --create-db --dist loadgroup $$($(test_workers)) $(PYTEST_ARGS)
	DATABASE_URL= CELERY_BROKER_URL= \
		$(BIN)/pytest -p no:cacheprovider -q --dist loadgroup $$($(test_workers)) \
		-m "both_databases and not e2e and not postgresql"

# mypy's settings and what they relax are in pyproject.toml ([tool.mypy]); its cache is
# .mypy_cache/. The format check comes last, so a file to reformat hides no other finding.
lint: $(BIN)/.installed ## ruff's lint, mypy over the apps, Django's checks, ruff's format check
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python manage.py check
	$(BIN)/ruff format --check .

bench: $(BIN)/.installed ## Run the benchmarks under bench/ and print their figures
	$(BIN)/python bench/run.py $(BENCH)

migrate: $(BIN)/.installed ## Apply migrations to the configured database
	$(BIN)/python manage.py migrate --noinput

clean: ## Remove the embedded database, broker files and the virtualenv
	rm -rf .data $(VENV)
