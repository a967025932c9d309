# rcusim: the README's two commands are `make run` and `make test`.
# Needs only python3, make, gcc and apt on a fresh machine; everything else is installed here.

PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install run demo test lint typecheck unit bench clean browser-deps

$(STAMP): pyproject.toml
	@$(PY) -m venv $(VENV) 2>/dev/null || { \
	  echo "python3 -m venv failed: installing python3-venv with apt"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq python3-venv && $(PY) -m venv $(VENV); }
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[app,dev]'
	@touch $(STAMP)

COLLECTOR := calibration/collector/rcusim-collector

$(COLLECTOR): $(wildcard calibration/collector/*.c calibration/collector/*.h) calibration/collector/Makefile
	$(MAKE) -C calibration/collector

# The engine's hot modules compiled with mypyc (sim/compiled.py): rebuilt whenever a source
# under sim/ or models/ changes; until then rcusim runs them as plain Python and says so.
COMPILED := build/compiled/manifest.json

$(COMPILED): $(STAMP) $(shell find sim models -name '*.py')
	RCUSIM_PURE=1 $(BIN)/python -m sim.compile

install: $(STAMP) $(COLLECTOR) $(COMPILED)

# The main job: the what-if explorer (Streamlit) on the bundled default profile, at
# http://localhost:8501 (rcusim app --port N for another port).
run: install
	$(BIN)/rcusim app

# Headless Chromium for the browser tests (tests/test_browser.py): Debian's package, installed
# with apt only when /usr/bin/chromium is missing; the tests skip, saying why, if it cannot be.
browser-deps:
	@[ -x /usr/bin/chromium ] || { echo "installing chromium with apt for the browser tests"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
	  || echo "chromium could not be installed: the browser tests will be skipped"

demo: run

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/python -m pytest -q

# The whole suite, as CI runs it (.ci/run).
test: install browser-deps lint typecheck unit

bench: install
	$(BIN)/python benchmarks/all.py

clean:
	$(MAKE) -C calibration/collector clean
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis .mypy_cache .ruff_cache
