# One command runs the project (`make run`), one passes its tests (`make test`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck contracts pytest run bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check supervision providers adk_actors tests benchmarks
	$(BIN)/ruff format --check supervision providers adk_actors tests benchmarks

contracts: $(STAMP)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy supervision

pytest: $(STAMP)
	$(BIN)/python -m pytest

test: lint contracts typecheck pytest

run: $(STAMP)
	$(BIN)/python -m supervision.demo

bench: $(STAMP)
	$(BIN)/python benchmarks/kernel.py
	$(BIN)/python benchmarks/runtime.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
