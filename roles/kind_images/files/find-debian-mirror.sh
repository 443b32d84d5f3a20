#!/usr/bin/env bash
# Print the Debian archive mirror this host's apt uses, for debootstrap.
# Usage: find-debian-mirror.sh [APT_DIR]   (default /etc/apt; tests pass a tree of their own)
#
# Reads both source formats apt reads:
#   - one-line:  APT_DIR/sources.list and APT_DIR/sources.list.d/*.list  ("deb [opts] URI suite comp...")
#   - deb822:    APT_DIR/sources.list.d/*.sources (stanzas with Types:, URIs:, Suites:, Components:,
#                Enabled:), the only form on a fresh Debian 12 host
# and keeps "deb" entries of the main component that are not the security archive. URIs that end
# in /debian are preferred (a third-party repository such as a vendor's own comes second). Any file
# may be missing. Exits 3 with a message naming kind_images_debian_mirror when nothing qualifies.
set -Eeuo pipefail
trap 'echo "${0##*/}: line ${LINENO}: exit $?: ${BASH_COMMAND}" >&2' ERR

apt_dir="${1:-/etc/apt}"

candidates() {
  local f
  # One-line format. Options in [...] may hold spaces; the URI is the first word after them.
  for f in "${apt_dir}/sources.list" "${apt_dir}"/sources.list.d/*.list; do
    [ -f "${f}" ] || continue
    awk '
      { sub(/#.*/, "") }
      $1 != "deb" { next }
      {
        line = $0
        sub(/^[[:space:]]*deb[[:space:]]+/, "", line)
        if (line ~ /^\[/) { sub(/^\[[^]]*\][[:space:]]*/, "", line) }
        n = split(line, w, /[[:space:]]+/)
        if (n < 3) next
        comps = ""
        for (i = 3; i <= n; i++) comps = comps " " w[i]
        print w[1] "\t" w[2] "\t" comps
      }' "${f}"
  done
  # deb822 format: one record per stanza, one line per (URI, suite).
  for f in "${apt_dir}"/sources.list.d/*.sources; do
    [ -f "${f}" ] || continue
    awk '
      function flush(   i, j, nu, ns, u, s) {
        if (types ~ /(^|[[:space:]])deb([[:space:]]|$)/ && enabled !~ /^(no|false)$/) {
          nu = split(uris, u, /[[:space:]]+/); ns = split(suites, s, /[[:space:]]+/)
          for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
            if (u[i] != "" && s[j] != "") print u[i] "\t" s[j] "\t " comps
        }
        types = ""; uris = ""; suites = ""; comps = ""; enabled = ""; last = ""
      }
      /^[[:space:]]*#/ { next }
      /^[[:space:]]*$/ { flush(); next }
      /^[[:space:]]/ {   # continuation of the previous field
        v = $0; sub(/^[[:space:]]+/, "", v)
        if (last == "uris") uris = uris " " v
        else if (last == "suites") suites = suites " " v
        else if (last == "components") comps = comps " " v
        else if (last == "types") types = types " " v
        next
      }
      {
        key = tolower($0); sub(/:.*/, "", key)
        v = $0; sub(/^[^:]*:[[:space:]]*/, "", v); sub(/[[:space:]]+$/, "", v)
        last = key
        if (key == "types") types = v
        else if (key == "uris") uris = v
        else if (key == "suites") suites = v
        else if (key == "components") comps = v
        else if (key == "enabled") enabled = tolower(v)
      }
      END { flush() }' "${f}"
  done
}

# uri \t suite \t components -> keep the main archive, drop the security archive.
qualified="$(candidates | awk -F '\t' '
  $1 ~ /security/ || $2 ~ /-security$/ { next }
  (" " $3 " ") !~ /[[:space:]]main[[:space:]]/ { next }
  { print $1 }')"

mirror=""
if [ -n "${qualified}" ]; then
  mirror="$(printf '%s\n' "${qualified}" | grep -m1 -E '/debian/?$' || true)"
  [ -n "${mirror}" ] || mirror="$(printf '%s\n' "${qualified}" | head -n1)"
fi
if [ -z "${mirror}" ]; then
  echo "find-debian-mirror: no Debian archive (a 'deb' entry of component main that is not the security archive) in ${apt_dir}/sources.list, ${apt_dir}/sources.list.d/*.list or ${apt_dir}/sources.list.d/*.sources; set kind_images_debian_mirror to your Debian mirror's URL (for example http://<your mirror>/debian)" >&2
  exit 3
fi
printf '%s\n' "${mirror%/}"
