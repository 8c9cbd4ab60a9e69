# One line per target; `make help` lists them.
.DEFAULT_GOAL := help
VENV := .venv
BIN := $(VENV)/bin
DEMO_STATE ?= /tmp/reconciler-demo
# pytest-xdist workers: the tests touching the real libvirtd run one after another on one of
# them (tests/conftest.py), the others run the pure tests beside them. `make test JOBS=0`:
# one process, as plain `pytest` runs (also `pytest -p no:xdist`).
JOBS ?= 2
XDIST := -n $(JOBS) --dist loadgroup
# `make check` runs types and contracts beside the suite at a lower priority (nice): the
# suite's libvirtd lane sets the wall time, so it gets the CPU first.
NICE ?=

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup: ## install Debian packages and .venv with the project (idempotent)
	@scripts/setup

demo: setup ## run the daemon on examples/repo against test:///default
	@scripts/demo

test: setup ## the whole suite, real-libvirt tests included
	@scripts/libvirtd-up
	$(BIN)/python -m pytest $(XDIST)

test-fast: setup ## the loop while editing: pure, test:///default and hostile tests (no libvirtd, no QEMU)
	$(BIN)/python -m pytest $(XDIST) -m "not integration and not faults"

test-unit: setup ## pure tests and test:///default tests only
	$(BIN)/python -m pytest $(XDIST) -m "not integration"

test-integration: setup ## only the real libvirtd + QEMU tests
	@scripts/libvirtd-up
	$(BIN)/python -m pytest -m integration

test-faults: setup ## only the fault suite (restarts libvirtd: run under flock /tmp/rtest.lock)
	@scripts/libvirtd-up
	$(BIN)/python -m pytest -m faults tests/faults

install: setup ## install the CLI in /usr/local/bin (venv in /opt/reconciler), the systemd unit and example configs
	@scripts/install

dist: setup ## build a wheel of the project into dist/
	$(BIN)/python -m pip wheel --no-deps -q -w dist .

lint: setup ## ruff (the rules of pyproject.toml, typing-only imports, pytest style and commented-out code included)
	$(BIN)/ruff check reconciler tests && $(BIN)/ruff format --check reconciler tests

typecheck: setup ## mypy --strict on the package and the tests
	$(NICE) $(BIN)/mypy

contracts: setup ## import-linter: the layer contracts of pyproject.toml
	$(NICE) $(BIN)/lint-imports

check: lint ## everything CI runs: lint, then types, import contracts and the whole suite side by side
	@$(MAKE) --no-print-directory -j3 --output-sync=target typecheck contracts test NICE='nice -n 10'

golden: setup ## rewrite golden files after a reviewed change
	$(BIN)/python -m pytest tests/unit --regen-golden

bench: setup ## every benchmark, under the venv's interpreter (figures only; touches libvirtd: run under the shared lock)
	@scripts/libvirtd-up
	$(BIN)/python bench/scale
	$(BIN)/python bench/build
	$(BIN)/python bench/build-ratio
	$(BIN)/python bench/render
	$(BIN)/python bench/budgets
	$(BIN)/python bench/plan
	$(BIN)/python bench/jobs
	$(BIN)/python bench/resync
	$(BIN)/python bench/resync --daemon
	$(BIN)/python bench/daemon --only rss --commits 3 --idle 10 --uri test+unix:///default --installed

sweep: setup ## remove rtest-* domains (and rtbr-* bridges) left by an interrupted integration run
	$(BIN)/python -m tests.helpers.sweep

.PHONY: help setup demo install dist test test-fast test-unit test-integration test-faults lint typecheck golden bench sweep
