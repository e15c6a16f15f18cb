# Two commands on a fresh machine: `make run` (whole pipeline, embedded default, offline)
# and `make test`. Both set up .venv first; setup is skipped when the installed state
# already matches pyproject.toml + constraints.txt + requirements-nodeps.txt (wheels whose
# own dependencies we do not want). uv installs the pinned set (pip takes
# 2 min 20 s on 2 cores, one file at a time; uv 48 s, bytecode included) and looks where
# this machine's pip is told to look for local wheels (the CPU build of torch).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(abspath $(VENV))/bin
STAMP  := $(VENV)/.installed
export PATH := $(BIN):$(PATH)
export DVC_NO_ANALYTICS := 1
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export RAY_USAGE_STATS_ENABLED := 0
export DO_NOT_TRACK := 1

.PHONY: setup run test test-fast bench lint format clean

setup:
	@want=$$(cat pyproject.toml constraints.txt requirements-nodeps.txt | sha256sum | cut -d' ' -f1); \
	if [ "$$(cat $(STAMP) 2>/dev/null)" != "$$want" ]; then \
	  set -e; \
	  test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); \
	  echo "setting up $(VENV) (log: .paperline/logs/setup.log)"; \
	  mkdir -p .paperline/logs; \
	  links=$${PIP_FIND_LINKS:-$$($(BIN)/python -m pip config get global.find-links 2>/dev/null || true)}; \
	  [ -z "$$links" ] || export UV_FIND_LINKS="$$links"; \
	  { $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt uv \
	    && $(BIN)/uv pip install --python $(BIN)/python --compile-bytecode \
	      -c constraints.txt -e '.[dev]' \
	    && $(BIN)/uv pip install --python $(BIN)/python --no-deps -r requirements-nodeps.txt; \
	  } > .paperline/logs/setup.log 2>&1 \
	    || { tail -n 20 .paperline/logs/setup.log; echo "setup failed; see .paperline/logs/setup.log"; exit 1; }; \
	  echo "$$want" > $(STAMP); \
	fi

# `dvc repro` with one line per stage (details in .paperline/logs/) and one shared Ray
run: setup
	$(BIN)/paperline repro

test: setup
	$(BIN)/python -m pytest

# unit tests only: no services, no pipeline copies (a few minutes on 2 cores)
test-fast: setup
	$(BIN)/python -m pytest tests/unit

bench: setup
	$(BIN)/python benchmarks/atomic_io.py
	$(BIN)/python benchmarks/corpus_filter_dedup.py --mb 50
	$(BIN)/python benchmarks/mlm_throughput.py --steps 60
	$(BIN)/python benchmarks/kg_mining.py --pairs 1000
	$(BIN)/python benchmarks/crawl.py --copies 20
	$(BIN)/python benchmarks/delta_rule.py --lengths 128,512
	$(BIN)/python benchmarks/aoeb_metrics.py --queries 10000 --depth 100
	$(BIN)/python benchmarks/kv_press.py --lengths 512,2048
	$(BIN)/python benchmarks/llm_throughput.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf .paperline .pytest_cache .ruff_cache
