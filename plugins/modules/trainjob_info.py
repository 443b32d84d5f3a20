#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: trainjob_info
short_description: Read the state of distributed training jobs (PyTorchJob, MPIJob, Volcano Job) and wait for one
version_added: 0.2.0
description:
  - Reads one training job (O(name)) or every job of O(kind) in a namespace (optionally filtered by
    O(label_selector)). O(kind) is C(PyTorchJob) (Kubeflow training operator, C(kubeflow.org/v1),
    the default), C(MPIJob) (mpi-operator, C(kubeflow.org/v2beta1), a Launcher and Workers) or
    C(VolcanoJob) (C(batch.volcano.sh/v1alpha1) Job, what TorchX submits; its pods are labelled
    C(volcano.sh/job-name) and named after their task).
  - C(trainfleet.training.pytorchjob_info) is a redirect to this module (its O(kind) defaults to
    C(PyTorchJob)), so playbooks written for it keep working.
  - For each job returns the phase (C(Pending), C(Created), C(Running), C(Restarting),
    C(Suspended), C(Succeeded) or C(Failed); a Volcano job's C(status.state.phase) is mapped onto
    these, C(Completed) to C(Succeeded), C(Aborted) and C(Terminated) to C(Failed), and kept in
    RV(job.kind_phase)), the conditions, per replica type (Volcano, per task) the
    active/succeeded/failed counters, start and completion time, duration, and per pod its
    replica type and index, node, phase, restarts, waiting or terminated reason
    (C(ImagePullBackOff), C(CrashLoopBackOff), C(OOMKilled), C(Error), ...) and exit code.
  - Restarts per replica type (RV(job.restarts_by_replica)) and the reason of each restart or
    death (RV(job.restart_reasons)) - which pod and container, on which node, when, with which
    reason, exit code and signal.
  - The phase of a Kubeflow job is the latest true condition, as the operator sets them;
    C(Succeeded) and C(Failed) always win, C(Pending) means the operator has not set any condition
    yet.
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
  - Progress while waiting. Every check round the module writes one line to the progress channel
    of the C(trainfleet.training.progress) stdout callback, which prints it at least every 30 s -
    the phase and, once rank 0 has printed an epoch (the last 40 lines of its log, read at most
    every 10 s), epoch k/N (N from the trainer's C(--epochs)), loss, accuracy, samples/s, the time
    since the job started and an estimate of the time left. Besides, every
    phase change is recorded as it happens in three places, the returned RV(transitions) list
    (with timestamps and elapsed seconds), the system log of the host running the module
    (C(module.log), for example C(journalctl -f)), and, when O(progress_file) is set, one JSON
    line appended per change to that file, which C(tail -f) shows live.
  - Gang scheduling (Volcano). While the job is C(Pending) or C(Created) and a Volcano PodGroup of
    the same name exists (the training operator and the mpi-operator name it after the job), the job
    gets RV(job.podgroup) and RV(job.pending_reason), the reason the gang cannot be placed, naming
    the resources (for example C(insufficient cpu)). When PodGroups cannot be read (no Volcano, HTTP 404;
    not allowed, HTTP 403) nothing is added. The caller needs C(get) on C(podgroups.scheduling.volcano.sh)
    and C(list) on C(events) in the namespace for it.
  - The module only reads the cluster; it supports check mode and always returns C(changed=false).
author:
  - trainfleet developers (!UNKNOWN)
options:
  kind:
    description:
      - The kind of job. C(VolcanoJob) is Volcano's C(Job) (C(batch.volcano.sh/v1alpha1)).
    type: str
    default: PyTorchJob
    choices: [PyTorchJob, MPIJob, VolcanoJob]
  name:
    description:
      - Name of one job. Without it, every job of O(kind) in O(namespace) is returned.
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
  pending_timeout:
    description:
      - Seconds (0 = off) after which a wait ends early, not failed, when the job's gang cannot be
        placed - its Volcano PodGroup stays C(Pending) or C(Inqueue) with an C(Unschedulable) condition
        (or the scheduler's C(Unschedulable) events) that long without a break. The job is then still
        waiting as a whole (no pod started); RV(job.pending_reason) says why and RV(pending_timeout_reached) is true.
      - Checked once per O(wait_check_interval) round, so the wait ends up to one round later.
      - Without gang scheduling (no PodGroup, or PodGroups cannot be read) it has no effect.
    type: int
    default: 0
  progress_timeout:
    description:
      - Seconds (0 = off) after which a wait on a C(Running) job fails when its pods printed no log
        line and started no container for that long - a hang (a rank waiting on a peer that never
        comes, a stuck read), whatever script runs. The message names the newest line read and its
        pod; RV(stall) has the same. The job is left running.
      - The lines are rank 0's (every running pod's, at most 8, until rank 0 is known), read at most
        every 10 s, so the wait ends up to a round and a read later. Not checked while no log could
        be read.
      - Set it above the longest silence of your script (a long epoch with no output).
    type: int
    default: 0
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
      - C(CreateContainerConfigError) with the kubelet's C(failed to sync secret cache) or
        C(failed to sync configmap cache) does not count, because the kubelet retries it by itself.
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
  timeline:
    description:
      - With O(name), return RV(job.timeline), the job's start-up timeline. It costs one read of
        the events and of the head (256 KiB) of each started pod's log.
    type: bool
    default: true
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
  - The pods are found by their controller's labels, C(training.kubeflow.org/job-name) with
    C(training.kubeflow.org/replica-type) (PyTorchJob) or C(training.kubeflow.org/job-role)
    (MPIJob, C(launcher) or C(worker)) and C(training.kubeflow.org/replica-index); C(volcano.sh/job-name)
    with the task name in C(volcano.sh/task-spec) (Volcano).
  - An MPIJob's launcher pod is owned by the C(batch/v1) Job C(<name>-launcher) the operator creates.
seealso:
  - module: trainfleet.training.trainjob_logs
"""

EXAMPLES = r"""
- name: Read one job
  trainfleet.training.trainjob_info:
    name: mnist
    namespace: training
    kubeconfig: "{{ trainfleet_cache_dir }}/kubeconfig-trainfleet"
  register: __job

- name: Show its phase
  ansible.builtin.debug:
    msg: "{{ __job.job.phase }} after {{ __job.job.elapsed_seconds }}s"

- name: Wait until it finished (fails fast with the reason and the log tail when it Failed)
  trainfleet.training.trainjob_info:
    name: mnist
    namespace: training
    wait: true
    wait_timeout: 1800
    progress_file: /tmp/mnist-progress.jsonl
  register: __job_done

- name: Wait until it is running
  trainfleet.training.trainjob_info:
    name: mnist
    namespace: training
    wait: true
    wait_for: Running
    wait_timeout: 600

- name: List the jobs of a team
  trainfleet.training.trainjob_info:
    namespace: training
    label_selector: team=ml
  register: __jobs

- name: Wait for an MPIJob (rank 0's lines are in its launcher's log)
  trainfleet.training.trainjob_info:
    kind: MPIJob
    name: digits-mpi
    namespace: training
    wait: true

- name: Show that a gang that does not fit stays Pending as a whole (returns after 60 s unschedulable)
  trainfleet.training.trainjob_info:
    name: too-big
    namespace: training
    wait: true
    wait_timeout: 600
    pending_timeout: 60
  register: __gang

- name: Say why
  ansible.builtin.debug:
    msg: "{{ __gang.job.pending_reason }} (PodGroup {{ __gang.job.podgroup.phase }}, {{ __gang.job.pods | length }} pods)"
  when: __gang.pending_timeout_reached

- name: Does the job exist yet?
  trainfleet.training.trainjob_info:
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
    kind:
      description: The kind of job, as O(kind) names it.
      type: str
      returned: always
      sample: PyTorchJob
    kind_phase:
      description: The phase in the kind's own words (a Volcano job's C(status.state.phase), for example
        C(Completed)); for the Kubeflow kinds the same as RV(job.phase).
      type: str
      returned: always
      sample: Succeeded
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
        - With O(wait=true) each container's run also has C(log_tail), the last lines (at most 5, at
          most O(log_lines)) of that run's log, read when the pod watch first saw the run end (the
          kubelet keeps one previous run per container, so a later restart or the pod's deletion
          would lose it), and C(log_error) when it could not be read. A run that ended after the
          watch's last look (the job ended first) is read at the end of the wait, while its pod
          exists (the newest 10 such runs).
      type: list
      elements: dict
      returned: always
      sample: [{"pod": "mnist-master-0", "replica_type": "master", "replica_index": 0,
                "node": "trainfleet-worker2", "container": "pytorch", "init": false, "restarts": 2,
                "run": "previous", "reason": "Error", "exit_code": 1, "signal": null,
                "signal_name": null, "message": "Connection reset by peer",
                "started_at": "2025-01-01T10:02:20Z", "finished_at": "2025-01-01T10:03:35Z",
                "log_tail": ["RuntimeError: Connection reset by peer"], "log_error": null}]
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
    timeline:
      description:
        - The start-up timeline (what users ask when a job "takes forever to start"), with O(timeline=true).
        - C(steps), in order, C(submitted) (the job's creationTimestamp), C(scheduled) (the last pod's
          C(PodScheduled) condition), C(image_pulled) (the last C(Pulled) event of its pods),
          C(containers_started) (the last container's C(startedAt)), C(rendezvous) (rank 0's
          C(trainfleet-rank:) line, printed once the rendezvous is complete), C(first_epoch) (rank 0's
          first C(trainfleet-epoch:) line; both at the trainer's C(time=), or the kubelet's timestamp of
          the line for older trainers) and C(finished) (the C(Succeeded) or C(Failed) condition). Each has
          C(step), C(label), C(time) (RFC 3339, null when not reached or not known), C(seconds) (since the
          step before it that has a time) and C(since_submitted).
        - C(pods), per pod, C(pod), C(node), C(created), C(scheduled), C(pull_started), C(pulled),
          C(pull_seconds) (what the kubelet's C(Pulled) events say the pulls took, summed), C(images_present)
          (true when every image was already on the node) and C(containers_started).
        - C(rank0_pod), C(image_pull_seconds_max), C(lines) (the steps as text with the time between
          them, as the train summary prints them) and C(errors) (events or logs that could not be read).
      type: dict
      returned: with O(name) and O(timeline=true)
      sample: {"steps": [{"step": "submitted", "label": "submitted", "time": "2025-01-01T10:00:00Z", "seconds": null,
                          "since_submitted": 0.0}],
               "rank0_pod": "mnist-worker-1", "image_pull_seconds_max": 41.3,
               "lines": ["         submitted            2025-01-01T10:00:00Z", "+2.0s    pods scheduled       2025-01-01T10:00:02Z"]}
    podgroup:
      description:
        - The job's Volcano PodGroup (C(scheduling.volcano.sh/v1beta1), same name as the job), read while
          the job is C(Pending) or C(Created) - a gang not placed yet creates no pod at all.
        - C(name), C(phase) (C(Pending), C(Inqueue), C(Running), C(Completed), C(Unknown)), C(min_member),
          C(min_resources), C(queue), C(running), C(succeeded), C(failed), C(conditions) (type, status,
          reason, message, last_transition_time), C(message) (the Unschedulable condition's message,
          else the scheduler's last warning) and C(events) (the last 5 events on the PodGroup).
      type: dict
      returned: with O(name), when the job is Pending or Created and its PodGroup can be read
      sample: {"name": "digits", "phase": "Pending", "min_member": 3, "queue": "team-a",
               "conditions": [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                               "message": "3/3 tasks in gang unschedulable: pod group is not ready, 3 minAvailable"}],
               "message": "3/3 tasks in gang unschedulable: pod group is not ready, 3 minAvailable"}
    pending_reason:
      description: Why the gang cannot be placed, naming the resources the scheduler lacks; null when the
        PodGroup is not stuck (placed, or not yet looked at by the scheduler).
      type: str
      returned: with RV(job.podgroup)
      sample: "gang digits cannot be placed (PodGroup Inqueue, minMember 3): insufficient cpu; 0/3 nodes are unavailable: 3 Insufficient cpu."
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
pending_timeout_reached:
  description: True when the wait ended early because the job's gang stayed unschedulable for O(pending_timeout) seconds.
  returned: when O(wait=true)
  type: bool
  sample: false
stall:
  description:
    - Why the wait ended on O(progress_timeout) - seconds without a sign of life, the pod and time of
      the newest line read, and that line; null otherwise.
  returned: when O(wait=true)
  type: dict
  sample: {"silent_seconds": 61.2, "progress_timeout": 60, "pod": "mnist-worker-0",
           "last_line_at": "2025-01-01T10:03:00Z", "last_line": "rank 0: waiting for the batch"}
waited_seconds:
  description: Seconds spent waiting.
  returned: when O(wait=true)
  type: float
  sample: 42.7
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.jobinfo import all_jobs, one_job
from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import (
    DEFAULT_FATAL_WAITING_REASONS,
    KIND_CHOICES,
    get_kind,
)
from ansible_collections.trainfleet.training.plugins.module_utils.k8s import (
    TrainJobService,
    auth_arg_spec,
    get_api_client,
    require_kubernetes,
)


def argspec():
    spec = auth_arg_spec()
    spec.update(
        kind=dict(type="str", default="PyTorchJob", choices=KIND_CHOICES),
        name=dict(type="str"),
        namespace=dict(type="str", default="default"),
        label_selector=dict(type="str"),
        allow_missing=dict(type="bool", default=False),
        wait=dict(type="bool", default=False),
        wait_for=dict(type="str", default="terminal",
                      choices=["terminal", "Created", "Running", "Restarting", "Suspended"]),
        wait_timeout=dict(type="int", default=3600),
        wait_check_interval=dict(type="int", default=10),
        pending_timeout=dict(type="int", default=0),
        progress_timeout=dict(type="int", default=0),
        wait_fail_reasons=dict(type="list", elements="str", default=list(DEFAULT_FATAL_WAITING_REASONS)),
        progress_file=dict(type="path"),
        log_lines=dict(type="int", default=50),
        event_limit=dict(type="int", default=20),
        timeline=dict(type="bool", default=True),
    )
    return spec


def main():
    module = AnsibleModule(
        argument_spec=argspec(),
        supports_check_mode=True,
        required_if=[("wait", True, ["name"])],
        mutually_exclusive=[("name", "label_selector")],
    )
    for option in ("wait_timeout", "wait_check_interval", "log_lines", "event_limit", "pending_timeout",
                   "progress_timeout"):
        if module.params[option] < 0:
            module.fail_json(msg="%s must be 0 or more, got %s" % (option, module.params[option]))
    require_kubernetes(module)
    kind = get_kind(module.params["kind"])
    try:
        service = TrainJobService(get_api_client(module.params), kind)
        if module.params["name"]:
            result = one_job(module, service, kind)
        else:
            result = all_jobs(module, service, kind)
    except TrainfleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
