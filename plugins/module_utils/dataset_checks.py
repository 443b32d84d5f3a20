# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dataset step's checks of its inputs once its source was scanned (roles/dataset/tasks/preflight.yml).

The name and targets, the object store, the bucket and prefix (strictly under the prefix the run owns,
never under one the s3 step's lifecycle rule expires), the endpoint; for the claim copy its namespace,
claim, paths, image, pod access to S3, security, resources and wait; the manifest's path; then whether
the cluster can be reached. module_utils/checks.py says how the checks run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.trainfleet.training.plugins.module_utils.checks import (
    DNS_1123_LABEL, DNS_1123_SUBDOMAIN, DOT_OR_DOTDOT, MOUNT_PATH, first, is_list, matches, optional, q, text, to_int)

NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?\Z")
PREFIX = re.compile(r"^([A-Za-z0-9!_.()'-]+/)+\Z")
DOT_COMPONENT = re.compile(r"(^|/)\.\.?/")
ENDPOINT = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?\Z")
REGION = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}\Z")
CLAIM_DIR = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*\Z")
SYSTEM_DIRS = ("/tmp", "/etc", "/dev", "/proc", "/sys", "/usr", "/opt", "/opt/trainfleet", "/etc/trainfleet-dataset")
IMAGE = re.compile(r"^[a-z0-9][A-Za-z0-9._:/@-]*\Z")
CPU = re.compile(r"^[0-9]+(\.[0-9]+)?m?\Z")
MEMORY = re.compile(r"^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?\Z")
FILE_PATH = re.compile(r"^(/[A-Za-z0-9._+@=,-]+)+\Z")


def _name_and_store(v, store):
    targets = v["dataset_targets"]
    if not (matches(NAME, v["dataset_name"]) and is_list(targets) and targets and all(t in ("s3", "claim") for t in targets)
            and "s3" in targets and 1 <= to_int(v["dataset_max_files"]) <= 100000):
        return ("dataset_name must be a DNS label of at most 40 characters (lowercase letters, digits and '-'; it names the "
                "prefix, the claim directory and the copy Job), got %s; dataset_targets a list of s3 and claim that contains s3 "
                "(the claim copy pulls from the prefix), got %s; dataset_max_files 1..100000, got %s."
                % (q(v["dataset_name"]), q(targets), q(v["dataset_max_files"])))
    if store.get("kind") == "none":
        return ("dataset_targets %s: the platform has no object store (trainfleet_cluster.object_store.kind none), so there is no "
                "prefix to stage to and no source for the claim copy. Copy the files onto the claim yourself, or configure an "
                "object store (inventories/existing: platform_existing_object_store)." % q(targets))
    prefix, owned = v["dataset_s3_prefix"], v["dataset_s3_owned_prefix"]
    reserved = [p for p in (v["dataset_s3_reserved_prefixes"] if is_list(v["dataset_s3_reserved_prefixes"]) else [])
                if isinstance(p, str) and p and text(prefix).startswith(p)]
    if not (v["dataset_s3_bucket"] == store.get("bucket") and matches(PREFIX, owned) and matches(PREFIX, prefix)
            and not DOT_COMPONENT.search(prefix) and not DOT_COMPONENT.search(owned)
            and prefix.startswith(owned) and prefix != owned and not reserved):
        return ("dataset_s3_bucket must be the contract's bucket %s (got %s); dataset_s3_prefix must be a key prefix ending in '/' "
                "(letters, digits and !_.()'- between the slashes, no . or .. component) strictly under dataset_s3_owned_prefix "
                "%s, the prefix the run owns (the training pods can read nothing else), and not under %s (the s3 step's "
                "lifecycle rule expires what is there); got dataset_s3_prefix=%s."
                % (q(store.get("bucket")), q(v["dataset_s3_bucket"]), q(owned), q(reserved), q(prefix)))
    if not (optional(ENDPOINT, v["dataset_s3_endpoint_url"]) and matches(REGION, v["dataset_s3_region"])):
        return ("dataset_s3_endpoint_url must be empty (AWS) or http(s)://host[:port][/path], got %s; dataset_s3_region a region "
                "name (lowercase letters, digits and '-'), got %s." % (q(v["dataset_s3_endpoint_url"]), q(v["dataset_s3_region"])))
    return None


def _claim_copy(v, check_mode, store):
    """The copy Job's inputs (dataset_targets contains claim)."""
    namespace, claim, mount, directory = (v["dataset_namespace"], v["dataset_claim_name"], v["dataset_claim_mount_path"],
                                          v["dataset_claim_dir"])
    if not (matches(DNS_1123_LABEL, namespace) and len(namespace) <= 63 and not namespace.startswith("kube-")
            and matches(DNS_1123_SUBDOMAIN, claim) and len(claim) <= 253
            and matches(MOUNT_PATH, mount) and not DOT_OR_DOTDOT.search(mount) and mount not in SYSTEM_DIRS
            and matches(CLAIM_DIR, directory) and not DOT_OR_DOTDOT.search(directory)):
        return ("dataset_namespace must be a DNS label that is not one of Kubernetes' own (kube-*), got %s; dataset_claim_name a "
                "claim name (DNS subdomain), got %s; dataset_claim_mount_path an absolute path of letters, digits and ._- without "
                ". or .. components (not /tmp or a system directory), got %s; dataset_claim_dir a relative path under it without "
                ". or .. components, got %s." % (q(namespace), q(claim), q(mount), q(directory)))
    endpoint, secrets = v["dataset_aws_endpoint_url"], v["dataset_image_pull_secrets"]
    if not (matches(IMAGE, v["dataset_image"]) and v["dataset_image_pull_policy"] in ("IfNotPresent", "Always", "Never")
            and optional(ENDPOINT, endpoint) and (check_mode or store.get("kind") != "s3_compatible" or endpoint != "")
            and optional(DNS_1123_SUBDOMAIN, v["dataset_aws_credentials_secret"]) and optional(DNS_1123_SUBDOMAIN, v["dataset_service_account"])
            and is_list(secrets) and all(matches(DNS_1123_SUBDOMAIN, secret) for secret in secrets)):
        return ("dataset_image must be an image reference such as localhost:5001/trainfleet/trainer:TAG (the trainer image: run the "
                "trainer_image step, or pass -e dataset_image=...), got %s; dataset_image_pull_policy IfNotPresent, Always or "
                "Never, got %s; dataset_aws_endpoint_url (the endpoint as the pods reach it) empty or http(s)://host[:port][/path], "
                "and set for an S3-compatible store, got %s; dataset_aws_credentials_secret, dataset_service_account and "
                "dataset_image_pull_secrets Kubernetes names, got %s, %s and %s."
                % (q(v["dataset_image"]), q(v["dataset_image_pull_policy"]), q(endpoint), q(v["dataset_aws_credentials_secret"]),
                   q(v["dataset_service_account"]), q(secrets)))
    selector, tolerations = v["dataset_node_selector"], v["dataset_tolerations"]
    if not (1 <= to_int(v["dataset_run_as_user"]) <= 2147483647 and 1 <= to_int(v["dataset_run_as_group"]) <= 2147483647
            and 0 <= to_int(v["dataset_fs_group"]) <= 2147483647 and CPU.match(text(v["dataset_cpu_request"]))
            and MEMORY.match(text(v["dataset_memory_request"])) and MEMORY.match(text(v["dataset_memory_limit"]))
            and 30 <= to_int(v["dataset_claim_timeout"]) <= 86400
            and isinstance(selector, dict) and all(isinstance(val, str) for val in selector.values())
            and is_list(tolerations) and all(isinstance(item, dict) for item in tolerations)):
        return ("The copy Job runs as a non-root user: dataset_run_as_user and dataset_run_as_group 1..2147483647 (got %s and %s), "
                "dataset_fs_group 0..2147483647 (got %s); dataset_cpu_request a CPU quantity (got %s), dataset_memory_request and "
                "dataset_memory_limit memory quantities (got %s and %s); dataset_claim_timeout 30..86400 seconds (got %s); "
                "dataset_node_selector a mapping of strings (got %s) and dataset_tolerations a list of mappings (got %s)."
                % tuple(q(v[name]) for name in (
                    "dataset_run_as_user", "dataset_run_as_group", "dataset_fs_group", "dataset_cpu_request",
                    "dataset_memory_request", "dataset_memory_limit", "dataset_claim_timeout", "dataset_node_selector",
                    "dataset_tolerations")))
    return None


def _manifest(v):
    dest = v["dataset_manifest_dest"]
    if not (optional(FILE_PATH, dest) and not DOT_OR_DOTDOT.search(dest)):
        return ("dataset_manifest_dest must be empty or an absolute path of letters, digits and ._+@=,- without . or .. components "
                "(got %s)." % q(dest))
    return None


NAMES = (
    "dataset_name", "dataset_targets", "dataset_max_files", "dataset_s3_bucket", "dataset_s3_owned_prefix", "dataset_s3_prefix",
    "dataset_s3_reserved_prefixes", "dataset_s3_endpoint_url", "dataset_s3_region", "dataset_namespace", "dataset_claim_name",
    "dataset_claim_mount_path", "dataset_claim_dir", "dataset_image", "dataset_image_pull_policy", "dataset_aws_endpoint_url",
    "dataset_aws_credentials_secret", "dataset_service_account", "dataset_image_pull_secrets", "dataset_run_as_user",
    "dataset_run_as_group", "dataset_fs_group", "dataset_cpu_request", "dataset_memory_request", "dataset_memory_limit",
    "dataset_claim_timeout", "dataset_node_selector", "dataset_tolerations", "dataset_manifest_dest", "dataset_kubeconfig",
)


def problems(values, context=None):
    """The first problem of the dataset step's inputs (NAMES -> value), as a list.

    context: check_mode, cluster_available (the kubeconfig exists; needed for the claim copy outside
    check mode) and object_store (the platform contract's: its kind and bucket).
    """
    context = context or {}
    store = context.get("object_store") or {}
    claim = "claim" in (values.get("dataset_targets") or [])

    def claim_copy(v):
        return _claim_copy(v, context.get("check_mode", False), store) if claim else None

    def reach(v):
        if claim and not (context.get("cluster_available", True) or context.get("check_mode", False)):
            return ("dataset_kubeconfig=%s does not exist. Run the cluster step first (it writes the kubeconfig), or point "
                    "dataset_kubeconfig at an existing one. Nothing was staged." % q(v["dataset_kubeconfig"]))
        return None

    return first(values, NAMES, (lambda v: _name_and_store(v, store), claim_copy, _manifest, reach))
