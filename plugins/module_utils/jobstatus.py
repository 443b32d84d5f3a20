# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a job and its pods look like now: pod summaries, restarts and their reasons, the job summary.

Pure functions over the API server's JSON; the kind-specific parts (labels, phases) come from
jobkinds.
"""

from __future__ import annotations

import datetime
import signal

from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import (
    BENIGN_WAITING_REASONS,
    DEFAULT_FATAL_WAITING_REASONS,
    kind_of_pod,
    parse_time,
    replica_statuses,
    to_int,
    waiting_is_fatal,
)


def _container_entry(status, init):
    state = status.get("state") or {}
    last = status.get("lastState") or {}
    entry = {
        "name": status.get("name"),
        "init": init,
        "ready": bool(status.get("ready")),
        "restarts": to_int(status.get("restartCount"), 0),
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
            entry["exit_code"] = to_int(detail.get("exitCode"))
            entry["started_at"] = detail.get("startedAt")
            entry["finished_at"] = detail.get("finishedAt")
            break
    last_term = last.get("terminated") or None
    if last_term:
        entry["last_reason"] = last_term.get("reason")
        entry["last_exit_code"] = to_int(last_term.get("exitCode"))
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


def pod_identity(pod, kind=None):
    """Which pod this is: name, namespace, replica type and index, job role (the controller's labels), node."""
    return (kind or kind_of_pod(pod)).pod_identity(pod)


def pod_summary(pod, kind=None):
    """name, replica type/index, node, phase, restarts, reason, exit_code, containers."""
    status = pod.get("status") or {}
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

    summary = pod_identity(pod, kind)
    summary.update({
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
    # master (PyTorchJob) or launcher (MPIJob) first, then workers, then anything else (Volcano
    # tasks, by name); then by index
    order = {"master": 0, "launcher": 0, "worker": 1}.get(rtype, 2)
    index = summary.get("replica_index")
    return (order, rtype, index if index is not None else 1 << 30, summary.get("name") or "")


def sort_pod_summaries(summaries):
    return sorted(summaries, key=replica_sort_key)


def pod_has_fatal_reason(summary, reasons=DEFAULT_FATAL_WAITING_REASONS):
    """True when any container of the pod waits for one of `reasons` (jobkinds.waiting_is_fatal)."""
    for entry in summary.get("containers") or []:
        if entry["state"] == "waiting" and waiting_is_fatal(entry["reason"], entry.get("message"), reasons):
            return True
    return False


def exit_signal(exit_code, signal_number=None):
    """(number, name) of the signal that ended a container, else (None, None).

    terminated.signal when the runtime reports it, else the shell convention the container
    runtimes follow: exit code 128+N means killed by signal N (137 SIGKILL, 143 SIGTERM).
    """
    number = to_int(signal_number)
    if number is None:
        code = to_int(exit_code)
        if code is not None and 128 < code < 128 + 65:
            number = code - 128
    if number is None or number <= 0:
        return None, None
    try:
        return number, signal.Signals(number).name
    except ValueError:
        return number, None


def _restart_entry(pod, cstatus, init, terminated, current):
    identity = pod_identity(pod)
    number, name = exit_signal(terminated.get("exitCode"), terminated.get("signal"))
    entry = {
        "pod": identity["name"],
        "replica_type": identity["replica_type"],
        "replica_index": identity["replica_index"],
        "node": identity["node"],
        "container": cstatus.get("name") if cstatus else None,
        "init": init,
        "restarts": to_int((cstatus or {}).get("restartCount"), 0),
        "run": "current" if current else "previous",
        "reason": terminated.get("reason") or ("Error" if to_int(terminated.get("exitCode")) not in (None, 0) else None),
        "exit_code": to_int(terminated.get("exitCode")),
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
            if failed_run(now):
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
    (the pod was deleted, evicted or replaced since; its entry keeps observed_at), oldest end first.
    A live run that was recorded too keeps the recorded run's log tail (log_tail, log_error)."""
    logs = dict((restart_reason_key(e), e) for e in recorded or [] if "log_tail" in e)
    merged = []
    for entry in live or []:
        found = logs.get(restart_reason_key(entry))
        merged.append(dict(entry, log_tail=found["log_tail"], log_error=found.get("log_error")) if found else entry)
    seen = set(restart_reason_key(e) for e in merged)
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


def pods_with_problems(summaries, reasons=DEFAULT_FATAL_WAITING_REASONS):
    return [s for s in summaries if pod_has_fatal_reason(s, reasons)]


def failed_run(terminated):
    """True when a terminated state (a dict or None) ended with a non-zero exit code."""
    return bool(terminated) and to_int(terminated.get("exitCode")) not in (None, 0)
