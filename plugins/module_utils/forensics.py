# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Failure forensics: which pod failed a job, with what exit code and log, even when it is gone.

When a job exceeds runPolicy.backoffLimit (restart counts with OnFailure/Always/ExitCode, or a new
failed pod when backoffLimit is 0) or runPolicy.activeDeadlineSeconds, the Kubeflow operators
delete all its pods and Services first and only then set the Failed condition; on that path
cleanPodPolicy is ignored (pkg/controller.v1/common/job.go, DeletePodsAndServices). The failing
pod's exit code and log are then only known to whoever looked before (FailureRecorder, fed by
PodFailureWatch while a wait runs, see container_failure) or, without a log, from the operator's
events on the job ("Error pod <pod> container <c> exitCode: <n> terminated message: ...",
"Pod: <ns>.<pod> exited with code <n>"; see events_failure).
"""

from __future__ import annotations

import re
import threading
import time

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import (
    BENIGN_WAITING_REASONS,
    EPOCH,
    dig,
    format_time,
    job_failure,
    kind_of,
    parse_time,
    pod_belongs_to_job,
    to_int,
    utcnow,
)
from ansible_collections.trainfleet.training.plugins.module_utils.jobstatus import (
    failed_run,
    pod_identity,
    pod_restart_reasons,
    restart_reason_key,
)
from ansible_collections.trainfleet.training.plugins.module_utils.k8s import iter_lines

# Where job.failure's pod, exit code and log tail come from.
FAILURE_SOURCE_LIVE = "live_pod"
FAILURE_SOURCE_SNAPSHOT = "snapshot"
FAILURE_SOURCE_EVENTS = "events"

# Events the Kubeflow operators record on the job (pkg/core/job.go RecordAbnormalPods,
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
        if not failed_run(terminated):
            terminated, previous = (cstatus.get("lastState") or {}).get("terminated"), True
            if not failed_run(terminated):
                continue
        failure = pod_identity(pod)
        failure["pod"] = failure.pop("name")
        failure.pop("job_role", None)
        failure.update({
            "container": cstatus.get("name"),
            "init": init,
            "exit_code": to_int(terminated.get("exitCode")),
            "reason": terminated.get("reason") or "Error",
            "message": terminated.get("message"),
            "finished_at": terminated.get("finishedAt"),
            "restarts": to_int(cstatus.get("restartCount"), 0),
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
    """The pod names the controller gives a job's replicas (<job>-<type>-<index>)."""
    return kind_of(job).replica_pod_names(job)


def events_failure(events, job_name, kind_name="PyTorchJob"):
    """What the operator's events on the PyTorchJob say about the failing pod, or None.

    The earliest non-zero exit ("Error pod <pod> container <c> exitCode: <n> terminated
    message: <m>", reason Error/OOMKilled, or "Pod: <ns>.<pod> exited with code <n>"), completed
    from the other events about the same pod; without any exit, a container the operator saw
    waiting on a problem ("Error pod <pod> container <c> waiting message: <m>").
    Returns {pod, container, exit_code, container_reason, container_message, time}.
    """
    epoch = EPOCH
    exits, waits = [], []
    for event in events or []:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        if involved.get("kind") != kind_name or involved.get("name") != job_name:
            continue
        summary = event_summary(event)
        text = summary["message"] or ""
        first = event.get("firstTimestamp") or event.get("eventTime") or summary["time"]
        when = parse_time(first) or epoch
        match = EVENT_POD_TERMINATED_RE.search(text)
        if match and to_int(match.group("exit_code")) not in (None, 0):
            exits.append((when, 0, {
                "pod": match.group("pod"), "container": match.group("container"),
                "exit_code": to_int(match.group("exit_code")),
                "container_reason": summary["reason"],
                "container_message": (match.group("message") or "").strip() or None,
                "time": first}))
            continue
        match = EVENT_POD_EXITED_RE.search(text)
        if match and to_int(match.group("exit_code")) not in (None, 0):
            exits.append((when, 1, {
                "pod": match.group("pod"), "container": kind_of({"kind": kind_name}).default_container,
                "exit_code": to_int(match.group("exit_code")),
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
    run_policy = dig(job, "spec", "runPolicy", default={}) or {}
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
    found = events_failure(events, name, (job.get("kind") or "PyTorchJob"))
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
        "count": to_int(event.get("count") or dig(event, "series", "count"), 1),
    }


def recent_events(events, limit=20):
    """Event summaries, oldest first, the last `limit` of them."""
    epoch = EPOCH
    summaries = [event_summary(e) for e in events or []]
    summaries.sort(key=lambda e: parse_time(e["time"]) or epoch)
    return summaries[-limit:] if limit else summaries


# --------------------------------------------------------------------------- evidence while waiting


def log_tail(service, namespace, pod, container, lines, previous_first=False):
    """The last lines of a container's log; the previous run's when the current one has none
    (CrashLoopBackOff). previous_first reads the previous run first (the failed run of a
    container that restarted since). Returns (lines, error message or None)."""
    return _log_tail(service, namespace, pod, container, lines, previous_first)[:2]


def _log_tail(service, namespace, pod, container, lines, previous_first):
    """log_tail, and which run the lines are of (previous: True/False; None without lines)."""
    errors = []
    for previous in ((True, False) if previous_first else (False, True)):
        text, error = run_log_tail(service, namespace, pod, container, lines, previous)
        if error:
            errors.append(error)
        elif text:
            return text, None, previous
    return [], "; ".join(errors) or None, None


def run_log_tail(service, namespace, pod, container, lines, previous):
    """The last lines of one run of a container: the previous one (it restarted since) or the
    current one. Never the other run. Returns (lines, error message or None)."""
    try:
        return list(iter_lines(service.iter_log(namespace, pod, container=container, tail_lines=lines,
                                                previous=previous))), None
    except TrainfleetError as exc:
        return [], exc.msg


def fill_restart_logs(service, namespace, reasons, pods, lines, newest=10):
    """Reads the last `lines` lines of each ended run in `reasons` (restart_reasons entries) that has
    none yet and whose pod is among `pods` (summaries): a run that ended after the pod watch's last
    look. The newest `newest` such runs only; entries gain log_tail and log_error."""
    names = set(pod["name"] for pod in pods or [])
    missing = [e for e in reasons or [] if e.get("container") and "log_tail" not in e and e.get("pod") in names]
    for entry in missing[-newest:] if lines > 0 else []:
        entry["log_tail"], entry["log_error"] = run_log_tail(service, namespace, entry["pod"], entry["container"], lines,
                                                             previous=entry.get("run") == "previous")


class FailureRecorder(object):
    """Snapshots of failed containers of one job's pods, taken the moment they are seen.

    observe(pod) is called with every pod the pod watch reports. The first failure of each
    replica type is kept (with its log tail, read at once: the operator may delete the pod a
    moment later); a snapshot whose log could not be read is retried on the pod's next
    event, a few times. Every ended run is recorded too (restart_reasons), with the last
    RESTART_LOG_LINES lines of that run's log, read when it is first seen: the kubelet keeps
    one previous run per container, so a later restart or the pod's deletion would lose it.
    Thread-safe: the pod watch thread writes, the module reads.
    """

    LOG_ATTEMPTS = 3
    # Every ended run seen (restart_reasons), at most this many: a crash loop must not grow it forever.
    MAX_RESTART_RECORDS = 200
    # Lines of each ended run's log kept with its restart record (the summary prints them).
    RESTART_LOG_LINES = 5

    def __init__(self, service, namespace, name, log_lines, now=utcnow, kind=None):
        self.service = service
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.log_lines = log_lines
        self.now = now
        self._lock = threading.Lock()
        self._by_key = {}
        self._order = []
        self._restarts = []
        self._restart_keys = set()

    def _record_restarts(self, pod, read=None):
        """Record the pod's ended runs not seen before, each with its last lines. read: the failure
        snapshot's log just read ((pod, container, previous), lines), reused when it is the same run."""
        entries = pod_restart_reasons(pod)
        if not entries:
            return
        observed_at = format_time(self.now())
        new = []
        with self._lock:
            for entry in entries:
                key = restart_reason_key(entry)
                if key in self._restart_keys or len(self._restarts) >= self.MAX_RESTART_RECORDS:
                    continue
                self._restart_keys.add(key)
                record = dict(entry, observed_at=observed_at)
                self._restarts.append(record)
                new.append(record)
        lines = min(self.log_lines, self.RESTART_LOG_LINES)
        for record in new:
            if not record["container"] or lines <= 0:
                continue
            run = (record["pod"], record["container"], record["run"] == "previous")
            if read is not None and read[0] == run:  # the snapshot read log_lines >= lines of it
                tail, error = read[1][-lines:], None
            else:
                tail, error = run_log_tail(self.service, self.namespace, record["pod"], record["container"], lines,
                                           previous=run[2])
            with self._lock:
                record.update(log_tail=tail, log_error=error)

    def restart_reasons(self):
        """Every ended run seen while waiting (copies, in the order seen)."""
        with self._lock:
            return [dict(entry) for entry in self._restarts]

    def observe(self, pod):
        if not isinstance(pod, dict) or not pod_belongs_to_job(pod, self.name, self.kind):
            return None
        read = None
        try:
            snapshot, read = self._snapshot(pod)
        finally:
            self._record_restarts(pod, read)
        return snapshot

    def _snapshot(self, pod):
        """(the failure snapshot of the pod's replica, the log this call read or None)."""
        found = container_failure(pod)
        if not found:
            return None, None
        key = found["replica_type"] or found["pod"]
        with self._lock:
            current = self._by_key.get(key)
            if current is not None:
                retry = (current["pod"] == found["pod"] and current["container"] == found["container"]
                         and not current["log_tail"] and current.get("log_error")
                         and current["log_attempts"] < self.LOG_ATTEMPTS)
                if not retry:
                    return current, None
        snapshot = dict(found, observed_at=format_time(self.now()), log_tail=[], log_error=None,
                        log_attempts=(current or {}).get("log_attempts", 0) + 1)
        if current is not None:
            snapshot["observed_at"] = current["observed_at"]
        read = None
        if self.log_lines > 0:
            snapshot["log_tail"], snapshot["log_error"], previous = _log_tail(
                self.service, self.namespace, found["pod"], found["container"], self.log_lines,
                previous_first=found["previous"])
            if previous is not None:
                read = ((found["pod"], found["container"], previous), snapshot["log_tail"])
        with self._lock:
            if key not in self._by_key:
                self._order.append(key)
            self._by_key[key] = snapshot
        return snapshot, read

    def snapshots(self):
        """The snapshots, oldest first (copies)."""
        with self._lock:
            return [dict(self._by_key[key]) for key in self._order]


class PodFailureWatch(object):
    """Runs a watch on the job's pods in a background thread, feeding a FailureRecorder,
    while the module waits on the job itself.

    Bounded: it ends by itself at `timeout` seconds, each watch round lasts at most
    `round_seconds`, and stop() cancels the current round (closing its connection) and joins
    the thread. When the watch fails (for example no permission to watch pods) it falls back
    to listing the pods once per round.
    """

    ROUND_SECONDS = 60
    JOIN_SECONDS = 5

    def __init__(self, service, namespace, name, recorder, timeout, round_seconds=ROUND_SECONDS,
                 clock=time.monotonic):
        self.service = service
        self.namespace = namespace
        self.name = name
        self.recorder = recorder
        self.timeout = timeout
        self.round_seconds = max(1, round_seconds)
        self.clock = clock
        self.error = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._watch = None
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, name="trainjob-pod-watch-%s" % self.name)
        self._thread.daemon = True
        self._thread.start()
        return self

    def _run(self):
        deadline = self.clock() + self.timeout
        try:
            while not self._stop.is_set():
                remaining = deadline - self.clock()
                if remaining <= 0:
                    return
                started = self.clock()
                try:
                    self._round(min(remaining, self.round_seconds))
                except TrainfleetError as exc:
                    self.error = exc.msg
                    self._poll()
                    self._stop.wait(min(self.round_seconds, max(0, deadline - self.clock())))
                if self.clock() - started < 1:
                    # a round that returns at once must not turn into a busy loop
                    self._stop.wait(1)
        except Exception as exc:  # pylint: disable=broad-except
            # the watch only adds evidence: it must never break the wait itself
            self.error = "%s: %s" % (type(exc).__name__, exc)

    def _round(self, seconds):
        watch = self.service.watch_pods(self.namespace, self.name, seconds)
        with self._lock:
            self._watch = watch
        try:
            if self._stop.is_set():
                return
            for event_type, pod in watch.events():
                if self._stop.is_set():
                    break
                if event_type in ("ADDED", "MODIFIED"):
                    self.recorder.observe(pod)
        finally:
            with self._lock:
                self._watch = None

    def _poll(self):
        try:
            for pod in self.service.list_pods(self.namespace, self.name):
                self.recorder.observe(pod)
        except TrainfleetError:
            pass

    def stop(self):
        """Stop the watch and wait (briefly) for the thread; True when it has ended."""
        self._stop.set()
        with self._lock:
            watch = self._watch
        if watch is not None:
            watch.cancel()
        if self._thread is not None:
            self._thread.join(self.JOIN_SECONDS)
            return not self._thread.is_alive()
        return True


def diagnose(service, params, summary, pod=None, container=None, job=None, snapshots=None):
    """Fill summary['failure'] with the log tail of the failing container and recent events.

    pod/container: a live pod with a problem (a wait that fails on a pod). job/snapshots: a
    Failed job and the snapshots taken while waiting; when no live pod shows the failure,
    the snapshot or else the operator's events fill it in (complete_failure).
    """
    namespace, name = summary["namespace"], summary["name"]
    failure = summary.get("failure") or new_failure(
        pod.get("reason") if pod else None, (container or {}).get("message"))
    for key, value in new_failure().items():
        failure.setdefault(key, value)
    snapshots = snapshots or []
    live = [p["name"] for p in summary["pods"]]
    if pod is not None:
        failure.update({
            "source": FAILURE_SOURCE_LIVE,
            "pod": pod["name"],
            "replica_type": pod.get("replica_type"),
            "replica_index": pod.get("replica_index"),
            "node": pod.get("node"),
            "container": (container or {}).get("name") or pod.get("container"),
            "container_reason": (container or {}).get("reason") or pod.get("reason"),
            "container_message": (container or {}).get("message"),
            "exit_code": (container or {}).get("exit_code", pod.get("exit_code")),
        })
    fallback = job is not None and not failure.get("pod")

    events, names = None, [name] + live
    if fallback:
        # the pods may be gone: their events (kubelet's) outlive them
        names += replica_pod_names(job) + [s["pod"] for s in snapshots]
    if params["event_limit"] > 0 or fallback:
        try:
            events = service.list_events(namespace, list(dict.fromkeys(names)))
        except TrainfleetError as exc:
            failure["events_error"] = exc.msg
    if fallback:
        complete_failure(failure, job, snapshots, events, live)

    if failure["source"] == FAILURE_SOURCE_LIVE and failure.get("container") and params["log_lines"] > 0:
        tail, error = log_tail(service, namespace, failure["pod"], failure["container"], params["log_lines"],
                               previous_first=failed_run_is_previous(summary["pods"], failure["pod"], failure["container"]))
        failure["log_tail"] = tail
        if error:
            failure["log_error"] = error
            # deleted between the listing and the log read: the snapshot kept its log
            for snapshot in snapshots:
                if (snapshot["pod"], snapshot["container"]) == (failure["pod"], failure["container"]) \
                        and snapshot.get("log_tail"):
                    failure["log_tail"] = list(snapshot["log_tail"])
                    failure["observed_at"] = snapshot.get("observed_at")
                    break
    if params["event_limit"] > 0 and events is not None:
        failure["events"] = recent_events(events, params["event_limit"])
    summary["failure"] = failure
    return failure


def failed_run_is_previous(summaries, pod, container):
    """True when the failing container has started again since its failed run (it is not terminated now
    and its lastState holds a non-zero exit): the failure's lines are that previous run's. With
    OnFailure the kubelet may restart it before the operator deletes the pods of a failed job."""
    for summary in summaries or []:
        if summary.get("name") != pod:
            continue
        for entry in summary.get("containers") or []:
            if entry.get("name") == container:
                return entry.get("state") != "terminated" and entry.get("last_exit_code") not in (None, 0)
    return False


def failure_message(summary):
    """The task's message for a Failed job: reason, failing pod, exit code, last log line, hint."""
    failure = summary["failure"] or {}
    parts = ["%s %s/%s %s" % (summary.get("kind") or "PyTorchJob", summary["namespace"], summary["name"],
                              summary["phase"])]
    if failure.get("reason") or failure.get("message"):
        parts.append(": %s" % " - ".join(x for x in (failure.get("reason"), failure.get("message")) if x))
    if failure.get("pod"):
        parts.append("; pod %s container %s: %s (exit code %s)" % (
            failure["pod"], failure.get("container"), failure.get("container_reason"),
            failure.get("exit_code")))
        if failure.get("source") == FAILURE_SOURCE_SNAPSHOT:
            parts.append(", recorded at %s while waiting" % failure.get("observed_at"))
        elif failure.get("source") == FAILURE_SOURCE_EVENTS:
            parts.append(", from the operator's events")
    if failure.get("log_tail"):
        parts.append("; last log line: %s" % failure["log_tail"][-1])
    if failure.get("hint"):
        parts.append(". %s" % failure["hint"])
    return "".join(parts)


def live_failure(job, summaries):
    """job.failure as the job and its live pods show it (new_failure shape), None unless it failed."""
    condition = job_failure(job)
    if not condition:
        return None
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
    return failure
