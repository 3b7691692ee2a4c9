# One command runs the project (`make run`), one passes its tests (`make test`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Benchmarks run in their own venv: the peer (google-adk) pins other versions of shared
# dependencies, and must never change what the tests run against.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

.PHONY: test lint typecheck contracts pytest browser-deps run demo bench interop stress clean

# The console's browser tests (tests/browser) drive Debian's chromium through playwright's
# Python package (a dev extra); `playwright install` is never used. As root on a fresh
# machine, `make test` installs chromium; otherwise it says how, and those tests fail.
CHROMIUM := /usr/bin/chromium

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(BENCH_STAMP): pyproject.toml
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install -q -e '.[bench]'
	touch $(BENCH_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check supervision providers adk_actors tests benchmarks examples
	$(BIN)/ruff format --check supervision providers adk_actors tests benchmarks examples

contracts: $(STAMP)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy supervision providers adk_actors

browser-deps:
	@if [ ! -x $(CHROMIUM) ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "make: installing Debian's chromium for the browser tests"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
		else \
			echo "make: $(CHROMIUM) is missing: run 'sudo apt-get install -y chromium' (tests/browser needs it)" >&2; \
		fi; \
	fi

# The MCP interoperability tests run the npm reference server ("everything") with
# Debian's node; `make test` installs it once into .mcp-node (a stamp file).
MCP_NODE := .mcp-node
MCP_NODE_STAMP := $(MCP_NODE)/.installed

$(MCP_NODE_STAMP):
	npm install --prefix $(MCP_NODE) --no-audit --no-fund @modelcontextprotocol/server-everything@2026.8.31
	touch $(MCP_NODE_STAMP)

# Two worker processes (pytest-xdist), tests handed out one at a time: the suite mostly
# waits (sleeps, subprocesses, sockets), so two workers on two cores shorten it.
# `make pytest PYTEST_WORKERS=auto` uses every core; 0 runs it in one process.
PYTEST_WORKERS ?= 2

pytest: $(STAMP) browser-deps $(MCP_NODE_STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS)

test: lint contracts typecheck pytest

run: $(STAMP)
	$(BIN)/python examples/quickstart.py

demo: $(STAMP)
	$(BIN)/python -m supervision.demo

bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python benchmarks/kernel.py
	$(BENCH_VENV)/bin/python benchmarks/runtime.py
	$(BENCH_VENV)/bin/python benchmarks/events.py
	$(BENCH_VENV)/bin/python benchmarks/agents.py
	$(BENCH_VENV)/bin/python benchmarks/runner.py
	$(BENCH_VENV)/bin/python benchmarks/runs.py
	$(BENCH_VENV)/bin/python benchmarks/sessions.py
	$(BENCH_VENV)/bin/python benchmarks/history.py
	$(BENCH_VENV)/bin/python benchmarks/inflight.py
	$(BENCH_VENV)/bin/python benchmarks/workflows.py
	$(BENCH_VENV)/bin/python benchmarks/daemon.py
	$(BENCH_VENV)/bin/python benchmarks/tracing.py
	$(BENCH_VENV)/bin/python benchmarks/evaluation.py
	$(BENCH_VENV)/bin/python benchmarks/mcp_calls.py
	$(BENCH_VENV)/bin/python benchmarks/a2a_tasks.py

# A2A interoperability with google-adk (to_a2a, RemoteA2aAgent): google-adk lives in the
# bench venv, so these tests run there; `make test` skips them.
interop: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m pytest -o addopts="" -p no:cacheprovider -q tests/interop

# Two minutes of mixed load with chaos on the in-process runtime; reports in stress-report/.
stress: $(STAMP)
	$(BIN)/adk stress examples/stress/mixed-2min.json --report-dir stress-report

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(MCP_NODE) .pytest_cache .mypy_cache .ruff_cache
