# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local platform's checks of its inputs (roles/local_registry, local_aws, kind_cluster, kind_images:
tasks/preflight.yml): the registry, the AWS endpoint, the kind cluster and the images it is built from.

They run in the cluster step before anything is built or started, so a refused value makes nothing.
The two servers have no authentication: an address beyond loopback is refused unless asked for.
module_utils/checks.py says how the checks run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.trainfleet.training.plugins.module_utils.checks import (
    DEBIAN_PACKAGE, DNS_LABEL_63, IPV4, REPOSITORY_PATH, absolute, first, is_list, length, matches, q, text, to_int, whole)
from ansible_collections.trainfleet.training.plugins.module_utils.pod_settings import to_bool

IPV4_ADDRESS = re.compile(r"^%s\Z" % IPV4)
LOOPBACK = re.compile(r"^127\.")
DOCKER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+\Z")
DOCKER_NETWORK = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*\Z")
CLUSTER_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?\Z")
CIDR = re.compile(r"^\d+\.\d+\.\d+\.\d+/\d+\Z")
LOG_SIZE = re.compile(r"^[1-9][0-9]*(Ki|Mi|Gi)\Z")
IMAGE = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?\Z")
MIRROR_HOST = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?\Z")
MIRROR_ENDPOINT = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?\Z")
SHARED_PATH = re.compile(r"^/(var/local|srv|mnt|data)(/[A-Za-z0-9._-]+)+\Z")
VERSION = re.compile(r"^v\d+\.\d+\.\d+\Z")
NAME_TAG = re.compile(r"^[a-z0-9./_-]+:[A-Za-z0-9._-]+\Z")
PINNED_NODE = re.compile(r"^[a-z0-9./_-]+:v1\.\d+\.\d+@sha256:[0-9a-f]{64}\Z")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
MIRROR_URL = re.compile(r"^https?://[^\s\"'\\]+\Z")
SUITE = re.compile(r"^[a-z]+\Z")


def _between(value, low, high):
    """`low <= value | int <= high`."""
    return low <= to_int(value) <= high


def _published(v, p, address_name, what, keep):
    """An address beyond loopback for a server without authentication, unless <p>_allow_non_loopback."""
    address = v[address_name]
    if v[p + "_state"] != "present" or to_bool(v[p + "_allow_non_loopback"]) or matches(LOOPBACK, address):
        return None
    return ("%s %s would publish %s %s. Keep a loopback address such as 127.0.0.1 (%s), or set %s_allow_non_loopback: true."
            % (address_name, q(address), what, "on every interface of this machine" if address == "0.0.0.0" else "beyond this machine",
               keep, p))


# --------------------------------------------------------------------------- the registry


def _registry(v):
    p = "local_registry"
    packages = v[p + "_packages"]
    ok = (v[p + "_state"] in ("present", "absent") and matches(DOCKER_NAME, v[p + "_name"])
          and matches(DOCKER_NETWORK, v[p + "_network"]) and matches(DOCKER_NAME, v[p + "_volume"])
          and _between(v[p + "_port"], 1, 65535) and _between(v[p + "_host_port"], 1, 65535)
          and matches(IPV4_ADDRESS, v[p + "_bind_address"]) and matches(REPOSITORY_PATH, v[p + "_image_repository"])
          and absolute(v[p + "_cache_dir"]) and is_list(packages) and "docker-registry" in packages
          and all(matches(DEBIAN_PACKAGE, package) for package in packages)
          and v[p + "_log_level"] in ("error", "warn", "info", "debug") and _between(v[p + "_wait_timeout"], 1, 600))
    if ok:
        return None
    return ("Invalid local_registry input: local_registry_state present|absent (got %s); local_registry_name, local_registry_network "
            "and local_registry_volume docker names (got %s, %s, %s); local_registry_port and local_registry_host_port 1-65535 (got %s, "
            "%s); local_registry_bind_address an IPv4 address (got %s); local_registry_image_repository a lowercase repository (got %s); "
            "local_registry_cache_dir absolute (got %s); local_registry_packages Debian package names that include docker-registry "
            "(got %s); local_registry_log_level error|warn|info|debug (got %s); local_registry_wait_timeout 1..600 (got %s)."
            % tuple(q(v[p + suffix]) for suffix in ("_state", "_name", "_network", "_volume", "_port", "_host_port", "_bind_address",
                                                    "_image_repository", "_cache_dir", "_packages", "_log_level", "_wait_timeout")))


LOCAL_REGISTRY = tuple("local_registry_" + name for name in (
    "state", "name", "network", "volume", "port", "host_port", "bind_address", "image_repository", "cache_dir", "packages",
    "log_level", "wait_timeout", "allow_non_loopback"))


def local_registry_problems(values, context=None):
    """The first problem of the local registry's inputs, as a list."""
    return first(values, LOCAL_REGISTRY, (_registry, lambda v: _published(
        v, "local_registry", "local_registry_bind_address", "the registry (no authentication, deletes enabled)",
        "the kind nodes pull over the docker network, not through it")))


# --------------------------------------------------------------------------- the AWS endpoint


def _aws(v):
    p = "local_aws"
    ok = (v[p + "_state"] in ("present", "absent") and _between(v[p + "_port"], 1, 65535) and matches(IPV4_ADDRESS, v[p + "_host"])
          and all(absolute(v[p + suffix]) for suffix in ("_python", "_run_dir", "_pidfile", "_logfile"))
          and _between(v[p + "_wait_timeout"], 1, 600) and _between(v[p + "_stop_timeout"], 1, 600)
          and matches(DOCKER_NETWORK, v[p + "_pod_network"]))
    if ok:
        return None
    return ("Invalid local_aws input: local_aws_state must be present|absent (got %s), local_aws_port 1-65535 (got %s), local_aws_host "
            "an IPv4 address (got %s), local_aws_python, local_aws_run_dir, local_aws_pidfile and local_aws_logfile absolute paths (got "
            "%s, %s, %s, %s), local_aws_wait_timeout and local_aws_stop_timeout 1..600 (got %s, %s), local_aws_pod_network a docker network name (got %s)."
            % tuple(q(v[p + suffix]) for suffix in ("_state", "_port", "_host", "_python", "_run_dir", "_pidfile", "_logfile",
                                                    "_wait_timeout", "_stop_timeout", "_pod_network")))


LOCAL_AWS = tuple("local_aws_" + name for name in (
    "state", "port", "host", "python", "run_dir", "pidfile", "logfile", "wait_timeout", "stop_timeout", "pod_network",
    "allow_non_loopback"))


def local_aws_problems(values, context=None):
    """The first problem of the local AWS endpoint's inputs, as a list."""
    return first(values, LOCAL_AWS, (_aws, lambda v: _published(
        v, "local_aws", "local_aws_host", "the moto server (no authentication, a reset endpoint that wipes every resource)",
        "the pods reach the server on the kind network's gateway, local_aws_pod_listen")))


# --------------------------------------------------------------------------- the kind cluster


def _mirrors(mirrors):
    return is_list(mirrors) and all(isinstance(m, dict) and matches(MIRROR_HOST, m.get("host")) and matches(MIRROR_ENDPOINT, m.get("endpoint"))
                                    for m in mirrors)


def _cluster(v):
    p = "kind_cluster"
    ok = (v[p + "_state"] in ("present", "absent") and matches(CLUSTER_NAME, v[p + "_name"]) and _between(v[p + "_workers"], 0, 10)
          and absolute(v[p + "_kubeconfig"]) and absolute(v[p + "_kind_bin"])
          and matches(CIDR, v[p + "_pod_subnet"]) and matches(CIDR, v[p + "_service_subnet"]) and _mirrors(v[p + "_registry_mirrors"])
          and _between(v[p + "_create_timeout"], 60, 3600) and _between(v[p + "_ready_timeout"], 30, 3600)
          and whole(v[p + "_coredns_node_lost_toleration_seconds"], 1, 3600)
          and matches(LOG_SIZE, v[p + "_container_log_max_size"]) and _between(v[p + "_container_log_max_files"], 2, 100)
          and matches(IMAGE, v[p + "_node_image"]) and matches(IMAGE, v[p + "_verify_image"])
          and matches(DNS_LABEL_63, v[p + "_verify_namespace"]) and v[p + "_cni"] in ("trainfleet", "kindnet"))
    if ok:
        return None
    return ("kind_cluster_state must be present or absent (got %s); kind_cluster_name a DNS label of at most 32 characters (got %s); "
            "kind_cluster_workers 0-10 (got %s); kind_cluster_kubeconfig and kind_cluster_kind_bin absolute paths; kind_cluster_node_image "
            "and kind_cluster_verify_image image references (got %s, %s); kind_cluster_verify_namespace a DNS label (got %s); every "
            "kind_cluster_registry_mirrors host a host[:port] and endpoint an http(s)://host[:port] URL (got %s); kind_cluster_pod_subnet / "
            "kind_cluster_service_subnet CIDRs; every kind_cluster_registry_mirrors endpoint an http(s) URL; kind_cluster_create_timeout "
            "60..3600 (got %s) and kind_cluster_ready_timeout 30..3600 seconds (got %s); kind_cluster_coredns_node_lost_toleration_seconds "
            "1..3600 seconds (got %s); kind_cluster_container_log_max_size a quantity such as 256Mi (got %s) and "
            "kind_cluster_container_log_max_files 2..100 (2 is the kubelet's minimum; got %s); kind_cluster_cni trainfleet or kindnet "
            "(got %s)."
            % tuple(q(v[p + suffix]) for suffix in (
                "_state", "_name", "_workers", "_node_image", "_verify_image", "_verify_namespace", "_registry_mirrors", "_create_timeout",
                "_ready_timeout", "_coredns_node_lost_toleration_seconds", "_container_log_max_size", "_container_log_max_files", "_cni")))


def _shared_path(v):
    path = v["kind_cluster_shared_path"]
    if isinstance(path, str) and (path == "" or (matches(SHARED_PATH, path) and "/.." not in path and "/./" not in path)):
        return None
    return ("kind_cluster_shared_path must be empty or an absolute directory under /var/local, /srv, /mnt or /data on the nodes, "
            "without '..' (got %s)" % q(path))


KIND_CLUSTER = tuple("kind_cluster_" + name for name in (
    "state", "name", "workers", "kubeconfig", "kind_bin", "pod_subnet", "service_subnet", "registry_mirrors", "create_timeout",
    "ready_timeout", "coredns_node_lost_toleration_seconds", "container_log_max_size", "container_log_max_files", "node_image",
    "verify_image", "verify_namespace", "cni", "shared_path"))


def kind_cluster_problems(values, context=None):
    """The first problem of the kind cluster's inputs, as a list."""
    return first(values, KIND_CLUSTER, (_cluster, _shared_path))


# --------------------------------------------------------------------------- the images the cluster is built from


def _sequence(value):
    """Jinja's `value is sequence`."""
    try:
        len(value)
        value.__getitem__  # pylint: disable=pointless-statement
    except (TypeError, AttributeError):
        return False
    return True


def _versions(v):
    p = "kind_images"
    ok = (matches(VERSION, v[p + "_kind_version"]) and matches(re.compile(r"^v1\.\d+\.\d+\Z"), v[p + "_kubernetes_version"])
          and matches(re.compile(r"^v3\.\d+\.\d+\Z"), v[p + "_etcd_version"]) and matches(VERSION, v[p + "_coredns_version"])
          and (v[p + "_containerd_version"] == "debian" or matches(VERSION, v[p + "_containerd_version"]))
          and matches(re.compile(r"^\d+\.\d+\Z"), text(v[p + "_pause_version"])) and absolute(v[p + "_cache_dir"])
          and matches(SUITE, v[p + "_debian_suite"]) and matches(SUITE, v[p + "_trainer_debian_suite"])
          and all(matches(NAME_TAG, v[p + suffix]) for suffix in ("_node_image", "_debian_base_image", "_trainer_base_image", "_init_image"))
          and _sequence(v[p + "_extra_images"]) and _between(v[p + "_build_timeout"], 60, 14400))
    if ok:
        return None
    return ("kind_images: versions must look like vX.Y.Z (kind_images_kind_version=%s, kind_images_kubernetes_version=%s, "
            "kind_images_etcd_version=%s, kind_images_coredns_version=%s; kind_images_containerd_version vX.Y.Z or 'debian'), "
            "kind_images_pause_version X.Y, kind_images_cache_dir an absolute path (%s), kind_images_debian_suite and "
            "kind_images_trainer_debian_suite Debian suite names (%s, %s), kind_images_node_image, kind_images_init_image, "
            "kind_images_debian_base_image and kind_images_trainer_base_image name:tag, kind_images_extra_images a list, "
            "kind_images_build_timeout 60..14400 seconds (got %s)."
            % tuple(q(v[p + suffix]) for suffix in ("_kind_version", "_kubernetes_version", "_etcd_version", "_coredns_version",
                                                    "_cache_dir", "_debian_suite", "_trainer_debian_suite", "_build_timeout")))


def _source(v):
    p = "kind_images"
    ok = (v[p + "_source"] in ("build", "pull", "auto") and _between(v[p + "_source_probe_timeout"], 1, 60)
          and _between(v[p + "_pull_timeout"], 60, 7200) and matches(PINNED_NODE, v[p + "_pull_node_image"])
          and matches(DIGEST, v[p + "_pull_init_image_digest"]) and matches(NAME_TAG, v[p + "_pull_local_node_image"]))
    if ok:
        return None
    return ("kind_images_source must be build, pull or auto (got %s); kind_images_source_probe_timeout 1..60 seconds (got %s); "
            "kind_images_pull_timeout 60..7200 seconds (got %s); kind_images_pull_node_image a kind node image pinned by tag and digest "
            "such as kindest/node:v1.32.0@sha256:<64 hex> (got %s); kind_images_pull_init_image_digest sha256:<64 hex> (got %s); "
            "kind_images_pull_local_node_image name:tag (got %s)."
            % tuple(q(v[p + suffix]) for suffix in ("_source", "_source_probe_timeout", "_pull_timeout", "_pull_node_image",
                                                    "_pull_init_image_digest", "_pull_local_node_image")))


def _mirror(v):
    mirror = v["kind_images_debian_mirror"]
    if length(mirror) == 0 or matches(MIRROR_URL, mirror):
        return None
    return ("kind_images_debian_mirror must be empty (read from the host's apt sources) or an http(s) URL of a Debian archive mirror; "
            "got %s." % q(mirror))


KIND_IMAGES = tuple("kind_images_" + name for name in (
    "kind_version", "kubernetes_version", "etcd_version", "coredns_version", "containerd_version", "pause_version", "cache_dir",
    "debian_suite", "trainer_debian_suite", "node_image", "debian_base_image", "trainer_base_image", "init_image", "extra_images",
    "build_timeout", "source", "source_probe_timeout", "pull_timeout", "pull_node_image", "pull_init_image_digest",
    "pull_local_node_image", "debian_mirror"))


def kind_images_problems(values, context=None):
    """The first problem of the kind images' inputs, as a list."""
    return first(values, KIND_IMAGES, (_versions, _source, _mirror))
