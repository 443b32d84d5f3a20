# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Volcano Job that TorchX's kubernetes scheduler would create for our trainer, made ours.

Two halves:

- ``torchx_volcano_job(spec)`` asks the installed torchx (requirements.txt pins it) in-process
  for what ``torchx run -s kubernetes --dryrun dist.ddp -j <nnodes>x<nproc> -m <module> ...``
  prints: the AppDef of the ``dist.ddp`` component, then ``KubernetesScheduler.submit_dryrun``
  with ``queue``/``namespace``/``service_account``; the request's ``resource`` (a dict holding
  kubernetes client models) is serialised to plain JSON-able data.
- ``patch_job(job, spec, unique_id)`` is pure: it turns that dict into our job. TorchX's AppDef
  cannot say what our pods need (a fixed name, our labels, the restricted securityContext, the
  S3 credentials from a Secret, pull secrets, node placement, requests != limits), and the
  command's leading ``torchrun`` becomes the launcher the role names (default ``torchrun``), with
  the same arguments.

What torchx 0.7.0 renders (checked with its CLI's --dryrun): one Volcano task per replica,
named ``<role>-<replica>`` (role = the module's last dotted part, ``train`` for trainer.train),
each pod ``bash -c "torchrun --rdzv_backend c10d --rdzv_endpoint ${<RANK0>:=localhost}:<port>
--rdzv_id '<app id>' --nnodes <n> --nproc_per_node <p> --tee 3 --role '' -m <module> <args>"``
where <RANK0> is ``TORCHX_RANK0_HOST`` (set to localhost) on replica 0 and ``VC_<ROLE>_0_HOSTS``
(which Volcano's svc plugin sets to replica 0's DNS name) on the others; plugins svc
(``--publish-not-ready-addresses``) and env; schedulerName volcano; a random-suffixed name
(``<name>-<random>``) that this module replaces by the fixed name everywhere (rendezvous id too).
Volcano names the pods ``<job>-<task>-<index>``: rank 0's node is ``<job>-<role>-0-0``.
"""

from __future__ import annotations

import copy
import shlex

from ansible_collections.trainfleet.training.plugins.module_utils import pod_settings
from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError

# The one torchx release this module was written and tested against (requirements.txt pins it).
TORCHX_TESTED_VERSION = "0.7.0"
TORCHX_SESSION = "torchx"
TORCHRUN = "torchrun"

MANAGED_LABELS = {
    "app.kubernetes.io/name": "trainfleet-trainer",
    "app.kubernetes.io/part-of": "trainfleet",
    "app.kubernetes.io/component": "torchx",
    "app.kubernetes.io/managed-by": "trainfleet",
}


class TorchxRequestError(TrainfleetError):
    """A request torchx cannot render, or a rendering this module does not recognise."""


def load_torchx():
    """(torchx version, dist component module, kubernetes scheduler module) or a clear error."""
    try:
        import torchx  # pylint: disable=import-outside-toplevel
        from torchx.components import dist  # pylint: disable=import-outside-toplevel
        from torchx.schedulers import kubernetes_scheduler  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise TorchxRequestError(
            "torchx is not importable by the Python that runs this module (%s): %s. Install the pinned "
            "version into the control node's venv: pip install -r requirements.txt (torchx==%s)"
            % (_python(), exc, TORCHX_TESTED_VERSION)) from exc
    return getattr(torchx, "__version__", "unknown"), dist, kubernetes_scheduler


def _python():
    import sys  # pylint: disable=import-outside-toplevel
    return sys.executable


def role_name(module):
    """The role (and task prefix) dist.ddp derives from -m: the module's last dotted part."""
    return str(module).rpartition(".")[2]


def rank0_pod_name(name, module):
    """Volcano's pod name for task <role>-0, index 0: where rank 0's node runs."""
    return "%s-%s-0-0" % (name, role_name(module))


def app_handle(namespace, name):
    """The handle `torchx status` and `torchx log` take for our job (session name required)."""
    return "kubernetes://%s/%s:%s" % (TORCHX_SESSION, namespace, name)


def torchx_volcano_job(spec):
    """Ask torchx for the Volcano Job of dist.ddp; returns (plain dict, unique app id, torchx version)."""
    version, dist, kubernetes_scheduler = load_torchx()
    try:
        app = dist.ddp(
            *[str(arg) for arg in spec["trainer_args"]],
            m=spec["module"],
            image=spec["image"],
            name=spec["name"],
            j="%dx%d" % (spec["nnodes"], spec["nproc_per_node"]),
            # cpu/memMB only shape torchx's own resources, which patch_job replaces.
            cpu=1,
            memMB=1024,
            env={"LOGLEVEL": spec["log_level"]},
            rdzv_port=spec["rdzv_port"],
            max_retries=spec["max_retries"],
        )
        scheduler = kubernetes_scheduler.KubernetesScheduler(session_name=TORCHX_SESSION)
        cfg = {"queue": spec["queue"], "namespace": spec["namespace"]}
        if spec.get("service_account"):
            cfg["service_account"] = spec["service_account"]
        info = scheduler.submit_dryrun(app, cfg)
        resource = info.request.resource
        job = kubernetes_scheduler.sanitize_for_serialization(resource)
    except (ValueError, TypeError, KeyError, AssertionError) as exc:
        raise TorchxRequestError("torchx %s refused the request: %s" % (version, exc)) from exc
    unique_id = ((job or {}).get("metadata") or {}).get("name")
    if not unique_id:
        raise TorchxRequestError("torchx %s rendered a job without metadata.name: %r" % (version, job))
    return job, unique_id, version


def _replace_strings(value, old, new):
    """Every string inside value with `old` replaced by `new` (dict keys too)."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace_strings(item, old, new) for item in value]
    if isinstance(value, dict):
        return {_replace_strings(k, old, new): _replace_strings(v, old, new) for k, v in value.items()}
    return value


def launcher_script(script, launcher):
    """torchx's `torchrun ARGS` -> `<launcher> ARGS` (the launcher takes torchrun's arguments)."""
    words = shlex.split(script)
    if not words or words[0] != TORCHRUN:
        raise TorchxRequestError(
            "torchx's command does not start with %s (this torchx renders something this module does not "
            "know, tested with torchx %s): %r" % (TORCHRUN, TORCHX_TESTED_VERSION, script))
    prefix = TORCHRUN + " "
    if not script.startswith(prefix):
        raise TorchxRequestError("unexpected torchx command layout: %r" % script)
    return " ".join(shlex.quote(str(word)) for word in launcher) + " " + script[len(prefix):]


def rdzv_endpoint(script):
    """The --rdzv_endpoint of a torchrun command line (unexpanded shell text), or None."""
    words = script.split()
    for index, word in enumerate(words[:-1]):
        if word == "--rdzv_endpoint":
            return words[index + 1]
    return None


def _env(spec, container_env):
    """torchx's env (LOGLEVEL, TORCHX_*), then ours (pod_settings.trainer_env, with TORCHX_JOB_ID after
    AWS_DEFAULT_REGION); ours wins on a name clash."""
    ours = pod_settings.trainer_env(spec["name"], spec["s3_bucket"], spec["s3_prefix"], spec["output_dir"],
                                    spec["aws_region"], spec.get("aws_endpoint_url"), spec.get("aws_credentials_secret"),
                                    spec.get("env"))
    # the handle torchx's own tools know this job by (the CLI sets the same variable)
    ours.insert(6, {"name": "TORCHX_JOB_ID", "value": app_handle(spec["namespace"], spec["name"])})
    names = set(item["name"] for item in ours)
    return [item for item in (container_env or []) if item.get("name") not in names] + ours


def _resources(spec):
    return pod_settings.resources(spec["cpu_request"], spec["memory_request"], spec.get("cpu_limit"),
                                  spec.get("memory_limit"), spec.get("gpus"), spec.get("neuron_devices"),
                                  spec.get("efa_devices"))


def pod_security_context(spec):
    """The restricted pod securityContext, spec's security_context merged over it."""
    return pod_settings.pod_security_context(spec["run_as_user"], spec["run_as_group"], spec.get("security_context"))


def container_security_context(spec=None):
    """The restricted container securityContext (privileged false too), spec's container_security_context
    merged over it."""
    merged = pod_settings.container_security_context((spec or {}).get("container_security_context"))
    context = {"allowPrivilegeEscalation": merged.pop("allowPrivilegeEscalation"),
               "privileged": merged.pop("privileged", False)}
    context.update(merged)
    return context


def _tolerations(spec):
    """The spec's tolerations; with node_lost_toleration_seconds, the node-lost ones after them. None: leave torchx's."""
    if spec.get("node_lost_toleration_seconds") is not None:
        return pod_settings.node_lost_tolerations(spec.get("tolerations"), spec["node_lost_toleration_seconds"])
    if spec.get("tolerations"):
        return copy.deepcopy(spec["tolerations"])
    return None


def patch_job(job, spec, unique_id):
    """torchx's Volcano Job (plain dict) -> ours. Does not modify `job`."""
    name, namespace = spec["name"], spec["namespace"]
    job = _replace_strings(copy.deepcopy(job), unique_id, name)
    if job.get("apiVersion") != "batch.volcano.sh/v1alpha1" or job.get("kind") != "Job":
        raise TorchxRequestError("torchx rendered %s/%s, not a Volcano batch.volcano.sh/v1alpha1 Job"
                                 % (job.get("apiVersion"), job.get("kind")))
    labels = dict(MANAGED_LABELS, **{"app.kubernetes.io/instance": name})
    labels.update(spec.get("labels") or {})
    job["metadata"] = {"name": name, "namespace": namespace, "labels": labels}
    if spec.get("annotations"):
        job["metadata"]["annotations"] = dict(spec["annotations"])
    job_spec = job.setdefault("spec", {})
    job_spec["schedulerName"] = "volcano"
    job_spec["queue"] = spec["queue"]
    # gang: every replica or none (torchx leaves the job's minAvailable to Volcano's default)
    job_spec["minAvailable"] = int(spec["nnodes"])
    tasks = job_spec.get("tasks") or []
    if len(tasks) != int(spec["nnodes"]):
        raise TorchxRequestError("torchx rendered %d tasks for %d nodes" % (len(tasks), spec["nnodes"]))
    for task in tasks:
        template = task.setdefault("template", {})
        meta = template.setdefault("metadata", {})
        meta["labels"] = dict(meta.get("labels") or {}, **labels)
        pod = template.setdefault("spec", {})
        pod["securityContext"] = pod_security_context(spec)
        pod["automountServiceAccountToken"] = False
        pod["enableServiceLinks"] = False
        pod["restartPolicy"] = "Never"
        if spec.get("service_account"):
            pod["serviceAccountName"] = spec["service_account"]
        else:
            pod.pop("serviceAccountName", None)
        if spec.get("image_pull_secrets"):
            pod["imagePullSecrets"] = [{"name": secret} for secret in spec["image_pull_secrets"]]
        if spec.get("node_selector"):
            pod["nodeSelector"] = dict(spec["node_selector"])
        else:
            pod.pop("nodeSelector", None)
        tolerations = _tolerations(spec)
        if tolerations is not None:
            pod["tolerations"] = tolerations
        if spec.get("affinity"):
            pod["affinity"] = copy.deepcopy(spec["affinity"])
        for volume in pod.get("volumes") or []:
            if volume.get("name") == "dshm" and spec.get("shm_size"):
                volume.setdefault("emptyDir", {})["sizeLimit"] = str(spec["shm_size"])
            if "hostPath" in volume:
                raise TorchxRequestError("torchx rendered a hostPath volume %r" % volume.get("name"))
        containers = pod.get("containers") or []
        if len(containers) != 1:
            raise TorchxRequestError("torchx rendered %d containers in task %r" % (len(containers), task.get("name")))
        container = containers[0]
        command = container.get("command") or []
        if len(command) != 3 or command[:2] != ["bash", "-c"]:
            raise TorchxRequestError("unexpected torchx command %r in task %r" % (command, task.get("name")))
        container["command"] = ["bash", "-c", launcher_script(command[2], spec["launcher"])]
        container.pop("args", None)
        container["image"] = spec["image"]
        container["imagePullPolicy"] = spec["image_pull_policy"]
        container["env"] = _env(spec, container.get("env"))
        container["resources"] = _resources(spec)
        container["securityContext"] = container_security_context(spec)
        # The claim (trainjob_pvc_claim_name), the code's ConfigMap (trainjob_script_dir) and the extra
        # volumes: the AppDef this module builds mounts none of them, so the volumes the other
        # launchers get from pod_settings.volumes are added here, from the same function (TorchX
        # renders /dev/shm itself: shm_size above).
        more_volumes, more_mounts = pod_settings.volumes(
            pvc_claim_name=spec.get("pvc_claim_name") or "", pvc_mount_path=spec.get("pvc_mount_path") or "",
            pvc_read_only=spec.get("pvc_read_only") or False, shm_size="",
            extra_volumes=copy.deepcopy(spec.get("extra_volumes") or []),
            extra_volume_mounts=copy.deepcopy(spec.get("extra_volume_mounts") or []),
            script_configmap=spec.get("script_configmap") or "", script_mount_path=spec.get("script_mount_path") or "/opt/script")
        if more_volumes:
            pod.setdefault("volumes", []).extend(more_volumes)
        if more_mounts:
            container.setdefault("volumeMounts", []).extend(more_mounts)
    return job


def render(spec):
    """The whole request: (our Volcano Job, facts about it)."""
    raw, unique_id, version = torchx_volcano_job(spec)
    job = patch_job(raw, spec, unique_id)
    first = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"][2]
    others = [task["template"]["spec"]["containers"][0]["command"][2] for task in job["spec"]["tasks"][1:]]
    info = {
        "torchx_version": version,
        "torchx_tested_version": TORCHX_TESTED_VERSION,
        "app_id": "%s:%s" % (spec["namespace"], spec["name"]),
        "app_handle": app_handle(spec["namespace"], spec["name"]),
        "role": role_name(spec["module"]),
        "tasks": [task.get("name") for task in job["spec"]["tasks"]],
        "rank0_pod": rank0_pod_name(spec["name"], spec["module"]),
        "rdzv_endpoints": {"rank0": rdzv_endpoint(first), "others": rdzv_endpoint(others[0]) if others else None},
        "torchx_unique_id": unique_id,
    }
    return job, info
