#!/usr/bin/env bash
# Cluster create time on the local stack (warm build cache): the cluster step
# (playbooks/cluster.yml = kind_images, all cached, + kind_cluster) and, from the task profile,
# `kind create cluster` itself and the wait for Ready nodes + CoreDNS.
# Needs the registry and moto (the create stage of molecule/default, or site.yml --tags
# local_stack,registry). Refuses to touch an existing cluster unless --recreate is given
# (which deletes it first). Prints figures only.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_CONFIG=$PWD/ansible.cfg PATH=$PWD/.venv/bin:$PATH
CACHE=${TRAINFLEET_CACHE:-$HOME/.cache/trainfleet}
KIND=$(ls -1 "$CACHE"/kind/*/kind 2>/dev/null | sort | tail -n1 || true)
if [ -n "$KIND" ] && "$KIND" get clusters 2>/dev/null | grep -qx trainfleet; then
  if [ "${1:-}" != "--recreate" ]; then
    echo "cluster trainfleet exists; rerun with --recreate to delete and time a fresh create" >&2
    exit 2
  fi
  start=$(date +%s.%N)
  ansible-playbook playbooks/cluster.yml -e kind_cluster_state=absent >/dev/null
  printf 'delete: %.1fs\n' "$(echo "$(date +%s.%N) - $start" | bc)"
fi
log=$(mktemp)
start=$(date +%s.%N)
ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks ansible-playbook playbooks/cluster.yml >"$log" 2>&1
end=$(date +%s.%N)
printf 'cluster step (kind_images warm + kind create + Ready): %.1fs\n' "$(echo "$end - $start" | bc)"
grep -E '^(Create the cluster|Wait until every node is Ready|Wait until CoreDNS)' "$log" -A0 | sed 's/^/  /' || true
grep -E -- '-{3,} [0-9.]+s$' "$log" | grep -E 'kind create|Create the cluster|Ready|CoreDNS' | sed 's/^/  /' || true
rm -f "$log"
