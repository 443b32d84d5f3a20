# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PyTorchJob (kubeflow.org/v1) semantics, in one place.

Everything here is a pure function over plain dicts (the JSON the API server returns),
so it is unit-tested on YAML fixtures with no cluster and no kubernetes client.

Facts this module encodes (Kubeflow training operator v1.x, pkg/apis/kubeflow.org/v1 and
pkg/util/status.go):

- Condition types are Created, Running, Restarting, Succeeded, Suspended and Failed.
  The operator appends the newest condition at the end of status.conditions and drops the
  previous one of the same type; Running and Restarting replace each other; when the job
  turns Succeeded or Failed the Running condition is kept with status False. Failed is
  sticky: once set, no later condition is recorded.
- Pods carry the labels training.kubeflow.org/job-name, .../replica-type (lower case:
  master, worker), .../replica-index and, for the master replica, .../job-role=master.
- status.replicaStatuses is keyed by the replica type as written in the spec (Master,
  Worker) with active/succeeded/failed counters.
- With torchrun's c10d rendezvous, global ranks follow join order, not pod names, so rank 0
  is found from what the processes print (see find_rank0).
- When a job exceeds runPolicy.backoffLimit (restart counts with OnFailure/Always/ExitCode, or a
  new failed pod when backoffLimit is 0) or runPolicy.activeDeadlineSeconds, the operator
  deletes all its pods and Services first and only then sets the Failed condition; on that
  path cleanPodPolicy is ignored (pkg/controller.v1/common/job.go, DeletePodsAndServices). The
  failing pod's exit code and log are then only known to whoever looked before (see
  container_failure) or, without a log, from the operator's events on the PyTorchJob
  ("Error pod <pod> container <c> exitCode: <n> terminated message: ...", "Pod: <ns>.<pod>
  exited with code <n>"; see events_failure).
"""

from __future__ import annotations

import datetime
import json
import re
import signal

GROUP = "kubeflow.org"
VERSION = "v1"
PLURAL = "pytorchjobs"
KIND = "PyTorchJob"
API_VERSION = GROUP + "/" + VERSION
CRD_NAME = PLURAL + "." + GROUP

LABEL_JOB_NAME = "training.kubeflow.org/job-name"
LABEL_REPLICA_TYPE = "training.kubeflow.org/replica-type"
LABEL_REPLICA_INDEX = "training.kubeflow.org/replica-index"
LABEL_JOB_ROLE = "training.kubeflow.org/job-role"
LABEL_OPERATOR_NAME = "training.kubeflow.org/operator-name"

# The operator requires the training container of every replica to be named "pytorch".
DEFAULT_CONTAINER = "pytorch"

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

TRAINER_RANK_RE = re.compile(
    r"trainfleet-rank:\s+rank=(?P<rank>\d+)\s+local_rank=(?P<local_rank>\d+)\s+"
    r"world_size=(?P<world_size>\d+)\s+group_rank=(?P<group_rank>\d+)"
    r"(?:\s+host=(?P<host>(?:(?!trainfleet-)\S)+))?")
TRAINER_RESULT_RE = re.compile(r"trainfleet-result:\s*(?P<json>\{.*\})\s*$")
# trainer/metrics.py resume_line: "trainfleet-resume: epoch=<k> next_epoch=<k+1> snapshot=<uri> restarts=<n>"
# (restarts= since the trainer counts them).
TRAINER_RESUME_RE = re.compile(
    r"trainfleet-resume:\s+epoch=(?P<epoch>\d+)\s+next_epoch=\d+\s+snapshot=\S+(?:\s+restarts=(?P<restarts>\d+))?")
# Fields parse_trainer_result always returns (null when the trainer did not say).
TRAINER_RESULT_INT_FIELDS = ("resumed_from_epoch", "restarts")
# torch.distributed.elastic agent (LOGLEVEL=INFO): "[default] Rendezvous complete for workers.
# Result:" followed by indented "key=value" lines (restart_count, master_addr, group_rank,
# group_world_size, local_ranks, role_ranks, global_ranks, ...).
TORCHRUN_RDZV_RE = re.compile(r"Rendezvous complete for workers")
TORCHRUN_GROUP_RANK_RE = re.compile(r"(?<![a-z_])group_rank=(?P<group_rank>\d+)")
TORCHRUN_GLOBAL_RANKS_RE = re.compile(r"global_ranks=\[(?P<ranks>[\d,\s]*)\]")
TORCHRUN_RESTART_RE = re.compile(r"restart_count=(?P<restart_count>\d+)")

# Where job.failure's pod, exit code and log tail come from.
FAILURE_SOURCE_LIVE = "live_pod"
FAILURE_SOURCE_SNAPSHOT = "snapshot"
FAILURE_SOURCE_EVENTS = "events"

# Events the operator records on the PyTorchJob (pkg/core/job.go RecordAbnormalPods,
# pkg/controller.v1/common/pod.go ReconcilePods).
EVENT_POD_TERMINATED_RE = re.compile(
    r"Error pod (?P<pod>\S+) container (?P<container>\S+) exitCode: (?P<exit_code>-?\d+)"
    r"(?: terminated message: ?(?P<message>.*))?", re.S)
EVENT_POD_WAITING_RE = re.compile(
    r"Error pod (?P<pod>\S+) container (?P<container>\S+) waiting message: ?(?P<message>.*)", re.S)
EVENT_POD_EXITED_RE = re.compile(
    r"Pod: (?P<namespace>[^.\s]+)\.(?P<pod>\S+) exited with code (?P<exit_code>-?\d+)")
# The replica type a Failed condition names: "PyTorchJob x is failed because 1 Master
# replica(s) failed." or 'job "x" is failing because "Master" replica(s) failed.'
CONDITION_REPLICA_RE = re.compile(r'(?:\d+\s+)?"?(?P<rtype>[A-Za-z]+)"?\s+replica\(s\) failed')
BACKOFF_RE = re.compile(r"backoff ?limit", re.I)
DEADLINE_RE = re.compile(r"deadline", re.I)

METHOD_TRAINER = "trainer-log"
METHOD_TORCHRUN = "torchrun-log"
METHOD_OUTPUT = "trainer-rank0-output"
METHOD_FALLBACK = "fallback-master-0"
# Lines only the trainer's global rank 0 prints, at the start of a line or after torchrun's
# "--tee" prefix "[default0]:" (other ranks prefix theirs with "[rank N] " under --verbose-ranks).
# They tell rank 0 when the head of a log, with its trainfleet-rank: line, is gone (the kubelet
# serves only the current file of a rotated log).
RANK0_OUTPUT_RE = re.compile(r"^(?:\[[A-Za-z_-]*\d+\]:)?trainfleet-(?:epoch|result|resume|stopped):")


# --------------------------------------------------------------------------- helpers


def _get(obj, *path, **kwargs):
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


def _to_int(value, default=None):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


# --------------------------------------------------------------------------- job status


def job_conditions(job):
    """status.conditions normalised to snake_case dicts, in the operator's order."""
    result = []
    for cond in _get(job, "status", "conditions", default=[]) or []:
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


def _is_true(cond):
    return str(cond.get("status", "")).lower() == "true"


def job_phase(job):
    """The job's phase from status.conditions.

    Failed and Succeeded win whenever they are true (the operator never clears them).
    Otherwise the latest true condition wins: the operator appends the newest condition at
    the end, and lastTransitionTime breaks ties when a list was reordered by a client.
    A job with no true condition yet (not reconciled) is Pending.
    """
    conds = [c for c in job_conditions(job) if _is_true(c) and c["type"] in CONDITION_TYPES]
    types = set(c["type"] for c in conds)
    if PHASE_FAILED in types:
        return PHASE_FAILED
    if PHASE_SUCCEEDED in types:
        return PHASE_SUCCEEDED
    if not conds:
        return PHASE_PENDING
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    best_pos, best_time, best_type = -1, epoch, None
    for pos, cond in enumerate(conds):
        when = parse_time(cond["last_transition_time"]) or parse_time(cond["last_update_time"]) or epoch
        if when > best_time or (when == best_time and pos > best_pos):
            best_pos, best_time, best_type = pos, when, cond["type"]
    return best_type


def is_terminal_phase(phase):
    return phase in TERMINAL_PHASES


def is_terminal(job):
    """True when the job Succeeded or Failed: both end a wait."""
    return is_terminal_phase(job_phase(job))


def phase_reached(job, wanted):
    """True when the job is at `wanted` or beyond it.

    `wanted` is "terminal" or a phase. A terminal job always ends a wait (a job that already
    finished has passed Running; a job that failed never will).
    """
    phase = job_phase(job)
    if is_terminal_phase(phase):
        return True
    if wanted in (None, "terminal"):
        return False
    if wanted == PHASE_CREATED:
        return phase != PHASE_PENDING
    return phase == wanted


def job_condition(job, ctype):
    for cond in job_conditions(job):
        if cond["type"] == ctype:
            return cond
    return None


def job_failure(job):
    """{reason, message} of the Failed condition, or None when the job did not fail."""
    if job_phase(job) != PHASE_FAILED:
        return None
    cond = None
    for item in job_conditions(job):
        if item["type"] == PHASE_FAILED and _is_true(item):
            cond = item
    return {"reason": cond.get("reason"), "message": cond.get("message")} if cond else None


def replica_specs(job):
    specs = _get(job, "spec", "pytorchReplicaSpecs", default={}) or {}
    result = {}
    for rtype, spec in specs.items():
        spec = spec or {}
        result[rtype] = {
            "replicas": _to_int(spec.get("replicas"), 1),
            "restart_policy": spec.get("restartPolicy"),
        }
    return result


def replica_statuses(job):
    """Per replica type (Master, Worker): replicas (spec), active, succeeded, failed."""
    specs = replica_specs(job)
    statuses = _get(job, "status", "replicaStatuses", default={}) or {}
    result = {}
    for rtype in sorted(set(specs) | set(statuses)):
        status = statuses.get(rtype) or {}
        result[rtype] = {
            "replicas": specs.get(rtype, {}).get("replicas"),
            "active": _to_int(status.get("active"), 0),
            "succeeded": _to_int(status.get("succeeded"), 0),
            "failed": _to_int(status.get("failed"), 0),
        }
    return result


def job_times(job, now=None):
    """start_time, completion_time (RFC3339), duration_seconds (only when finished) and
    elapsed_seconds (start to completion, or to now while the job is not finished)."""
    start = parse_time(_get(job, "status", "startTime"))
    end = parse_time(_get(job, "status", "completionTime"))
    phase = job_phase(job)
    if end is None and is_terminal_phase(phase):
        # Failed jobs do not always get completionTime: use the terminal condition's time.
        cond = job_condition(job, phase)
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


# --------------------------------------------------------------------------- pods


def pod_label_selector(job_name, replica_type=None, replica_index=None):
    """Label selector for the pods the operator created for a job."""
    parts = ["%s=%s" % (LABEL_JOB_NAME, job_name)]
    if replica_type is not None:
        parts.append("%s=%s" % (LABEL_REPLICA_TYPE, str(replica_type).lower()))
    if replica_index is not None:
        parts.append("%s=%s" % (LABEL_REPLICA_INDEX, replica_index))
    return ",".join(parts)


def pod_belongs_to_job(pod, job_name):
    """Labels must name the job; owner references, when present, must point at a PyTorchJob
    of that name (another job kind with the same name shares the job-name label)."""
    labels = _get(pod, "metadata", "labels", default={}) or {}
    if labels.get(LABEL_JOB_NAME) != job_name:
        return False
    owners = _get(pod, "metadata", "ownerReferences", default=[]) or []
    controllers = [o for o in owners if o.get("controller")]
    if not controllers:
        return True
    return any(o.get("kind") == KIND and o.get("name") == job_name for o in controllers)


def _container_entry(status, init):
    state = status.get("state") or {}
    last = status.get("lastState") or {}
    entry = {
        "name": status.get("name"),
        "init": init,
        "ready": bool(status.get("ready")),
        "restarts": _to_int(status.get("restartCount"), 0),
        "state": None,
        "reason": None,
        "message": None,
        "exit_code": None,
        "started_at": None,
        "finished_at": None,
        "last_reason": None,
        "last_exit_code": None,
        "last_finished_at": None,
    }
    for key in ("waiting", "running", "terminated"):
        if state.get(key) is not None:
            entry["state"] = key
            detail = state.get(key) or {}
            entry["reason"] = detail.get("reason")
            entry["message"] = detail.get("message")
            entry["exit_code"] = _to_int(detail.get("exitCode"))
            entry["started_at"] = detail.get("startedAt")
            entry["finished_at"] = detail.get("finishedAt")
            break
    last_term = last.get("terminated") or None
    if last_term:
        entry["last_reason"] = last_term.get("reason")
        entry["last_exit_code"] = _to_int(last_term.get("exitCode"))
        entry["last_finished_at"] = last_term.get("finishedAt")
    return entry


def _container_problem(entry):
    """(reason, exit_code) when a container shows a problem, else None."""
    if entry["state"] == "waiting" and entry["reason"] and entry["reason"] not in BENIGN_WAITING_REASONS:
        exit_code = entry["last_exit_code"] if entry["last_exit_code"] is not None else None
        return entry["reason"], exit_code
    if entry["state"] == "terminated" and entry["exit_code"] not in (None, 0):
        return entry["reason"] or "Error", entry["exit_code"]
    return None


def _pod_identity(pod):
    """Which pod this is: name, namespace, replica type and index (the operator's labels), node."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "replica_type": labels.get(LABEL_REPLICA_TYPE),
        "replica_index": _to_int(labels.get(LABEL_REPLICA_INDEX)),
        "node": (pod.get("spec") or {}).get("nodeName"),
    }


def pod_summary(pod):
    """name, replica type/index, node, phase, restarts, reason, exit_code, containers."""
    status = pod.get("status") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    init = [_container_entry(s, True) for s in status.get("initContainerStatuses") or []]
    main = [_container_entry(s, False) for s in status.get("containerStatuses") or []]
    containers = init + main

    reason = container = exit_code = None
    # 1. a container stuck waiting (ImagePullBackOff, CrashLoopBackOff, ...) or one that
    #    terminated non-zero (Error, OOMKilled); main containers first, then init ones.
    for entry in main + init:
        problem = _container_problem(entry)
        if problem:
            reason, exit_code = problem
            container = entry["name"]
            break
    # 2. pod-level reason (Evicted, DeadlineExceeded, ...)
    if reason is None and status.get("reason"):
        reason = status.get("reason")
    # 3. a clean exit of the main container
    if reason is None:
        for entry in main:
            if entry["state"] == "terminated":
                reason, exit_code, container = entry["reason"] or "Completed", entry["exit_code"], entry["name"]
                break
    # 4. the last restart's reason (e.g. OOMKilled on a container running again)
    last_reason = last_exit_code = None
    for entry in main:
        if entry["last_reason"]:
            last_reason, last_exit_code = entry["last_reason"], entry["last_exit_code"]
            break

    summary = _pod_identity(pod)
    summary.update({
        "job_role": labels.get(LABEL_JOB_ROLE),
        "phase": status.get("phase"),
        "pod_ip": status.get("podIP"),
        "start_time": status.get("startTime"),
        "restarts": sum(e["restarts"] for e in main),
        "ready": bool(main) and all(e["ready"] for e in main),
        "reason": reason,
        "message": status.get("message"),
        "container": container,
        "exit_code": exit_code,
        "last_reason": last_reason,
        "last_exit_code": last_exit_code,
        "containers": containers,
    })
    return summary


def replica_sort_key(summary):
    rtype = summary.get("replica_type") or ""
    # master first, then worker, then anything else; then by index
    order = {"master": 0, "worker": 1}.get(rtype, 2)
    index = summary.get("replica_index")
    return (order, rtype, index if index is not None else 1 << 30, summary.get("name") or "")


def sort_pod_summaries(summaries):
    return sorted(summaries, key=replica_sort_key)


def pod_has_fatal_reason(summary, reasons=DEFAULT_FATAL_WAITING_REASONS):
    """True when any container of the pod waits for one of `reasons`."""
    for entry in summary.get("containers") or []:
        if entry["state"] == "waiting" and entry["reason"] in reasons:
            return True
    return False


def failing_pod(summaries):
    """The pod that most likely caused a failure, with its failing container.

    Preference: the earliest non-zero termination of a training container (the first
    failure; the others are usually killed as a consequence), then a container waiting on a
    problem (ImagePullBackOff, CrashLoopBackOff, ...), then an earlier crash seen in
    lastState, then a pod-level reason. Returns (summary, container entry) or (None, None).
    """
    terminated = []
    waiting = []
    restarted = []
    pod_level = []
    for summary in summaries:
        for entry in summary.get("containers") or []:
            if entry["state"] == "terminated" and entry["exit_code"] not in (None, 0):
                terminated.append((parse_time(entry["finished_at"]) or utcnow(), not entry["init"],
                                   summary, entry))
            elif entry["state"] == "waiting" and entry["reason"] and \
                    entry["reason"] not in BENIGN_WAITING_REASONS:
                waiting.append((summary, entry))
            elif entry["last_exit_code"] not in (None, 0):
                restarted.append((parse_time(entry["last_finished_at"]) or utcnow(), summary, entry))
        if summary.get("phase") == "Failed" and summary.get("reason"):
            pod_level.append(summary)
    if terminated:
        terminated.sort(key=lambda item: (item[0], not item[1]))
        return terminated[0][2], terminated[0][3]
    if waiting:
        return waiting[0]
    if restarted:
        restarted.sort(key=lambda item: item[0])
        return restarted[0][1], restarted[0][2]
    if pod_level:
        return pod_level[0], None
    return None, None


def exit_signal(exit_code, signal_number=None):
    """(number, name) of the signal that ended a container, else (None, None).

    terminated.signal when the runtime reports it, else the shell convention the container
    runtimes follow: exit code 128+N means killed by signal N (137 SIGKILL, 143 SIGTERM).
    """
    number = _to_int(signal_number)
    if number is None:
        code = _to_int(exit_code)
        if code is not None and 128 < code < 128 + 65:
            number = code - 128
    if number is None or number <= 0:
        return None, None
    try:
        return number, signal.Signals(number).name
    except ValueError:
        return number, None


def _restart_entry(pod, cstatus, init, terminated, current):
    identity = _pod_identity(pod)
    number, name = exit_signal(terminated.get("exitCode"), terminated.get("signal"))
    entry = {
        "pod": identity["name"],
        "replica_type": identity["replica_type"],
        "replica_index": identity["replica_index"],
        "node": identity["node"],
        "container": cstatus.get("name") if cstatus else None,
        "init": init,
        "restarts": _to_int((cstatus or {}).get("restartCount"), 0),
        "run": "current" if current else "previous",
        "reason": terminated.get("reason") or ("Error" if _to_int(terminated.get("exitCode")) not in (None, 0) else None),
        "exit_code": _to_int(terminated.get("exitCode")),
        "signal": number,
        "signal_name": name,
        "message": terminated.get("message"),
        "started_at": terminated.get("startedAt"),
        "finished_at": terminated.get("finishedAt"),
        "observed_at": None,
    }
    return entry


def pod_restart_reasons(pod):
    """Why a pod's containers restarted or died, from its raw status.

    One entry per container whose previous run ended (lastState.terminated: the kubelet keeps only
    the last one, `restarts` says how many there were), one per container that is terminated now
    with a non-zero exit code, and one for a pod that failed as a whole (Evicted, NodeLost, ...)
    with no such container. Each: pod, replica_type, replica_index, node, container, init,
    restarts, run (previous or current), reason, exit_code, signal, signal_name, message,
    started_at, finished_at.
    """
    status = pod.get("status") or {}
    entries = []
    for statuses, init in ((status.get("containerStatuses"), False), (status.get("initContainerStatuses"), True)):
        for cstatus in statuses or []:
            last = (cstatus.get("lastState") or {}).get("terminated")
            if last:
                entries.append(_restart_entry(pod, cstatus, init, last, current=False))
            now = (cstatus.get("state") or {}).get("terminated")
            if _failed_run(now):
                entries.append(_restart_entry(pod, cstatus, init, now, current=True))
    if not entries and status.get("phase") == "Failed" and status.get("reason"):
        entry = _restart_entry(pod, None, False, {"reason": status.get("reason"), "message": status.get("message")},
                               current=True)
        entries.append(entry)
    return entries


def _sort_restart_reasons(entries):
    far = datetime.datetime.max.replace(tzinfo=datetime.timezone.utc)
    entries.sort(key=lambda e: (parse_time(e["finished_at"]) or far, e["pod"] or "", e["container"] or ""))
    return entries


def restart_reason_key(entry):
    """What makes two restart_reasons entries the same ended run (a failed current run becomes
    the previous run after the restart)."""
    return (entry.get("pod"), entry.get("container"), entry.get("finished_at"), entry.get("reason"))


def restart_reasons(pods):
    """pod_restart_reasons of every pod (raw dicts), oldest end first (unknown times last)."""
    entries = []
    for pod in pods or []:
        entries.extend(pod_restart_reasons(pod))
    return _sort_restart_reasons(entries)


def merge_restart_reasons(live, recorded):
    """live restart_reasons plus the runs recorded while waiting that the live pods no longer show
    (the pod was deleted, evicted or replaced since; its entry keeps observed_at), oldest end first."""
    seen = set(restart_reason_key(e) for e in live or [])
    merged = list(live or [])
    for entry in recorded or []:
        key = restart_reason_key(entry)
        if key not in seen:
            seen.add(key)
            merged.append(dict(entry))
    return _sort_restart_reasons(merged)


def restarts_by_replica(job, summaries):
    """Per replica type as the spec writes it (Master, Worker): restarts (container restarts summed
    over its pods), failed (status.replicaStatuses) and pods ({pod name: restarts})."""
    statuses = replica_statuses(job)
    by_lower = dict((rtype.lower(), rtype) for rtype in statuses)
    result = dict((rtype, {"restarts": 0, "failed": status["failed"], "pods": {}}) for rtype, status in statuses.items())
    for summary in summaries:
        lower = (summary.get("replica_type") or "").lower()
        rtype = by_lower.get(lower) or (lower.capitalize() if lower else "Unknown")
        entry = result.setdefault(rtype, {"restarts": 0, "failed": 0, "pods": {}})
        entry["restarts"] += summary["restarts"]
        entry["pods"][summary["name"]] = summary["restarts"]
    return result


# Codes of lost_pod_risks, the reasons a job cannot survive the loss of one pod (or its node).
RISK_STATIC_RENDEZVOUS = "static-rendezvous"
RISK_RESTART_NEVER = "restart-policy-never"
RISK_RESTART_EXIT_CODE = "restart-policy-exit-code"
RISK_BACKOFF_LIMIT = "backoff-limit"
RISK_ELASTIC_NO_RESTARTS = "elastic-max-restarts"
RISK_ELASTIC_NO_SLACK = "elastic-min-equals-replicas"
RISK_NO_SNAPSHOTS = "no-snapshots"


def _trainer_args(spec):
    containers = _get(spec, "template", "spec", "containers", default=[]) or []
    main = ([c for c in containers if c.get("name") == DEFAULT_CONTAINER] or containers or [{}])[0]
    return [str(a) for a in (main.get("command") or []) + (main.get("args") or [])]


def lost_pod_risks(manifest):
    """Why a PyTorchJob manifest cannot survive the loss of one pod (a deleted pod, a lost node).

    Returns a list of {code, message}; empty when one lost pod is survivable: an elasticPolicy
    (c10d rendezvous: the survivors re-rendezvous with the replacement pod) that may restart,
    a restart policy that restarts a survivor whatever its exit code (OnFailure, Always), a
    backoffLimit above the restarts a lost pod costs, and snapshots to resume from (otherwise
    a restart trains from epoch 1 again).
    """
    spec = manifest.get("spec") or {}
    replicas = spec.get("pytorchReplicaSpecs") or {}
    run_policy = spec.get("runPolicy") or {}
    elastic = spec.get("elasticPolicy")
    pods = sum(_to_int((r or {}).get("replicas"), 1) for r in replicas.values())
    risks = []
    if elastic is None and "Master" in replicas and pods > 1:
        risks.append({"code": RISK_STATIC_RENDEZVOUS, "message": (
            "static rendezvous (Master + %d Worker(s), no elasticPolicy): when one pod is lost the others fail on "
            "the broken collective or wait in it until their timeout, and the restarted pods cannot re-rendezvous "
            "with a replacement reliably; set pytorchjob_elastic: true (c10d rendezvous, Workers only)"
            % (pods - 1))})
    never = sorted(rtype for rtype, r in replicas.items() if (r or {}).get("restartPolicy") == "Never")
    if never:
        risks.append({"code": RISK_RESTART_NEVER, "message": (
            "restartPolicy Never (%s): a pod that dies is not restarted and the job fails; use OnFailure or "
            "ExitCode (pytorchjob_restart_policy)" % ", ".join(never))})
    exit_code = sorted(rtype for rtype, r in replicas.items() if (r or {}).get("restartPolicy") == "ExitCode")
    if exit_code and pods > 1:
        risks.append({"code": RISK_RESTART_EXIT_CODE, "message": (
            "restartPolicy ExitCode (%s) with %d pods: when a peer is lost, a surviving pod's torchrun gives up "
            "with exit code 1 once its restarts fail, which ExitCode takes for a permanent error, and the job "
            "fails; use OnFailure (pytorchjob_restart_policy)" % (", ".join(exit_code), pods))})
    backoff = _to_int(run_policy.get("backoffLimit"))
    if backoff is not None and not never and backoff < pods:
        risks.append({"code": RISK_BACKOFF_LIMIT, "message": (
            "backoffLimit %d is below the job's %d pods: losing one pod can cost a restart of each of them, and "
            "the operator then fails the job and deletes its pods; raise pytorchjob_backoff_limit to %d or more"
            % (backoff, pods, pods))})
    if elastic is not None:
        if _to_int(elastic.get("maxRestarts"), 0) < 1:
            risks.append({"code": RISK_ELASTIC_NO_RESTARTS, "message": (
                "elasticPolicy.maxRestarts is %s: torchrun gives up at the first lost peer; set "
                "pytorchjob_elastic_max_restarts to 1 or more" % elastic.get("maxRestarts", "unset"))})
        workers = _to_int((replicas.get("Worker") or {}).get("replicas"), 1)
        if _to_int(elastic.get("minReplicas"), 1) >= workers > 1:
            risks.append({"code": RISK_ELASTIC_NO_SLACK, "message": (
                "elasticPolicy.minReplicas %s equals the %d Workers: the survivors of a lost pod wait for its "
                "replacement (it may never come when a node is lost) instead of going on with fewer; set "
                "pytorchjob_elastic_min_replicas below pytorchjob_worker_replicas"
                % (elastic.get("minReplicas"), workers))})
    args = []
    for rspec in replicas.values():
        args.extend(_trainer_args(rspec or {}))
    uses_trainer = any(a.startswith("trainer.") or "trainer.train" in a for a in args)
    if uses_trainer and not any(a == "--snapshot-dir" or a.startswith("--snapshot-dir=") for a in args):
        risks.append({"code": RISK_NO_SNAPSHOTS, "message": (
            "no --snapshot-dir: a restarted pod trains from epoch 1 again; set pytorchjob_trainer_snapshot_dir "
            "(an s3:// prefix or a shared volume)")})
    return risks


def job_summary(job, pods=None, now=None):
    """Everything pytorchjob_info returns for one job (pods: raw pod dicts)."""
    meta = job.get("metadata") or {}
    name = meta.get("name")
    phase = job_phase(job)
    summaries = sort_pod_summaries(
        [pod_summary(p) for p in (pods or []) if pod_belongs_to_job(p, name)])
    result = {
        "name": name,
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "creation_timestamp": meta.get("creationTimestamp"),
        "labels": meta.get("labels") or {},
        "phase": phase,
        "terminal": is_terminal_phase(phase),
        "conditions": job_conditions(job),
        "replica_statuses": replica_statuses(job),
        "restarts": sum(s["restarts"] for s in summaries),
        "restarts_by_replica": restarts_by_replica(job, summaries),
        "restart_reasons": restart_reasons([p for p in (pods or []) if pod_belongs_to_job(p, name)]),
        "pods": summaries,
        "failure": None,
    }
    result.update(job_times(job, now=now))
    condition = job_failure(job)
    if condition:
        failure = new_failure(condition["reason"], condition["message"])
        pod, container = failing_pod(summaries)
        if pod:
            failure.update({
                "source": FAILURE_SOURCE_LIVE,
                "pod": pod["name"],
                "replica_type": pod.get("replica_type"),
                "replica_index": pod.get("replica_index"),
                "node": pod.get("node"),
                "container": container["name"] if container else pod.get("container"),
                "container_reason": container["reason"] if container else pod.get("reason"),
                "container_message": container["message"] if container else pod.get("message"),
                "exit_code": (container["exit_code"] if container and container["exit_code"] is not None
                              else (container or {}).get("last_exit_code")),
            })
        result["failure"] = failure
    return result


def new_failure(reason=None, message=None):
    """The shape of job.failure: every key present, nothing known yet."""
    return {
        "reason": reason,
        "message": message,
        "source": None,
        "pod": None,
        "replica_type": None,
        "replica_index": None,
        "node": None,
        "container": None,
        "container_reason": None,
        "container_message": None,
        "exit_code": None,
        "observed_at": None,
        "log_tail": [],
        "events": [],
        "hint": None,
    }


def pods_with_problems(summaries, reasons=DEFAULT_FATAL_WAITING_REASONS):
    return [s for s in summaries if pod_has_fatal_reason(s, reasons)]


# --------------------------------------------------------------------------- failure evidence


def _failed_run(terminated):
    return bool(terminated) and _to_int(terminated.get("exitCode")) not in (None, 0)


def container_failure(pod):
    """The failed run a pod shows, or None: what to record before the operator deletes it.

    The first container (main containers first, then init containers) that terminated with a
    non-zero exit code, or that runs again or waits (CrashLoopBackOff) after one
    (lastState.terminated). `previous` is True in the second case: the failed run is the
    container's previous one, so its log is read with previous=True.
    """
    status = pod.get("status") or {}
    entries = [(s, False) for s in status.get("containerStatuses") or []] + \
        [(s, True) for s in status.get("initContainerStatuses") or []]
    for cstatus, init in entries:
        state = cstatus.get("state") or {}
        terminated, previous = state.get("terminated"), False
        if not _failed_run(terminated):
            terminated, previous = (cstatus.get("lastState") or {}).get("terminated"), True
            if not _failed_run(terminated):
                continue
        failure = _pod_identity(pod)
        failure["pod"] = failure.pop("name")
        failure.update({
            "container": cstatus.get("name"),
            "init": init,
            "exit_code": _to_int(terminated.get("exitCode")),
            "reason": terminated.get("reason") or "Error",
            "message": terminated.get("message"),
            "finished_at": terminated.get("finishedAt"),
            "restarts": _to_int(cstatus.get("restartCount"), 0),
            "previous": previous,
        })
        return failure
    return None


def failed_replica_type(job):
    """The replica type (lower case) the Failed condition names, or None."""
    condition = job_failure(job) or {}
    match = CONDITION_REPLICA_RE.search(condition.get("message") or "")
    return match.group("rtype").lower() if match else None


def choose_snapshot(snapshots, job):
    """Of the failures recorded while waiting (oldest first), the one of the replica type the
    Failed condition names, else the first one (the first failure is usually the cause; the
    others tend to follow from it)."""
    snapshots = [s for s in snapshots or [] if s]
    if not snapshots:
        return None
    rtype = failed_replica_type(job)
    if rtype:
        for snapshot in snapshots:
            if snapshot.get("replica_type") == rtype:
                return snapshot
    return snapshots[0]


def replica_pod_names(job):
    """The pod names the operator gives a job's replicas: <job>-<type>-<index>."""
    name = (job.get("metadata") or {}).get("name")
    names = []
    for rtype, spec in sorted(replica_specs(job).items()):
        for index in range(max(0, spec["replicas"] or 0)):
            names.append("%s-%s-%d" % (name, str(rtype).lower(), index))
    return names


def events_failure(events, job_name):
    """What the operator's events on the PyTorchJob say about the failing pod, or None.

    The earliest non-zero exit ("Error pod <pod> container <c> exitCode: <n> terminated
    message: <m>", reason Error/OOMKilled, or "Pod: <ns>.<pod> exited with code <n>"), completed
    from the other events about the same pod; without any exit, a container the operator saw
    waiting on a problem ("Error pod <pod> container <c> waiting message: <m>").
    Returns {pod, container, exit_code, container_reason, container_message, time}.
    """
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    exits, waits = [], []
    for event in events or []:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        if involved.get("kind") != KIND or involved.get("name") != job_name:
            continue
        summary = event_summary(event)
        text = summary["message"] or ""
        first = event.get("firstTimestamp") or event.get("eventTime") or summary["time"]
        when = parse_time(first) or epoch
        match = EVENT_POD_TERMINATED_RE.search(text)
        if match and _to_int(match.group("exit_code")) not in (None, 0):
            exits.append((when, 0, {
                "pod": match.group("pod"), "container": match.group("container"),
                "exit_code": _to_int(match.group("exit_code")),
                "container_reason": summary["reason"],
                "container_message": (match.group("message") or "").strip() or None,
                "time": first}))
            continue
        match = EVENT_POD_EXITED_RE.search(text)
        if match and _to_int(match.group("exit_code")) not in (None, 0):
            exits.append((when, 1, {
                "pod": match.group("pod"), "container": DEFAULT_CONTAINER,
                "exit_code": _to_int(match.group("exit_code")),
                "container_reason": None, "container_message": None, "time": first}))
            continue
        match = EVENT_POD_WAITING_RE.search(text)
        if match:
            waits.append((when, 2, {
                "pod": match.group("pod"), "container": match.group("container"),
                "exit_code": None, "container_reason": summary["reason"],
                "container_message": (match.group("message") or "").strip() or None,
                "time": first}))
    candidates = sorted(exits, key=lambda c: (c[0], c[1])) or sorted(waits, key=lambda c: (c[0], c[1]))
    if not candidates:
        return None
    best = dict(candidates[0][2])
    for _when, _kind, other in sorted(exits + waits, key=lambda c: (c[1], c[0])):
        if other["pod"] != best["pod"]:
            continue
        for key in ("exit_code", "container_reason", "container_message"):
            if best.get(key) is None and other.get(key) is not None:
                best[key] = other[key]
    return best


def pods_gone_hint(job, pod=None, have_log=False):
    """Why the failing pod is gone, what job.failure is based on instead, and how to keep the
    pods next time."""
    condition = job_failure(job) or {}
    text = " ".join(x for x in (condition.get("reason"), condition.get("message")) if x)
    run_policy = _get(job, "spec", "runPolicy", default={}) or {}
    if BACKOFF_RE.search(text):
        cause = ("The training operator deleted the job's pods, and their logs, when the job exceeded "
                 "runPolicy.backoffLimit (%s); on that path it deletes them whatever cleanPodPolicy says"
                 % run_policy.get("backoffLimit", "unset"))
        keep = ("To keep the failing pod and its log next time, run with restartPolicy Never (or ExitCode, "
                "for exit codes the operator does not retry), runPolicy.backoffLimit 1 or more and "
                "runPolicy.cleanPodPolicy None; with OnFailure a larger backoffLimit only allows more "
                "restarts before the pods are deleted.")
    elif DEADLINE_RE.search(text):
        cause = ("The training operator deleted the job's pods, and their logs, when the job exceeded "
                 "runPolicy.activeDeadlineSeconds (%s); on that path it deletes them whatever "
                 "cleanPodPolicy says" % run_policy.get("activeDeadlineSeconds", "unset"))
        keep = "Raise runPolicy.activeDeadlineSeconds to let the job finish."
    else:
        cause = ("The job's pods no longer exist (runPolicy.cleanPodPolicy is %s: unless it is None the "
                 "operator deletes the pods of a finished job; they may also have been deleted by hand)"
                 % run_policy.get("cleanPodPolicy", "unset"))
        keep = "Set runPolicy.cleanPodPolicy None to keep them."
    if have_log:
        known = ("; pod %s was recorded while waiting, before it was deleted, so its exit code and log "
                 "tail come from that snapshot." % pod)
    elif pod:
        known = ("; no log is available, pod %s and its exit code come from the operator's events."
                 % pod)
    else:
        known = "; no log is available, and the operator's events name no failing pod."
    return "%s%s %s" % (cause, known, keep)


def complete_failure(failure, job, snapshots=None, events=None, live_pods=()):
    """Fill job.failure when the live pods name no failing pod.

    failure: job_summary()'s failure; snapshots: container_failure() records taken while
    waiting, each with observed_at, log_tail and maybe log_error; events: the raw events of
    the job (and its pods); live_pods: the names of the pods that still exist.
    Uses the chosen snapshot, else the operator's events, and says in `hint` that (and why)
    the pods are gone. Returns failure.
    """
    if failure.get("pod"):
        return failure
    name = (job.get("metadata") or {}).get("name")
    live_pods = set(live_pods or ())
    snapshot = choose_snapshot(snapshots, job)
    if snapshot:
        failure.update({
            "source": FAILURE_SOURCE_SNAPSHOT,
            "pod": snapshot["pod"],
            "replica_type": snapshot.get("replica_type"),
            "replica_index": snapshot.get("replica_index"),
            "node": snapshot.get("node"),
            "container": snapshot.get("container"),
            "container_reason": snapshot.get("reason"),
            "container_message": snapshot.get("message"),
            "exit_code": snapshot.get("exit_code"),
            "observed_at": snapshot.get("observed_at"),
            "log_tail": list(snapshot.get("log_tail") or []),
        })
        if snapshot.get("log_error"):
            failure["log_error"] = snapshot["log_error"]
        if snapshot["pod"] not in live_pods:
            failure["hint"] = pods_gone_hint(job, snapshot["pod"], have_log=bool(failure["log_tail"]))
        return failure
    found = events_failure(events, name)
    if found:
        failure.update({
            "source": FAILURE_SOURCE_EVENTS,
            "pod": found["pod"],
            "container": found["container"],
            "container_reason": found["container_reason"],
            "container_message": found["container_message"],
            "exit_code": found["exit_code"],
        })
        match = re.match(r"^%s-(?P<rtype>[a-z]+)-(?P<index>\d+)$" % re.escape(name or ""), found["pod"])
        if match:
            failure["replica_type"] = match.group("rtype")
            failure["replica_index"] = int(match.group("index"))
    if not live_pods or (found and found["pod"] not in live_pods):
        failure["hint"] = pods_gone_hint(job, found["pod"] if found else None)
    return failure


# --------------------------------------------------------------------------- events


def event_summary(event):
    involved = event.get("involvedObject") or event.get("regarding") or {}
    meta = event.get("metadata") or {}
    when = (event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
            or meta.get("creationTimestamp"))
    return {
        "time": when,
        "type": event.get("type"),
        "reason": event.get("reason"),
        "object": "%s/%s" % (involved.get("kind"), involved.get("name")),
        "message": event.get("message") or event.get("note"),
        "count": _to_int(event.get("count") or _get(event, "series", "count"), 1),
    }


def recent_events(events, limit=20):
    """Event summaries, oldest first, the last `limit` of them."""
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    summaries = [event_summary(e) for e in events or []]
    summaries.sort(key=lambda e: parse_time(e["time"]) or epoch)
    return summaries[-limit:] if limit else summaries


# --------------------------------------------------------------------------- rank 0


def parse_rank_lines(lines):
    """What one pod's log says about ranks.

    Returns a dict:
      trainer: from `trainfleet-rank:` lines of the latest round (the last world size and
        group rank printed): ranks (sorted global ranks), group_rank, world_size, hosts;
        None when no such line.
      torchrun: from the elastic agent's latest "Rendezvous complete" block: group_rank,
        global_ranks, restart_count; None when not found.
      rank0_output: True when a line starts with what only global rank 0 prints
        (RANK0_OUTPUT_RE: epoch, result, resume and stopped lines).
    The latest round counts because an elastic restart re-runs the rendezvous and may hand
    out different ranks.
    """
    trainer_lines = []
    torchrun = None
    in_block = False
    block = None
    rank0_output = False
    for line in lines:
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        if RANK0_OUTPUT_RE.match(line):
            rank0_output = True
            continue
        # finditer: older trainers (print under PYTHONUNBUFFERED) could tear two ranks' lines into one
        # ("trainfleet-rank: rank=0 ...trainfleet-rank: rank=1 ...")
        matches = [match.groupdict() for match in TRAINER_RANK_RE.finditer(line)]
        if matches:
            trainer_lines.extend(matches)
            continue
        if TORCHRUN_RDZV_RE.search(line):
            in_block = True
            block = {"group_rank": None, "global_ranks": None, "restart_count": None}
            # the agent may print the block on one line when a handler joins it
            _torchrun_fields(line, block)
            continue
        if in_block:
            if _torchrun_fields(line, block):
                if block["group_rank"] is not None:
                    torchrun = dict(block)
                continue
            if block["group_rank"] is not None:
                torchrun = dict(block)
            in_block = False
        elif "group_rank=" in line and "trainfleet-" not in line:
            # any other torchrun line that reveals the node's group rank
            single = {"group_rank": None, "global_ranks": None, "restart_count": None}
            if _torchrun_fields(line, single) and single["group_rank"] is not None:
                torchrun = single
    if in_block and block and block["group_rank"] is not None:
        torchrun = dict(block)

    trainer = None
    if trainer_lines:
        last = trainer_lines[-1]
        world, group = last["world_size"], last["group_rank"]
        same_round = [t for t in trainer_lines if t["world_size"] == world and t["group_rank"] == group]
        trainer = {
            "ranks": sorted(set(int(t["rank"]) for t in same_round)),
            "group_rank": int(group),
            "world_size": int(world),
            "hosts": sorted(set(t["host"] for t in same_round if t.get("host"))),
        }
    return {"trainer": trainer, "torchrun": torchrun, "rank0_output": rank0_output}


def says_nothing(info):
    """True when parse_rank_lines found no word about ranks."""
    return not (info.get("trainer") or info.get("torchrun") or info.get("rank0_output"))


def _torchrun_fields(line, block):
    found = False
    match = TORCHRUN_GROUP_RANK_RE.search(line)
    if match:
        block["group_rank"] = int(match.group("group_rank"))
        found = True
    match = TORCHRUN_GLOBAL_RANKS_RE.search(line)
    if match:
        block["global_ranks"] = [int(x) for x in re.findall(r"\d+", match.group("ranks"))]
        found = True
    match = TORCHRUN_RESTART_RE.search(line)
    if match:
        block["restart_count"] = int(match.group("restart_count"))
        found = True
    if not found and re.match(r"^\s*(\[[^\]]*\]\s*)?\s*[a-z_]+=", line):
        # other key=value lines of the block (master_addr=, local_ranks=, ...)
        found = True
    return found


def pod_ranks(info):
    """(ranks, group_rank, source) for one pod from parse_rank_lines' result."""
    if info.get("trainer"):
        return info["trainer"]["ranks"], info["trainer"]["group_rank"], METHOD_TRAINER
    if info.get("torchrun"):
        tr = info["torchrun"]
        return tr.get("global_ranks") or [], tr.get("group_rank"), METHOD_TORCHRUN
    if info.get("rank0_output"):
        return [0], None, METHOD_OUTPUT
    return [], None, None


def _holds_rank(info, rank, method):
    if method == METHOD_TRAINER:
        data = info.get("trainer")
        if not data:
            return False
        return rank in data["ranks"] or (rank == 0 and data["group_rank"] == 0)
    if method == METHOD_OUTPUT:
        return rank == 0 and bool(info.get("rank0_output"))
    data = info.get("torchrun")
    if not data:
        return False
    if data.get("global_ranks"):
        return rank in data["global_ranks"]
    # without global ranks, global rank 0 always lives on group rank 0
    return rank == 0 and data.get("group_rank") == 0


def _pod_started(summary):
    latest = None
    for entry in summary.get("containers") or []:
        when = parse_time(entry.get("started_at"))
        if when and (latest is None or when > latest):
            latest = when
    return latest or parse_time(summary.get("start_time"))


def fallback_rank0_pod(summaries):
    """master-0 (job-role=master), else the lowest-index worker."""
    ordered = sort_pod_summaries(summaries)
    for summary in ordered:
        if summary.get("job_role") == "master" or summary.get("replica_type") == "master":
            if summary.get("replica_index") in (0, None):
                return summary
    return ordered[0] if ordered else None


def find_rank0(summaries, rank_infos):
    """Pick the pod that ran global rank 0.

    summaries: pod summaries; rank_infos: {pod name: parse_rank_lines(...)}.
    Decides by the trainer's own rank lines first, then torchrun's rendezvous result, then the
    trainer's rank-0-only lines (epoch/result: the head of a rotated log is gone), then falls
    back to master-0. When several pods claim rank 0 (stale logs from before an elastic
    restart), the most recently started one wins.
    Returns {"pod": summary or None, "method": ..., "candidates": [names]}.
    """
    for method in (METHOD_TRAINER, METHOD_TORCHRUN, METHOD_OUTPUT):
        candidates = [s for s in summaries
                      if _holds_rank(rank_infos.get(s["name"]) or {}, 0, method)]
        if candidates:
            epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
            candidates.sort(key=lambda s: (_pod_started(s) or epoch, s["name"]), reverse=True)
            return {"pod": candidates[0], "method": method,
                    "candidates": sorted(s["name"] for s in candidates)}
    pod = fallback_rank0_pod(summaries)
    return {"pod": pod, "method": METHOD_FALLBACK if pod else None,
            "candidates": [pod["name"]] if pod else []}


def parse_trainer_result(lines):
    """The JSON of the last `trainfleet-result:` line, or None.

    resumed_from_epoch (the epoch of the snapshot the run resumed from, 0 when it started fresh)
    and restarts (torchrun's restarts of the worker group on rank 0's node) are always present
    as int or None: trainers that predate them still print a `trainfleet-resume:` line when they
    resume, and its epoch (and restarts=, when printed) fill them in.
    """
    result = None
    resume = None
    for line in lines:
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        match = TRAINER_RESUME_RE.search(line)
        if match:
            resume = {"resumed_from_epoch": int(match.group("epoch")),
                      "restarts": _to_int(match.group("restarts"))}
            continue
        match = TRAINER_RESULT_RE.search(line)
        if match:
            try:
                value = json.loads(match.group("json"))
            except ValueError:
                continue
            if isinstance(value, dict):
                result = value
    if result is None:
        return None
    for key in TRAINER_RESULT_INT_FIELDS:
        value = _to_int(result.get(key))
        if value is None and resume is not None:
            value = resume[key]
        result[key] = value
    return result


def log_file_name(summary, ranks):
    """<replica type>-<index>-rank<R>.log (ranks<A>-<B> for several, rank-unknown when
    nothing said)."""
    rtype = summary.get("replica_type") or "pod"
    index = summary.get("replica_index")
    base = "%s-%s" % (rtype, index if index is not None else summary.get("name"))
    if not ranks:
        tag = "rank-unknown"
    elif len(ranks) == 1:
        tag = "rank%d" % ranks[0]
    else:
        tag = "ranks%d-%d" % (min(ranks), max(ranks))
    return re.sub(r"[^A-Za-z0-9_.-]", "_", "%s-%s.log" % (base, tag))


# --------------------------------------------------------------------------- matching log lines

# A log line read with timestamps (the kubelet's RFC 3339 time, with up to nanoseconds, a space,
# then the line as the container wrote it).
LOG_TIMESTAMP_RE = re.compile(r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) (?P<text>.*)$", re.S)


def split_log_timestamp(line):
    """(normalised time or None, seconds since the epoch or None, text) of a log line read with
    timestamps. The time is rewritten as YYYY-MM-DDTHH:MM:SS.ffffffZ (UTC, microseconds), so that
    the times of different lines compare as strings; the kubelet's own form drops trailing zeros."""
    match = LOG_TIMESTAMP_RE.match(line)
    if not match:
        return None, None, line
    parsed = parse_time(match.group("time"))
    if parsed is None:
        return None, None, line
    utc = parsed.astimezone(datetime.timezone.utc)
    epoch = (utc - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)).total_seconds()
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), round(epoch, 6), match.group("text")


# The trainer's log-line contract (trainer/metrics.py), as parse_trainer_line reads it.
TRAINER_EPOCH_LINE_RE = re.compile(r"^trainfleet-epoch: epoch=(?P<epoch>\d+)(?P<fields>(?: \S+=\S+)*)\s*$")
TRAINER_SNAPSHOT_LINE_RE = re.compile(r"^trainfleet-info: snapshot epoch=(?P<epoch>\d+) uri=(?P<uri>\S+)")
TRAINER_SNAPSHOT_FAILED_RE = re.compile(r"^trainfleet-warning: snapshot epoch=(?P<epoch>\d+) failed")
TRAINER_STORAGE_RETRY_RE = re.compile(
    r"^trainfleet-warning: storage (?P<op>\S+) (?P<uri>\S+) attempt (?P<attempt>\d+)/(?P<attempts>\d+) failed")


def _float_or_none(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def parse_trainer_line(text):
    """What one line of the trainer's log-line contract says, as a dict with C(kind):

    epoch (epoch, loss, test_acc), snapshot (epoch, uri: whole, and latest names it),
    snapshot_failed (epoch), storage_retry (op, uri, attempt, attempts), resume (epoch: the
    snapshot's, restarts), rank (rank, world_size, group_rank), result (the result's fields);
    {"kind": None} for any other line (a dict either way, so templates can select on it).
    """
    text = text.strip()
    match = TRAINER_EPOCH_LINE_RE.match(text)
    if match:
        fields = dict(part.split("=", 1) for part in match.group("fields").split())
        return {"kind": "epoch", "epoch": int(match.group("epoch")), "loss": _float_or_none(fields.get("loss")),
                "test_acc": _float_or_none(fields.get("test_acc"))}
    match = TRAINER_SNAPSHOT_LINE_RE.match(text)
    if match:
        return {"kind": "snapshot", "epoch": int(match.group("epoch")), "uri": match.group("uri")}
    match = TRAINER_SNAPSHOT_FAILED_RE.match(text)
    if match:
        return {"kind": "snapshot_failed", "epoch": int(match.group("epoch"))}
    match = TRAINER_STORAGE_RETRY_RE.match(text)
    if match:
        return {"kind": "storage_retry", "op": match.group("op"), "uri": match.group("uri"),
                "attempt": int(match.group("attempt")), "attempts": int(match.group("attempts"))}
    match = TRAINER_RESUME_RE.match(text)
    if match:
        restarts = match.group("restarts")
        return {"kind": "resume", "epoch": int(match.group("epoch")),
                "restarts": int(restarts) if restarts is not None else None}
    match = TRAINER_RANK_RE.match(text)
    if match:
        return {"kind": "rank", "rank": int(match.group("rank")), "world_size": int(match.group("world_size")),
                "group_rank": int(match.group("group_rank"))}
    match = TRAINER_RESULT_RE.match(text)
    if match:
        try:
            result = json.loads(match.group("json"))
        except ValueError:
            result = None
        if isinstance(result, dict):
            parsed = dict(result)
            parsed["kind"] = "result"
            return parsed
    return {"kind": None}


def match_log_lines(lines, pattern, limit):
    """The last `limit` lines that `pattern` (a compiled regex) finds (re.search) in the text of
    `lines` (read with timestamps or not): [{time, epoch_s, line, trainer}] in log order, trainer
    being parse_trainer_line of the text. Memory stays bounded by `limit` whatever the log's length."""
    kept = []
    for raw in lines:
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", "replace")
        time_text, epoch, text = split_log_timestamp(raw)
        if pattern.search(text):
            kept.append({"time": time_text, "epoch_s": epoch, "line": text, "trainer": parse_trainer_line(text)})
            if len(kept) > 2 * limit:
                del kept[:len(kept) - limit]
    return kept[-limit:] if limit else []


def sort_matches(matches):
    """Matches of several pods in time order (lines without a time last, in pod order)."""
    return sorted(matches, key=lambda m: (m.get("epoch_s") is None, m.get("epoch_s") or 0.0))


# --------------------------------------------------------------------------- bounded text


class TailBuffer(object):
    """Keeps the last `limit` bytes of a byte stream in bounded memory.

    Chunks are appended; once the buffer holds more than twice the limit it is cut back to
    the limit, so memory stays at most ~3x the limit whatever the stream's size.
    limit None keeps everything; limit 0 keeps nothing (only counts).
    """

    def __init__(self, limit):
        self.limit = limit
        self.total = 0
        self._buf = bytearray()

    def feed(self, chunk):
        if not chunk:
            return
        self.total += len(chunk)
        if self.limit == 0:
            return
        self._buf.extend(chunk)
        if self.limit is not None and len(self._buf) > 2 * self.limit + 1:
            # keep one byte more than the limit: it tells whether the window starts a line
            del self._buf[:len(self._buf) - self.limit - 1]

    @property
    def truncated(self):
        return self.limit is not None and self.total > self.limit

    def value(self):
        """The kept bytes; when cut, starts at the first full line."""
        data = bytes(self._buf)
        if self.limit is None or len(data) <= self.limit:
            return data
        previous = data[len(data) - self.limit - 1:len(data) - self.limit]
        data = data[len(data) - self.limit:]
        if previous != b"\n":
            newline = data.find(b"\n")
            if 0 <= newline < len(data) - 1:
                data = data[newline + 1:]
        return data

    def text(self):
        return self.value().decode("utf-8", "replace")
