#!/usr/bin/env bash
# make setup: system packages, the .venv with requirements.txt, and a running Docker engine.
# Idempotent: when everything is in place it only checks and returns in seconds.
set -Eeuo pipefail
trap 'echo "setup.sh: line ${LINENO}: exit $?: ${BASH_COMMAND}" >&2' ERR
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}

log() { printf 'setup: %s\n' "$*"; }

# System packages: Docker engine, debootstrap (offline base file systems), the registry, gcc and
# libc6-dev (the static pause binary), and what kind's nodes and our scripts use on the host.
# kubectl is not one of them: the cluster step builds it with Kubernetes and the roles use that one.
SYSTEM_PACKAGES=(docker.io debootstrap docker-registry iptables rsync git make curl ca-certificates gcc libc6-dev)
missing=()
for p in "${SYSTEM_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing system packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
    { $SUDO apt-get update -q >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; } ||
    { log "cannot install ${missing[*]} with apt-get (needs root or sudo, and Debian's package archive); install them and run make setup again" >&2; exit 1; }
fi

# Go cannot be installed from Debian's bookworm archive at the version the pinned modules need:
# check it and say what is needed. The minimum is pinned with the Kubernetes version it serves.
go_min=$(sed -n 's/^kind_images_go_min_version:[[:space:]]*"\{0,1\}\([0-9.]*\)"\{0,1\}.*/\1/p' roles/kind_images/defaults/main.yml)
go_have=$(go version 2>/dev/null | sed -n 's/.*go\([0-9][0-9.]*\).*/\1/p' || true)
if [ -z "$go_have" ] || [ "$(printf '%s\n%s\n' "$go_min" "$go_have" | sort -V | head -n1)" != "$go_min" ]; then
  log "Go >= ${go_min} is needed to build the local cluster's images (found: ${go_have:-no go on PATH})." >&2
  log "Install Go ${go_min} or newer (the Go toolchain module golang.org/toolchain@v0.0.1-go${go_min}.linux-$(dpkg --print-architecture 2>/dev/null || echo amd64) from your Go module proxy, or a release archive), put it on PATH and run make setup again." >&2
  exit 1
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
# wrapper kind's privileged nodes need) is managed by the docker_engine role. It runs when dockerd
# does not answer or when the role changed since it last ran to the end here (a stamp in the venv);
# otherwise the engine is as the role left it, and site.yml's local_stack step checks it again.
if [ -f playbooks/local_host.yml ]; then
  engine_want=$(cat playbooks/local_host.yml roles/docker_engine/*/* | sha256sum | cut -d' ' -f1)
  engine_stamp=$VENV/.docker_engine.sha256
  if ! docker info >/dev/null 2>&1 || [ "$(cat "$engine_stamp" 2>/dev/null)" != "$engine_want" ]; then
    ANSIBLE_CONFIG=$ROOT/ansible.cfg "$VENV/bin/ansible-playbook" playbooks/local_host.yml >/dev/null ||
      { ANSIBLE_CONFIG=$ROOT/ansible.cfg "$VENV/bin/ansible-playbook" playbooks/local_host.yml; exit 1; }
    echo "$engine_want" > "$engine_stamp"
  fi
fi
log "ready ($VENV)"
