#!/usr/bin/env bash
# Build commands of one Go module at a pinned version through a throw-away wrapper module.
# Usage: build-go-binaries.sh OUT_DIR MODULE VERSION PACKAGE[=NAME]...
#   OUT_DIR  receives bin/<name> and bin/.complete on success (src/ keeps the wrapper module)
#   MODULE   module path, e.g. go.etcd.io/etcd/server/v3
#   VERSION  tag or pseudo-version, e.g. v3.5.24
#   PACKAGE  import path of a main package; "=NAME" renames the binary
# Environment: GO_LDFLAGS (extra -ldflags), GO_TAGS (build tags), CGO_ENABLED (default 0).
# A wrapper module is used (instead of `go install MODULE@VERSION`) because modules such as etcd
# carry replace directives in their go.mod, which `go install pkg@version` refuses.
set -Eeuo pipefail
trap 'echo "${0##*/}: line ${LINENO}: exit $?: ${BASH_COMMAND}" >&2' ERR

out="${1:?output directory}"
module="${2:?module path}"
version="${3:?module version}"
shift 3
[ "$#" -gt 0 ] || { echo "no package given" >&2; exit 2; }

export CGO_ENABLED="${CGO_ENABLED:-0}"
src="${out}/src"
mkdir -p "${src}" "${out}/bin"
cd "${src}"
printf 'module trainfleet.invalid/build\n\ngo 1.21\n' >go.mod
printf '// Package build only exists so that the wrapper module is a valid module.\npackage build\n' >build.go
go get "${module}@${version}"
for spec in "$@"; do
  go get "${spec%%=*}@${version}"
done

for spec in "$@"; do
  pkg="${spec%%=*}"
  name="${pkg##*/}"
  [ "${spec}" = "${pkg}" ] || name="${spec#*=}"
  go build -trimpath -tags "${GO_TAGS:-}" -ldflags "-s -w ${GO_LDFLAGS:-}" -o "${out}/bin/${name}" "${pkg}"
done
touch "${out}/bin/.complete"
