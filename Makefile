# `make demo` and `make test` each build the local virtual environment from
# nothing (Python >= 3.10 and a C compiler are all they need).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,io,hpc,plot,gpu-test]"
	touch $(STAMP)

demo: $(STAMP)
	mkdir -p build
	$(BIN)/isokernel demo --figure build/soil-moisture-demo.png

# mypy: --strict over examples/ and tests/typing/usage.py ([tool.mypy] in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples scripts/gpu-check
	$(BIN)/lint-imports
	$(BIN)/mypy

# ISOKERNEL_REQUIRE_NVRTC: the NVRTC compile tests fail, not skip, when NVRTC is missing.
# -n: test files spread over up to 4 worker processes (pytest-xdist); a fresh run is mostly
# C compiles, one core each (17.5 min on one process of an idle 2-core machine, 10.6 on two)
test: lint
	ISOKERNEL_REQUIRE_NVRTC=1 $(BIN)/python -m pytest -q -n auto --maxprocesses 4

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis .mypy_cache
