# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kinds of training job: what each kind's status and pod labels mean.

Pure functions over plain dicts (the JSON the API server returns). Three kinds:

- PyTorchJob (kubeflow.org/v1, Kubeflow training operator v1.x): status.conditions of types
  Created, Running, Restarting, Succeeded, Suspended and Failed. The operator appends the newest
  condition at the end and drops the previous one of the same type; Running and Restarting
  replace each other; Failed and Succeeded are sticky. Pods carry training.kubeflow.org/job-name,
  .../replica-type (master, worker), .../replica-index and, for the master, .../job-role=master.
  status.replicaStatuses is keyed by the replica type as the spec writes it (Master, Worker).
  When a job exceeds runPolicy.backoffLimit or activeDeadlineSeconds the operator deletes all its
  pods first and only then sets Failed (cleanPodPolicy is ignored on that path).
- MPIJob (kubeflow.org/v2beta1, mpi-operator v0.6): the same condition types; spec.mpiReplicaSpecs
  Launcher and Worker. Pods carry training.kubeflow.org/job-name and .../job-role (launcher,
  worker); workers also .../replica-index. The launcher runs as a batch/v1 Job named
  <job>-launcher, so its pod's owner is that Job. mpirun runs in the launcher: its log is where
  mpirun's output, and with it rank 0's lines, appear.
- Volcano Job (batch.volcano.sh/v1alpha1, what TorchX creates): status.state.phase (Pending,
  Running, Restarting, Completing, Completed, Aborting, Aborted, Terminating, Terminated, Failed)
  with reason and message; spec.tasks (name, replicas). Pods carry volcano.sh/job-name and the
  task name in volcano.sh/task-spec (label or annotation), and are named <job>-<task>-<index>.
  TorchX names one task per replica of a role (<role>-<replica id>).

Every kind's phase is reported in the PyTorchJob vocabulary (Pending, Created, Running,
Restarting, Suspended, Succeeded, Failed) so one wait and one summary serve all; the kind's own
word is kept in kind_phase.
"""

from __future__ import annotations

import datetime
import re

PHASE_PENDING = "Pending"
PHASE_CREATED = "Created"
PHASE_RUNNING = "Running"
PHASE_RESTARTING = "Restarting"
PHASE_SUCCEEDED = "Succeeded"
PHASE_SUSPENDED = "Suspended"
PHASE_FAILED = "Failed"

CONDITION_TYPES = (PHASE_CREATED, PHASE_RUNNING, PHASE_RESTARTING, PHASE_SUCCEEDED,
                   PHASE_SUSPENDED, PHASE_FAILED)
PHASES = (PHASE_PENDING,) + CONDITION_TYPES
TERMINAL_PHASES = (PHASE_SUCCEEDED, PHASE_FAILED)

# Container waiting reasons that are "in progress", not a problem.
BENIGN_WAITING_REASONS = ("ContainerCreating", "PodInitializing")
# Waiting reasons that mean the pod will not start without a change by a human.
DEFAULT_FATAL_WAITING_REASONS = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName",
                                 "CreateContainerConfigError")
# CreateContainerConfigError with one of these messages is the kubelet's own hiccup, which it retries:
# its watch of a Secret or ConfigMap the pod uses had not caught up yet ("failed to sync secret
# cache: timed out waiting for the condition"). Seen in make test on a loaded 2-core machine: the
# container started 1 s later, but the train step had already called the job failed. A Secret that
# does not exist says "secret \"x\" not found" instead and stays fatal.
TRANSIENT_WAITING_MESSAGES = ("failed to sync secret cache", "failed to sync configmap cache")


def waiting_is_fatal(reason, message, reasons=DEFAULT_FATAL_WAITING_REASONS):
    """True when a container waiting for `reason` (with `message`) will not start without a change by a
    human: `reason` is one of `reasons` and the message is not one of the kubelet's transient ones."""
    if reason not in reasons:
        return False
    return not (reason == "CreateContainerConfigError" and any(text in (message or "") for text in TRANSIENT_WAITING_MESSAGES))


KUBEFLOW_JOB_NAME = "training.kubeflow.org/job-name"
KUBEFLOW_REPLICA_TYPE = "training.kubeflow.org/replica-type"
KUBEFLOW_REPLICA_INDEX = "training.kubeflow.org/replica-index"
KUBEFLOW_JOB_ROLE = "training.kubeflow.org/job-role"
VOLCANO_JOB_NAME = "volcano.sh/job-name"
VOLCANO_TASK = "volcano.sh/task-spec"
VOLCANO_TASK_INDEX = "volcano.sh/task-index"

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


# --------------------------------------------------------------------------- helpers


def dig(obj, *path, **kwargs):
    """Walk nested dicts; return default (None) when any step is missing."""
    default = kwargs.get("default")
    cur = obj
    for key in path:
        if not isinstance(cur, dict):
            return default
        cur = cur.get(key)
        if cur is None:
            return default
    return cur


def to_int(value, default=None):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def parse_time(value):
    """RFC3339 (as the API server writes it) -> aware datetime, or None."""
    if not value:
        return None
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
    text = str(value).strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    # Drop fractional seconds beyond microseconds (fromisoformat on 3.8-3.10 is strict).
    match = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$", text)
    if match:
        frac = (match.group(2) or "")[:7]
        text = match.group(1) + frac + match.group(3)
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed


def format_time(value):
    """Aware datetime -> RFC3339 string with Z, or None."""
    if value is None:
        return None
    return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


def seconds_between(start, end):
    """Seconds from one RFC 3339 time (or datetime) to another, rounded to ms; None if either is unknown."""
    first, last = parse_time(start), parse_time(end)
    if first is None or last is None:
        return None
    return round((last - first).total_seconds(), 3)


def _is_true(cond):
    return str(cond.get("status", "")).lower() == "true"


# --------------------------------------------------------------------------- kinds


class JobKind(object):
    """A Kubeflow-style job (PyTorchJob, MPIJob): conditions, replica specs, kubeflow labels."""

    name = None
    # The value of the modules' kind option (the API kind but for Volcano's "Job").
    label = None
    group = "kubeflow.org"
    version = None
    plural = None
    replica_specs_key = None
    # The training container every replica must name so (None: the pod's first container).
    default_container = None
    # Replica types in the order pods are listed; the first holds rank 0 when no log says.
    replica_order = ()
    label_job_name = KUBEFLOW_JOB_NAME
    # Kinds whose pods a controller of another kind owns (MPIJob's launcher: a batch/v1 Job).
    extra_owner_kinds = ()
    # Where the trainer's rank-0 lines appear (for the documentation and the summary).
    rank0_note = None
    # What serves the kind (for the message when its CRD is missing).
    installer = None

    @property
    def api_version(self):
        return "%s/%s" % (self.group, self.version)

    @property
    def crd_name(self):
        return "%s.%s" % (self.plural, self.group)

    # ---------------------------------------------------------------- status

    def conditions(self, job):
        """status.conditions normalised to snake_case dicts, in the controller's order."""
        result = []
        for cond in dig(job, "status", "conditions", default=[]) or []:
            if not isinstance(cond, dict):
                continue
            result.append({
                "type": cond.get("type"),
                "status": cond.get("status"),
                "reason": cond.get("reason"),
                "message": cond.get("message"),
                "last_transition_time": cond.get("lastTransitionTime"),
                "last_update_time": cond.get("lastUpdateTime"),
            })
        return result

    def kind_phase(self, job):
        return self.phase(job)

    def phase(self, job):
        """Failed and Succeeded win whenever they are true (never cleared). Otherwise the latest
        true condition wins: the newest is appended at the end, and lastTransitionTime breaks ties
        when a client reordered the list. No true condition yet (not reconciled): Pending."""
        conds = [c for c in self.conditions(job) if _is_true(c) and c["type"] in CONDITION_TYPES]
        types = set(c["type"] for c in conds)
        if PHASE_FAILED in types:
            return PHASE_FAILED
        if PHASE_SUCCEEDED in types:
            return PHASE_SUCCEEDED
        if not conds:
            return PHASE_PENDING
        best_pos, best_time, best_type = -1, EPOCH, None
        for pos, cond in enumerate(conds):
            when = parse_time(cond["last_transition_time"]) or parse_time(cond["last_update_time"]) or EPOCH
            if when > best_time or (when == best_time and pos > best_pos):
                best_pos, best_time, best_type = pos, when, cond["type"]
        return best_type

    def condition(self, job, ctype):
        """The (last) condition of a type, or None."""
        found = None
        for cond in self.conditions(job):
            if cond["type"] == ctype:
                found = cond
        return found

    def failure(self, job):
        """{reason, message} of the Failed condition, or None when the job did not fail."""
        if self.phase(job) != PHASE_FAILED:
            return None
        cond = None
        for item in self.conditions(job):
            if item["type"] == PHASE_FAILED and _is_true(item):
                cond = item
        return {"reason": cond.get("reason"), "message": cond.get("message")} if cond else None

    def start_end(self, job):
        return parse_time(dig(job, "status", "startTime")), parse_time(dig(job, "status", "completionTime"))

    def replica_specs(self, job):
        """{replica type as the spec writes it: {replicas, restart_policy}}."""
        specs = dig(job, "spec", self.replica_specs_key, default={}) or {}
        result = {}
        for rtype, spec in specs.items():
            spec = spec or {}
            result[rtype] = {"replicas": to_int(spec.get("replicas"), 1),
                             "restart_policy": spec.get("restartPolicy")}
        return result

    def pod_templates(self, job):
        """[(replica type, replicas, pod spec of its template)] in the spec's order."""
        specs = dig(job, "spec", self.replica_specs_key, default={}) or {}
        return [(rtype, to_int((spec or {}).get("replicas"), 1), dig(spec, "template", "spec", default={}) or {})
                for rtype, spec in specs.items()]

    def raw_replica_statuses(self, job):
        return dig(job, "status", "replicaStatuses", default={}) or {}

    def replica_pod_names(self, job):
        """The pod names the controller gives a job's replicas: <job>-<type>-<index>."""
        name = dig(job, "metadata", "name")
        names = []
        for rtype, spec in sorted(self.replica_specs(job).items()):
            for index in range(max(0, spec["replicas"] or 0)):
                names.append("%s-%s-%d" % (name, str(rtype).lower(), index))
        return names

    def trainer_args(self, job):
        """The command and arguments of every replica's training container."""
        args = []
        for spec in (dig(job, "spec", self.replica_specs_key, default={}) or {}).values():
            args.extend(_container_args(dig(spec, "template", "spec", "containers", default=[]),
                                        self.default_container))
        return args

    # ---------------------------------------------------------------- pods

    def pod_selector(self, job_name=None):
        """Label selector for the pods of one job (job_name) or of every job of this kind."""
        return "%s=%s" % (self.label_job_name, job_name) if job_name else self.label_job_name

    def pod_job_name(self, pod):
        return (dig(pod, "metadata", "labels", default={}) or {}).get(self.label_job_name)

    def pod_belongs(self, pod, job_name):
        """Labels must name the job; a controller owner reference, when present, must be a job of
        this kind and name (another kind with the same name shares the job-name label)."""
        if self.pod_job_name(pod) != job_name:
            return False
        owners = dig(pod, "metadata", "ownerReferences", default=[]) or []
        controllers = [o for o in owners if o.get("controller")]
        if not controllers:
            return True
        return any((o.get("kind") == self.name and o.get("name") == job_name)
                   or o.get("kind") in self.extra_owner_kinds for o in controllers)

    def pod_identity(self, pod):
        """name, namespace, replica_type, replica_index, job_role, node of a pod."""
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        return {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "replica_type": labels.get(KUBEFLOW_REPLICA_TYPE) or labels.get(KUBEFLOW_JOB_ROLE),
            "replica_index": to_int(labels.get(KUBEFLOW_REPLICA_INDEX)),
            "job_role": labels.get(KUBEFLOW_JOB_ROLE),
            "node": (pod.get("spec") or {}).get("nodeName"),
        }

    def replica_rank(self, replica_type):
        """Position of a replica type in replica_order (unknown ones last)."""
        lower = (replica_type or "").lower()
        return self.replica_order.index(lower) if lower in self.replica_order else len(self.replica_order)

    def container_for(self, pod, wanted=None):
        """The container whose log is read: wanted, else the kind's default (when the pod has it),
        else the pod's first container."""
        if wanted:
            return wanted
        names = [c.get("name") for c in dig(pod, "spec", "containers", default=[]) or []]
        if self.default_container and (self.default_container in names or not names):
            return self.default_container
        return names[0] if names else None


class PyTorchJobKind(JobKind):
    name = "PyTorchJob"
    label = "PyTorchJob"
    version = "v1"
    plural = "pytorchjobs"
    replica_specs_key = "pytorchReplicaSpecs"
    default_container = "pytorch"
    replica_order = ("master", "worker")
    rank0_note = "the pod that printed rank 0's lines (torchrun's c10d rendezvous hands ranks out in join order)"
    installer = "the Kubeflow training operator (training_operator step)"


class MPIJobKind(JobKind):
    name = "MPIJob"
    label = "MPIJob"
    version = "v2beta1"
    plural = "mpijobs"
    replica_specs_key = "mpiReplicaSpecs"
    replica_order = ("launcher", "worker")
    extra_owner_kinds = ("Job",)
    rank0_note = "the launcher: mpirun runs there and prints every rank's output, rank 0's lines included"
    installer = "the MPI operator (mpi-operator, kubeflow.org/v2beta1)"

    def replica_pod_names(self, job):
        name = dig(job, "metadata", "name")
        names = []
        for rtype, spec in sorted(self.replica_specs(job).items()):
            if rtype.lower() == "launcher":
                continue  # a batch/v1 Job's pod: <job>-launcher-<random>
            for index in range(max(0, spec["replicas"] or 0)):
                names.append("%s-%s-%d" % (name, rtype.lower(), index))
        return names


# Volcano's state.phase -> (the phase in the common vocabulary)
VOLCANO_PHASES = {
    "Pending": PHASE_PENDING,
    "Running": PHASE_RUNNING,
    "Restarting": PHASE_RESTARTING,
    "Completing": PHASE_RUNNING,
    "Completed": PHASE_SUCCEEDED,
    "Aborting": PHASE_RUNNING,
    "Aborted": PHASE_FAILED,
    "Terminating": PHASE_RUNNING,
    "Terminated": PHASE_FAILED,
    "Failed": PHASE_FAILED,
}


class VolcanoJobKind(JobKind):
    name = "Job"
    label = "VolcanoJob"
    group = "batch.volcano.sh"
    version = "v1alpha1"
    plural = "jobs"
    label_job_name = VOLCANO_JOB_NAME
    rank0_note = "the pod of the first task's replica 0 unless a log says otherwise (TorchX: <role>-0)"
    installer = "Volcano (its controller serves batch.volcano.sh/v1alpha1 jobs)"

    def kind_phase(self, job):
        return dig(job, "status", "state", "phase")

    def phase(self, job):
        return VOLCANO_PHASES.get(self.kind_phase(job) or "", PHASE_PENDING if not self.kind_phase(job)
                                  else PHASE_RUNNING)

    def conditions(self, job):
        """Volcano's status.conditions: one per phase reached ({status: <phase>, lastTransitionTime}),
        shaped like the Kubeflow ones (type = the phase in the common vocabulary)."""
        result = []
        for cond in dig(job, "status", "conditions", default=[]) or []:
            if not isinstance(cond, dict):
                continue
            result.append({"type": VOLCANO_PHASES.get(cond.get("status"), cond.get("status")),
                           "status": "True", "reason": cond.get("status"), "message": None,
                           "last_transition_time": cond.get("lastTransitionTime"), "last_update_time": None})
        state = dig(job, "status", "state", default={}) or {}
        if state.get("phase") and (not result or result[-1]["reason"] != state.get("phase")):
            result.append({"type": self.phase(job), "status": "True", "reason": state.get("phase"),
                           "message": state.get("message"), "last_transition_time": state.get("lastTransitionTime"),
                           "last_update_time": None})
        elif result:
            result[-1]["message"] = state.get("message")
            result[-1]["reason"] = state.get("reason") or result[-1]["reason"]
        return result

    def failure(self, job):
        if self.phase(job) != PHASE_FAILED:
            return None
        state = dig(job, "status", "state", default={}) or {}
        return {"reason": state.get("reason") or state.get("phase"), "message": state.get("message")}

    def start_end(self, job):
        conds = self.conditions(job)
        start = None
        for cond in conds:
            if cond["type"] == PHASE_RUNNING:
                start = parse_time(cond["last_transition_time"])
                break
        end = None
        if self.phase(job) in TERMINAL_PHASES:
            end = parse_time(dig(job, "status", "state", "lastTransitionTime"))
        return start, end

    def replica_specs(self, job):
        result = {}
        for task in dig(job, "spec", "tasks", default=[]) or []:
            policy = dig(task, "template", "spec", "restartPolicy")
            result[task.get("name") or "default"] = {"replicas": to_int(task.get("replicas"), 1),
                                                     "restart_policy": policy}
        return result

    def pod_templates(self, job):
        return [(task.get("name") or "default", to_int(task.get("replicas"), 1),
                 dig(task, "template", "spec", default={}) or {})
                for task in dig(job, "spec", "tasks", default=[]) or [] if isinstance(task, dict)]

    def raw_replica_statuses(self, job):
        result = {}
        for task, counts in (dig(job, "status", "taskStatusCount", default={}) or {}).items():
            phases = (counts or {}).get("phase") or {}
            result[task] = {"active": to_int(phases.get("Running"), 0) + to_int(phases.get("Pending"), 0),
                            "succeeded": to_int(phases.get("Succeeded"), 0),
                            "failed": to_int(phases.get("Failed"), 0)}
        return result

    def replica_pod_names(self, job):
        name = dig(job, "metadata", "name")
        return ["%s-%s-%d" % (name, task, index) for task, spec in sorted(self.replica_specs(job).items())
                for index in range(max(0, spec["replicas"] or 0))]

    def trainer_args(self, job):
        args = []
        for task in dig(job, "spec", "tasks", default=[]) or []:
            args.extend(_container_args(dig(task, "template", "spec", "containers", default=[]), None))
        return args

    def pod_identity(self, pod):
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        task = labels.get(VOLCANO_TASK) or annotations.get(VOLCANO_TASK)
        index = to_int(labels.get(VOLCANO_TASK_INDEX))
        if index is None:
            match = re.search(r"-(\d+)$", meta.get("name") or "")
            index = int(match.group(1)) if match else None
        return {"name": meta.get("name"), "namespace": meta.get("namespace"), "replica_type": task,
                "replica_index": index, "job_role": None, "node": (pod.get("spec") or {}).get("nodeName")}

    def replica_rank(self, replica_type):
        return 0


PYTORCHJOB = PyTorchJobKind()
MPIJOB = MPIJobKind()
VOLCANOJOB = VolcanoJobKind()
KINDS = {"PyTorchJob": PYTORCHJOB, "MPIJob": MPIJOB, "VolcanoJob": VOLCANOJOB}
KIND_CHOICES = sorted(KINDS)


def _container_args(containers, preferred):
    containers = containers or []
    main = ([c for c in containers if preferred and c.get("name") == preferred] or containers or [{}])[0]
    return [str(a) for a in (main.get("command") or []) + (main.get("args") or [])]


def get_kind(name):
    """The JobKind for a kind option value (PyTorchJob, MPIJob, VolcanoJob)."""
    return KINDS[name or "PyTorchJob"]


def kind_of(job):
    """The JobKind of a job object (from kind and apiVersion); PyTorchJob when it does not say."""
    kind = (job or {}).get("kind")
    if kind == "Job" and str((job or {}).get("apiVersion", "")).startswith(VOLCANOJOB.group + "/"):
        return VOLCANOJOB
    return KINDS.get(kind) or PYTORCHJOB


def kind_of_pod(pod):
    """The JobKind whose labels a pod carries (Kubeflow's, or Volcano's)."""
    labels = dig(pod, "metadata", "labels", default={}) or {}
    if VOLCANO_JOB_NAME in labels and KUBEFLOW_JOB_NAME not in labels:
        return VOLCANOJOB
    return PYTORCHJOB


# --------------------------------------------------------------------------- job status


def job_conditions(job):
    return kind_of(job).conditions(job)


def job_phase(job):
    """The job's phase in the common vocabulary (see the module docstring)."""
    return kind_of(job).phase(job)


def is_terminal_phase(phase):
    return phase in TERMINAL_PHASES


def phase_reached(job, wanted):
    """True when the job is at `wanted` or beyond it ("terminal" or a phase). A terminal job always
    ends a wait (a job that finished has passed Running; a job that failed never will)."""
    phase = job_phase(job)
    if is_terminal_phase(phase):
        return True
    if wanted in (None, "terminal"):
        return False
    if wanted == PHASE_CREATED:
        return phase != PHASE_PENDING
    return phase == wanted


def job_condition(job, ctype):
    return kind_of(job).condition(job, ctype)


def job_failure(job):
    """{reason, message} of the job's failure, or None when it did not fail."""
    return kind_of(job).failure(job)


def replica_specs(job):
    return kind_of(job).replica_specs(job)


def replica_statuses(job):
    """Per replica type (Master, Worker; Launcher; Volcano tasks): replicas (spec), active, succeeded, failed."""
    kind = kind_of(job)
    specs = kind.replica_specs(job)
    statuses = kind.raw_replica_statuses(job)
    result = {}
    for rtype in sorted(set(specs) | set(statuses)):
        status = statuses.get(rtype) or {}
        result[rtype] = {
            "replicas": specs.get(rtype, {}).get("replicas"),
            "active": to_int(status.get("active"), 0),
            "succeeded": to_int(status.get("succeeded"), 0),
            "failed": to_int(status.get("failed"), 0),
        }
    return result


def job_times(job, now=None):
    """start_time, completion_time (RFC3339), duration_seconds (only when finished) and
    elapsed_seconds (start to completion, or to now while the job is not finished)."""
    kind = kind_of(job)
    start, end = kind.start_end(job)
    phase = kind.phase(job)
    if end is None and is_terminal_phase(phase):
        # Failed jobs do not always get completionTime: use the terminal condition's time.
        cond = kind.condition(job, phase)
        if cond:
            end = parse_time(cond["last_transition_time"])
    duration = elapsed = None
    if start is not None:
        if end is not None:
            duration = max(0.0, (end - start).total_seconds())
            elapsed = duration
        else:
            elapsed = max(0.0, ((now or utcnow()) - start).total_seconds())
    return {
        "start_time": format_time(start),
        "completion_time": format_time(end),
        "duration_seconds": duration,
        "elapsed_seconds": elapsed,
    }


def total_epochs(job):
    """The --epochs the trainer was started with (from the job's container arguments), or None."""
    args = kind_of(job).trainer_args(job)
    for pos, arg in enumerate(args):
        if arg.startswith("--epochs="):
            return to_int(arg.split("=", 1)[1])
        if arg == "--epochs" and pos + 1 < len(args):
            return to_int(args[pos + 1])
    return None


def pod_belongs_to_job(pod, job_name, kind=None):
    return (kind or kind_of_pod(pod)).pod_belongs(pod, job_name)
