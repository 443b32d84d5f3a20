#!/usr/bin/env bash
# Turn the node base image into the kind node image: start a container from it, run containerd
# inside, import the given images into containerd's k8s.io namespace (pinned, so the kubelet's
# image GC keeps them), then commit the container. This is what `kind build node-image` does,
# minus its `ctr content fetch` of every image it did not build (which always fails offline).
# Usage: preload-node-image.sh BASE_IMAGE NODE_IMAGE VERSIONS_LABEL IMAGE...
#   BASE_IMAGE      node base image (systemd, containerd, kubelet, kind's files)
#   NODE_IMAGE      tag to commit to
#   VERSIONS_LABEL  value of the label trainfleet.versions (what the image was built from)
#   IMAGE           images in the local Docker engine to preload
set -Eeuo pipefail
trap 'echo "${0##*/}: line ${LINENO}: exit $?: ${BASH_COMMAND}" >&2' ERR

base="${1:?base image}"
node="${2:?node image}"
label="${3:?versions label}"
shift 3
[ "$#" -gt 0 ] || { echo "no image to preload" >&2; exit 2; }

work="$(mktemp -d)"
container=""
cleanup() {
  [ -z "${container}" ] || docker rm -f -v "${container}" >/dev/null 2>&1 || true
  rm -rf "${work}"
}
trap cleanup EXIT

docker save -o "${work}/images.tar" "$@"
container="$(docker run -d --privileged --entrypoint sleep --tmpfs /run --tmpfs /tmp "${base}" infinity)"
docker exec "${container}" bash -c 'nohup containerd >/var/log/containerd-preload.log 2>&1 &'
for _ in $(seq 1 60); do
  docker exec "${container}" ctr --timeout 2s version >/dev/null 2>&1 && break
  sleep 1
done
docker exec "${container}" ctr --timeout 2s version >/dev/null
docker exec -i "${container}" ctr -n k8s.io images import --all-platforms --no-unpack --digests - <"${work}/images.tar"
for image in "$@"; do
  ref="${image}"
  # docker save writes short names (alpine:3.10) as docker.io/library/...; ctr stores the full name.
  case "${ref%%/*}" in
    *.*|*:*|localhost) ;;
    *) case "${ref}" in */*) ref="docker.io/${ref}" ;; *) ref="docker.io/library/${ref}" ;; esac ;;
  esac
  docker exec "${container}" ctr -n k8s.io images label "${ref}" io.cri-containerd.pinned=pinned >/dev/null
done
docker exec "${container}" ctr -n k8s.io images ls -q
docker exec "${container}" bash -c 'kill "$(pidof containerd)"; for _ in $(seq 1 30); do pidof containerd >/dev/null || exit 0; sleep 1; done; exit 1'
docker commit \
  --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
  --change "LABEL trainfleet.versions=${label}" \
  "${container}" "${node}" >/dev/null
