# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which pod ran global rank 0, decided from what the processes printed.

With torchrun's c10d rendezvous, global ranks follow join order, not pod names, so the pod that
ran rank 0 is found from the logs: the trainer's own rank lines first (trainerlog), then
torchrun's "Rendezvous complete" block, then the lines only rank 0 prints; only when no pod says
anything, the first replica (master-0; an MPIJob's launcher, where mpirun prints every rank's
output; a Volcano job's first task's replica 0).
"""

from __future__ import annotations

import re

from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import EPOCH, parse_time
from ansible_collections.trainfleet.training.plugins.module_utils.jobstatus import sort_pod_summaries
from ansible_collections.trainfleet.training.plugins.module_utils.trainerlog import RANK0_OUTPUT_RE, TRAINER_RANK_RE

METHOD_TRAINER = "trainer-log"
METHOD_TORCHRUN = "torchrun-log"
METHOD_OUTPUT = "trainer-rank0-output"
METHOD_FALLBACK = "fallback-master-0"
# The fallback of kinds without a master replica (MPIJob: the launcher; Volcano: the first task).
METHOD_FALLBACK_FIRST = "fallback-first-replica"
FALLBACK_METHODS = (METHOD_FALLBACK, METHOD_FALLBACK_FIRST)

# torch.distributed.elastic agent (LOGLEVEL=INFO): "[default] Rendezvous complete for workers.
# Result:" followed by indented "key=value" lines (restart_count, master_addr, group_rank,
# group_world_size, local_ranks, role_ranks, global_ranks, ...).
TORCHRUN_RDZV_RE = re.compile(r"Rendezvous complete for workers")
TORCHRUN_GROUP_RANK_RE = re.compile(r"(?<![a-z_])group_rank=(?P<group_rank>\d+)")
TORCHRUN_GLOBAL_RANKS_RE = re.compile(r"global_ranks=\[(?P<ranks>[\d,\s]*)\]")
TORCHRUN_RESTART_RE = re.compile(r"restart_count=(?P<restart_count>\d+)")


# --------------------------------------------------------------------------- rank 0


def parse_rank_lines(lines):
    """What one pod's log says about ranks.

    Returns a dict:
      trainer: from `trainfleet-rank:` lines of the latest round (the last world size and
        group rank printed): ranks (sorted global ranks), group_rank, world_size, hosts;
        None when no such line. Lines ending in launcher=mpirun are an MPIJob launcher's log, which
        holds every rank's lines: the round is every such line of the last world size, and
        group_rank is that of its lowest rank.
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
        if last.get("launcher") == "mpirun":
            # an MPIJob's launcher: mpirun forwards every rank's output, whatever its node, to this log
            same_round = [t for t in trainer_lines if t["world_size"] == world and t.get("launcher") == "mpirun"]
            group = min(same_round, key=lambda t: int(t["rank"]))["group_rank"]
        else:
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
    """master-0 (job-role=master), else the first pod in replica order (the lowest-index worker; an
    MPIJob's launcher; a Volcano job's first task)."""
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
            candidates.sort(key=lambda s: (_pod_started(s) or EPOCH, s["name"]), reverse=True)
            return {"pod": candidates[0], "method": method,
                    "candidates": sorted(s["name"] for s in candidates)}
    pod = fallback_rank0_pod(summaries)
    method = None
    if pod:
        kubeflow = (pod.get("replica_type") or "master").lower() in ("master", "worker")
        method = METHOD_FALLBACK if kubeflow else METHOD_FALLBACK_FIRST
    return {"pod": pod, "method": method,
            "candidates": [pod["name"]] if pod else []}


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
