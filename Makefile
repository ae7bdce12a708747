# Quick start: `make demo` (set up and run the main job), `make test` (set up and run all tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --quiet --disable-pip-version-check

.PHONY: demo test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-core: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[web]"
	touch $@

$(VENV)/.installed-all: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[all]"
	touch $@ $(VENV)/.installed-core

demo: $(VENV)/.installed-core
	$(BIN)/infraplan catalog gpus
	$(BIN)/infraplan memory --model llama-3.1-70b --gpu h100 --num-gpus 64 --tp 8 --pp 2 \
		--zero 1 --recompute selective --sequence-parallel --seq-len 8192
	$(BIN)/infraplan memory examples/memory-llama-3.1-8b-qlora.yaml
	$(BIN)/infraplan plan train examples/train-llama-3.1-70b.yaml
	$(BIN)/infraplan validate training validation/training_dev.csv
	$(BIN)/infraplan simulate serve examples/serve-llama8b-chat.yaml
	$(BIN)/infraplan plan serve examples/serve-llama8b-chat.yaml
	$(BIN)/infraplan validate serving validation/serving_dev.csv
	$(BIN)/infraplan simulate train examples/article-4-2b-spot.yaml
	$(BIN)/infraplan tco dgx-h100 --utilization 0.7 --rent 2.69
	$(BIN)/infraplan report examples/train-llama-3.1-70b.yaml -o report.html

# Browser tests drive Debian's Chromium (Playwright's own download does not work here).
test: $(VENV)/.installed-all
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis
