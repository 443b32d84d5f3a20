# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What trainjob_info does for one job or a namespace: summary, wait, forensics.

The module parses its options and calls one_job or all_jobs with a TrainJobService.
"""

from __future__ import annotations

import json

from ansible_collections.trainfleet.training.plugins.module_utils import forensics, gang
from ansible_collections.trainfleet.training.plugins.module_utils.errors import JobNotFoundError, TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import (
    PHASE_FAILED,
    is_terminal_phase,
    job_conditions,
    job_phase,
    job_times,
    kind_of,
    replica_statuses,
)
from ansible_collections.trainfleet.training.plugins.module_utils.jobstatus import (
    merge_restart_reasons,
    pod_summary,
    restart_reasons,
    restarts_by_replica,
    sort_pod_summaries,
)
from ansible_collections.trainfleet.training.plugins.module_utils.progress import ProgressReporter
from ansible_collections.trainfleet.training.plugins.module_utils.timeline import job_timeline, read_rank0_times
from ansible_collections.trainfleet.training.plugins.module_utils.waiter import (
    OUTCOME_FAILED,
    OUTCOME_POD_PROBLEM,
    OUTCOME_STALLED,
    OUTCOME_TIMEOUT,
    OUTCOME_UNSCHEDULABLE,
    JobWaiter,
    ProgressLog,
    Rank0Tail,
    pods_text,
    round_progress,
)


def job_summary(job, pods=None, now=None, kind=None):
    """Everything trainjob_info returns for one job (pods: raw pod dicts; kind: from the job when None)."""
    kind = kind or kind_of(job)
    meta = job.get("metadata") or {}
    name = meta.get("name")
    phase = job_phase(job)
    own = [p for p in (pods or []) if kind.pod_belongs(p, name)]
    summaries = sort_pod_summaries([pod_summary(p, kind) for p in own])
    result = {
        "name": name,
        "namespace": meta.get("namespace"),
        "kind": kind.label,
        "uid": meta.get("uid"),
        "creation_timestamp": meta.get("creationTimestamp"),
        "labels": meta.get("labels") or {},
        "phase": phase,
        "kind_phase": kind.kind_phase(job),
        "terminal": is_terminal_phase(phase),
        "conditions": job_conditions(job),
        "replica_statuses": replica_statuses(job),
        "restarts": sum(s["restarts"] for s in summaries),
        "restarts_by_replica": restarts_by_replica(job, summaries),
        "restart_reasons": restart_reasons(own),
        "pods": summaries,
        "failure": forensics.live_failure(job, summaries),
    }
    result.update(job_times(job, now=now))
    return result


def _wait(module, service, kind, result):
    """Wait on the job with a pod watch beside it; (WaitResult, snapshots, restarts, pod watch)."""
    params = module.params
    namespace, name = params["namespace"], params["name"]
    tail = Rank0Tail(service, namespace, kind)  # the progress line's epochs, and the stall check's last line
    waiter = JobWaiter(service, namespace, name, wanted=params["wait_for"], timeout=params["wait_timeout"],
                       check_interval=params["wait_check_interval"], fatal_reasons=params["wait_fail_reasons"],
                       on_transition=ProgressLog(module, namespace, name, params["progress_file"], kind.label),
                       on_round=round_progress(ProgressReporter(min_interval=5.0), namespace, name, kind.label, tail=tail),
                       kind=kind, pending_timeout=params.get("pending_timeout") or 0,
                       gang=gang.UnschedulableClock(service, namespace, name),
                       progress_timeout=params.get("progress_timeout") or 0, liveness=tail)
    # The operators delete the pods of a job that exceeds its backoffLimit before they mark the
    # job Failed: record a failing container while it still exists.
    recorder = forensics.FailureRecorder(service, namespace, name, params["log_lines"], kind=kind)
    pod_watch = forensics.PodFailureWatch(service, namespace, name, recorder, timeout=params["wait_timeout"]).start()
    try:
        wait_result = waiter.wait()
    finally:
        pod_watch.stop()
    result.update(transitions=wait_result.transitions, waited_seconds=wait_result.elapsed,
                  pending_timeout_reached=wait_result.outcome == OUTCOME_UNSCHEDULABLE, stall=wait_result.stall)
    return wait_result, recorder.snapshots(), recorder.restart_reasons(), pod_watch


def _raise_for_outcome(service, params, kind, summary, wait_result, result):
    namespace, name = params["namespace"], params["name"]
    if wait_result.outcome == OUTCOME_FAILED:
        raise TrainfleetError(forensics.failure_message(summary), **result)
    if wait_result.outcome == OUTCOME_POD_PROBLEM:
        problem = wait_result.problem_pods[0]
        current = dict((p["name"], p) for p in summary["pods"]).get(problem["name"], problem)
        container = None
        for entry in current["containers"]:
            if entry["state"] == "waiting" and entry["reason"] in params["wait_fail_reasons"]:
                container = entry
                break
        failure = forensics.diagnose(service, params, summary, pod=current, container=container)
        raise TrainfleetError(
            "%s %s/%s cannot start: pod %s container %s is %s: %s" % (
                kind.label, namespace, name, failure["pod"], failure["container"], failure["container_reason"],
                failure.get("message") or "-"), **result)
    if wait_result.outcome == OUTCOME_STALLED:
        stall = wait_result.stall
        raise TrainfleetError(
            "%s %s/%s made no progress: its pods printed no log line and started no container for %ss "
            "(progress_timeout %ss); the last line read, from pod %s at %s: %s. The job is left running "
            "to be looked at (a hang: a rank waiting on a peer, a stuck read); pods: %s" % (
                kind.label, namespace, name, int(stall["silent_seconds"]), stall["progress_timeout"], stall["pod"],
                stall["last_line_at"] or "-", json.dumps(stall["last_line"]) if stall["last_line"] is not None else "none",
                pods_text(summary["pods"])), **result)
    if wait_result.outcome == OUTCOME_TIMEOUT:
        events = []
        try:
            events = forensics.recent_events(
                service.list_events(namespace, [name] + [p["name"] for p in summary["pods"]]), params["event_limit"])
        except TrainfleetError:
            pass
        result["events"] = events
        raise TrainfleetError(
            "Timed out after %ss waiting for %s %s/%s to reach %s: phase is %s; pods: %s%s" % (
                params["wait_timeout"], kind.label, namespace, name, params["wait_for"], summary["phase"],
                pods_text(summary["pods"]),
                "; %s" % summary["pending_reason"] if summary.get("pending_reason") else ""), **result)


def one_job(module, service, kind):
    """The job named by the name option: summary, optionally waited for; raises TrainfleetError
    (with the result as details) when the wait ends on a failure or the timeout."""
    params = module.params
    namespace, name = params["namespace"], params["name"]
    result = {"changed": False}
    try:
        job = service.get_job(namespace, name)
    except JobNotFoundError:
        if params["allow_missing"] and not params["wait"]:
            result.update(exists=False, job=None, jobs=[])
            return result
        raise

    wait_result, snapshots, recorded_restarts, pod_watch = None, [], [], None
    if params["wait"]:
        wait_result, snapshots, recorded_restarts, pod_watch = _wait(module, service, kind, result)
        job = wait_result.job

    pods = service.list_pods(namespace, name)
    summary = job_summary(job, pods, kind=kind)
    # runs of pods that were deleted or replaced while waiting are only known from the pod watch
    summary["restart_reasons"] = merge_restart_reasons(summary["restart_reasons"], recorded_restarts)
    if params["wait"]:  # a run that ended after the pod watch's last look has no lines yet
        forensics.fill_restart_logs(service, namespace, summary["restart_reasons"], summary["pods"],
                                    min(params["log_lines"], forensics.FailureRecorder.RESTART_LOG_LINES))
    result.update(exists=True, job=summary, jobs=[summary])

    podgroup, reason = gang.describe(service, namespace, name, summary["phase"])
    if podgroup is not None:
        summary.update(podgroup=podgroup, pending_reason=reason)
        if not reason and wait_result is not None and wait_result.outcome == OUTCOME_UNSCHEDULABLE:
            # the PodGroup changed between the wait's last round and this read: say what the wait saw
            summary["pending_reason"] = wait_result.pending_reason
    if params["timeline"]:
        summary["timeline"] = timeline(service, namespace, job, [p for p in pods if kind.pod_belongs(p, name)], kind)
    if summary["phase"] == PHASE_FAILED:
        failure = forensics.diagnose(service, params, summary, job=job, snapshots=snapshots)
        if pod_watch is not None and pod_watch.error and failure["source"] != forensics.FAILURE_SOURCE_LIVE:
            module.warn("Could not watch the pods of %s %s/%s while waiting: %s"
                        % (kind.label, namespace, name, pod_watch.error))
    if wait_result is not None:
        _raise_for_outcome(service, params, kind, summary, wait_result, result)
    return result


def timeline(service, namespace, job, pods, kind):
    """job.timeline: the start-up timeline from the job, its pods, their events and rank 0's log head.
    What cannot be read (events, logs) leaves its steps null and is said in timeline.errors."""
    name = (job.get("metadata") or {}).get("name")
    errors = []
    try:
        events = service.list_events(namespace, [name] + [(p.get("metadata") or {}).get("name") for p in pods])
    except TrainfleetError as exc:
        events = []
        errors.append(exc.msg)
    try:
        rank0, rendezvous, first_epoch, log_errors = read_rank0_times(service, namespace, pods, kind)
    except TrainfleetError as exc:
        rank0 = rendezvous = first_epoch = None
        log_errors = [exc.msg]
    result = job_timeline(job, pods, events, rank0, rendezvous, first_epoch)
    result["errors"] = errors + log_errors
    return result


def all_jobs(module, service, kind):
    """Every job of the kind in the namespace (label_selector applies)."""
    params = module.params
    jobs = service.list_jobs(params["namespace"], params["label_selector"])
    pods = service.list_pods(params["namespace"]) if jobs else []
    by_job = {}
    for pod in pods:
        by_job.setdefault(kind.pod_job_name(pod), []).append(pod)
    summaries = [job_summary(job, by_job.get((job.get("metadata") or {}).get("name"), []), kind=kind)
                 for job in jobs]
    return {"changed": False, "jobs": summaries}
