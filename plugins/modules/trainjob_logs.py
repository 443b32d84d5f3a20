#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: trainjob_logs
short_description: Fetch the log of the pod that ran global rank 0 of a training job (PyTorchJob, MPIJob, Volcano Job)
version_added: 0.2.0
description:
  - Finds the pod of a training job that ran global rank 0 and returns its log, or with
    O(all_ranks=true) writes every pod's log to O(dest_dir). O(kind) is C(PyTorchJob)
    (C(kubeflow.org/v1), the default), C(MPIJob) (C(kubeflow.org/v2beta1)) or C(VolcanoJob)
    (C(batch.volcano.sh/v1alpha1), what TorchX submits).
  - C(trainfleet.training.pytorchjob_logs) is a redirect to this module (O(kind) defaults to
    C(PyTorchJob)), so playbooks written for it keep working.
  - An MPIJob's ranks run under C(mpirun) in the launcher pod, which prints every rank's output;
    the launcher's log is where rank 0's lines appear (the workers' logs hold only their SSH
    server's), so the launcher is the pod this module returns.
  - With torchrun's c10d rendezvous, ranks follow join order, not pod names, so rank 0 is found
    from what the processes printed at the start of each pod's log (the first O(rank_scan_bytes)),
    in this order, the trainer's own C(trainfleet-rank:) line (method C(trainer-log)),
    then torchrun's elastic agent C(Rendezvous complete) block with C(group_rank) and
    C(global_ranks) (method C(torchrun-log), printed by torchrun with C(LOGLEVEL=INFO)),
    then the lines only the trainer's global rank 0 prints (C(trainfleet-epoch:),
    C(trainfleet-result:), ...; method C(trainer-rank0-output)), and only when no pod says
    anything the master replica 0 (method C(fallback-master-0)). RV(method) says which one
    decided.
  - When the head of a pod's log says nothing about ranks and the log is longer than that head,
    its last O(rank_scan_tail_lines) lines are read as well. The kubelet serves only the current file of a rotated log
    (C(containerLogMaxSize), 10Mi by default on EKS nodes), so a long log loses its head and
    with it the rank lines; the rank-0-only lines near the end still tell.
  - The log is streamed in chunks, never loaded whole, so memory stays bounded for logs of
    hundreds of MB. The returned RV(log) holds at most the last O(max_bytes) bytes (starting at
    a line start when a whole line fits; RV(truncated) tells); O(dest) and the files in
    O(dest_dir) receive the whole log (after O(tail_lines) / O(since_seconds)), written straight
    to disk.
  - Works on finished pods; O(previous=true) reads the previous run of restarted containers.
  - With O(match), the module does not look for rank 0. It reads the log of every pod of the job
    with the kubelet's timestamps and returns the lines that the regular expression finds, with
    the pod and the time each line was written (RV(matches)). A job without pods is not an error
    then, so that a test can poll while pods are replaced. Fault-injection tests use it to time
    a recovery from the trainer's own lines.
  - The module only reads the cluster and supports check mode. Files (O(dest), O(dest_dir)) are
    written through a temporary file and replaced only when their content differs, which is
    the only case that reports C(changed=true); in check mode the log is still read and
    compared, but no file or directory is written.
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
      - Name of the job.
    type: str
    required: true
  namespace:
    description:
      - Namespace of the job.
    type: str
    default: default
  container:
    description:
      - Container whose log is read. Defaults, for a PyTorchJob, to C(pytorch) (the name the
        training operator requires), and otherwise (or when there is no C(pytorch) container) to
        the pod's first container.
    type: str
  tail_lines:
    description:
      - Only the last N lines of the log.
    type: int
  since_seconds:
    description:
      - Only log lines of the last N seconds.
    type: int
  max_bytes:
    description:
      - At most this many bytes (the end of the log) are returned in RV(log). V(0) returns no
        log text (useful with O(dest)). Files are not limited.
    type: int
    default: 1048576
  previous:
    description:
      - Read the previous (terminated) run of the container instead of the current one.
    type: bool
    default: false
  dest:
    description:
      - Also write the rank-0 pod's log to this file (on the host running the module).
    type: path
  all_ranks:
    description:
      - Write the log of every pod of the job to O(dest_dir), one file per pod named
        C(<replica type>-<index>-rank<R>.log) (C(ranks<A>-<B>) for a pod running several
        ranks, C(rank-unknown) when its log says nothing about ranks). RV(log) is not returned.
    type: bool
    default: false
  dest_dir:
    description:
      - Directory for O(all_ranks=true); created when missing.
    type: path
  rank_scan_bytes:
    description:
      - How many bytes from the start of each pod's log are read to find the ranks it ran.
    type: int
    default: 1048576
  rank_scan_tail_lines:
    description:
      - How many lines from the end of a pod's log are read when its head says nothing about
        ranks. V(0) reads no tail. The tail is streamed and parsed line by line, not kept.
    type: int
    default: 2000
  match:
    description:
      - A Python regular expression. Return the lines of every pod's log that it finds
        (C(re.search), on the line without its timestamp) in RV(matches), instead of the rank-0
        log. O(tail_lines), O(since_seconds), O(previous) and O(container) apply to each pod.
      - Cannot be combined with O(all_ranks) or O(dest).
    type: str
  match_limit:
    description:
      - With O(match), keep at most the last N matching lines of each pod.
    type: int
    default: 500
extends_documentation_fragment:
  - trainfleet.training.k8s_auth
attributes:
  check_mode:
    support: full
    description: Reads the logs; writes no file in check mode and reports whether it would.
  diff_mode:
    support: none
    description: No diff is produced.
notes:
  - Logs of pods removed by the job's C(cleanPodPolicy) or C(ttlSecondsAfterFinished) are gone;
    the module then fails with a message saying the job has no pods.
seealso:
  - module: trainfleet.training.trainjob_info
"""

EXAMPLES = r"""
- name: Rank-0 log, last 200 lines
  trainfleet.training.trainjob_logs:
    name: mnist
    namespace: training
    tail_lines: 200
  register: __rank0

- name: Final metrics printed by the trainer
  ansible.builtin.debug:
    msg: "{{ __rank0.trainer_result.final_accuracy }} from {{ __rank0.pod }} ({{ __rank0.method }})"

- name: Whole rank-0 log to a file, nothing returned
  trainfleet.training.trainjob_logs:
    name: mnist
    namespace: training
    max_bytes: 0
    dest: /tmp/mnist-rank0.log

- name: Every pod's log, one file each
  trainfleet.training.trainjob_logs:
    name: mnist
    namespace: training
    all_ranks: true
    dest_dir: /tmp/mnist-logs

- name: Poll until a restarted trainer printed its resume line (any pod), bounded
  trainfleet.training.trainjob_logs:
    name: mnist
    namespace: training
    match: "^trainfleet-resume: "
  register: __resumed
  until: __resumed.matches | length > 0
  retries: 60
  delay: 2

- name: Previous run of a crash-looping rank-0 container
  trainfleet.training.trainjob_logs:
    name: mnist
    namespace: training
    previous: true
    tail_lines: 100
"""

RETURN = r"""
pod:
  description: The pod that ran global rank 0.
  returned: unless O(match) is set
  type: str
  sample: mnist-worker-1
replica_type:
  description: Its replica type (master, worker).
  returned: unless O(match) is set
  type: str
  sample: worker
replica_index:
  description: Its replica index.
  returned: unless O(match) is set
  type: int
  sample: 1
rank:
  description: The global rank the module looked for (always 0).
  returned: unless O(match) is set
  type: int
  sample: 0
ranks:
  description: Every global rank that pod ran (several with more than one process per pod);
    empty when decided by fallback.
  returned: unless O(match) is set
  type: list
  elements: int
  sample: [0, 1]
group_rank:
  description: The pod's torchrun group (node) rank, null when unknown.
  returned: unless O(match) is set
  type: int
  sample: 0
method:
  description: What decided, C(trainer-log), C(torchrun-log), C(trainer-rank0-output),
    C(fallback-master-0) (a PyTorchJob's master replica 0, or its first worker) or
    C(fallback-first-replica) (an MPIJob's launcher, a Volcano job's first task).
  returned: unless O(match) is set
  type: str
  sample: trainer-log
candidates:
  description: Pods that claimed rank 0 (more than one only after elastic restarts; the most
    recently started wins).
  returned: unless O(match) is set
  type: list
  elements: str
scanned:
  description: What each pod's log said about ranks (pod, replica_type, replica_index, ranks,
    group_rank, source, error, and part, C(head) or C(tail) when the tail was read too).
  returned: unless O(match) is set
  type: list
  elements: dict
container:
  description: The container whose log was read.
  returned: unless O(all_ranks=true) or O(match) is set
  type: str
  sample: pytorch
log:
  description: The rank-0 log, at most the last O(max_bytes) bytes.
  returned: unless O(all_ranks=true) or O(match) is set
  type: str
log_lines:
  description: RV(log) split into lines.
  returned: unless O(all_ranks=true) or O(match) is set
  type: list
  elements: str
truncated:
  description: Whether RV(log) was cut to O(max_bytes).
  returned: unless O(all_ranks=true) or O(match) is set
  type: bool
  sample: false
bytes:
  description: Size of the whole log read from the API server.
  returned: unless O(all_ranks=true) or O(match) is set
  type: int
  sample: 18342
returned_bytes:
  description: Size of RV(log).
  returned: unless O(all_ranks=true) or O(match) is set
  type: int
trainer_result:
  description:
    - The JSON of the trainer's last C(trainfleet-result:) line in RV(log) (final_accuracy,
      final_loss, epochs, model_uri, metrics_uri, plot_uri, world_size, duration_s, ...), null when absent.
    - Always with C(resumed_from_epoch) (the epoch of the snapshot rank 0 resumed from, 0 when it
      started fresh) and C(restarts) (torchrun's restarts of the worker group on rank 0's node), as
      int or null when the trainer did not say; older trainers' C(trainfleet-resume:) line fills them in.
  returned: unless O(all_ranks=true) or O(match) is set
  type: dict
path:
  description: The file written (O(dest)), null without O(dest).
  returned: unless O(all_ranks=true) or O(match) is set
  type: str
files:
  description: One entry per pod with O(all_ranks=true, pod, replica_type, replica_index, ranks,
    group_rank, path, bytes, changed, error).
  returned: when O(all_ranks=true)
  type: list
  elements: dict
dest_dir:
  description: The directory of RV(files).
  returned: when O(all_ranks=true)
  type: str
matches:
  description:
    - With O(match), the matching lines of every pod, oldest first (by the time the kubelet
      recorded; the lines of one pod keep their order). Each has C(pod), C(replica_type),
      C(replica_index), C(node), C(time) (UTC, C(YYYY-MM-DDTHH:MM:SS.ffffffZ)), C(epoch_s)
      (the same time in seconds since the epoch), C(line) (without the timestamp) and C(trainer),
      what the line says in the trainer's log-line contract, as C(kind) and its fields;
      C(epoch) (epoch, loss, test_acc), C(snapshot) (epoch, uri), C(snapshot_failed) (epoch),
      C(storage_retry) (op, uri, attempt, attempts), C(resume) (epoch, restarts), C(rank)
      (rank, world_size, group_rank), C(result) (the result's fields); C(kind) null for any other line.
  returned: when O(match) is set
  type: list
  elements: dict
  sample: [{"pod": "mnist-worker-1", "replica_type": "worker", "replica_index": 1, "node": "trainfleet-worker",
            "time": "2025-01-01T10:03:12.512331Z", "epoch_s": 1735725792.512331,
            "line": "trainfleet-resume: epoch=3 next_epoch=4 snapshot=s3://b/p/snapshot-epoch-00003.pt restarts=0",
            "trainer": {"kind": "resume", "epoch": 3, "restarts": 0}}]
pods:
  description:
    - With O(match), every pod of the job (C(name), C(replica_type), C(replica_index), C(node),
      C(phase), C(restarts)) and C(error), why its log could not be read (a container not
      started yet), else null.
  returned: when O(match) is set
  type: list
  elements: dict
"""

import json
import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import KIND_CHOICES, get_kind
from ansible_collections.trainfleet.training.plugins.module_utils.joblogs import job_pods, match_lines, rank0_log
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
        name=dict(type="str", required=True),
        namespace=dict(type="str", default="default"),
        container=dict(type="str"),
        tail_lines=dict(type="int"),
        since_seconds=dict(type="int"),
        max_bytes=dict(type="int", default=1048576),
        previous=dict(type="bool", default=False),
        dest=dict(type="path"),
        all_ranks=dict(type="bool", default=False),
        dest_dir=dict(type="path"),
        rank_scan_bytes=dict(type="int", default=1048576),
        rank_scan_tail_lines=dict(type="int", default=2000),
        match=dict(type="str"),
        match_limit=dict(type="int", default=500),
    )
    return spec


def check_params(module):
    """Refuse bad option values before anything is read."""
    params = module.params
    for option in ("tail_lines", "since_seconds", "max_bytes", "rank_scan_bytes", "rank_scan_tail_lines", "match_limit"):
        if params[option] is not None and params[option] < 0:
            module.fail_json(msg="%s must be 0 or more, got %s" % (option, params[option]))
    if params["match"] is not None:
        try:
            re.compile(params["match"])
        except re.error as exc:
            module.fail_json(msg="match is not a valid regular expression (%s): %s" % (exc, json.dumps(params["match"])))
    if params["rank_scan_bytes"] == 0:
        module.fail_json(msg="rank_scan_bytes must be more than 0")
    for option in ("dest", "dest_dir"):
        value = params[option]
        if value is not None and (".." in value.split(os.sep) or any(ord(c) < 32 for c in value)):
            module.fail_json(msg="%s must be a path without '..' components or control characters, got %s"
                             % (option, json.dumps(value)))
    if params["dest"] and os.path.isdir(params["dest"]):
        module.fail_json(msg="dest %s is a directory; give a file path (or use all_ranks with dest_dir)" % params["dest"])


def main():
    module = AnsibleModule(
        argument_spec=argspec(),
        supports_check_mode=True,
        required_if=[("all_ranks", True, ["dest_dir"])],
        mutually_exclusive=[("all_ranks", "dest"), ("match", "all_ranks"), ("match", "dest")],
    )
    check_params(module)
    require_kubernetes(module)
    params = module.params
    kind = get_kind(params["kind"])
    try:
        service = TrainJobService(get_api_client(params), kind)
        service.get_job(params["namespace"], params["name"])  # clear errors for a missing CRD or job
        summaries, pods = job_pods(service, params["namespace"], params["name"], kind)
        if params["match"] is not None:
            result = match_lines(module, service, pods, re.compile(params["match"]), kind)
        else:
            result = rank0_log(module, service, kind, summaries, pods)
    except TrainfleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    except (IOError, OSError) as exc:
        module.fail_json(msg="Cannot write the log file: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
