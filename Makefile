# Everyday targets; the README's two commands are what a fresh machine runs.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install constraints test thorough chaos fuzz typecheck lint format golden bench control-plane kueue dev-cluster dev-cluster-down

install:
	python3 -m venv $(VENV) && $(VENV)/bin/pip install -q -c constraints.txt -e '.[test]'

constraints:  # re-pin every dependency to the newest versions pyproject.toml allows (then: make install, make test)
	rm -rf .pins && python3 -m venv .pins && .pins/bin/pip install -q '.[test]' \
		&& (head -5 constraints.txt; .pins/bin/pip freeze --all --exclude pip --exclude gitops-sched) > .pins/c.txt \
		&& mv .pins/c.txt constraints.txt && rm -rf .pins

test:
	$(VENV)/bin/pytest

control-plane:  # build (once, cached outside the repo) the control plane the in-cluster tests use
	bash hack/control-plane.sh

kueue:  # build Kueue's controller and fetch its CRDs (once, cached outside the repo) for tests/test_kueue_admission.py
	bash hack/kueue.sh && bash hack/target-crds.sh kueue

REPO ?= examples/clusters/netapp-dgx
dev-cluster:  # that control plane outside pytest, kwok GPU nodes from $(REPO)'s NodeGroups
	$(PY) -m testkit.control_plane up --repo $(REPO) --dir .dev-cluster

dev-cluster-down:
	$(PY) -m testkit.control_plane down --dir .dev-cluster

thorough:  # the whole suite with ten times each property's examples (hypothesis profile
	# `thorough`) and five seeds of each seeded fault test on the real control plane
	HYPOTHESIS_PROFILE=thorough $(VENV)/bin/pytest

CHAOS_SEEDS ?= 1,2,3,4,5,6,7,8,9,10
CHAOS_KILLS ?= 8
chaos:  # the reconciler and the scheduler through random faults and kills: ten seeds, eight
	# kills each (the suite runs seed 19 with two), on the real control plane
	CHAOS_SEEDS=$(CHAOS_SEEDS) CHAOS_KILLS=$(CHAOS_KILLS) $(VENV)/bin/pytest tests/test_chaos.py

FUZZ_EXAMPLES ?= 40
fuzz:  # mutated inputs through every command (10x the examples), then each input surface's
	# target, every case a process of its own within the harness's time and memory bounds
	HYPOTHESIS_PROFILE=thorough $(VENV)/bin/pytest tests/test_fuzz.py --hypothesis-show-statistics
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(VENV)/bin/pytest tests/test_fuzz_surfaces.py \
		--hypothesis-show-statistics

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
