# trainfleet: thin wrappers. Every target is one script or one tool call.
SHELL := /bin/bash
VENV ?= $(CURDIR)/.venv
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export TRAINFLEET_CACHE ?= $(HOME)/.cache/trainfleet
REPORTS := $(CURDIR)/out/test-reports

.PHONY: setup demo cold-demo test test-fast lint sanity unit integration collection-test adversarial trainer-test molecule molecule-default molecule-existing bench-trainer teardown clean help

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup:  ## venv + Python deps + system packages + Docker engine (idempotent)
	@bash scripts/setup.sh

# The local AWS endpoint (moto) accepts any credentials; give the AWS modules its dummy ones
# unless the caller set some. Never used with inventories/aws.
demo: export AWS_ACCESS_KEY_ID ?= testing
demo: export AWS_SECRET_ACCESS_KEY ?= testing
demo: setup  ## the whole pipeline on the embedded default (inventories/local)
	ansible-playbook site.yml

cold-demo: setup  ## make demo as on a new machine: empty temporary cache, no trainfleet images; prints each step's time (not in make test)
	@bash scripts/cold_demo.sh

test: setup  ## every test: molecule default + existing in the background beside lint, sanity, unit, integration, collection, adversarial, trainer, molecule aws; prints each suite's time
	@bash scripts/test.sh all

test-fast: setup  ## the inner loop: lint, sanity, unit; prints each suite's time
	@bash scripts/test.sh fast

lint: setup  ## ansible-lint (production profile)
	@bash scripts/test.sh lint

sanity: setup  ## ansible-test sanity on a copy of the collection
	@bash scripts/test.sh sanity

unit: setup  ## pytest tests/unit
	@bash scripts/test.sh unit

integration: setup  ## pytest tests/integration (site.yml --check on inventories/aws against its own moto)
	@bash scripts/test.sh integration

collection-test: setup  ## pytest tests/collection (build + install the collection, use it from outside the repo)
	@bash scripts/test.sh collection

adversarial: setup  ## pytest tests/adversarial (hostile inputs to every step: refused in preflight, nothing created or leaked)
	@bash scripts/test.sh adversarial

trainer-test: setup  ## pytest trainer/tests (real torchrun, moto)
	@bash scripts/test.sh trainer

molecule: setup  ## the molecule scenarios make test runs (aws: AWS roles on the local endpoint; default: the local stack on kind; existing: site.yml on a cluster trainfleet did not create)
	@bash scripts/test.sh molecule

molecule-default: setup  ## only molecule/default: the local stack end to end on kind
	@MOLECULE_SCENARIOS=default bash scripts/test.sh molecule

molecule-existing: setup  ## only molecule/existing: the existing platform on a kind cluster the scenario makes
	@MOLECULE_SCENARIOS=existing bash scripts/test.sh molecule

bench-trainer: setup  ## samples/s for 1 and 2 processes (synthetic data) and scaling efficiency
	python trainer/bench.py

teardown: export AWS_ACCESS_KEY_ID ?= testing
teardown: export AWS_SECRET_ACCESS_KEY ?= testing
teardown: setup  ## remove everything site.yml created on the local stack
	ansible-playbook site.yml --tags teardown

clean:  ## remove the venv and test outputs (the build cache in ~/.cache/trainfleet stays)
	rm -rf $(VENV) out .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
