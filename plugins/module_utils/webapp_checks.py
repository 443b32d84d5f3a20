# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The web apps' checks of their inputs (roles/tensorboard and roles/jupyter: tasks/preflight.yml).

Both serve a pod that reads the runs (from S3 or the claim), from an image they build or are given,
behind a port-forward or an internal load balancer: what they share is checked once, by prefix; each
one's own reads are its own. module_utils/checks.py says how the checks run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.trainfleet.training.plugins.module_utils.checks import (
    BUCKET, DNS_1035, DNS_1123_LABEL, DNS_1123_SUBDOMAIN, ENDPOINT, IPV4, LABEL_VALUE, REPOSITORY, first, is_list, length, matches,
    optional, q, quantity, text, to_int)
from ansible_collections.trainfleet.training.plugins.module_utils.pod_settings import to_bool

LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
S3_PREFIX = re.compile(r"^[A-Za-z0-9!_.*()/-]*\Z")
S3_LOGDIR = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[A-Za-z0-9!_.*()/-]*[A-Za-z0-9!_.*()-]\Z")
PATH = re.compile(r"^/[A-Za-z0-9_.@:+/-]*\Z")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]\Z")
IMAGE = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?\Z")
BASE_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9./:@_-]*\Z")
VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+\Z")
PYTHON = re.compile(r"^3\.[0-9]+\Z")
KUBECTL = re.compile(r"^[A-Za-z0-9_./+@-]+\Z")
LINE_BREAK = re.compile(r"[\n\r]")
CIDR = re.compile(r"^((%s/([0-9]|[12][0-9]|3[0-2]))|([0-9a-fA-F:]+:[0-9a-fA-F:]*/([0-9]|[1-9][0-9]|1[01][0-9]|12[0-8])))\Z" % IPV4)
EVERYWHERE = re.compile(r"^(0\.0\.0\.0/0|::/0)\Z")
TENSORBOARD_FLAG = re.compile(r"^--[a-z_]+(=[A-Za-z0-9_.,:/=-]*)?\Z")
# TensorBoard's flags the role sets (--path_prefix breaks the probes)
TENSORBOARD_OWN_FLAGS = ("--logdir", "--logdir_spec", "--host", "--bind_all", "--port", "--load_fast", "--path_prefix")
NOTEBOOK_SYSTEM_DIR = re.compile(r"^/(tmp|work|opt|usr|etc)(/|\Z)")


def _segments_ok(path, forbidden=(".", "..")):
    return not [part for part in path.split("/") if part in forbidden]


# --------------------------------------------------------------------------- shared, by prefix


def _identity(v, p):
    name, namespace, labels, own = v[p + "_name"], v[p + "_namespace"], v[p + "_labels"], v["_%s_labels" % p]
    good = (matches(DNS_1035, name) and len(name) <= 54 and matches(DNS_1123_LABEL, namespace) and len(namespace) <= 63
            and not namespace.startswith("kube-") and isinstance(labels, dict) and not set(labels) & set(own)
            and all(matches(LABEL_KEY, key) for key in labels) and all(LABEL_VALUE.match(text(val)) for val in labels.values()))
    if not good:
        return ("%s_name must be a DNS-1035 label of at most 54 characters (got %s), %s_namespace a DNS-1123 label that is not one "
                "of Kubernetes' own kube-* namespaces (got %s), and %s_labels a dict of valid label keys and values that does not "
                "replace the role's own labels %s (got %s)." % (p, q(name), p, q(namespace), p, q(list(own)), q(labels)))
    return None


def _s3_access(v, p, region, endpoint, secret, account):
    return (matches(REGION, v[region]) and optional(ENDPOINT, v[endpoint]) and optional(DNS_1123_SUBDOMAIN, v[secret])
            and optional(DNS_1123_SUBDOMAIN, v[account]))


def _image(v, p, versions, base_image):
    """The image: given, or built from `versions` ({variable: pattern}) on `base_image`."""
    image, secrets = v[p + "_image"], v[p + "_image_pull_secrets"]
    good = (optional(IMAGE, image) and all(matches(pattern, v[name]) for name, pattern in versions.items())
            and is_list(secrets) and all(matches(DNS_1123_SUBDOMAIN, secret) for secret in secrets)
            and (image != "" or v[p + "_state"] == "absent"
                 or (matches(REPOSITORY, v[p + "_image_repository"]) and matches(base_image, v[p + "_image_base_image"])
                     and v[p + "_image_registry_login"] in ("none", "ecr") and 60 <= to_int(v[p + "_image_build_timeout"]) <= 14400)))
    if not good:
        return ("%s_image must be \"\" (build it) or an image reference (got %s); %s; %s_image_pull_secrets Secret names (got %s); "
                "to build: %s_image_repository registry-host[:port]/path in lowercase (got %s; on aws known once the registry step "
                "ran), %s_image_base_image an image (got %s), %s_image_registry_login none or ecr (got %s), "
                "%s_image_build_timeout 60..14400 (got %s)."
                % (p, q(image), ", ".join("%s %s (got %s)" % (name, "3.N" if pattern is PYTHON else "an exact version X.Y.Z",
                                                              q(v[name])) for name, pattern in versions.items()),
                   p, q(secrets), p, q(v[p + "_image_repository"]), p, q(v[p + "_image_base_image"]), p,
                   q(v[p + "_image_registry_login"]), p, q(v[p + "_image_build_timeout"])))
    return None


def _pod(v, p, more=()):
    """Quantities, ports, a non-root user and the waits; `more`: (variable, low, high) of the app's own."""
    ranges = ((p + "_port", 1024, 65535), (p + "_local_port", 1024, 65535), (p + "_run_as_user", 1, 2147483647),
              (p + "_run_as_group", 1, 2147483647), (p + "_wait_timeout", 10, 3600), (p + "_api_timeout", 1, 300)) + tuple(more)
    quantities = tuple(p + suffix for suffix in ("_cpu_request", "_cpu_limit", "_memory_request", "_memory_limit"))
    if not (all(quantity(v[name]) for name in quantities) and all(low <= to_int(v[name]) <= high for name, low, high in ranges)):
        return ("Kubernetes quantities such as 100m, 1, 256Mi are needed (limits too): %s; and %s."
                % (", ".join("%s %s" % (name, q(v[name])) for name in quantities),
                   ", ".join("%s %d..%d (got %s)" % (name, low, high, q(v[name])) for name, low, high in ranges)))
    return None


def _load_balancer(v, p, why):
    internal, ranges, annotations = (v[p + "_internal_load_balancer"], v[p + "_load_balancer_source_ranges"],
                                     v[p + "_load_balancer_annotations"])
    good = ((not to_bool(internal) or length(ranges) > 0)
            and is_list(ranges) and all(CIDR.match(text(cidr)) and not EVERYWHERE.match(text(cidr)) for cidr in ranges)
            and (not to_bool(internal) or length(annotations) > 0)
            and isinstance(annotations, dict) and all(isinstance(val, str) for val in annotations.values()))
    if not good:
        return ("%s_internal_load_balancer %s needs %s_load_balancer_source_ranges: the CIDRs allowed to reach it, each a.b.c.d/n "
                "(or IPv6), not 0.0.0.0/0 or ::/0 (got %s); and %s_load_balancer_annotations, the string annotations that make "
                "the load balancer internal (got %s). %s"
                % (p, q(internal), p, q(ranges), p, q(annotations), why))
    return None


def _access(v, p):
    kubeconfig, context, kubectl, dest = v[p + "_kubeconfig"], v[p + "_context"], v[p + "_kubectl"], v[p + "_manifest_dest"]
    good = (isinstance(kubeconfig, str) and kubeconfig != "" and not LINE_BREAK.search(kubeconfig)
            and isinstance(context, str) and not LINE_BREAK.search(context) and optional(KUBECTL, kubectl)
            and isinstance(dest, str) and (dest == "" or (dest.startswith("/") and "/../" not in dest + "/"))
            and not re.search(r"[\n\r\t]", dest))
    if not good:
        return ("%s_kubeconfig must be the path of a kubeconfig (the contract's; got %s), %s_context a context name or \"\" (got "
                "%s), %s_kubectl \"\" or the path of kubectl (got %s), %s_manifest_dest \"\" or an absolute path without '..' "
                "segments (got %s)." % (p, q(kubeconfig), p, q(context), p, q(kubectl), p, q(dest)))
    return None


def _shared(p, image_versions, base_image, pod_more, lb_why):
    return (lambda v: _identity(v, p), lambda v: _image(v, p, image_versions, base_image),
            lambda v: _pod(v, p, pod_more), lambda v: _load_balancer(v, p, lb_why), lambda v: _access(v, p))


SHARED = ("_name", "_namespace", "_labels", "_state", "_image", "_image_pull_secrets", "_image_repository",
          "_image_base_image", "_image_registry_login", "_image_build_timeout", "_cpu_request", "_cpu_limit",
          "_memory_request", "_memory_limit", "_port", "_local_port", "_run_as_user", "_run_as_group", "_wait_timeout",
          "_api_timeout", "_internal_load_balancer", "_load_balancer_source_ranges", "_load_balancer_annotations",
          "_kubeconfig", "_context", "_kubectl", "_manifest_dest")


# --------------------------------------------------------------------------- TensorBoard


def _tensorboard_reads(v, context):
    run, prefix, logdir = v["tensorboard_run"], v["tensorboard_s3_prefix"], v["_tensorboard_logdir"]
    claim, mount = v["tensorboard_pvc_claim_name"], v["tensorboard_pvc_mount_path"]
    is_s3 = logdir.startswith("s3://")
    kind = (context.get("object_store") or {}).get("kind")
    good = ((run == "" or (matches(DNS_1123_SUBDOMAIN, run) and len(run) <= 63))
            and matches(S3_PREFIX, prefix) and _segments_ok(prefix)
            and ((matches(S3_LOGDIR, logdir) and _segments_ok(logdir[5:], (".", "..", "")))
                 or (matches(PATH, logdir) and _segments_ok(logdir[1:], (".", "..", ""))))
            and (is_s3 or length(claim) > 0) and (not is_s3 or kind != "none" or length(v["tensorboard_logdir"]) > 0)
            and optional(DNS_1123_SUBDOMAIN, claim) and matches(PATH, mount) and _segments_ok(mount[1:])
            and (is_s3 or (logdir + "/").startswith(mount.rstrip("/") + "/")))
    if not good:
        return ("TensorBoard reads %s (tensorboard_logdir %s, tensorboard_s3_bucket %s, tensorboard_s3_prefix %s, tensorboard_run "
                "%s): it must be s3://<bucket>/<prefix> (a prefix, not the whole bucket; no '.', '..' or empty segments) or an "
                "absolute path on the claim tensorboard_pvc_claim_name (%s, mounted read-only at tensorboard_pvc_mount_path %s, "
                "under which the path must lie); tensorboard_run a run (job) name or \"\"; without an object store the claim "
                "must be set (the storage step's claim)."
                % (q(logdir), q(v["tensorboard_logdir"]), q(v["tensorboard_s3_bucket"]), q(prefix), q(run), q(claim), q(mount)))
    endpoint = v["tensorboard_s3_endpoint_url"]
    if not (_s3_access(v, "tensorboard", "tensorboard_aws_region", "tensorboard_s3_endpoint_url",
                       "tensorboard_aws_credentials_secret", "tensorboard_service_account")
            and (context.get("check_mode") or not is_s3 or kind != "s3_compatible" or length(endpoint) > 0)):
        return ("tensorboard_aws_region must be an AWS region (got %s); tensorboard_s3_endpoint_url \"\" or http(s)://host[:port] "
                "as the pod reaches the object store (got %s; on the local platform the kind network's gateway, known once the "
                "cluster step ran); tensorboard_aws_credentials_secret (got %s) and tensorboard_service_account (got %s) \"\" or "
                "Kubernetes object names." % (q(v["tensorboard_aws_region"]), q(endpoint),
                                              q(v["tensorboard_aws_credentials_secret"]), q(v["tensorboard_service_account"])))
    return None


def _tensorboard_own(v):
    if not (isinstance(v["tensorboard_node_selector"], dict) and is_list(v["tensorboard_tolerations"])):
        return ("tensorboard_node_selector must be a dict and tensorboard_tolerations a list (got %s and %s)."
                % (q(v["tensorboard_node_selector"]), q(v["tensorboard_tolerations"])))
    # TensorBoard's own flags only: none that widens what it serves or where it listens
    extra = [text(arg) for arg in v["tensorboard_extra_args"]] if is_list(v["tensorboard_extra_args"]) else [None]
    if not all(arg is not None and TENSORBOARD_FLAG.match(arg) for arg in extra) or [arg for arg in extra if arg.split("=")[0] in TENSORBOARD_OWN_FLAGS]:
        return ("tensorboard_extra_args must be TensorBoard flags --name[=value] other than the ones the role sets (--logdir, "
                "--host, --bind_all, --port, --load_fast; --path_prefix breaks the probes); got %s." % q(v["tensorboard_extra_args"]))
    return None


TENSORBOARD = tuple("tensorboard" + suffix for suffix in SHARED) + (
    "_tensorboard_labels", "_tensorboard_logdir", "tensorboard_logdir", "tensorboard_run", "tensorboard_s3_bucket",
    "tensorboard_s3_prefix", "tensorboard_pvc_claim_name", "tensorboard_pvc_mount_path", "tensorboard_aws_region",
    "tensorboard_s3_endpoint_url", "tensorboard_aws_credentials_secret", "tensorboard_service_account", "tensorboard_version",
    "tensorboard_boto3_version", "tensorboard_reload_interval", "tensorboard_node_selector", "tensorboard_tolerations",
    "tensorboard_extra_args")
_TENSORBOARD_SHARED = _shared(
    "tensorboard", {"tensorboard_version": VERSION, "tensorboard_boto3_version": VERSION}, BASE_IMAGE,
    (("tensorboard_reload_interval", 1, 3600),),
    "Without them it would be open to everything that reaches the network it is on. Or keep it off and use the printed "
    "kubectl port-forward.")


def tensorboard_problems(values, context=None):
    """The first problem of TensorBoard's inputs, as a list. context: check_mode, object_store (the contract's)."""
    context = context or {}
    shared = _TENSORBOARD_SHARED
    return first(values, TENSORBOARD, shared[:1] + (lambda v: _tensorboard_reads(v, context),) + shared[1:3]
                 + (_tensorboard_own,) + shared[3:])


# --------------------------------------------------------------------------- JupyterLab


def _jupyter_reads(v):
    run, prefix, runs = v["jupyter_run"], v["jupyter_s3_prefix"], v["_jupyter_runs"]
    claim, mount = v["jupyter_pvc_claim_name"], v["jupyter_pvc_mount_path"]
    is_s3 = runs.startswith("s3://")
    good = ((run == "" or (matches(DNS_1123_SUBDOMAIN, run) and len(run) <= 63))
            and matches(S3_PREFIX, prefix) and _segments_ok(prefix)
            and (not is_s3 or matches(BUCKET, v["jupyter_s3_bucket"])) and (is_s3 or length(claim) > 0)
            and optional(DNS_1123_SUBDOMAIN, claim) and matches(PATH, mount) and _segments_ok(mount[1:])
            and mount not in ("/tmp", "/work") and not NOTEBOOK_SYSTEM_DIR.match(mount)
            and _s3_access(v, "jupyter", "jupyter_aws_region", "jupyter_aws_endpoint_url", "jupyter_aws_credentials_secret",
                           "jupyter_service_account"))
    if not good:
        return ("The notebook reads the runs at %s: jupyter_s3_bucket %s must be a bucket name and jupyter_s3_prefix %s a prefix "
                "without '.' or '..' segments; without an object store jupyter_pvc_claim_name (%s) must name the claim. jupyter_run "
                "%s: a run (job) name or \"\". jupyter_pvc_mount_path %s: an absolute path without '..', not under /tmp, /work, "
                "/opt, /usr or /etc. jupyter_aws_region %s: an AWS region; jupyter_aws_endpoint_url %s: \"\" or "
                "http(s)://host[:port]; jupyter_aws_credentials_secret %s and jupyter_service_account %s: \"\" or object names."
                % (q(runs), q(v["jupyter_s3_bucket"]), q(prefix), q(claim), q(run), q(mount), q(v["jupyter_aws_region"]),
                   q(v["jupyter_aws_endpoint_url"]), q(v["jupyter_aws_credentials_secret"]), q(v["jupyter_service_account"])))
    return None


JUPYTER = tuple("jupyter" + suffix for suffix in SHARED) + (
    "_jupyter_labels", "_jupyter_runs", "jupyter_run", "jupyter_s3_bucket", "jupyter_s3_prefix", "jupyter_pvc_claim_name",
    "jupyter_pvc_mount_path", "jupyter_aws_region", "jupyter_aws_endpoint_url", "jupyter_aws_credentials_secret",
    "jupyter_service_account", "jupyter_lab_version", "jupyter_image_python_version")
_JUPYTER_SHARED = _shared(
    "jupyter", {"jupyter_lab_version": VERSION, "jupyter_image_python_version": PYTHON}, IMAGE, (),
    "JupyterLab runs code: keep it off and use the printed kubectl port-forward unless the network it would be on is yours "
    "alone.")


def jupyter_problems(values, context=None):  # pylint: disable=unused-argument
    """The first problem of JupyterLab's inputs, as a list."""
    return first(values, JUPYTER, _JUPYTER_SHARED[:1] + (_jupyter_reads,) + _JUPYTER_SHARED[1:])
