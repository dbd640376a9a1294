# GPU host audit and SGLang deployment: developer and CI entry points.
# `make` alone lists the targets. Everything runs from .venv (scripts/venv.sh makes it): `make audit` and
# `make analyze` install only what they need into it (requirements-audit.txt, seconds); the targets that
# lint, test or build install the rest (requirements-controller.txt) into the same venv.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

VENV := $(CURDIR)/.venv
PYTHON := $(VENV)/bin/python
# The venv counts as activated: molecule shells out to ansible-config and friends.
export VIRTUAL_ENV := $(VENV)
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Podman settings for the test containers (runc, lowered ulimits); /etc stays untouched.
export CONTAINERS_CONF := $(CURDIR)/molecule/containers.conf

# Every molecule/<name>/molecule.yml is a scenario; `make molecule SCENARIO=audit` runs one.
SCENARIOS := $(sort $(patsubst molecule/%/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))
SCENARIO ?= $(SCENARIOS)
# Scenarios run side by side (scripts/molecule_all.py); 1 runs them one after another. A scenario keeps about two
# thirds of a core busy on average (its controller and its containers, measured from their cgroups: cuda_extension
# 0.61, sglang_serve 0.68), the rest waiting on podman, apt and systemd: three at a time keep two cores busy.
MOLECULE_JOBS ?= 3
# The release the provisioning scenarios (nvidia_driver, cuda_apt, cuda_extension, serving_venv, sglang_serve) boot:
# bookworm (Debian 12, what make test runs), trixie (Debian 13) or noble (Ubuntu 24.04). `make molecule
# PLATFORM=trixie SCENARIO=nvidia_driver` builds the image first when it is missing (scripts/test-image.sh; root).
PLATFORM ?= bookworm
export GPUHOST_PLATFORM := $(PLATFORM)
INVENTORY ?= inventories/local/hosts.yml
# `make analyze` resolves INPUT and REPORTS against the directory make was called from. With
# `make -C <repo> analyze`, CURDIR is the repository; the caller's directory is the PWD make inherited
# from the shell (make leaves it as it was; the recipe's shell would reset it).
# INPUT, REPORTS and that directory are data from the user: they reach ansible-playbook only as environment
# variables of the recipe, never in its text (a quote in INPUT would end the shell's string and run what
# follows), and their raw text ($(value ...)) so that a $(shell ...) in them is not run by make either; the
# playbook reads them with the env lookup, whose result Ansible never templates. make itself would export INPUT and
# REPORTS given on its command line to every recipe, expanding them (and so running a $(shell ...)) first: they are
# not exported.
REPORTS ?= reports
unexport INPUT REPORTS

.PHONY: help venv venv-audit torch-venv system-deps image lint unit fuzz alerts fleet docs docs-test collection collection-test sanity ee ee-test molecule test audit analyze bench-audit bench-ee bench-analyze gpu-check time-extension-build quickstart-test clean

help: ## List the targets
	@echo "Targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'
	@echo "Molecule scenarios: $(or $(SCENARIOS),none)"

venv: ## Create or refresh .venv with everything: the run-time set and the development, test and build tools
	@scripts/venv.sh dev

venv-audit: ## Create or refresh .venv with what make audit and make analyze need (requirements-audit.txt)
	@scripts/venv.sh audit

torch-venv: ## Create .cache/torch-venv (Python 3.11 + torch CPU) for the collective benchmark tests
	@scripts/torch-venv.sh

system-deps: ## Install podman, runc, debootstrap and friends with apt (root)
	@scripts/system-deps.sh

image: ## Build the cached test image localhost/gpuhost-debian:bookworm (root)
	@scripts/test-image.sh

lint: venv ## yamllint, ruff and ansible-lint (production profile)
	yamllint --strict .
	ruff check .
	ansible-lint

# The fuzz harness (tests/fuzz) runs a fixed, seeded slice with the unit tests: FUZZ_SLICE cases per entry point
# (about 17,000 cases in all, seconds); `make fuzz` runs FUZZ_CASES per entry point, seed FUZZ_SEED.
FUZZ_SLICE := 200
FUZZ_CASES ?= 5000
FUZZ_SEED ?= 27

unit: venv ## Unit tests (pytest tests/unit) and the fuzz harness's fixed slice (tests/fuzz); no tests collected is a failure
	@rc=0; FUZZ_CASES=$(FUZZ_SLICE) FUZZ_SEED=27 pytest tests/unit tests/fuzz -q --durations=10 || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "unit: no tests were collected under tests/unit" >&2; fi; \
	exit $$rc

# promtool comes with Debian's prometheus package (scripts/system-deps.sh).
alerts: ## promtool check rules and test rules on monitoring/ (the Prometheus alert rules)
	@command -v promtool >/dev/null || { echo "alerts: promtool is missing; install Debian's prometheus package (make system-deps)" >&2; exit 1; }
	promtool check rules monitoring/*.rules.yml
	promtool test rules monitoring/tests/*.yml

fuzz: export FUZZ_CASES := $(FUZZ_CASES)
fuzz: export FUZZ_SEED := $(FUZZ_SEED)
fuzz: venv ## The fuzz harness, longer: FUZZ_CASES per entry point (default 5000), FUZZ_SEED (default 27)
	pytest tests/fuzz -q

fleet: venv ## site.yml's audit, bench and gate phases in check mode over tests/fleet (a fleet of captures)
	pytest tests/fleet -q --durations=10

docs: venv ## Write docs/reference/ from the modules, role argument specs, playbooks and findings catalog
	$(PYTHON) scripts/docs_reference.py --write

# The blocks a page of README.md or docs/ marks as tested (<!-- tested ... -->), run as written in a copy of the
# checkout; the README's report excerpt checked against the report it pictures.
docs-test: venv ## Every documentation command block marked as tested, run as written (tests/docs)
	pytest tests/docs -q

collection: venv ## Build the collection's tarball (galaxy.yml) into .cache/collection/
	scripts/collection.sh

collection-test: venv ## Build, install into an empty path, and use it by name: ansible-doc, the audit, a role alone
	$(PYTHON) -m pytest tests/collection -q

sanity: venv ## ansible-test sanity on the installed tarball, offline (scripts/sanity.sh); ARGS="--test pep8" for one
	scripts/sanity.sh $(ARGS)

ee: venv ## Build the execution environment of execution-environment.yml (when its recipe or pins changed)
	@scripts/ee-build.sh

# Builds the EE first when needed; skipped (with the reason) only where podman cannot run containers.
ee-test: venv ## The capture fleet's audit, bench and gate inside the EE through ansible-navigator
	pytest tests/ee -q

# Without a molecule/default scenario, molecule logs "CRITICAL 'molecule/default/molecule.yml'
# glob failed" and carries on: that line is noise, not an error.
molecule: venv ## Every molecule scenario, MOLECULE_JOBS at a time (SCENARIO=name for one; PLATFORM=trixie|noble for the provisioning scenarios on Debian 13 or Ubuntu 24.04)
	@if [ "$(PLATFORM)" != bookworm ]; then SUITE=$(PLATFORM) scripts/test-image.sh; fi
	@$(PYTHON) scripts/molecule_all.py --jobs $(MOLECULE_JOBS) $(if $(filter-out bookworm,$(PLATFORM)),--log-dir .cache/molecule-logs/$(PLATFORM)) $(SCENARIO)

# scripts/test-all.sh runs the steps and says what each took: setup steps stop at the first failure; every test
# step runs; beside lint, the alert rules, the fleet, the EE test and sanity, one after another, run the unit
# tests (one process) and then molecule (its scenarios three at a time), so that both cores stay busy. The last
# line says which steps passed, the time in all and the slowest step. Under `make -n test` it prints each step's
# commands and runs none of them (the `+` runs the script under -n; DRY_RUN tells it so).
DRY_RUN = $(findstring n,$(firstword -$(MAKEFLAGS)))
test: ## venv, torch-venv, system-deps, image; then lint, alerts, fleet, docs-test, ee-test, collection-test, sanity, with unit and then molecule beside them (what CI runs)
	+@MAKE='$(MAKE)' scripts/test-all.sh $(if $(DRY_RUN),--dry-run)

audit: venv-audit ## Audit the hosts in INVENTORY (default: this machine); reports under reports/
	ansible-playbook playbooks/audit.yml -i $(INVENTORY)

bench-audit: venv ## Time the audit (scripts/bench_audit.py)
	$(PYTHON) scripts/bench_audit.py

# INPUT is split at spaces; paths holding spaces go through ansible-playbook -e directly.
analyze: export GPU_ANALYZE_INPUT = $(value INPUT)
analyze: export GPU_ANALYZE_DIR = $(if $(value PWD),$(value PWD),$(CURDIR))
analyze: export GPU_ANALYZE_REPORT_DIR = $(value REPORTS)
analyze: venv-audit ## Analyse material offline (bug reports, pasted outputs, captures): INPUT="capture.json bug-report.log.gz pastes/ ..." [REPORTS=dir]
	@[ -n "$${GPU_ANALYZE_INPUT// /}" ] || { echo 'analyze: give INPUT="path ...": captures, nvidia-bug-report.log(.gz) files, directories of pasted outputs' >&2; exit 2; }
	ansible-playbook playbooks/analyze.yml

bench-ee: venv ## Time the capture fleet's audit in the EE beside the same run from the venv (scripts/bench_ee.py)
	$(PYTHON) scripts/bench_ee.py

bench-analyze: venv ## Time make analyze's playbook on 200 inputs beside audit.yml on 200 capture hosts
	$(PYTHON) scripts/bench_analyze.py

# Minutes per release (apt, the venv from the package index, the audit), so not part of `make test`.
quickstart-test: ## The README's quick start in fresh Debian 12, Debian 13, Ubuntu 24.04 containers (root; RELEASES=...)
	scripts/quickstart-test.sh

gpu-check: ## On a machine with a GPU: the GPU paths for real, no torch needed (scripts/gpu-check.sh; --carry: what to copy)
	scripts/gpu-check.sh

time-extension-build: venv ## Time first build, wheelhouse install, no-op re-run (scripts/time_extension_build.py)
	$(PYTHON) scripts/time_extension_build.py

clean: ## Remove .venv, .cache and tool caches (reports/ and the test image stay)
	rm -rf .venv .cache .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
