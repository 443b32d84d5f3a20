# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a job's logs in bounded memory: rank 0's log, every pod's log to files, matching lines.

Logs are streamed in chunks and never loaded whole: the returned text is a TailBuffer (the last
max_bytes), files are written straight to disk through a temporary file that replaces the
destination only when the content differs.
"""

from __future__ import annotations

import hashlib
import os
import tempfile

from ansible_collections.trainfleet.training.plugins.module_utils.errors import LogReadError, TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.jobstatus import pod_summary, replica_sort_key
from ansible_collections.trainfleet.training.plugins.module_utils.k8s import iter_lines
from ansible_collections.trainfleet.training.plugins.module_utils.ranks import (
    FALLBACK_METHODS,
    find_rank0,
    log_file_name,
    parse_rank_lines,
    pod_ranks,
    says_nothing,
)
from ansible_collections.trainfleet.training.plugins.module_utils.trainerlog import (
    match_log_lines,
    parse_trainer_result,
    sort_matches,
)


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
        fd, tmp_path = tempfile.mkstemp(prefix=".trainjob_logs.", dir=dest_dir)
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


def scan_part(service, params, namespace, name, container, tail_lines=None):
    """(parse_rank_lines result, bytes read) of the head (rank_scan_bytes) or, with tail_lines,
    of the last lines. The tail is not cut by bytes: its last lines are the ones that tell."""
    chunks = service.iter_log(namespace, name, container=container, previous=params["previous"],
                              tail_lines=tail_lines, limit_bytes=None if tail_lines else params["rank_scan_bytes"])
    read = [0]

    def counted():
        for chunk in chunks:
            read[0] += len(chunk)
            yield chunk
    info = parse_rank_lines(iter_lines(counted()))
    return info, read[0]


def scan_ranks(service, params, namespace, pods, summaries, kind):
    """Parse the head of every pod's log, and its tail when the head says nothing;
    {pod name: parse_rank_lines result}, scan list."""
    infos = {}
    scanned = []
    for pod, summary in zip(pods, summaries):
        name = summary["name"]
        container = kind.container_for(pod, params["container"])
        entry = {"pod": name, "replica_type": summary["replica_type"],
                 "replica_index": summary["replica_index"], "ranks": [], "group_rank": None,
                 "source": None, "part": "head", "error": None}
        try:
            info, head_bytes = scan_part(service, params, namespace, name, container)
            # A head shorter than rank_scan_bytes was the whole log: its tail would say nothing more.
            if says_nothing(info) and params["rank_scan_tail_lines"] and head_bytes >= params["rank_scan_bytes"]:
                # a rotated log: its head (and the rank lines) may be gone
                info, _tail_bytes = scan_part(service, params, namespace, name, container, params["rank_scan_tail_lines"])
                entry["part"] = "tail"
        except LogReadError as exc:
            info = {"trainer": None, "torchrun": None, "rank0_output": False}
            entry["error"] = exc.msg
        infos[name] = info
        entry["ranks"], entry["group_rank"], entry["source"] = pod_ranks(info)
        scanned.append(entry)
    return infos, scanned


def log_kwargs(params, container):
    return dict(container=container, tail_lines=params["tail_lines"],
                since_seconds=params["since_seconds"], previous=params["previous"])


def all_ranks(module, service, pods, summaries, scanned, kind):
    params = module.params
    dest_dir = params["dest_dir"]
    if not module.check_mode and not os.path.isdir(dest_dir):
        os.makedirs(dest_dir)
    files = []
    changed = False
    for pod, summary, scan in zip(pods, summaries, scanned):
        path = os.path.join(dest_dir, log_file_name(summary, scan["ranks"]))
        entry = {"pod": summary["name"], "replica_type": summary["replica_type"],
                 "replica_index": summary["replica_index"], "ranks": scan["ranks"],
                 "group_rank": scan["group_rank"], "path": path, "bytes": 0, "changed": False,
                 "error": None}
        tail = TailBuffer(0)
        try:
            chunks = service.iter_log(params["namespace"], summary["name"],
                                      **log_kwargs(params, kind.container_for(pod, params["container"])))
            entry["changed"], _path = stream_log(module, chunks, tail, dest=path)
        except LogReadError as exc:
            entry["error"] = exc.msg
        entry["bytes"] = tail.total
        changed = changed or entry["changed"]
        files.append(entry)
    return {"changed": changed, "files": files, "dest_dir": dest_dir}


def match_lines(module, service, pods, pattern, kind):
    """The match mode: every pod's log (with timestamps), the lines `pattern` finds."""
    params = module.params
    matches = []
    seen = []
    for pod in pods:
        summary = pod_summary(pod, kind)
        entry = {"name": summary["name"], "replica_type": summary["replica_type"],
                 "replica_index": summary["replica_index"], "node": summary["node"],
                 "phase": summary["phase"], "restarts": summary["restarts"], "error": None}
        try:
            chunks = service.iter_log(params["namespace"], summary["name"], timestamps=True,
                                      **log_kwargs(params, kind.container_for(pod, params["container"])))
            found = match_log_lines(iter_lines(chunks), pattern, params["match_limit"])
        except LogReadError as exc:
            entry["error"] = exc.msg
            found = []
        for item in found:
            item.update({"pod": summary["name"], "replica_type": summary["replica_type"],
                         "replica_index": summary["replica_index"], "node": summary["node"]})
        matches.extend(found)
        seen.append(entry)
    return {"changed": False, "matches": sort_matches(matches), "pods": seen}


def job_pods(service, namespace, name, kind):
    """(pod summaries, raw pods) of a job, in replica order (master/launcher first, then by index)."""
    pods = [p for p in service.list_pods(namespace, name) if kind.pod_belongs(p, name)]
    pairs = sorted(((pod_summary(p, kind), p) for p in pods), key=lambda pair: replica_sort_key(pair[0]))
    return [pair[0] for pair in pairs], [pair[1] for pair in pairs]


def rank0_log(module, service, kind, summaries, pods):
    """Find rank 0 (scan every pod's log) and return it: the rank-0 log (or with all_ranks every
    pod's log in dest_dir), with the decision, what each pod said and the trainer's result."""
    params = module.params
    namespace, name = params["namespace"], params["name"]
    if not pods:
        raise TrainfleetError(
            "%s %s/%s has no pods: not started yet, or removed by its cleanPodPolicy or "
            "ttlSecondsAfterFinished." % (kind.label, namespace, name))
    infos, scanned = scan_ranks(service, params, namespace, pods, summaries, kind)
    decision = find_rank0(summaries, infos)
    rank0 = decision["pod"]
    rank0_scan = [s for s in scanned if s["pod"] == rank0["name"]][0]
    result = {
        "changed": False,
        "pod": rank0["name"],
        "replica_type": rank0["replica_type"],
        "replica_index": rank0["replica_index"],
        "rank": 0,
        "ranks": rank0_scan["ranks"] if decision["method"] not in FALLBACK_METHODS else [],
        "group_rank": rank0_scan["group_rank"],
        "method": decision["method"],
        "candidates": decision["candidates"],
        "scanned": scanned,
    }
    if params["all_ranks"]:
        result.update(all_ranks(module, service, pods, summaries, scanned, kind))
        return result

    pod = pods[summaries.index(rank0)]
    container = kind.container_for(pod, params["container"])
    tail = TailBuffer(params["max_bytes"])
    chunks = service.iter_log(namespace, rank0["name"], **log_kwargs(params, container))
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
        "trainer_result": parse_trainer_result(lines),
        "path": path,
    })
    return result
