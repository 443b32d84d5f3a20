#!/usr/bin/env bash
# The no-op rerun: `make demo` on a stack that is already up must report changed=0, quickly
# (target <= 60 s on 2 cores). Prints the time of `make setup`, of `ansible-playbook site.yml`,
# their sum, the changed count, and the 10 slowest tasks (ansible.posix.profile_tasks).
# Usage: benchmarks/rerun.sh [--runs N]   (default 1 measured run; the stack must be up: it runs
# `make demo` once first when the summary line of the last run is not changed=0)
# Prints figures only; no assertion on time.
set -Eeuo pipefail
trap 'echo "rerun.sh: line ${LINENO}: exit $?: ${BASH_COMMAND}" >&2' ERR
cd "$(dirname "$0")/.."
ROOT=$PWD
runs=1
[ "${1:-}" = "--runs" ] && runs=${2:?number of runs}
export ANSIBLE_CONFIG=$ROOT/ansible.cfg PATH=$ROOT/.venv/bin:$PATH
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-testing}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-testing}"
export ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks PROFILE_TASKS_TASK_OUTPUT_LIMIT=10 ANSIBLE_NOCOLOR=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "warm-up: make demo (brings the stack up if it is not)"
make -s demo >"$log" 2>&1 || { tail -n 40 "$log"; echo "make demo failed" >&2; exit 1; }

for i in $(seq 1 "$runs"); do
  t0=$(date +%s.%N)
  make -s setup >/dev/null
  t1=$(date +%s.%N)
  ansible-playbook site.yml >"$log" 2>&1
  t2=$(date +%s.%N)
  recap=$(grep -E '^localhost +: ok=' "$log" | tail -n1)
  awk -v i="$i" -v a="$t0" -v b="$t1" -v c="$t2" -v r="$(echo "$recap" | grep -oE 'changed=[0-9]+')" \
    'BEGIN { printf "run %s: setup %.1fs + site.yml %.1fs = %.1fs   %s\n", i, b - a, c - b, c - a, r }'
done
echo "10 slowest tasks of the last run:"
grep -E -- ' -{2,} +[0-9.]+s$' "$log" | head -n 10 | sed 's/^/  /'
