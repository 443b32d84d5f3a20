#!/usr/bin/env bash
# trainfleet-cni: pod networking for a kind cluster without kindnetd (whose Go module the proxy
# does not serve). Runs on every node as a systemd service. Every few seconds it reads the nodes'
# pod CIDRs and internal IPs with the kubelet's credentials and
#   * writes /etc/cni/net.d/10-trainfleet.conflist for this node's podCIDR (ptp + host-local +
#     portmap, Debian's containernetworking-plugins) -> the node becomes Ready;
#   * routes every other node's podCIDR via that node's IP (all nodes share the docker network);
#   * masquerades pod traffic that leaves the pod networks (chain TRAINFLEET-MASQ).
set -u

kubeconfig=/etc/kubernetes/kubelet.conf
conflist=/etc/cni/net.d/10-trainfleet.conflist
interval="${TRAINFLEET_CNI_INTERVAL:-5}"
node="$(cat /etc/hostname)"

write_conflist() {
  local cidr="$1" tmp
  tmp="$(mktemp /etc/cni/net.d/.trainfleet.XXXXXX)"
  cat >"${tmp}" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "trainfleet",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "${cidr}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  if cmp -s "${tmp}" "${conflist}"; then rm -f "${tmp}"; else chmod 0644 "${tmp}"; mv "${tmp}" "${conflist}"; fi
}

sync_masquerade() {
  # $@ = every pod CIDR of the cluster; own pods talking to any of them keep their address.
  local own="$1"; shift
  local rules="*nat
:TRAINFLEET-MASQ - [0:0]
-F TRAINFLEET-MASQ"
  for cidr in "$@"; do rules="${rules}
-A TRAINFLEET-MASQ -d ${cidr} -j RETURN"; done
  rules="${rules}
-A TRAINFLEET-MASQ -j MASQUERADE
COMMIT"
  printf '%s\n' "${rules}" | iptables-restore --noflush
  iptables -t nat -C POSTROUTING -s "${own}" -j TRAINFLEET-MASQ 2>/dev/null ||
    iptables -t nat -A POSTROUTING -s "${own}" -j TRAINFLEET-MASQ
}

sync_once() {
  local lines own="" cidrs=() name cidr ip
  lines="$(kubectl --kubeconfig "${kubeconfig}" get nodes --request-timeout=10s -o \
    jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.podCIDR}{" "}{.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' 2>/dev/null)" || return 0
  while read -r name cidr ip; do
    [ -n "${cidr:-}" ] || continue
    cidrs+=("${cidr}")
    if [ "${name}" = "${node}" ]; then
      own="${cidr}"
    elif [ -n "${ip:-}" ]; then
      ip route replace "${cidr}" via "${ip}" 2>/dev/null || true
    fi
  done <<<"${lines}"
  [ -n "${own}" ] || return 0
  write_conflist "${own}"
  sync_masquerade "${own}" "${cidrs[@]}"
}

mkdir -p /etc/cni/net.d
sysctl -qw net.ipv4.ip_forward=1 || true
while true; do
  [ -s "${kubeconfig}" ] && sync_once
  sleep "${interval}"
done
