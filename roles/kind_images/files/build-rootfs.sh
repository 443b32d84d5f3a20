#!/usr/bin/env bash
# Create a minimal Debian root file system with debootstrap and store it as a tar archive.
# Usage: build-rootfs.sh SUITE OUT_TAR [MIRROR]
#   SUITE    Debian suite, e.g. bookworm
#   OUT_TAR  archive to write (written to OUT_TAR.tmp, then renamed: a half archive never exists)
#   MIRROR   Debian mirror URL; default: the first Debian "main" URI in the host's apt sources
set -Eeuo pipefail
trap 'echo "${0##*/}: line ${LINENO}: exit $?: ${BASH_COMMAND}" >&2' ERR

suite="${1:?Debian suite}"
out="${2:?output tar}"
mirror="${3:-}"

if [ -z "${mirror}" ]; then
  # The host's own Debian mirror (deb822 *.sources or one-line *.list); it explains itself when
  # it finds none.
  mirror="$("$(dirname "$0")/find-debian-mirror.sh")"
fi

mkdir -p "$(dirname "${out}")"
exec 9>"$(dirname "${out}")/.lock"
flock -w 1800 9
[ -s "${out}" ] && exit 0

root="$(mktemp -d "$(dirname "${out}")/rootfs.XXXXXX")"
trap 'rm -rf "${root}" "${out}.tmp"' EXIT
debootstrap --variant=minbase --include=ca-certificates "${suite}" "${root}" "${mirror}"
# The image must resolve packages from the same mirror when later builds run apt-get.
printf 'deb %s %s main\ndeb %s %s-updates main\n' "${mirror}" "${suite}" "${mirror}" "${suite}" >"${root}/etc/apt/sources.list"
rm -rf "${root}"/var/cache/apt/archives/*.deb "${root}"/var/lib/apt/lists/*
tar -C "${root}" --numeric-owner -cf "${out}.tmp" .
mv "${out}.tmp" "${out}"
