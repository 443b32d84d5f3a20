#!/usr/bin/env bash
# make setup: system packages, the .venv with requirements.txt, and a running Docker engine.
# Idempotent: when everything is in place it only checks and returns in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}

log() { printf 'setup: %s\n' "$*"; }

# System packages: Docker engine, debootstrap (offline base file systems), the registry,
# and what kind's nodes and our scripts use on the host.
SYSTEM_PACKAGES=(docker.io debootstrap docker-registry iptables rsync git make curl ca-certificates)
missing=()
for p in "${SYSTEM_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing system packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
    { $SUDO apt-get update -q >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
fi

# The venv, reinstalled only when requirements.txt changes.
want=$(sha256sum requirements.txt | cut -d' ' -f1)
stamp=$VENV/.requirements.sha256
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "creating $VENV with $($PYTHON --version) and requirements.txt (torch is large; pip caches it)"
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -r requirements.txt
  echo "$want" > "$stamp"
fi

# The Docker engine (and, on hosts whose capability bounding set is restricted, the runtime
# wrapper kind's privileged nodes need) is managed by the docker_engine role.
if [ -f playbooks/local_host.yml ]; then
  ANSIBLE_CONFIG=$ROOT/ansible.cfg "$VENV/bin/ansible-playbook" playbooks/local_host.yml >/dev/null ||
    { ANSIBLE_CONFIG=$ROOT/ansible.cfg "$VENV/bin/ansible-playbook" playbooks/local_host.yml; exit 1; }
fi
log "ready ($VENV)"
