# Two commands on a fresh Debian 12 machine, as root:
#   make demo   the main job against the sandbox node (incident state -> deployed)
#   make test   the whole test suite
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PYINFRA := $(VENV)/bin/pyinfra
# Debian packages: the control side's (make setup: the venv's python), and the sandbox's
# host packages (one per line in each file: debootstrap, QEMU, a cross compiler...), which
# only the targets that build sandbox nodes or repositories install (make sandbox-deps).
CONTROL_PACKAGES := python3-venv
SANDBOX_PACKAGES := $(shell sed -e 's/\#.*//' sandbox/host-packages.txt sandbox/aptrepo/host-packages.txt)
# Installs the Debian packages of $(1) that are not installed yet.
define apt_install_missing
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing host packages: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef
DEMO_NODE := gpu1
DEMO_ADDR := 127.0.0.11
DEMO_GPU := rtx-pro-6000-x8
# The seeds' node as it is found (NVIDIA's apt source, CUDA 12.8 by apt, a hand-built
# venv); DEMO_OS=debian13 runs the same demo on Debian 13 (CPython 3.13),
# DEMO_OS=ubuntu2204 / ubuntu2404 on Ubuntu (python3.11 from jammy-updates; python3.12).
DEMO_STATES := incident
DEMO_OS := debian12
# A model for the unit's arguments, which the node suite checks with SGLang's own
# parser; not started (service_enable=false): the sandbox has no GPU to serve on.
DEMO_DATA := service_model=Qwen/Qwen3-0.6B service_enable=false
# Where the demo's node suite also writes its JUnit XML and report (pytest's
# --junitxml=FILE --node-report=FILE), for a caller that reads the result.
DEMO_SUITE_ARGS :=
# make test's pytest workers (pytest-xdist; tests/sandbox/conftest.py says what runs
# together). Three on this project's 2-core, 24 GiB CI machine: the light suites' nodes
# mostly wait (services starting, timeouts), and the third worker fills the cores then;
# the disk budget holds, as two venv nodes at most are up at a time.
TEST_WORKERS := 3

.PHONY: setup control-deps sandbox-deps host-deps test demo demo-debian13 sandbox-up sandbox-down bench bench-fleet gpu-proof lock lock-venv lock-cuda lock-driver lock-dcgm

control-deps:
	$(call apt_install_missing,$(CONTROL_PACKAGES))

# The sandbox's host packages: for make test, demo, bench and lock (not for a control machine).
sandbox-deps: setup
	$(call apt_install_missing,$(SANDBOX_PACKAGES))

host-deps: sandbox-deps

$(VENV)/.installed: requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements.txt
	touch $@

# The control side only: python3-venv, the venv with pyinfra, testinfra and their deps.
setup: control-deps $(VENV)/.installed

test: sandbox-deps
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

# The two servers serve what is built so far; `sandbox up` first builds and fetches its
# node's platform (the apt directory of DEMO_OS, the wheels of its CPython's locks and of
# DEMO_STATES' venvs): a first run fetches one platform, not all of them.
sandbox-up: sandbox-deps
	$(PY) -m sandbox.aptrepo serve
	$(PY) -m sandbox.pypimirror serve
	$(PY) -m sandbox up $(DEMO_NODE) --addr $(DEMO_ADDR) --gpu $(DEMO_GPU) --os $(DEMO_OS) --state $(DEMO_STATES)

demo: sandbox-up
	@echo "== 1. validate: the incident's node, as found (nothing is changed)"
	$(PYINFRA) -y -v $(DEMO_DATA:%=--data %) inventory/gpu.py --limit $(DEMO_NODE) validate.py
	@echo "== 2. deploy"
	$(PYINFRA) -y $(DEMO_DATA:%=--data %) inventory/gpu.py --limit $(DEMO_NODE) deploy.py
	@echo "== 3. validate again: nothing left to fix"
	$(PYINFRA) -y -v $(DEMO_DATA:%=--data %) inventory/gpu.py --limit $(DEMO_NODE) validate.py
	@echo "== 4. the node suite: the end state, proved"
	$(VENV)/bin/pytest tests/node --inventory inventory/gpu.py --node-limit $(DEMO_NODE) $(DEMO_DATA:%=--node-data %) $(DEMO_SUITE_ARGS)
	@echo "nodes stay up: $(PY) -m sandbox status; stop them with: make sandbox-down"

demo-debian13:
	$(MAKE) demo DEMO_OS=debian13 DEMO_NODE=gpu13 DEMO_ADDR=127.0.0.13 DEMO_STATES=

sandbox-down:
	-$(PY) -m sandbox down --all
	-$(PY) -m sandbox.aptrepo stop
	-$(PY) -m sandbox.pypimirror stop

bench: sandbox-deps
	$(PY) bench/validate_cost.py
	$(PY) bench/deploy_cost.py --limit $(DEMO_NODE) $(DEMO_DATA:%=--data %)
	$(PY) bench/prewarm_venv.py $(DEMO_NODE)
	$(PY) bench/arm64_node.py

# 50 sandbox nodes of their own (sc-01...), taken down at the end; about 5 minutes.
bench-fleet: sandbox-deps
	$(PY) bench/fleet_scale.py --nodes 50 --deploy-nodes 8 --runs 3

# On a machine with a real NVIDIA GPU (docs/contributing.md, "Proving it on a GPU machine"):
# no control venv, no pyinfra, no network; PYTHON a python with torch (its venv is the one
# proven unless TORCH_VENV says another). Elsewhere it stops at the first step that needs
# a GPU with exit status 3. The table and JSON go to OUT (else bench/out/).
PYTHON ?= python3
TORCH_VENV ?=
gpu-proof:
	$(PYTHON) bench/gpu_proof.py $(if $(TORCH_VENV),--torch-venv '$(TORCH_VENV)') $(if $(OUT),--out '$(OUT)')

# Regenerate files/locks/ from its .in files (control/locks.py): the venv locks for
# every supported CPython and CPU (uv pip compile, PyPI), then the toolkit locks from
# CUDA_REPO_URL's Packages index for CUDA_PLATFORMS (<distro>-<machine>,... or all), and
# the driver locks (files/locks/driver-<branch>.in) and the DCGM locks (files/locks/dcgm-<major>.in)
# from the same index.
# CUDA_REPO_URL=sandbox reads the sandbox's apt repository (the platforms it serves):
# its own CLI builds it and hands control.locks its file:// URL and signing key.
# Nothing changes when the inputs and indexes did not.
CUDA_REPO_URL ?= https://developer.download.nvidia.com/compute/cuda/repos
CUDA_PLATFORMS ?= all
lock: lock-venv lock-cuda lock-driver lock-dcgm

lock-venv: sandbox-deps
	$(PY) -m control.locks venv

lock-cuda: sandbox-deps
ifeq ($(CUDA_REPO_URL),sandbox)
	$(PY) -m sandbox.aptrepo lock --platforms '$(CUDA_PLATFORMS)'
else
	$(PY) -m control.locks cuda --repo-url '$(CUDA_REPO_URL)' --platforms '$(CUDA_PLATFORMS)'
endif

lock-driver: sandbox-deps
ifeq ($(CUDA_REPO_URL),sandbox)
	$(PY) -m sandbox.aptrepo lock --kind driver --platforms '$(CUDA_PLATFORMS)'
else
	$(PY) -m control.locks driver --repo-url '$(CUDA_REPO_URL)' --platforms '$(CUDA_PLATFORMS)'
endif

lock-dcgm: sandbox-deps
ifeq ($(CUDA_REPO_URL),sandbox)
	$(PY) -m sandbox.aptrepo lock --kind dcgm --platforms '$(CUDA_PLATFORMS)'
else
	$(PY) -m control.locks dcgm --repo-url '$(CUDA_REPO_URL)' --platforms '$(CUDA_PLATFORMS)'
endif
