# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The train step's checks of its shared inputs, beyond their argument spec (roles/trainjob/tasks/preflight.yml).

The argument spec checks types and choices; this checks names, paths, ranges, quantities, the
credentials' route and the pod security opt-ins, then whether the cluster and the object store can be
reached, before anything is created; module_utils/checks.py says how steps' checks run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.trainfleet.training.plugins.module_utils.checks import (
    BUCKET, DIGITS, DNS_1035, DNS_1123_LABEL, DNS_1123_SUBDOMAIN, DOTDOT, DOT_OR_DOTDOT, ENDPOINT, LABEL_VALUE, MOUNT_PATH,
    first, found, is_list, length, mapping, matches, q, quantity, strings, text, to_int, whole)
from ansible_collections.trainfleet.training.plugins.module_utils.pod_settings import PodSettingsError, container_security_context, to_bool

# The variables the checks read: the preflight task hands them over by these names.
NAMES = (
    "trainjob_name", "trainjob_namespace", "trainjob_launcher", "trainjob_image", "trainjob_image_variant",
    "trainjob_labels", "trainjob_annotations", "trainjob_pod_annotations", "trainjob_image_pull_policy",
    "trainjob_image_pull_secrets", "trainjob_trainer_extra_args", "trainjob_trainer_module", "trainjob_trainer_epochs",
    "trainjob_trainer_batch_size", "trainjob_trainer_dataset", "trainjob_trainer_backend", "trainjob_trainer_output_dir",
    "trainjob_trainer_snapshot_dir", "trainjob_trainer_device", "trainjob_compile_cache_set", "trainjob_precompile",
    "trainjob_neuron_devices", "trainjob_pvc_claim_name", "trainjob_cpu_request", "trainjob_memory_request",
    "trainjob_cpu_limit", "trainjob_memory_limit", "trainjob_shm_size", "trainjob_gpus", "trainjob_efa_devices",
    "trainjob_node_selector", "trainjob_tolerations", "trainjob_affinity", "trainjob_security_context",
    "trainjob_node_lost_toleration_seconds", "trainjob_pvc_mount_path", "trainjob_extra_volumes",
    "trainjob_extra_volume_mounts", "trainjob_script_dir", "trainjob_script_mount_path", "trainjob_s3_bucket",
    "trainjob_s3_prefix", "trainjob_aws_region", "trainjob_aws_endpoint_url", "trainjob_env", "trainjob_env_from",
    "trainjob_aws_credentials_secret", "trainjob_aws_credentials_create", "trainjob_aws_access_key_id",
    "trainjob_aws_secret_access_key", "trainjob_service_account", "trainjob_service_account_create",
    "trainjob_service_account_annotations", "trainjob_container_security_context", "trainjob_run_as_user",
    "trainjob_run_as_group", "trainjob_allow_system_namespace", "trainjob_allow_root", "trainjob_allow_privileged",
    "trainjob_allow_privilege_escalation", "trainjob_allow_host_path", "trainjob_rerun", "trainjob_wait",
    "trainjob_delete_timeout", "trainjob_prepull", "trainjob_accelerator_check", "trainjob_prepull_timeout",
    "trainjob_wait_timeout", "trainjob_progress_timeout", "trainjob_log_tail_lines", "trainjob_failure_log_lines",
    "trainjob_evaluate", "trainjob_evaluate_timeout", "trainjob_manifest_dest", "trainjob_log_dest",
    "trainjob_progress_file", "trainjob_kubeconfig",
)

LABEL_KEY = re.compile(r"^([a-z0-9.-]{1,253}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
MODULE_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
CONTROL_OR_SPACE = re.compile(r"[\x00-\x1f\x7f\s]")
CACHE_SET = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?\Z")
FILE_PATH = re.compile(r"^(/[A-Za-z0-9._+@=,-]+)+\Z")
SYSTEM_DIR = re.compile(r"^/(bin|dev|etc|lib|lib64|proc|sbin|sys|usr)/")
S3_PREFIX = re.compile(r"^[A-Za-z0-9!_.()'/-]*\Z")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]+\Z")
SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD)")
AWS_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
VARIANTS = ("", "cuda", "mpi", "cuda-mpi", "neuron", "neuron-mpi")
BOOLEANS = ("true", "false", "yes", "no", "1", "0")
RESERVED_VOLUMES = ("data", "dshm", "script")


# --------------------------------------------------------------------------- the checks


def _identity(v):
    if not (isinstance(v["trainjob_name"], str) and matches(DNS_1035, v["trainjob_name"]) and len(v["trainjob_name"]) <= 48
            and matches(DNS_1123_LABEL, v["trainjob_namespace"]) and len(v["trainjob_namespace"]) <= 63):
        return ("trainjob_name must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter) of at most 48 "
                "characters, and trainjob_namespace a DNS-1123 label of at most 63; got trainjob_name=%s and trainjob_namespace=%s."
                % (q(v["trainjob_name"]), q(v["trainjob_namespace"])))
    return None


def _image(v):
    variant, launcher, image = v["trainjob_image_variant"], v["trainjob_launcher"], v["trainjob_image"]
    if variant not in VARIANTS or (launcher == "mpijob") != found(re.compile("mpi"), variant):
        return ("trainjob_image_variant must be \"\", cuda, mpi, cuda-mpi, neuron or neuron-mpi (a job asks for GPUs or Neuron "
                "devices, not both), with mpi exactly when trainjob_launcher is mpijob (got trainjob_image_variant=%s, "
                "trainjob_launcher=%s)." % (q(variant), q(launcher)))
    if not (isinstance(image, str) and image and not re.search(r"\s", image)):
        hint = ""
        if variant:
            hint = (" The job needs the %s variant (TAG-%s): the trainer_image step with trainer_image_variants %s sets "
                    "trainer_image_variant_refs; playbooks/train.yml runs it so." % (variant, variant, q([variant])))
        return ("trainjob_image must be an image reference such as localhost:5001/trainfleet/trainer:TAG (got %s). Run the "
                "trainer_image step first (it sets trainer_image_ref) or pass -e trainjob_image=...%s" % (q(image), hint))
    return None


def _metadata(v):
    labels, secrets = v["trainjob_labels"], v["trainjob_image_pull_secrets"]
    good = (isinstance(labels, dict)
            and all(LABEL_KEY.match(text(key)) for key in labels) and all(LABEL_VALUE.match(text(val)) for val in labels.values())
            and isinstance(v["trainjob_annotations"], dict) and isinstance(v["trainjob_pod_annotations"], dict)
            and v["trainjob_image_pull_policy"] in ("Always", "IfNotPresent", "Never")
            and is_list(secrets) and all(matches(DNS_1123_SUBDOMAIN, name) for name in secrets))
    if not good:
        return ("trainjob_labels must be a dict of Kubernetes label keys and values (got %s); trainjob_annotations and "
                "trainjob_pod_annotations dicts; trainjob_image_pull_policy Always, IfNotPresent or Never (got %s); "
                "trainjob_image_pull_secrets a list of Secret names (got %s)."
                % (q(labels), q(v["trainjob_image_pull_policy"]), q(secrets)))
    return None


def _trainer(v):
    extra = v["trainjob_trainer_extra_args"]
    output, snapshot = v["trainjob_trainer_output_dir"], v["trainjob_trainer_snapshot_dir"]
    good = (strings(extra)
            and matches(MODULE_PATH, v["trainjob_trainer_module"])
            and whole(v["trainjob_trainer_epochs"], 1, 100000) and whole(v["trainjob_trainer_batch_size"], 1, 65536)
            and isinstance(v["trainjob_trainer_dataset"], str) and v["trainjob_trainer_dataset"] != ""
            and v["trainjob_trainer_backend"] in ("auto", "gloo", "nccl", "xla")
            and isinstance(output, str) and not CONTROL_OR_SPACE.search(output) and not DOTDOT.search(output)
            and isinstance(snapshot, str) and not CONTROL_OR_SPACE.search(snapshot))
    if not good:
        return ("trainjob_trainer_extra_args must be a list of strings without control characters (got %s); "
                "trainjob_trainer_module a Python module path (got %s); trainjob_trainer_epochs 1..100000 and "
                "trainjob_trainer_batch_size 1..65536 (got %s and %s); trainjob_trainer_dataset non-empty (got %s); "
                "trainjob_trainer_backend auto, gloo, nccl or xla (got %s); trainjob_trainer_output_dir and "
                "trainjob_trainer_snapshot_dir without spaces, control characters or .. components (got %s and %s)."
                % (q(extra), q(v["trainjob_trainer_module"]), q(v["trainjob_trainer_epochs"]),
                   q(v["trainjob_trainer_batch_size"]), q(v["trainjob_trainer_dataset"]), q(v["trainjob_trainer_backend"]),
                   q(output), q(snapshot)))
    return None


def _device(v):
    device, cache_set = v["trainjob_trainer_device"], v["trainjob_compile_cache_set"]
    good = (device in ("auto", "cpu", "cuda", "xla") and isinstance(cache_set, str)
            and (cache_set == "" or (CACHE_SET.match(cache_set) and ".." not in cache_set
                                     and (device == "xla" or (device == "auto" and to_int(v["trainjob_neuron_devices"]) > 0))
                                     and length(v["trainjob_pvc_claim_name"]) > 0))
            and isinstance(v["trainjob_precompile"], bool) and (not v["trainjob_precompile"] or cache_set != ""))
    if not good:
        return ("trainjob_trainer_device must be auto, cpu, cuda or xla (got %s); trainjob_compile_cache_set is one directory "
                "name of the claim: \"\" or 1-63 of a-z, 0-9, '.', '_', '-', starting and ending with a letter or digit, never "
                "'..' (got %s); it needs the XLA device (trainjob_trainer_device xla, or auto with trainjob_neuron_devices) and a "
                "claim, trainjob_pvc_claim_name (got %s, %s and %s); trainjob_precompile (got %s) needs a trainjob_compile_cache_set."
                % (q(device), q(cache_set), q(device), q(v["trainjob_neuron_devices"]), q(v["trainjob_pvc_claim_name"]),
                   q(v["trainjob_precompile"])))
    return None


def _resources(v):
    good = (quantity(v["trainjob_cpu_request"]) and quantity(v["trainjob_memory_request"])
            and all(quantity(v[name], optional=True) for name in ("trainjob_cpu_limit", "trainjob_memory_limit", "trainjob_shm_size"))
            and 0 <= to_int(v["trainjob_gpus"]) <= 16 and 0 <= to_int(v["trainjob_neuron_devices"]) <= 64
            and 0 <= to_int(v["trainjob_efa_devices"]) <= 32)
    if not good:
        return ("trainjob_cpu_request, trainjob_memory_request (and, when set, trainjob_cpu_limit, trainjob_memory_limit, "
                "trainjob_shm_size) must be Kubernetes quantities such as 500m, 2, 1Gi or 512Mi; trainjob_gpus (0..16), "
                "trainjob_neuron_devices (0..64) and trainjob_efa_devices (0..32) integers. Got cpu=%s/%s, memory=%s/%s, shm=%s, "
                "gpus=%s, neuron=%s, efa=%s."
                % (q(v["trainjob_cpu_request"]), q(v["trainjob_cpu_limit"]), q(v["trainjob_memory_request"]),
                   q(v["trainjob_memory_limit"]), q(v["trainjob_shm_size"]), q(v["trainjob_gpus"]),
                   q(v["trainjob_neuron_devices"]), q(v["trainjob_efa_devices"])))
    return None


def _placement(v):
    tolerations = v["trainjob_tolerations"]
    good = (isinstance(v["trainjob_node_selector"], dict) and is_list(tolerations)
            and all(isinstance(item, dict) for item in tolerations)
            and isinstance(v["trainjob_affinity"], dict) and isinstance(v["trainjob_security_context"], dict))
    if not good:
        return ("trainjob_node_selector must be a dict of label: value, trainjob_tolerations a list of toleration dicts (key, "
                "operator, value, effect), trainjob_affinity and trainjob_security_context dicts (got %s, %s, %s and %s)."
                % (q(v["trainjob_node_selector"]), q(tolerations), q(v["trainjob_affinity"]), q(v["trainjob_security_context"])))
    if not whole(v["trainjob_node_lost_toleration_seconds"], 1, 3600):
        return ("trainjob_node_lost_toleration_seconds must be an integer from 1 to 3600 (seconds before a pod on a lost node is "
                "evicted), got %s." % q(v["trainjob_node_lost_toleration_seconds"]))
    return None


def _storage(v):
    claim, mount = v["trainjob_pvc_claim_name"], v["trainjob_pvc_mount_path"]
    volumes, mounts = v["trainjob_extra_volumes"], v["trainjob_extra_volume_mounts"]
    dicts = is_list(volumes) and is_list(mounts) and all(isinstance(item, dict) for item in list(volumes) + list(mounts))
    good = ((length(claim) == 0 or matches(DNS_1123_SUBDOMAIN, claim))
            and matches(MOUNT_PATH, mount) and not DOT_OR_DOTDOT.search(mount) and mount != "/dev/shm"
            and dicts and not [item for item in volumes if item.get("name", "") in RESERVED_VOLUMES])
    if not good:
        return ("trainjob_pvc_claim_name must be empty or a PVC name (DNS-1123 subdomain), got %s; trainjob_pvc_mount_path an "
                "absolute path of letters, digits and ._- without . or .. components, other than /dev/shm, got %s; "
                "trainjob_extra_volumes and trainjob_extra_volume_mounts lists of dicts whose volumes are not named data, dshm or "
                "script (reserved for the PVC, /dev/shm and trainjob_script_dir)." % (q(claim), q(mount)))
    script_mount = v["trainjob_script_mount_path"]
    if length(v["trainjob_script_dir"]) > 0 and not (
            matches(MOUNT_PATH, script_mount) and not DOT_OR_DOTDOT.search(script_mount)
            and script_mount not in ("/dev/shm", mount) and not SYSTEM_DIR.match(script_mount + "/")):
        return ("trainjob_script_mount_path must be an absolute path of letters, digits and ._- without . or .. components, not "
                "/dev/shm, the claim's trainjob_pvc_mount_path or a system directory, got %s." % q(script_mount))
    return None


def _object_store(v):
    prefix, endpoint = v["trainjob_s3_prefix"], v["trainjob_aws_endpoint_url"]
    good = ((length(v["trainjob_trainer_output_dir"]) > 0 or matches(BUCKET, v["trainjob_s3_bucket"]))
            and isinstance(prefix, str) and not prefix.startswith("s3:") and S3_PREFIX.match(prefix) and not DOTDOT.search(prefix)
            and matches(REGION, v["trainjob_aws_region"])
            and (length(endpoint) == 0 or matches(ENDPOINT, endpoint)))
    if not good:
        return ("trainjob_s3_bucket must be an S3 bucket name (3-63 lowercase letters, digits, '.', '-'), got %s; "
                "trainjob_s3_prefix a key prefix (letters, digits, !_.()'/- and no .. component), not a URI, got %s; "
                "trainjob_aws_region a region such as us-east-1, got %s; trainjob_aws_endpoint_url empty or an "
                "http(s)://host[:port] URL reachable from the pods, got %s."
                % (q(v["trainjob_s3_bucket"]), q(prefix), q(v["trainjob_aws_region"]), q(endpoint)))
    return None


def _credentials(v):
    env, env_from, secret = v["trainjob_env"], v["trainjob_env_from"], v["trainjob_aws_credentials_secret"]
    create = to_bool(v["trainjob_aws_credentials_create"])
    good = (is_list(env) and all(isinstance(item, dict) and "name" in item for item in env)
            and not [item for item in env if item["name"] in AWS_KEYS and "value" in item]
            and is_list(env_from) and all(isinstance(item, dict) for item in env_from)
            and (length(secret) == 0 or matches(DNS_1123_SUBDOMAIN, secret))
            and (not create or (length(secret) > 0 and length(v["trainjob_aws_access_key_id"]) > 0
                                and length(v["trainjob_aws_secret_access_key"]) > 0)))
    if not good:
        return ("trainjob_env must be a list of dicts with a name, and must not carry AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or "
                "AWS_SESSION_TOKEN as a literal value (use trainjob_aws_credentials_secret, or valueFrom.secretKeyRef); "
                "trainjob_env_from a list of dicts; trainjob_aws_credentials_secret empty or a Secret name; with "
                "trainjob_aws_credentials_create=true, trainjob_aws_credentials_secret, trainjob_aws_access_key_id and "
                "trainjob_aws_secret_access_key must all be set.")
    literals = [item["name"] for item in env if "value" in item and SECRET_NAME.search(text(item["name"]))]
    if literals:
        return ("trainjob_env must not carry a literal value for a variable whose name looks secret (it contains KEY, TOKEN, "
                "SECRET or PASSWORD): %s would be printed at -v and stored in the manifest. Put the value in a Kubernetes Secret "
                "and reference it: {name: NAME, valueFrom: {secretKeyRef: {name: SECRET, key: KEY}}} (or trainjob_env_from)."
                % q(literals))
    account = v["trainjob_service_account"]
    if not ((length(account) == 0 or matches(DNS_1123_SUBDOMAIN, account))
            and (not to_bool(v["trainjob_service_account_create"]) or length(account) > 0)
            and isinstance(v["trainjob_service_account_annotations"], dict)):
        return ("trainjob_service_account must be empty or a ServiceAccount name (got %s); trainjob_service_account_create=true "
                "needs it set; trainjob_service_account_annotations must be a dict." % q(account))
    return None


def _runs_as_root(context):
    return text(context.get("runAsUser")) == "0" or text(context.get("runAsNonRoot", True)).lower() in ("false", "no", "off", "0")


def _unconfined(context, key):
    return mapping(context.get(key)).get("type", "") == "Unconfined"


def _pod_security(v):
    """Restricted by default, each widening behind its own opt-in; the checks read the user's inputs."""
    ctr, pod = v["trainjob_container_security_context"], v["trainjob_security_context"]
    if not (isinstance(ctr, dict) and whole(v["trainjob_run_as_user"], 0, 2147483647)
            and whole(v["trainjob_run_as_group"], 0, 2147483647)):
        return ("trainjob_run_as_user and trainjob_run_as_group must be numeric ids 0..2147483647 (got %s and %s); "
                "trainjob_container_security_context a dict (got %s)."
                % (q(v["trainjob_run_as_user"]), q(v["trainjob_run_as_group"]), q(ctr)))
    namespace = v["trainjob_namespace"]
    if not to_bool(v["trainjob_allow_system_namespace"]) and namespace.startswith("kube-"):
        return ("trainjob_namespace %s is a namespace of Kubernetes itself (kube-system, kube-public, kube-node-lease, kube-*): "
                "its service accounts and exemptions are the cluster's, not a training job's. Use the job's own namespace "
                "(trainfleet_namespace), or set trainjob_allow_system_namespace: true to run there anyway." % q(namespace))
    root = (["trainjob_run_as_user %s" % q(v["trainjob_run_as_user"])] if text(v["trainjob_run_as_user"]) == "0" else []) \
        + (["trainjob_security_context %s" % q(pod)] if _runs_as_root(pod) else []) \
        + (["trainjob_container_security_context %s" % q(ctr)] if _runs_as_root(ctr) else [])
    if root and not to_bool(v["trainjob_allow_root"]):
        return ("The pods would run as root: %s. The trainer image runs as the numeric user 10001:10001 (trainjob_run_as_user, "
                "trainjob_run_as_group); set trainjob_allow_root: true to run as root anyway (then also runAsNonRoot false)."
                % "; ".join(root))
    added = mapping(ctr.get("capabilities")).get("add") or []
    ctr_bad = (to_bool(ctr.get("privileged", False))
               or [cap for cap in added if re.sub("^CAP_", "", text(cap).upper(), count=1) != "NET_BIND_SERVICE"]
               or ctr.get("procMount", "") == "Unmasked" or _unconfined(ctr, "seccompProfile") or _unconfined(ctr, "appArmorProfile"))
    privileged = (["trainjob_security_context %s" % q(pod)]
                  if _unconfined(pod, "seccompProfile") or _unconfined(pod, "appArmorProfile") else []) \
        + (["trainjob_container_security_context %s" % q(ctr)] if ctr_bad else [])
    if privileged and not to_bool(v["trainjob_allow_privileged"]):
        return ("The pods would get privileges the restricted profile refuses: %s (privileged, capabilities.add other than "
                "NET_BIND_SERVICE, procMount Unmasked, an Unconfined seccomp or AppArmor profile). Set trainjob_allow_privileged: "
                "true to allow it." % "; ".join(privileged))
    try:
        escalation = to_bool(container_security_context(ctr).get("allowPrivilegeEscalation", False))
    except PodSettingsError:
        escalation = True
    if escalation and not to_bool(v["trainjob_allow_privilege_escalation"]):
        return ("trainjob_container_security_context %s lets the trainer gain privileges (allowPrivilegeEscalation true; "
                "Kubernetes implies it for privileged containers and CAP_SYS_ADMIN). Set trainjob_allow_privilege_escalation: true "
                "to allow it." % q(ctr))
    host_paths = [item["hostPath"] for item in v["trainjob_extra_volumes"] if "hostPath" in item]
    if host_paths and not to_bool(v["trainjob_allow_host_path"]):
        return ("trainjob_extra_volumes %s mounts the node's file system (hostPath %s). Use a PersistentVolumeClaim "
                "(trainjob_pvc_claim_name; the storage step makes one), or set trainjob_allow_host_path: true."
                % (q(v["trainjob_extra_volumes"]), q(host_paths)))
    return None


def _waits(v):
    flags = ("trainjob_rerun", "trainjob_wait", "trainjob_prepull", "trainjob_accelerator_check", "trainjob_evaluate")
    good = (all(text(v[name]).lower() in BOOLEANS for name in flags)
            and 1 <= to_int(v["trainjob_delete_timeout"]) <= 3600
            and matches(DIGITS, text(v["trainjob_prepull_timeout"])) and 10 <= to_int(v["trainjob_prepull_timeout"]) <= 7200
            and 1 <= to_int(v["trainjob_wait_timeout"]) <= 604800
            and matches(DIGITS, text(v["trainjob_progress_timeout"]))
            and (to_int(v["trainjob_progress_timeout"]) == 0 or 10 <= to_int(v["trainjob_progress_timeout"]) <= 604800)
            and 1 <= to_int(v["trainjob_log_tail_lines"]) <= 100000 and 0 <= to_int(v["trainjob_failure_log_lines"]) <= 10000
            and matches(DIGITS, text(v["trainjob_evaluate_timeout"])) and 10 <= to_int(v["trainjob_evaluate_timeout"]) <= 86400)
    if not good:
        return ("trainjob_rerun, trainjob_wait, trainjob_prepull and trainjob_accelerator_check must be booleans (got %s, %s, %s "
                "and %s); trainjob_delete_timeout 1..3600 (got %s), trainjob_prepull_timeout 10..7200 (got %s), "
                "trainjob_wait_timeout 1..604800 (7 days; got %s), trainjob_progress_timeout 0 (off) or 10..604800 (got %s), "
                "trainjob_log_tail_lines 1..100000 (got %s), trainjob_failure_log_lines 0..10000 (got %s), trainjob_evaluate a "
                "boolean (got %s), trainjob_evaluate_timeout 10..86400 (got %s)."
                % tuple(q(v[name]) for name in (
                    "trainjob_rerun", "trainjob_wait", "trainjob_prepull", "trainjob_accelerator_check", "trainjob_delete_timeout",
                    "trainjob_prepull_timeout", "trainjob_wait_timeout", "trainjob_progress_timeout", "trainjob_log_tail_lines",
                    "trainjob_failure_log_lines", "trainjob_evaluate", "trainjob_evaluate_timeout")))
    for name in ("trainjob_manifest_dest", "trainjob_log_dest", "trainjob_progress_file"):
        path = v[name]
        if not (isinstance(path, str) and (path == "" or FILE_PATH.match(path)) and not DOT_OR_DOTDOT.search(path)):
            return ("%s must be empty or an absolute path of letters, digits and ._+@=,- without . or .. components (got %s)."
                    % (name, q(path)))
    return None


def _reach(v, check_mode, cluster_available, object_store):
    if not (cluster_available or check_mode):
        return ("trainjob_kubeconfig=%s does not exist. Run the cluster step first (it writes the kubeconfig), or point "
                "trainjob_kubeconfig at an existing one." % q(v["trainjob_kubeconfig"]))
    kind = object_store.get("kind")
    if kind == "s3_compatible" and not check_mode and length(v["trainjob_aws_endpoint_url"]) == 0:
        return ("The object store is S3-compatible (trainfleet_cluster.object_store.endpoint_url %s) but "
                "trainjob_aws_endpoint_url, the endpoint as the pods reach it, is empty: on the local platform it is the kind "
                "network gateway, known once the cluster step ran; or set it with -e." % object_store.get("endpoint_url", ""))
    if kind == "none" and (length(v["trainjob_trainer_output_dir"]) == 0 or length(v["trainjob_pvc_claim_name"]) == 0):
        return ("The platform has no object store: the outputs go to the claim, so trainjob_pvc_claim_name (got %s) and "
                "trainjob_trainer_output_dir (got %s) must be set (the claim of the storage step, storage_pvc_name)."
                % (q(v["trainjob_pvc_claim_name"]), q(v["trainjob_trainer_output_dir"])))
    return None


CHECKS = (_identity, _image, _metadata, _trainer, _device, _resources, _placement, _storage, _object_store, _credentials,
          _pod_security, _waits)


def problems(values, context):
    """The first problem of the train step's shared inputs `values` (NAMES -> value), as a list.

    context: check_mode and cluster_available (the kubeconfig exists) decide whether a missing
    cluster is a problem; object_store is the platform contract's, whose kind decides where the
    outputs may go.
    """
    def reach(v):
        return _reach(v, context.get("check_mode", False), context.get("cluster_available", True), context.get("object_store") or {})

    return first(values, NAMES, CHECKS + (reach,))
