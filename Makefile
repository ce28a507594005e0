# Two entry points for a fresh machine with Python 3.11: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SAMPLE ?= Hello, world! tokmap maps a tokenizer file and encodes this sentence.

.PHONY: run test bench bench-targets venv clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

$(VENV)/.bench-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

venv: $(VENV)/.installed

# Export the bundled GPT-2 ranks (testdata/gpt2.tiktoken) and encode a sample.
run: $(VENV)/.installed
	mkdir -p out
	$(VENV)/bin/tok-export testdata/gpt2.tiktoken -o out/gpt2.mtok
	$(VENV)/bin/tokmap encode out/gpt2.mtok "$(SAMPLE)" --timing

# Both cores: the conformance suite runs every real model over every corpus.
test: $(VENV)/.installed
	$(PY) -m pytest -q -n auto

bench: $(VENV)/.bench-installed
	RAYON_NUM_THREADS=1 $(PY) bench/run.py

# Only what issue 4's targets need (writes bench/out/BENCHMARKS-targets.md, not BENCHMARKS.md).
bench-targets: $(VENV)/.bench-installed
	RAYON_NUM_THREADS=1 $(PY) bench/run.py --targets-only

clean:
	rm -rf out .pytest_cache
