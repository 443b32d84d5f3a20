#!/usr/bin/env bash
# Build the Kubernetes commands from the k8s.io/kubernetes Go module (no git, no tarball download).
# Usage: build-kubernetes.sh VERSION OUT_DIR
#   VERSION  e.g. v1.32.13 (staging modules are pinned to v0.<minor>.<patch>)
#   OUT_DIR  receives bin/<command> and a "version" file; "bin/.complete" marks success.
# The module cannot be built directly: its go.mod replaces k8s.io/* with ./staging/... which the
# module zip does not contain, so a wrapper module replaces each staging module with its release.
set -Eeuo pipefail
trap 'echo "${0##*/}: line ${LINENO}: exit $?: ${BASH_COMMAND}" >&2' ERR

version="${1:?kubernetes version (vX.Y.Z)}"
out="${2:?output directory}"
commands="kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl"

IFS=. read -r major minor patch <<<"${version#v}"
staging_version="v0.${minor}.${patch}"
staging="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms
kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller"

src="${out}/src"
mkdir -p "${src}" "${out}/bin"
cd "${src}"
{
  echo "module trainfleet.invalid/kubernetes-build"
  echo
  echo "go 1.23.0"
  echo
  echo "require k8s.io/kubernetes ${version}"
  echo
  echo "replace ("
  for m in ${staging}; do
    echo "	k8s.io/${m} => k8s.io/${m} ${staging_version}"
  done
  echo ")"
} >go.mod
cat >build.go <<'GO'
// Package build only exists so that the wrapper module is a valid module.
package build
GO

pkgs=""
for c in ${commands}; do pkgs="${pkgs} k8s.io/kubernetes/cmd/${c}"; done
# Resolve the dependency graph (with the replacements above) and fill go.sum.
go get $(for p in ${pkgs}; do echo "${p}@${version}"; done)

commit="$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/.*"Hash": *"\([0-9a-f]*\)".*/\1/p' | head -n1)"
commit="${commit:-0000000000000000000000000000000000000000}"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="${ldflags} -X ${p}.gitVersion=${version} -X ${p}.gitMajor=${major} -X ${p}.gitMinor=${minor}"
  ldflags="${ldflags} -X ${p}.gitCommit=${commit} -X ${p}.gitTreeState=clean -X ${p}.buildDate=${build_date}"
done

# One invocation for all commands so that the shared packages are compiled once.
# shellcheck disable=SC2086
CGO_ENABLED=0 go build -trimpath -tags providerless -ldflags "${ldflags}" -o "${out}/bin/" ${pkgs}
echo "${version}" >"${out}/version"
"${out}/bin/kubeadm" version -o short | grep -qx "${version}"
touch "${out}/bin/.complete"
