# Everyday targets; the README's two commands are what a fresh machine runs.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install test thorough fuzz typecheck lint format golden bench

install:
	python3 -m venv $(VENV) && $(VENV)/bin/pip install -q -e '.[test]'

test:
	$(VENV)/bin/pytest

thorough:  # the property tests with ten times the examples (hypothesis profile `thorough`)
	HYPOTHESIS_PROFILE=thorough $(VENV)/bin/pytest tests/test_engine_properties.py \
		tests/test_engine_live.py tests/test_engine_kai_parity.py tests/test_fairshare.py \
		tests/test_consolidation_properties.py tests/test_engine_codec.py tests/test_schema.py \
		tests/test_engine_held.py tests/test_scheduler_snapshot.py

fuzz:  # mutated example repos and Simulation files through every command, 10x the examples
	HYPOTHESIS_PROFILE=thorough $(VENV)/bin/pytest tests/test_fuzz.py --hypothesis-show-statistics

typecheck:  # mypy on the package (configured in pyproject.toml); CI runs it too
	$(VENV)/bin/mypy

lint:
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format:
	$(VENV)/bin/ruff check --fix . && $(VENV)/bin/ruff format .

golden:
	UPDATE_GOLDEN=1 $(VENV)/bin/pytest tests/test_golden.py

bench:
	$(PY) benchmarks/compile_scale.py && $(PY) benchmarks/schedule_scale.py
