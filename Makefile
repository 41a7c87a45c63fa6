# Everyday targets; the README's two commands are what a fresh machine runs.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install test lint format golden bench

install:
	python3 -m venv $(VENV) && $(VENV)/bin/pip install -q -e '.[test]'

test:
	$(VENV)/bin/pytest

lint:
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format:
	$(VENV)/bin/ruff check --fix . && $(VENV)/bin/ruff format .

golden:
	UPDATE_GOLDEN=1 $(VENV)/bin/pytest tests/test_golden.py

bench:
	$(PY) benchmarks/compile_scale.py && $(PY) benchmarks/schedule_scale.py
