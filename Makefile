# The README's two commands are `make run` and `make test`; everything else supports them.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
UV := $(VENV)/bin/uv
UV_PIN := uv==0.13.8
PORT ?= 8080
STAMP_PY := $(VENV)/.installed
STAMP_NPM := node_modules/.installed

.PHONY: setup run test pytest lint unit integration infra synth bench bench-compare clean

setup: $(STAMP_PY) $(STAMP_NPM)

# uv installs the same pinned requirements as pip would, downloading and unpacking in parallel:
# on a clean clone it takes about half of pip's time. pip (any version) only installs uv itself.
$(STAMP_PY): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q $(UV_PIN)
	$(UV) pip install -q --python $(PY) -r requirements-dev.txt
	$(UV) pip install -q --python $(PY) --no-deps -e .
	touch $@

$(STAMP_NPM): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

run: setup
	$(VENV)/bin/ipmeta serve --port $(PORT) --load-default-dataset

# Lint and pytest run side by side: mypy keeps one core busy, and pytest's workers leave idle
# time (dynalite round trips, the replica tests' waits) that it fills. Either failing fails the
# target. The 30 slowest tests are listed at the end, so a slow one is seen the day it lands.
test: setup
	@$(MAKE) --no-print-directory -j2 lint pytest

# One worker per core (pytest-xdist); each worker has its own dynalite, and synthesizes the app
# once if it runs a test that reads it (xdist 3.8's loadgroup cannot pin them to one: pytest 9
# ignores the node ids it rewrites). worksteal hands an idle worker half of the other's queue, so
# both end together however long the slowest test is.
pytest: setup
	@date -u "+== pytest at %T"
	$(PY) -m pytest -n auto --dist worksteal --durations=30
	@date -u "+== pytest done at %T"

lint: setup
	@date -u "+== lint at %T"
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	@date -u "+== lint done at %T"

unit: setup
	$(PY) -m pytest tests/unit

integration: setup
	$(PY) -m pytest tests/integration

infra: setup
	$(PY) -m pytest tests/infra

synth: setup
	npx cdk synth --quiet

bench: setup
	$(PY) -m bench.handler
	$(PY) -m bench.lookup
	$(PY) -m bench.access_log
	$(PY) -m bench.edge
	$(PY) -m bench.load
	$(PY) -m bench.reverse
	$(PY) -m bench.replication
	$(PY) -m bench.enrich
	$(PY) -m bench.enrich_task

# The working tree against REF on every core path, interleaved (bench/compare.py; QUICK=1 checks that
# every path runs in a few minutes). It exits 1 when a path is slower beyond noise. CI never runs it.
bench-compare: setup
	@test -n "$(REF)" || { echo "usage: make bench-compare REF=<commit> [QUICK=1] [ROUNDS=N]"; exit 2; }
	$(PY) -m bench.compare $(REF) $(if $(QUICK),--quick) $(if $(ROUNDS),--rounds $(ROUNDS))

clean:
	rm -rf cdk.out .mypy_cache .ruff_cache .pytest_cache
