# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-long lint install clean bench budget

# The Python client is its own distribution; installed beside the server so
# `make test` runs its tests against a real `relay serve`.
$(STAMP): pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]' -e ./clients/python
	touch $(STAMP)

install: $(STAMP)

## Start Relay on https://127.0.0.1:8443 with SQLite under ./.relay and a demo account.
## Another port: `make run PORT=9443` (or RELAY_PORT=9443 make run).
run: $(STAMP)
	$(BIN)/relay serve --demo $(if $(PORT),--port $(PORT))

## Lint, type-check and run the whole test suite (SQLite; set RELAY_TEST_DATABASE_URL for PostgreSQL).
test: $(STAMP) lint
	$(BIN)/pytest

## The long profiles of the model-based test and of the fuzzing (RELAY_TEST_DATABASE_URL applies too).
test-long: $(STAMP)
	RELAY_MODEL_PROFILE=long RELAY_FUZZ_PROFILE=long $(BIN)/pytest tests/model tests/api/test_schemathesis.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench clients/python
	$(BIN)/ruff format --check src tests bench clients/python
	$(BIN)/mypy
	$(BIN)/lint-imports

## Every benchmark comparison in one go (about 12 minutes on 2 cores; needs wrk, kannel,
## node and PostgreSQL; Jasmin's part RabbitMQ and redis-server, skipped without them):
## prints one table, writes bench/results/latest.json. Creates and
## checks carry an Idempotency-Key on every POST as relay-client sends (the headline keys)
## and are measured without it too (bare_ keys); verifications also run end to end over
## SMPP with a live key (docs/benchmarks.md).
## `make bench SMOKE=1`: a few seconds each, figures meaningless (CI).
bench: $(STAMP)
	$(BIN)/python bench/run_all.py $(if $(SMOKE),--smoke)

## The request path's instruction budget: every budgeted operation counted under callgrind
## (about a minute), one table beside bench/budget.toml; fails when one is more than 2 %
## over its budget (docs/benchmarks.md, "Instruction budgets"). Needs valgrind and a C compiler.
budget: $(STAMP)
	$(BIN)/python bench/budget.py

clean:
	rm -rf $(VENV) .relay .mypy_cache .ruff_cache .pytest_cache
