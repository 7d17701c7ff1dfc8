# The two commands of the README, and the steps they stand on. Each installs what it needs.
#   make up     a local cluster with fake GPU nodes and the whole system (queuectl dev up)
#   make test   unit, property, integration and e2e tests (pytest; starts its own control plane)
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.installed-stamp
ARGS ?=

.PHONY: install up down status test test-unit test-integration test-e2e build image lock helm native nvml-emu
install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

build: $(STAMP)
	$(VENV)/bin/queuectl dev build

up: $(STAMP)
	$(VENV)/bin/queuectl dev up $(ARGS)

down: $(STAMP)
	$(VENV)/bin/queuectl dev down $(ARGS)

status: $(STAMP)
	$(VENV)/bin/queuectl dev status $(ARGS)

test: $(STAMP)
	$(VENV)/bin/pytest -q -p no:cacheprovider $(ARGS)

# The same suite in tiers, for a fast loop: unit and property tests (no cluster), integration
# tests against the real API server, then e2e (whole-system scenarios, operators, real node).
# JOBS workers (pytest-xdist, a module's tests on one worker): the unit tier uses two; a cluster
# tier runs in one process unless JOBS=2 (one control plane per worker; the real-node tests
# need one process for now: their kubelet's socket paths outgrow 108 bytes in xdist's temp dirs).
JOBS ?=
workers = $(if $(filter-out 1,$(1)),-n $(1) --dist loadfile,)
PARALLEL = $(call workers,$(or $(JOBS),1))

test-unit: $(STAMP)
	$(VENV)/bin/pytest -q -p no:cacheprovider $(call workers,$(or $(JOBS),2)) tests/unit $(ARGS)

test-integration: $(STAMP)
	$(VENV)/bin/pytest -q -p no:cacheprovider $(PARALLEL) tests/integration $(ARGS)

test-e2e: $(STAMP)
	$(VENV)/bin/pytest -q -p no:cacheprovider $(PARALLEL) e2e $(ARGS)

# The controller/agent image as an OCI layout in build/image/oci, from Debian packages (no Docker,
# no registry); prints the manifest digest. Needs root, mmdebstrap and umoci (apt-get installs them).
image: $(STAMP)
	PY=$(VENV)/bin/python deploy/image/build.sh

# Re-pin deploy/image/requirements.lock (hashes included) after a dependency change in pyproject.
lock: $(STAMP)
	$(VENV)/bin/python -m pip install --quiet pip-tools
	$(VENV)/bin/pip-compile --quiet --generate-hashes --strip-extras --no-header \
	  --no-emit-find-links -o deploy/image/requirements.lock pyproject.toml

# Regenerate the Helm chart deploy/helm/queuectl from the kustomize base (after changing the base).
helm: $(STAMP)
	$(VENV)/bin/python deploy/helm/generate.py

# The scheduling core compiled with mypyc into build/native-core (needs a C compiler); used where
# QUEUECTL_NATIVE_CORE=1 (python -m bench simulate sets it) while it matches the sources.
native: $(STAMP)
	$(VENV)/bin/python -m queuectl.native

# The NVML emulator (libnvidia-ml.so.1 for a described node, no GPU) built with gcc into
# ~/.cache/queuectl/nvml-emu; prints its directory. Tests build it on demand. Try it with
#   $(VENV)/bin/python -m queuectl.agent.nvmlemu run queuectl/agent/scenarios/hgx-h100.yaml -- \
#     $(VENV)/bin/queuectl agent --once
nvml-emu: $(STAMP)
	$(VENV)/bin/python -m queuectl.agent.nvmlemu build
