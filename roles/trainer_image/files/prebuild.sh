#!/usr/bin/env bash
# The trainer image's early build (roles/trainer_image/tasks/prebuild.yml), run in the background
# by the cluster step: wait until the Docker engine has the base image (the cluster step imports it
# a few minutes in), then build the context with the engine's classic builder, the one
# community.docker.docker_image uses, so that the trainer_image step finds every layer in the build
# cache. The image is left untagged: that step tags it, by content.
# Usage: prebuild.sh BASE_IMAGE WAIT_SECONDS CONTEXT DOCKERFILE [docker build option]...
set -Eeuo pipefail
trap 'echo "${0##*/}: line ${LINENO}: exit $?: ${BASH_COMMAND}" >&2' ERR

base="${1:?base image}"
wait_s="${2:?seconds to wait for the base}"
context="${3:?build context}"
dockerfile="${4:?Dockerfile}"
shift 4

start=$(date +%s)
polls=0
until docker image inspect "${base}" >/dev/null 2>&1; do
  waited=$(( $(date +%s) - start ))
  if (( waited >= wait_s )); then
    echo "the base image ${base} did not appear within ${wait_s}s (the cluster step builds it)" >&2
    exit 3
  fi
  if (( polls % 6 == 0 )); then echo "waiting for the base image ${base} (${waited}s)"; fi
  polls=$(( polls + 1 ))
  sleep 5
done
echo "building the trainer image on ${base} (classic builder)"
DOCKER_BUILDKIT=0 exec docker build --rm -f "${context}/${dockerfile}" "$@" "${context}"
