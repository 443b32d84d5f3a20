#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pytorchjob_info
short_description: Read the state of Kubeflow PyTorchJobs and wait for one to finish
version_added: 0.1.0
description:
  - Reads one PyTorchJob (O(name)) or every PyTorchJob of a namespace (optionally filtered by
    O(label_selector)) of the Kubeflow training operator (C(kubeflow.org/v1)).
  - For each job returns the phase (C(Pending), C(Created), C(Running), C(Restarting),
    C(Suspended), C(Succeeded) or C(Failed)), the conditions, per replica type the
    active/succeeded/failed counters, start and completion time, duration, and per pod its
    replica type and index, node, phase, restarts, waiting or terminated reason
    (C(ImagePullBackOff), C(CrashLoopBackOff), C(OOMKilled), C(Error), ...) and exit code.
  - Restarts per replica type (RV(job.restarts_by_replica)) and the reason of each restart or
    death (RV(job.restart_reasons)) - which pod and container, on which node, when, with which
    reason, exit code and signal.
  - The phase is the latest true condition, as the training operator sets them; C(Succeeded)
    and C(Failed) always win, C(Pending) means the operator has not set any condition yet.
  - With O(wait=true) the module watches the job (Kubernetes watch API) until it reaches
    O(wait_for) or a terminal phase. C(Succeeded) and C(Failed) are both terminal. A job that
    turns C(Failed) fails the task at once with the reason, the failing pod and container,
    its exit code, the last lines of its log and the recent events. A pod waiting on one of
    O(wait_fail_reasons) (for example an image that does not exist) fails the task too,
    without waiting for the timeout.
  - While waiting, the module also watches the job's pods. The moment a container of one of
    them is seen terminated with a non-zero exit code (or restarted after one, for example in
    C(CrashLoopBackOff)), it records a snapshot, the pod, replica type and index, node,
    container, exit code, reason, message and the last O(log_lines) lines of that run's log.
    When a job exceeds C(runPolicy.backoffLimit) (or C(activeDeadlineSeconds)) the training
    operator deletes all its pods, and with them their logs, before it marks the job
    C(Failed), whatever C(cleanPodPolicy) says. RV(job.failure) then comes from the live pods
    when they still exist, else from the snapshot (the first failure, or the one of the replica
    type the C(Failed) condition names), else from the operator's events on the job, and
    RV(job.failure.source) says which; RV(job.failure.hint) explains that the pods were deleted
    and how to keep them next time.
  - Progress while waiting. Ansible shows a module's output only when it returns, so every
    phase change is recorded as it happens in three places, the returned RV(transitions) list
    (with timestamps and elapsed seconds), the system log of the host running the module
    (C(module.log), for example C(journalctl -f)), and, when O(progress_file) is set, one JSON
    line appended per change to that file, which C(tail -f) shows live.
  - The module only reads the cluster; it supports check mode and always returns C(changed=false).
author:
  - trainfleet developers (!UNKNOWN)
options:
  name:
    description:
      - Name of one PyTorchJob. Without it, every PyTorchJob of O(namespace) is returned.
    type: str
  namespace:
    description:
      - Namespace of the job(s).
    type: str
    default: default
  label_selector:
    description:
      - Label selector for the jobs listed when O(name) is not set, for example C(team=ml).
    type: str
  allow_missing:
    description:
      - When O(name) does not exist, return RV(exists=false) instead of failing.
    type: bool
    default: false
  wait:
    description:
      - Wait until the job reaches O(wait_for) or a terminal phase. Needs O(name).
    type: bool
    default: false
  wait_for:
    description:
      - The phase to wait for. V(terminal) waits until the job Succeeded or Failed.
      - A terminal phase always ends the wait, whatever O(wait_for) says; C(Failed) fails the task.
    type: str
    default: terminal
    choices: [terminal, Created, Running, Restarting, Suspended]
  wait_timeout:
    description:
      - Seconds to wait at most. When they run out the task fails with the job's phase,
        its pods' states and the recent events.
    type: int
    default: 3600
  wait_check_interval:
    description:
      - Seconds of one watch round. Between rounds the job's pods are checked for
        O(wait_fail_reasons).
    type: int
    default: 10
  wait_fail_reasons:
    description:
      - Container waiting reasons that fail a wait at once, because they do not resolve
        without a change to the job. An empty list disables the check.
    type: list
    elements: str
    default: [ImagePullBackOff, ErrImagePull, InvalidImageName, CreateContainerConfigError]
  progress_file:
    description:
      - While waiting, append one JSON line per phase change to this file (on the host running
        the module), so progress can be followed live with C(tail -f).
      - This is a progress log, not managed state; it is written in check mode too.
    type: path
  log_lines:
    description:
      - Number of log lines of the failing container to return in RV(job.failure.log_tail)
        (also the number kept in a snapshot taken while waiting).
    type: int
    default: 50
  event_limit:
    description:
      - Number of most recent events of the job and its pods to return with a failure.
    type: int
    default: 20
extends_documentation_fragment:
  - trainfleet.training.k8s_auth
attributes:
  check_mode:
    support: full
    description: The module only reads; check mode changes nothing.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
notes:
  - The training operator names the training container C(pytorch); the pods are found by the
    operator's labels C(training.kubeflow.org/job-name), C(training.kubeflow.org/replica-type)
    and C(training.kubeflow.org/replica-index).
seealso:
  - module: trainfleet.training.pytorchjob_logs
"""

EXAMPLES = r"""
- name: Read one job
  trainfleet.training.pytorchjob_info:
    name: mnist
    namespace: training
    kubeconfig: "{{ trainfleet_cache_dir }}/kubeconfig-trainfleet"
  register: __job

- name: Show its phase
  ansible.builtin.debug:
    msg: "{{ __job.job.phase }} after {{ __job.job.elapsed_seconds }}s"

- name: Wait until it finished (fails fast with the reason and the log tail when it Failed)
  trainfleet.training.pytorchjob_info:
    name: mnist
    namespace: training
    wait: true
    wait_timeout: 1800
    progress_file: /tmp/mnist-progress.jsonl
  register: __job_done

- name: Wait until it is running
  trainfleet.training.pytorchjob_info:
    name: mnist
    namespace: training
    wait: true
    wait_for: Running
    wait_timeout: 600

- name: List the jobs of a team
  trainfleet.training.pytorchjob_info:
    namespace: training
    label_selector: team=ml
  register: __jobs

- name: Does the job exist yet?
  trainfleet.training.pytorchjob_info:
    name: mnist
    namespace: training
    allow_missing: true
  register: __maybe_job
"""

RETURN = r"""
exists:
  description: Whether the job named O(name) exists.
  returned: when O(name) is set
  type: bool
  sample: true
job:
  description: The job named O(name) (null when it does not exist and O(allow_missing=true)).
  returned: when O(name) is set
  type: dict
  contains:
    name:
      description: Job name.
      type: str
      returned: always
      sample: mnist
    namespace:
      description: Job namespace.
      type: str
      returned: always
      sample: training
    uid:
      description: Job UID.
      type: str
      returned: always
    creation_timestamp:
      description: When the job object was created (RFC 3339).
      type: str
      returned: always
    labels:
      description: The job's labels.
      type: dict
      returned: always
    phase:
      description: Pending, Created, Running, Restarting, Suspended, Succeeded or Failed.
      type: str
      returned: always
      sample: Succeeded
    terminal:
      description: Whether the phase is Succeeded or Failed.
      type: bool
      returned: always
    conditions:
      description: The job's conditions in the operator's order (type, status, reason, message,
        last_transition_time, last_update_time).
      type: list
      elements: dict
      returned: always
    replica_statuses:
      description: Per replica type (Master, Worker) the desired replicas and the active,
        succeeded and failed pod counts.
      type: dict
      returned: always
      sample: {"Master": {"replicas": 1, "active": 0, "succeeded": 1, "failed": 0}}
    start_time:
      description: When the operator started the job (RFC 3339), null before.
      type: str
      returned: always
    completion_time:
      description: When the job finished (RFC 3339; for a failed job without completionTime,
        the time of the Failed condition), null while it runs.
      type: str
      returned: always
    duration_seconds:
      description: Seconds from start to completion, null until the job finished.
      type: float
      returned: always
    elapsed_seconds:
      description: Seconds from start to completion, or to now while the job runs.
      type: float
      returned: always
    restarts:
      description: Container restarts summed over the job's pods.
      type: int
      returned: always
    restarts_by_replica:
      description:
        - Per replica type as the spec names it (Master, Worker) the container restarts summed
          over its pods (C(restarts)), the failed count of status.replicaStatuses (C(failed)) and
          the restarts of each of its pods (C(pods), pod name to restarts).
        - A pod that was deleted (by hand, or evicted from a lost node) and created again by the
          operator starts again at 0 restarts; its end shows in the operator's events, not here.
      type: dict
      returned: always
      sample: {"Master": {"restarts": 2, "failed": 0, "pods": {"mnist-master-0": 2}},
               "Worker": {"restarts": 0, "failed": 0, "pods": {"mnist-worker-0": 0}}}
    restart_reasons:
      description:
        - Why containers of the job's pods restarted or died, oldest end first. One entry per
          container whose previous run ended (the kubelet keeps only the last one of each
          container, and C(restarts) says how many there were; C(run=previous)), one per container
          terminated now with a non-zero exit code (C(run=current)), and one per pod that failed
          as a whole (Evicted, ...; C(container) null).
        - Each has pod, replica_type, replica_index, node, container, init, restarts, run, reason
          (Error, OOMKilled, Evicted, ...), exit_code, signal and signal_name (from the
          runtime's signal, else exit code 128+N; 137 is SIGKILL, 143 SIGTERM), message,
          started_at, finished_at and observed_at.
        - With O(wait=true) the runs seen by the pod watch while waiting are kept too, so a pod
          that was deleted, evicted or replaced since still has its entry; C(observed_at) says when
          it was seen (null for entries read from the pods as they are now).
      type: list
      elements: dict
      returned: always
      sample: [{"pod": "mnist-master-0", "replica_type": "master", "replica_index": 0,
                "node": "trainfleet-worker2", "container": "pytorch", "init": false, "restarts": 2,
                "run": "previous", "reason": "Error", "exit_code": 1, "signal": null,
                "signal_name": null, "message": "Connection reset by peer",
                "started_at": "2025-01-01T10:02:20Z", "finished_at": "2025-01-01T10:03:35Z"}]
    pods:
      description: The job's pods, master first then workers by index.
      type: list
      elements: dict
      returned: always
      contains:
        name:
          description: Pod name.
          type: str
          returned: always
        replica_type:
          description: Replica type label (master, worker).
          type: str
          returned: always
        replica_index:
          description: Replica index label.
          type: int
          returned: always
        job_role:
          description: C(master) for the master replica, else null.
          type: str
          returned: always
        node:
          description: Node the pod runs on.
          type: str
          returned: always
        phase:
          description: Pod phase (Pending, Running, Succeeded, Failed).
          type: str
          returned: always
        restarts:
          description: Restarts of the pod's containers.
          type: int
          returned: always
        ready:
          description: Whether every container is ready.
          type: bool
          returned: always
        reason:
          description: The most telling reason (ImagePullBackOff, CrashLoopBackOff, OOMKilled,
            Error, Completed, Evicted, ...), null while all is well.
          type: str
          returned: always
        container:
          description: The container the reason is about.
          type: str
          returned: always
        exit_code:
          description: Exit code of that container (of its last run for CrashLoopBackOff).
          type: int
          returned: always
        last_reason:
          description: Reason of the previous run of a restarted container (for example OOMKilled).
          type: str
          returned: always
        last_exit_code:
          description: Exit code of the previous run of a restarted container.
          type: int
          returned: always
        containers:
          description: Per container (init containers first) name, init, ready, restarts, state
            (waiting, running, terminated), reason, message, exit_code, started_at, finished_at,
            last_reason, last_exit_code, last_finished_at.
          type: list
          elements: dict
          returned: always
    failure:
      description: Why the job failed, null unless the phase is Failed (or the wait failed on a pod).
      type: dict
      returned: always
      contains:
        reason:
          description: Reason of the Failed condition (or the pod's waiting reason).
          type: str
          returned: always
        message:
          description: Message of the Failed condition.
          type: str
          returned: always
        source:
          description:
            - Where RV(job.failure.pod), the exit code and the log tail come from.
            - C(live_pod) from the job's pods as they are now.
            - C(snapshot) from a record taken while waiting, when a container of the pod failed
              (the operator deleted the pods since).
            - C(events) from the operator's events on the job (pods deleted, nothing recorded
              before, so no log tail).
            - Null when nothing names a failing pod.
          type: str
          returned: always
          sample: snapshot
        pod:
          description: The pod that failed first.
          type: str
          returned: always
        replica_type:
          description: Its replica type (master, worker).
          type: str
          returned: always
        replica_index:
          description: Its replica index.
          type: int
          returned: always
        node:
          description: The node it ran on (null when only the events name the pod).
          type: str
          returned: always
        container:
          description: Its failing container.
          type: str
          returned: always
        container_reason:
          description: The container's reason (Error, OOMKilled, ImagePullBackOff, ...).
          type: str
          returned: always
        container_message:
          description: The container's termination (or waiting) message, when it has one.
          type: str
          returned: always
        exit_code:
          description: The container's exit code.
          type: int
          returned: always
        observed_at:
          description: When the snapshot the failure (or only its log tail, for a live pod deleted before
            its log could be read) comes from was taken (RFC 3339); null when no snapshot was used.
          type: str
          returned: always
        log_tail:
          description: The last O(log_lines) lines of the failing container's log (when O(name) is set);
            of the failed run, read with C(previous=true) when the container has restarted since.
          type: list
          elements: str
          returned: always
        log_error:
          description: Why the log could not be read, when it could not.
          type: str
          returned: when the log could not be read
        hint:
          description: When the failing pod no longer exists, why (for example deleted by the operator
            when the job exceeded C(backoffLimit)), what the failure is based on instead, and how to
            keep the pods next time. Null otherwise.
          type: str
          returned: always
        events:
          description: The most recent events of the job and its pods (time, type, reason,
            object, message, count).
          type: list
          elements: dict
          returned: always
jobs:
  description: Every job read (one entry when O(name) is set), each shaped like RV(job).
  returned: always
  type: list
  elements: dict
transitions:
  description: The phase changes seen while waiting, the first entry being the phase at the start.
  returned: when O(wait=true)
  type: list
  elements: dict
  sample:
    - {"time": "2025-01-01T10:00:00Z", "elapsed_seconds": 0.0, "phase": "Created", "reason": "PyTorchJobCreated", "message": null}
    - {"time": "2025-01-01T10:00:09Z", "elapsed_seconds": 9.1, "phase": "Running", "reason": "PyTorchJobRunning", "message": null}
waited_seconds:
  description: Seconds spent waiting.
  returned: when O(wait=true)
  type: float
  sample: 42.7
"""

import json
import threading
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainfleet.training.plugins.module_utils import pytorchjob as pj
from ansible_collections.trainfleet.training.plugins.module_utils.errors import (
    JobNotFoundError,
    PyTorchJobError,
)
from ansible_collections.trainfleet.training.plugins.module_utils.k8s import (
    PyTorchJobService,
    auth_arg_spec,
    get_api_client,
    iter_lines,
    require_kubernetes,
)
from ansible_collections.trainfleet.training.plugins.module_utils.progress import ProgressReporter
from ansible_collections.trainfleet.training.plugins.module_utils.waiter import (
    OUTCOME_FAILED,
    OUTCOME_POD_PROBLEM,
    OUTCOME_TIMEOUT,
    JobWaiter,
)


def argspec():
    spec = auth_arg_spec()
    spec.update(
        name=dict(type="str"),
        namespace=dict(type="str", default="default"),
        label_selector=dict(type="str"),
        allow_missing=dict(type="bool", default=False),
        wait=dict(type="bool", default=False),
        wait_for=dict(type="str", default="terminal",
                      choices=["terminal", "Created", "Running", "Restarting", "Suspended"]),
        wait_timeout=dict(type="int", default=3600),
        wait_check_interval=dict(type="int", default=10),
        wait_fail_reasons=dict(type="list", elements="str",
                               default=list(pj.DEFAULT_FATAL_WAITING_REASONS)),
        progress_file=dict(type="path"),
        log_lines=dict(type="int", default=50),
        event_limit=dict(type="int", default=20),
    )
    return spec


def _log_tail(service, namespace, pod, container, lines, previous_first=False):
    """The last lines of a container's log; the previous run's when the current one has none
    (CrashLoopBackOff). previous_first reads the previous run first (the failed run of a
    container that restarted since). Returns (lines, error message or None)."""
    errors = []
    for previous in ((True, False) if previous_first else (False, True)):
        try:
            chunks = service.iter_log(namespace, pod, container=container, tail_lines=lines,
                                      previous=previous)
            text = list(iter_lines(chunks))
        except PyTorchJobError as exc:
            errors.append(exc.msg)
            continue
        if text:
            return text, None
    return [], "; ".join(errors) or None


class FailureRecorder(object):
    """Snapshots of failed containers of one job's pods, taken the moment they are seen.

    observe(pod) is called with every pod the pod watch reports. The first failure of each
    replica type is kept (with its log tail, read at once: the operator may delete the pod a
    moment later); a snapshot whose log could not be read is retried on the pod's next
    event, a few times. Thread-safe: the pod watch thread writes, the module reads.
    """

    LOG_ATTEMPTS = 3
    # Every ended run seen (restart_reasons), at most this many: a crash loop must not grow it forever.
    MAX_RESTART_RECORDS = 200

    def __init__(self, service, namespace, name, log_lines, now=pj.utcnow):
        self.service = service
        self.namespace = namespace
        self.name = name
        self.log_lines = log_lines
        self.now = now
        self._lock = threading.Lock()
        self._by_key = {}
        self._order = []
        self._restarts = []
        self._restart_keys = set()

    def _record_restarts(self, pod):
        entries = pj.pod_restart_reasons(pod)
        if not entries:
            return
        observed_at = pj.format_time(self.now())
        with self._lock:
            for entry in entries:
                key = pj.restart_reason_key(entry)
                if key in self._restart_keys or len(self._restarts) >= self.MAX_RESTART_RECORDS:
                    continue
                self._restart_keys.add(key)
                self._restarts.append(dict(entry, observed_at=observed_at))

    def restart_reasons(self):
        """Every ended run seen while waiting (copies, in the order seen)."""
        with self._lock:
            return [dict(entry) for entry in self._restarts]

    def observe(self, pod):
        if not isinstance(pod, dict) or not pj.pod_belongs_to_job(pod, self.name):
            return None
        self._record_restarts(pod)
        found = pj.container_failure(pod)
        if not found:
            return None
        key = found["replica_type"] or found["pod"]
        with self._lock:
            current = self._by_key.get(key)
            if current is not None:
                retry = (current["pod"] == found["pod"] and current["container"] == found["container"]
                         and not current["log_tail"] and current.get("log_error")
                         and current["log_attempts"] < self.LOG_ATTEMPTS)
                if not retry:
                    return current
        snapshot = dict(found, observed_at=pj.format_time(self.now()), log_tail=[], log_error=None,
                        log_attempts=(current or {}).get("log_attempts", 0) + 1)
        if current is not None:
            snapshot["observed_at"] = current["observed_at"]
        if self.log_lines > 0:
            snapshot["log_tail"], snapshot["log_error"] = _log_tail(
                self.service, self.namespace, found["pod"], found["container"], self.log_lines,
                previous_first=found["previous"])
        with self._lock:
            if key not in self._by_key:
                self._order.append(key)
            self._by_key[key] = snapshot
        return snapshot

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
        self._thread = threading.Thread(target=self._run, name="pytorchjob-pod-watch-%s" % self.name)
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
                except PyTorchJobError as exc:
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
        except PyTorchJobError:
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


def _diagnose(service, params, summary, pod=None, container=None, job=None, snapshots=None):
    """Fill summary['failure'] with the log tail of the failing container and recent events.

    pod/container: a live pod with a problem (a wait that fails on a pod). job/snapshots: a
    Failed job and the snapshots taken while waiting; when no live pod shows the failure,
    the snapshot or else the operator's events fill it in (pj.complete_failure).
    """
    namespace, name = summary["namespace"], summary["name"]
    failure = summary.get("failure") or pj.new_failure(
        pod.get("reason") if pod else None, (container or {}).get("message"))
    for key, value in pj.new_failure().items():
        failure.setdefault(key, value)
    snapshots = snapshots or []
    live = [p["name"] for p in summary["pods"]]
    if pod is not None:
        failure.update({
            "source": pj.FAILURE_SOURCE_LIVE,
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
        names += pj.replica_pod_names(job) + [s["pod"] for s in snapshots]
    if params["event_limit"] > 0 or fallback:
        try:
            events = service.list_events(namespace, list(dict.fromkeys(names)))
        except PyTorchJobError as exc:
            failure["events_error"] = exc.msg
    if fallback:
        pj.complete_failure(failure, job, snapshots, events, live)

    if failure["source"] == pj.FAILURE_SOURCE_LIVE and failure.get("container") and params["log_lines"] > 0:
        tail, error = _log_tail(service, namespace, failure["pod"], failure["container"],
                                params["log_lines"])
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
        failure["events"] = pj.recent_events(events, params["event_limit"])
    summary["failure"] = failure
    return failure


def _failure_message(summary):
    failure = summary["failure"] or {}
    parts = ["PyTorchJob %s/%s %s" % (summary["namespace"], summary["name"], summary["phase"])]
    if failure.get("reason") or failure.get("message"):
        parts.append(": %s" % " - ".join(x for x in (failure.get("reason"), failure.get("message")) if x))
    if failure.get("pod"):
        parts.append("; pod %s container %s: %s (exit code %s)" % (
            failure["pod"], failure.get("container"), failure.get("container_reason"),
            failure.get("exit_code")))
        if failure.get("source") == pj.FAILURE_SOURCE_SNAPSHOT:
            parts.append(", recorded at %s while waiting" % failure.get("observed_at"))
        elif failure.get("source") == pj.FAILURE_SOURCE_EVENTS:
            parts.append(", from the operator's events")
    if failure.get("log_tail"):
        parts.append("; last log line: %s" % failure["log_tail"][-1])
    if failure.get("hint"):
        parts.append(". %s" % failure["hint"])
    return "".join(parts)


def _pods_line(summary):
    return ", ".join("%s %s%s" % (p["name"], p["phase"], " (%s)" % p["reason"] if p["reason"] else "")
                     for p in summary["pods"]) or "no pods"


def round_progress(reporter, namespace, name):
    """on_round for JobWaiter: one progress line per round on the progress channel."""
    def report(job, summaries, elapsed):
        reporter.report("PyTorchJob %s/%s %s; %s" % (
            namespace, name, pj.job_phase(job), _pods_line({"pods": summaries})))
    return report


class ProgressLog(object):
    """Records transitions in the system log and, optionally, a JSON-lines file."""

    def __init__(self, module, namespace, name, path=None):
        self.module = module
        self.prefix = "pytorchjob %s/%s" % (namespace, name)
        self.path = path

    def __call__(self, transition):
        self.module.log("%s: phase %s after %ss (%s)" % (
            self.prefix, transition["phase"], transition["elapsed_seconds"],
            transition.get("reason") or "-"))
        if self.path:
            line = dict(transition, job=self.prefix.split(" ", 1)[1])
            try:
                with open(self.path, "a") as handle:
                    handle.write(json.dumps(line, sort_keys=True) + "\n")
            except (IOError, OSError) as exc:
                self.module.warn("Cannot write progress_file %s: %s" % (self.path, exc))
                self.path = None


def _one_job(module, service):
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

    wait_result = None
    snapshots = []
    recorded_restarts = []
    pod_watch = None
    if params["wait"]:
        waiter = JobWaiter(service, namespace, name, wanted=params["wait_for"],
                           timeout=params["wait_timeout"],
                           check_interval=params["wait_check_interval"],
                           fatal_reasons=params["wait_fail_reasons"],
                           on_transition=ProgressLog(module, namespace, name, params["progress_file"]),
                           on_round=round_progress(ProgressReporter(min_interval=5.0), namespace, name))
        # The operator deletes the pods of a job that exceeds its backoffLimit before it marks
        # the job Failed: record a failing container while it still exists.
        recorder = FailureRecorder(service, namespace, name, params["log_lines"])
        pod_watch = PodFailureWatch(service, namespace, name, recorder,
                                    timeout=params["wait_timeout"]).start()
        try:
            wait_result = waiter.wait()
        finally:
            pod_watch.stop()
        snapshots = recorder.snapshots()
        recorded_restarts = recorder.restart_reasons()
        job = wait_result.job
        result.update(transitions=wait_result.transitions, waited_seconds=wait_result.elapsed)

    summary = pj.job_summary(job, service.list_pods(namespace, name))
    # runs of pods that were deleted or replaced while waiting are only known from the pod watch
    summary["restart_reasons"] = pj.merge_restart_reasons(summary["restart_reasons"], recorded_restarts)
    result.update(exists=True, job=summary, jobs=[summary])

    if summary["phase"] == pj.PHASE_FAILED:
        failure = _diagnose(service, params, summary, job=job, snapshots=snapshots)
        if pod_watch is not None and pod_watch.error and failure["source"] != pj.FAILURE_SOURCE_LIVE:
            module.warn("Could not watch the pods of PyTorchJob %s/%s while waiting: %s"
                        % (namespace, name, pod_watch.error))
    if wait_result is None:
        return result

    if wait_result.outcome == OUTCOME_FAILED:
        raise PyTorchJobError(_failure_message(summary), **result)
    if wait_result.outcome == OUTCOME_POD_PROBLEM:
        problem = wait_result.problem_pods[0]
        current = dict((p["name"], p) for p in summary["pods"]).get(problem["name"], problem)
        container = None
        for entry in current["containers"]:
            if entry["state"] == "waiting" and entry["reason"] in params["wait_fail_reasons"]:
                container = entry
                break
        _diagnose(service, params, summary, pod=current, container=container)
        failure = summary["failure"]
        raise PyTorchJobError(
            "PyTorchJob %s/%s cannot start: pod %s container %s is %s: %s" % (
                namespace, name, failure["pod"], failure["container"], failure["container_reason"],
                failure.get("message") or "-"), **result)
    if wait_result.outcome == OUTCOME_TIMEOUT:
        events = []
        try:
            events = pj.recent_events(
                service.list_events(namespace, [name] + [p["name"] for p in summary["pods"]]),
                params["event_limit"])
        except PyTorchJobError:
            pass
        result["events"] = events
        raise PyTorchJobError(
            "Timed out after %ss waiting for PyTorchJob %s/%s to reach %s: phase is %s; pods: %s" % (
                params["wait_timeout"], namespace, name, params["wait_for"], summary["phase"],
                _pods_line(summary)), **result)
    return result


def _all_jobs(module, service):
    params = module.params
    namespace = params["namespace"]
    jobs = service.list_jobs(namespace, params["label_selector"])
    pods = service.list_pods(namespace) if jobs else []
    by_job = {}
    for pod in pods:
        label = ((pod.get("metadata") or {}).get("labels") or {}).get(pj.LABEL_JOB_NAME)
        by_job.setdefault(label, []).append(pod)
    summaries = [pj.job_summary(job, by_job.get((job.get("metadata") or {}).get("name"), []))
                 for job in jobs]
    return {"changed": False, "jobs": summaries}


def execute_module(module, service):
    if module.params["name"]:
        return _one_job(module, service)
    return _all_jobs(module, service)


def main():
    module = AnsibleModule(
        argument_spec=argspec(),
        supports_check_mode=True,
        required_if=[("wait", True, ["name"])],
        mutually_exclusive=[("name", "label_selector")],
    )
    for option in ("wait_timeout", "wait_check_interval", "log_lines", "event_limit"):
        if module.params[option] < 0:
            module.fail_json(msg="%s must be 0 or more, got %s" % (option, module.params[option]))
    require_kubernetes(module)
    try:
        service = PyTorchJobService(get_api_client(module.params))
        result = execute_module(module, service)
    except PyTorchJobError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
