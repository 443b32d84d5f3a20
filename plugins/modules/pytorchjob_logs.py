#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pytorchjob_logs
short_description: Fetch the log of the pod that ran global rank 0 of a Kubeflow PyTorchJob
version_added: 0.1.0
description:
  - Finds the pod of a PyTorchJob (C(kubeflow.org/v1)) that ran global rank 0 and returns its
    log, or with O(all_ranks=true) writes every pod's log to O(dest_dir).
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
  name:
    description:
      - Name of the PyTorchJob.
    type: str
    required: true
  namespace:
    description:
      - Namespace of the job.
    type: str
    default: default
  container:
    description:
      - Container whose log is read. Defaults to C(pytorch) (the name the training operator
        requires), or the pod's first container when there is no C(pytorch) container.
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
  - module: trainfleet.training.pytorchjob_info
"""

EXAMPLES = r"""
- name: Rank-0 log, last 200 lines
  trainfleet.training.pytorchjob_logs:
    name: mnist
    namespace: training
    tail_lines: 200
  register: __rank0

- name: Final metrics printed by the trainer
  ansible.builtin.debug:
    msg: "{{ __rank0.trainer_result.final_accuracy }} from {{ __rank0.pod }} ({{ __rank0.method }})"

- name: Whole rank-0 log to a file, nothing returned
  trainfleet.training.pytorchjob_logs:
    name: mnist
    namespace: training
    max_bytes: 0
    dest: /tmp/mnist-rank0.log

- name: Every pod's log, one file each
  trainfleet.training.pytorchjob_logs:
    name: mnist
    namespace: training
    all_ranks: true
    dest_dir: /tmp/mnist-logs

- name: Poll until a restarted trainer printed its resume line (any pod), bounded
  trainfleet.training.pytorchjob_logs:
    name: mnist
    namespace: training
    match: "^trainfleet-resume: "
  register: __resumed
  until: __resumed.matches | length > 0
  retries: 60
  delay: 2

- name: Previous run of a crash-looping rank-0 container
  trainfleet.training.pytorchjob_logs:
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
  description: What decided, C(trainer-log), C(torchrun-log), C(trainer-rank0-output) or
    C(fallback-master-0).
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

import hashlib
import json
import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainfleet.training.plugins.module_utils import pytorchjob as pj
from ansible_collections.trainfleet.training.plugins.module_utils.errors import (
    LogReadError,
    PyTorchJobError,
)
from ansible_collections.trainfleet.training.plugins.module_utils.k8s import (
    PyTorchJobService,
    auth_arg_spec,
    get_api_client,
    iter_lines,
    require_kubernetes,
)


def argspec():
    spec = auth_arg_spec()
    spec.update(
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


def _container_for(pod, wanted):
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    if wanted:
        return wanted
    if pj.DEFAULT_CONTAINER in names or not names:
        return pj.DEFAULT_CONTAINER
    return names[0]


def _file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def stream_log(module, chunks, tail, dest=None):
    """Consume log chunks once: feed the bounded tail buffer and, with dest, a temp file next
    to dest that replaces dest only when the content differs (never in check mode).
    Returns (changed, path)."""
    digest = hashlib.sha256()
    handle = tmp_path = None
    if dest and not module.check_mode:
        dest_dir = os.path.dirname(os.path.abspath(dest))
        fd, tmp_path = tempfile.mkstemp(prefix=".pytorchjob_logs.", dir=dest_dir)
        handle = os.fdopen(fd, "wb")
    try:
        for chunk in chunks:
            tail.feed(chunk)
            digest.update(chunk)
            if handle:
                handle.write(chunk)
    except BaseException:
        if handle:
            handle.close()
            os.unlink(tmp_path)
        raise
    if handle:
        handle.close()
    if not dest:
        return False, None
    changed = not (os.path.isfile(dest) and _file_sha256(dest) == digest.hexdigest())
    if tmp_path:
        if changed:
            module.atomic_move(tmp_path, dest)
        else:
            os.unlink(tmp_path)
    return changed, dest


def _scan_part(service, params, namespace, name, container, tail_lines=None):
    """(parse_rank_lines result, bytes read) of the head (rank_scan_bytes) or, with tail_lines,
    of the last lines. The tail is not cut by bytes: its last lines are the ones that tell."""
    chunks = service.iter_log(namespace, name, container=container, previous=params["previous"],
                              tail_lines=tail_lines, limit_bytes=None if tail_lines else params["rank_scan_bytes"])
    read = [0]

    def counted():
        for chunk in chunks:
            read[0] += len(chunk)
            yield chunk
    info = pj.parse_rank_lines(iter_lines(counted()))
    return info, read[0]


def scan_ranks(service, params, namespace, pods, summaries):
    """Parse the head of every pod's log, and its tail when the head says nothing;
    {pod name: parse_rank_lines result}, scan list."""
    infos = {}
    scanned = []
    for pod, summary in zip(pods, summaries):
        name = summary["name"]
        container = _container_for(pod, params["container"])
        entry = {"pod": name, "replica_type": summary["replica_type"],
                 "replica_index": summary["replica_index"], "ranks": [], "group_rank": None,
                 "source": None, "part": "head", "error": None}
        try:
            info, head_bytes = _scan_part(service, params, namespace, name, container)
            # A head shorter than rank_scan_bytes was the whole log: its tail would say nothing more.
            if pj.says_nothing(info) and params["rank_scan_tail_lines"] and head_bytes >= params["rank_scan_bytes"]:
                # a rotated log: its head (and the rank lines) may be gone
                info, _tail_bytes = _scan_part(service, params, namespace, name, container, params["rank_scan_tail_lines"])
                entry["part"] = "tail"
        except LogReadError as exc:
            info = {"trainer": None, "torchrun": None, "rank0_output": False}
            entry["error"] = exc.msg
        infos[name] = info
        entry["ranks"], entry["group_rank"], entry["source"] = pj.pod_ranks(info)
        scanned.append(entry)
    return infos, scanned


def _log_kwargs(params, container):
    return dict(container=container, tail_lines=params["tail_lines"],
                since_seconds=params["since_seconds"], previous=params["previous"])


def _all_ranks(module, service, pods, summaries, scanned):
    params = module.params
    dest_dir = params["dest_dir"]
    if not module.check_mode and not os.path.isdir(dest_dir):
        os.makedirs(dest_dir)
    files = []
    changed = False
    for pod, summary, scan in zip(pods, summaries, scanned):
        path = os.path.join(dest_dir, pj.log_file_name(summary, scan["ranks"]))
        entry = {"pod": summary["name"], "replica_type": summary["replica_type"],
                 "replica_index": summary["replica_index"], "ranks": scan["ranks"],
                 "group_rank": scan["group_rank"], "path": path, "bytes": 0, "changed": False,
                 "error": None}
        tail = pj.TailBuffer(0)
        try:
            chunks = service.iter_log(params["namespace"], summary["name"],
                                      **_log_kwargs(params, _container_for(pod, params["container"])))
            entry["changed"], _path = stream_log(module, chunks, tail, dest=path)
        except LogReadError as exc:
            entry["error"] = exc.msg
        entry["bytes"] = tail.total
        changed = changed or entry["changed"]
        files.append(entry)
    return {"changed": changed, "files": files, "dest_dir": dest_dir}


def match_lines(module, service, pods, pattern):
    """The match mode: every pod's log (with timestamps), the lines `pattern` finds."""
    params = module.params
    matches = []
    seen = []
    for pod in pods:
        summary = pj.pod_summary(pod)
        entry = {"name": summary["name"], "replica_type": summary["replica_type"],
                 "replica_index": summary["replica_index"], "node": summary["node"],
                 "phase": summary["phase"], "restarts": summary["restarts"], "error": None}
        try:
            chunks = service.iter_log(params["namespace"], summary["name"], timestamps=True,
                                      **_log_kwargs(params, _container_for(pod, params["container"])))
            found = pj.match_log_lines(iter_lines(chunks), pattern, params["match_limit"])
        except LogReadError as exc:
            entry["error"] = exc.msg
            found = []
        for item in found:
            item.update({"pod": summary["name"], "replica_type": summary["replica_type"],
                         "replica_index": summary["replica_index"], "node": summary["node"]})
        matches.extend(found)
        seen.append(entry)
    return {"changed": False, "matches": pj.sort_matches(matches), "pods": seen}


def execute_module(module, service):
    params = module.params
    namespace, name = params["namespace"], params["name"]
    service.get_job(namespace, name)  # clear errors for a missing CRD or job
    pods = [p for p in service.list_pods(namespace, name) if pj.pod_belongs_to_job(p, name)]
    if params["match"] is not None:
        pods.sort(key=lambda p: pj.replica_sort_key(pj.pod_summary(p)))
        return match_lines(module, service, pods, re.compile(params["match"]))
    if not pods:
        raise PyTorchJobError(
            "PyTorchJob %s/%s has no pods: not started yet, or removed by its cleanPodPolicy or "
            "ttlSecondsAfterFinished." % (namespace, name))
    pairs = sorted(((pj.pod_summary(p), p) for p in pods), key=lambda pair: pj.replica_sort_key(pair[0]))
    summaries = [pair[0] for pair in pairs]
    pods = [pair[1] for pair in pairs]

    infos, scanned = scan_ranks(service, params, namespace, pods, summaries)
    decision = pj.find_rank0(summaries, infos)
    rank0 = decision["pod"]
    rank0_scan = [s for s in scanned if s["pod"] == rank0["name"]][0]
    result = {
        "changed": False,
        "pod": rank0["name"],
        "replica_type": rank0["replica_type"],
        "replica_index": rank0["replica_index"],
        "rank": 0,
        "ranks": rank0_scan["ranks"] if decision["method"] != pj.METHOD_FALLBACK else [],
        "group_rank": rank0_scan["group_rank"],
        "method": decision["method"],
        "candidates": decision["candidates"],
        "scanned": scanned,
    }
    if params["all_ranks"]:
        result.update(_all_ranks(module, service, pods, summaries, scanned))
        return result

    pod = pods[summaries.index(rank0)]
    container = _container_for(pod, params["container"])
    tail = pj.TailBuffer(params["max_bytes"])
    chunks = service.iter_log(namespace, rank0["name"], **_log_kwargs(params, container))
    changed, path = stream_log(module, chunks, tail, dest=params["dest"])
    text = tail.text()
    lines = text.splitlines()
    result.update({
        "changed": changed,
        "container": container,
        "log": text,
        "log_lines": lines,
        "truncated": tail.truncated,
        "bytes": tail.total,
        "returned_bytes": len(text.encode("utf-8")),
        "trainer_result": pj.parse_trainer_result(lines),
        "path": path,
    })
    return result


def main():
    module = AnsibleModule(
        argument_spec=argspec(),
        supports_check_mode=True,
        required_if=[("all_ranks", True, ["dest_dir"])],
        mutually_exclusive=[("all_ranks", "dest"), ("match", "all_ranks"), ("match", "dest")],
    )
    for option in ("tail_lines", "since_seconds", "max_bytes", "rank_scan_bytes", "rank_scan_tail_lines", "match_limit"):
        value = module.params[option]
        if value is not None and value < 0:
            module.fail_json(msg="%s must be 0 or more, got %s" % (option, value))
    if module.params["match"] is not None:
        try:
            re.compile(module.params["match"])
        except re.error as exc:
            module.fail_json(msg="match is not a valid regular expression (%s): %s" % (exc, json.dumps(module.params["match"])))
    if module.params["rank_scan_bytes"] == 0:
        module.fail_json(msg="rank_scan_bytes must be more than 0")
    for option in ("dest", "dest_dir"):
        value = module.params[option]
        if value is not None and (".." in value.split(os.sep) or any(ord(c) < 32 for c in value)):
            module.fail_json(msg="%s must be a path without '..' components or control characters, got %s"
                             % (option, json.dumps(value)))
    if module.params["dest"] and os.path.isdir(module.params["dest"]):
        module.fail_json(msg="dest %s is a directory; give a file path (or use all_ranks with dest_dir)"
                         % module.params["dest"])
    require_kubernetes(module)
    try:
        service = PyTorchJobService(get_api_client(module.params))
        result = execute_module(module, service)
    except PyTorchJobError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    except (IOError, OSError) as exc:
        module.fail_json(msg="Cannot write the log file: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
