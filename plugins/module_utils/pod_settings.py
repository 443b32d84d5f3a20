# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pod settings of a training job, computed once.

What every launcher's pods get: the trainjob role computes it once (defaults/main.yml,
_trainjob_pod) for templates/pytorchjob.yaml.j2, templates/mpijob.yaml.j2 and the pre-pull
DaemonSet, and module_utils/torchx_request.py calls it for TorchX's Volcano Job:

- ``node_lost_tolerations``: the user's tolerations, then NoExecute ``Exists`` tolerations with
  ``tolerationSeconds`` for node.kubernetes.io/not-ready and /unreachable (a NoExecute toleration
  the user gives for either key wins);
- ``resources``: requests and limits (cpu/memory as strings; nvidia.com/gpu, aws.amazon.com/neuron,
  vpc.amazonaws.com/efa as ints with request == limit);
- ``volumes``: the claim (``data``), the memory-backed /dev/shm (``dshm``), the user's code
  (``script``: the ConfigMap of trainjob_script_dir, read-only, module_utils/script_dir.py), then
  the user's;
- ``pod_security_context`` / ``container_security_context``: the restricted defaults with the
  user's keys merged over them the way Ansible's ``combine(recursive=true)`` does;
- ``controller_patch``: the JSON-patch operations of a restricted controller pod (image, resources,
  readiness, security contexts, node-lost tolerations) for the volcano and mpi_operator kustomizations;
- ``output_dir``, ``trainer_args``, ``trainer_env``: the trainer's --output-dir, arguments and
  environment (S3 credentials only through a Secret's secretKeyRef);
- ``pod_settings(settings)``: all of the above from one dict of job settings (the trainjob role's
  variables without their ``trainjob_`` prefix); the filter ``trainfleet.training.trainjob_pod`` calls it.

Values the Jinja turns into strings (``| string``) or ints (``| int``) are converted the same way
here; a None where the Jinja expects a string is taken as "" (Jinja would render "None").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError

NODE_LOST_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
EXTENDED_RESOURCES = ("nvidia.com/gpu", "aws.amazon.com/neuron", "vpc.amazonaws.com/efa")
SHM_MOUNT_PATH = "/dev/shm"
CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")

# Ansible's `bool` filter (ansible.plugins.filter.core.to_bool).
_BOOL_TRUE = frozenset(("yes", "on", "true", "1"))
_BOOL_FALSE = frozenset(("no", "off", "false", "0"))

# pod_settings(): keys that must be given, and the others with the trainjob role's defaults
# (defaults/main.yml; a default that comes from the platform contract is its empty value).
REQUIRED_KEYS = ("name", "cpu_request", "memory_request", "run_as_user", "run_as_group", "aws_region")
DEFAULTS = {
    "namespace": "",
    "labels": {},
    "pod_annotations": {},
    "image_pull_secrets": [],
    "node_selector": {},
    "tolerations": [],
    "node_lost_toleration_seconds": 30,
    "affinity": {},
    "service_account": "",
    "automount_service_account_token": False,
    "security_context": {},
    "container_security_context": {},
    "cpu_limit": "",
    "memory_limit": "2Gi",
    "gpus": 0,
    "neuron_devices": 0,
    "efa_devices": 0,
    "pvc_claim_name": "",
    "pvc_mount_path": "/data",
    "pvc_read_only": False,
    "shm_size": "",
    "extra_volumes": [],
    "extra_volume_mounts": [],
    "script_configmap": "",
    "script_mount_path": "/opt/script",
    "trainer_output_dir": "",
    "s3_bucket": "",
    "s3_prefix": "training",
    "aws_endpoint_url": "",
    "aws_credentials_secret": "",
    "env": [],
    "trainer_dataset": "digits",
    "trainer_epochs": 5,
    "trainer_batch_size": 64,
    "trainer_backend": "auto",
    "trainer_snapshot_dir": "",
    "trainer_device": "auto",
    "compile_cache_set": "",
    "precompile": False,
}
# Where a compile cache set lives: a directory of the claim (the trainer's --compile-cache-dir).
COMPILE_CACHE_DIR = "compile-cache"
OUTPUT_KEYS = ("tolerations", "resources", "volumes", "volume_mounts", "pod_security_context",
               "container_security_context", "image_pull_secrets", "output_dir", "trainer_args", "trainer_env")


class PodSettingsError(TrainfleetError):
    """Job settings the pod settings cannot be computed from (a missing key, a wrong type)."""


# --------------------------------------------------------------------------- Jinja/Ansible semantics


def _text(value):
    """`value | string`, with None as "" (Jinja would render "None")."""
    return "" if value is None else str(value)


def _int(value, what):
    """`value | int` (Jinja's do_int: int(), then int(float())); an unusable value is an error, not 0."""
    try:
        if isinstance(value, str):
            return int(value, 10)
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            raise PodSettingsError("%s must be an integer, got %r" % (what, value))


def to_bool(value):
    """Ansible's `bool` filter: yes/on/true/1 and no/off/false/0 (any case), else `value == 1`."""
    if isinstance(value, str):
        check = value.lower()
    elif isinstance(value, int):  # bool too
        check = str(value).lower()
    else:
        check = value
    try:
        if check in _BOOL_TRUE:
            return True
        if check in _BOOL_FALSE:
            return False
        return check == 1
    except TypeError:
        return False


def combine(base, override):
    """Ansible's `base | combine(override, recursive=true)` (merge_hash, lists replaced)."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        raise PodSettingsError("combine needs two dicts, got %s and %s" % (type(base).__name__, type(override).__name__))
    if base == {} or base == override:
        return copy.deepcopy(override)
    if override == {}:
        return copy.deepcopy(base)
    result = copy.deepcopy(base)
    for key, value in override.items():
        if key in result and isinstance(result[key], dict) and isinstance(value, dict):
            result[key] = combine(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _list(value, what):
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise PodSettingsError("%s must be a list, got %s %r" % (what, type(value).__name__, value))
    return copy.deepcopy(list(value))


def _dict(value, what):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PodSettingsError("%s must be a dict, got %s %r" % (what, type(value).__name__, value))
    return value


# --------------------------------------------------------------------------- the pieces


def node_lost_tolerations(tolerations, seconds):
    """The user's tolerations, then NoExecute Exists tolerations of the node-lost keys the user left out."""
    items = _list(tolerations, "tolerations")
    user_keys = [item["key"] for item in items
                 if isinstance(item, dict) and "effect" in item and item["effect"] == "NoExecute" and "key" in item]
    seconds = _int(seconds, "node_lost_toleration_seconds")
    for key in NODE_LOST_KEYS:
        if key not in user_keys:
            items.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds})
    return items


def resources(cpu_request, memory_request, cpu_limit="", memory_limit="", gpus=0, neuron_devices=0, efa_devices=0):
    """{'requests': ..., 'limits': ...}; limits only when there is one; devices as ints, request == limit."""
    requests = {"cpu": _text(cpu_request), "memory": _text(memory_request)}
    limits = {}
    if _text(cpu_limit):
        limits["cpu"] = _text(cpu_limit)
    if _text(memory_limit):
        limits["memory"] = _text(memory_limit)
    for resource, count, what in zip(EXTENDED_RESOURCES, (gpus, neuron_devices, efa_devices),
                                     ("gpus", "neuron_devices", "efa_devices")):
        count = _int(0 if count is None else count, what)
        if count > 0:
            requests[resource] = count
            limits[resource] = count
    result = {"requests": requests}
    if limits:
        result["limits"] = limits
    return result


def volumes(pvc_claim_name, pvc_mount_path, pvc_read_only, shm_size, extra_volumes, extra_volume_mounts,  # pylint: disable=too-many-arguments
            script_configmap="", script_mount_path="/opt/script"):
    """(volumes, volume mounts): the claim as `data`, /dev/shm as `dshm`, the code's ConfigMap as
    `script` (read-only, files mode 0444), then the extra ones."""
    vols, mounts = [], []
    if pvc_claim_name:
        read_only = to_bool(pvc_read_only)
        vols.append({"name": "data", "persistentVolumeClaim": {"claimName": pvc_claim_name, "readOnly": read_only}})
        mounts.append({"name": "data", "mountPath": pvc_mount_path, "readOnly": read_only})
    if _text(shm_size):
        vols.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": _text(shm_size)}})
        mounts.append({"name": "dshm", "mountPath": SHM_MOUNT_PATH})
    if _text(script_configmap):
        vols.append({"name": "script", "configMap": {"name": _text(script_configmap), "defaultMode": 0o444}})
        mounts.append({"name": "script", "mountPath": _text(script_mount_path), "readOnly": True})
    return (vols + _list(extra_volumes, "extra_volumes"),
            mounts + _list(extra_volume_mounts, "extra_volume_mounts"))


def pod_security_context(run_as_user, run_as_group, overrides=None):
    """The restricted pod securityContext with `overrides` merged (recursively) over it."""
    user = _int(run_as_user, "run_as_user")
    base = {"runAsNonRoot": user != 0, "runAsUser": user, "runAsGroup": _int(run_as_group, "run_as_group"),
            "seccompProfile": {"type": "RuntimeDefault"}}
    return combine(base, _dict(overrides, "security_context"))


def implies_privilege_escalation(overrides):
    """What Kubernetes implies: privileged, or capabilities.add holding SYS_ADMIN / CAP_SYS_ADMIN (any case)."""
    overrides = _dict(overrides, "container_security_context")
    if to_bool(overrides["privileged"]) if "privileged" in overrides else False:
        return True
    added = (overrides.get("capabilities") or {})
    added = (added.get("add") if isinstance(added, dict) else None) or []
    return any(re.sub("^CAP_", "", str(item).upper(), count=1) == "SYS_ADMIN" for item in added)


def container_security_context(overrides=None):
    """{allowPrivilegeEscalation, capabilities: {drop: [ALL]}} with `overrides` merged (recursively) over it."""
    overrides = _dict(overrides, "container_security_context")
    base = {"allowPrivilegeEscalation": implies_privilege_escalation(overrides), "capabilities": {"drop": ["ALL"]}}
    return combine(base, overrides)


CONTROLLER_RUN_AS = 65532


def controller_patch(image, resources, readiness_probe, node_lost_toleration_seconds,  # pylint: disable=redefined-outer-name
                     run_as=CONTROLLER_RUN_AS):
    """The JSON-patch (RFC 6902) operations that make container 0 of a controller's Deployment a
    restricted pod, for the kustomizations of the controllers the platform installs (volcano,
    mpi_operator; the filter trainfleet.training.controller_pod_patch):

    image (replace), imagePullPolicy IfNotPresent, resources, readinessProbe (both as given), the
    container securityContext (no privilege escalation, every capability dropped, read-only root),
    the pod securityContext (non-root as run_as:run_as, RuntimeDefault seccomp) and the node-lost
    tolerations of node_lost_toleration_seconds. The paths differ, so the order does not matter to
    the patched object; a template adds its own operations (args, ports, volumes) after these.
    """
    container = "/spec/template/spec/containers/0/"
    return [
        {"op": "replace", "path": container + "image", "value": copy.deepcopy(image)},
        {"op": "add", "path": container + "imagePullPolicy", "value": "IfNotPresent"},
        {"op": "add", "path": container + "resources", "value": copy.deepcopy(resources)},
        {"op": "add", "path": container + "readinessProbe", "value": copy.deepcopy(readiness_probe)},
        {"op": "add", "path": container + "securityContext",
         "value": container_security_context({"readOnlyRootFilesystem": True})},
        {"op": "add", "path": "/spec/template/spec/securityContext", "value": pod_security_context(run_as, run_as)},
        {"op": "add", "path": "/spec/template/spec/tolerations",
         "value": node_lost_tolerations([], node_lost_toleration_seconds)},
    ]


def output_dir(trainer_output_dir, s3_bucket, s3_prefix, name):
    """The trainer's --output-dir: trainer_output_dir, or s3://<bucket>/<prefix without edge slashes>/<name>."""
    if trainer_output_dir:
        return trainer_output_dir
    if not s3_bucket:
        raise PodSettingsError("s3_bucket is required when trainer_output_dir is empty (the outputs go to "
                               "s3://<s3_bucket>/<s3_prefix>/<name>)", key="s3_bucket")
    prefix = re.sub("^/+|/+$", "", _text(s3_prefix))
    return "s3://" + "/".join(str(part) for part in (s3_bucket, prefix, name) if part)


def trainer_args(dataset, epochs, batch_size, backend, output_dir, snapshot_dir="", gpus=0,  # pylint: disable=redefined-outer-name
                 device="auto", compile_cache=None, neuron_devices=0):
    """--dataset, --epochs, --batch-size, --backend, --output-dir, then --snapshot-dir when there is one, then
    the device: --device=<device> when one is named, else --device=cuda when the job asks for GPUs (a pod
    whose torch sees none then fails at once, saying so, instead of training on its CPUs) and --device=xla
    when it asks for Neuron devices (torch-neuronx's XLA device). compile_cache (mount path of the claim,
    cache set, precompile) adds --compile-cache-dir, --cache-set and --precompile."""
    args = ["--dataset=" + str(dataset), "--epochs=" + str(epochs), "--batch-size=" + str(batch_size),
            "--backend=" + str(backend), "--output-dir=" + str(output_dir)]
    if snapshot_dir:
        args.append("--snapshot-dir=" + str(snapshot_dir))
    if device and str(device) != "auto":
        args.append("--device=" + str(device))
    elif _int(0 if gpus is None else gpus, "gpus") > 0:
        args.append("--device=cuda")
    elif _int(0 if neuron_devices is None else neuron_devices, "neuron_devices") > 0:
        args.append("--device=xla")
    if compile_cache and compile_cache[1]:
        mount_path, cache_set, precompile = compile_cache
        args += ["--compile-cache-dir=" + _text(mount_path).rstrip("/") + "/" + COMPILE_CACHE_DIR, "--cache-set=" + _text(cache_set)]
        if precompile:
            args.append("--precompile")
    return args


def trainer_env(name, s3_bucket, s3_prefix, output_dir, aws_region, aws_endpoint_url,  # pylint: disable=redefined-outer-name
                aws_credentials_secret, env):
    """TRAINFLEET_*, AWS_REGION/AWS_DEFAULT_REGION, [AWS_ENDPOINT_URL], [credentials from the Secret], then `env`."""
    items = [
        {"name": "TRAINFLEET_JOB_NAME", "value": name},
        {"name": "TRAINFLEET_S3_BUCKET", "value": s3_bucket},
        {"name": "TRAINFLEET_S3_PREFIX", "value": s3_prefix},
        {"name": "TRAINFLEET_OUTPUT_DIR", "value": output_dir},
        {"name": "AWS_REGION", "value": aws_region},
        {"name": "AWS_DEFAULT_REGION", "value": aws_region},
    ]
    if aws_endpoint_url:
        items.append({"name": "AWS_ENDPOINT_URL", "value": aws_endpoint_url})
    if aws_credentials_secret:
        for key in CREDENTIAL_KEYS:
            items.append({"name": key, "valueFrom": {"secretKeyRef": {"name": aws_credentials_secret, "key": key}}})
    return items + _list(env, "env")


# --------------------------------------------------------------------------- the one entry point


def _settings(settings):
    """settings with the defaults filled in; a missing required key or an unknown key is an error."""
    if not isinstance(settings, dict):
        raise PodSettingsError("the job settings must be a dict, got %s" % type(settings).__name__)
    unknown = sorted(str(key) for key in settings if key not in DEFAULTS and key not in REQUIRED_KEYS)
    if unknown:
        raise PodSettingsError("unknown job settings %s (the keys are the role's variables without their prefix: %s)"
                               % (", ".join(unknown), ", ".join(REQUIRED_KEYS + tuple(sorted(DEFAULTS)))),
                               keys=unknown)
    missing = [key for key in REQUIRED_KEYS if settings.get(key) is None]
    if not settings.get("trainer_output_dir") and not settings.get("s3_bucket"):
        missing.append("s3_bucket")
    if missing:
        raise PodSettingsError(
            "missing required job setting%s: %s%s" % (
                "s" if len(missing) > 1 else "", ", ".join(missing),
                " (s3_bucket is required when trainer_output_dir is empty)" if "s3_bucket" in missing else ""),
            keys=missing)
    result = copy.deepcopy(DEFAULTS)
    result.update(settings)
    return result


def pod_settings(settings):
    """Every pod setting of a job from its settings (the role's variables without their prefix).

    Returns {tolerations, resources, volumes, volume_mounts, pod_security_context,
    container_security_context, image_pull_secrets, output_dir, trainer_args, trainer_env}.
    """
    s = _settings(settings)
    vols, mounts = volumes(s["pvc_claim_name"], s["pvc_mount_path"], s["pvc_read_only"], s["shm_size"],
                           s["extra_volumes"], s["extra_volume_mounts"], s["script_configmap"], s["script_mount_path"])
    out = output_dir(s["trainer_output_dir"], s["s3_bucket"], s["s3_prefix"], s["name"])
    return {
        "tolerations": node_lost_tolerations(s["tolerations"], s["node_lost_toleration_seconds"]),
        "resources": resources(s["cpu_request"], s["memory_request"], s["cpu_limit"], s["memory_limit"],
                               s["gpus"], s["neuron_devices"], s["efa_devices"]),
        "volumes": vols,
        "volume_mounts": mounts,
        "pod_security_context": pod_security_context(s["run_as_user"], s["run_as_group"], s["security_context"]),
        "container_security_context": container_security_context(s["container_security_context"]),
        "image_pull_secrets": [{"name": secret} for secret in _list(s["image_pull_secrets"], "image_pull_secrets")],
        "output_dir": out,
        "trainer_args": trainer_args(s["trainer_dataset"], s["trainer_epochs"], s["trainer_batch_size"],
                                     s["trainer_backend"], out, s["trainer_snapshot_dir"], s["gpus"], s["trainer_device"],
                                     (s["pvc_mount_path"], s["compile_cache_set"], s["precompile"]), s["neuron_devices"]),
        "trainer_env": trainer_env(s["name"], s["s3_bucket"], s["s3_prefix"], out, s["aws_region"],
                                   s["aws_endpoint_url"], s["aws_credentials_secret"], s["env"]),
    }
