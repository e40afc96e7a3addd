# Set-up and checks. `make test` works on a fresh machine: it creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck bench golden run clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check referee tests bench
	$(BIN)/mypy
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check referee tests bench
	$(BIN)/ruff format --check referee tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench.engine

golden: $(STAMP)
	$(BIN)/python -m tests.golden_gen

run: $(STAMP)
	@echo "The gRPC service is not built yet (issue 4); 'make run' will serve once it exists."
	@echo "Until then: $(BIN)/pinochle-referee query  /  $(BIN)/pinochle-referee audit FILE"
	@false

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
