#!/usr/bin/env bash
# make cold-demo: `make demo` as on a machine where it never ran: an empty temporary
# TRAINFLEET_CACHE (Go's module and build caches in it), no trainfleet images in the Docker engine
# and no trainfleet cluster, registry or local AWS endpoint. Prints the time of setup and of each
# step (the progress callback's STEP TIMES table) and the total. Not part of make test: it builds
# everything (about 20 min on 2 cores here).
# Usage: scripts/cold_demo.sh [--keep-cache]
#   By default the cold stack is torn down at the end and its temporary cache removed (an earlier
#   stack was torn down at the start). --keep-cache leaves both and prints how to tear them down.
set -Eeuo pipefail
trap 'echo "cold_demo.sh: line ${LINENO}: exit $?: ${BASH_COMMAND}" >&2' ERR
cd "$(dirname "$0")/.."
ROOT=$PWD
keep=false
[ "${1:-}" = "--keep-cache" ] && keep=true

log() { printf 'cold-demo: %s\n' "$*"; }
stamp() { date +%s; }
t0=$(stamp)

log "make setup"
make -s setup
t_setup=$(( $(stamp) - t0 ))
export PATH="$ROOT/.venv/bin:$PATH" ANSIBLE_CONFIG="$ROOT/ansible.cfg"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-testing}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-testing}"

# What an earlier demo left: its stack (through its own cache) and the images it built.
log "removing an earlier trainfleet stack (make teardown on ${TRAINFLEET_CACHE:-$HOME/.cache/trainfleet})"
ansible-playbook site.yml --tags teardown >/dev/null 2>&1 || log "teardown of the earlier stack reported errors (continuing)"
mapfile -t images < <(docker image ls --format '{{.Repository}}:{{.Tag}}' |
  grep -E '(^|/)trainfleet/|/(pause|etcd|coredns|kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|training-operator):|(^|/)alpine:3\.10$' || true)
if ((${#images[@]})); then
  log "removing ${#images[@]} trainfleet images from the Docker engine"
  docker image rm -f "${images[@]}" >/dev/null
fi
docker image prune -f >/dev/null

cache=$(mktemp -d "${TMPDIR:-/tmp}/trainfleet-cold-cache.XXXXXX")
cleanup() {
  log "tearing the cold stack down and removing $cache"
  ansible-playbook site.yml --tags teardown >/dev/null 2>&1 || log "teardown reported errors; see TRAINFLEET_CACHE=$cache make teardown"
  chmod -R u+w "$cache" 2>/dev/null || true  # Go's module cache is read-only
  rm -rf "$cache"
}
$keep || trap cleanup EXIT
log "TRAINFLEET_CACHE=$cache (empty), Go's module and build caches under it (empty too)"
export TRAINFLEET_CACHE="$cache" GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build"
t1=$(stamp)
status=0
ansible-playbook site.yml || status=$?
t_demo=$(( $(stamp) - t1 ))
printf '\ncold-demo: setup %ss, make demo %ss, total %ss, exit %s%s\n' "$t_setup" "$t_demo" "$(( $(stamp) - t0 ))" "$status" \
  "$($keep && echo "; stack and cache kept: TRAINFLEET_CACHE=$cache make teardown removes the stack")"
exit "$status"
