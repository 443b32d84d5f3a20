# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The trainer's log-line contract, read on the Ansible side.

trainer/metrics.py formats every ``trainfleet-...:`` line the trainer prints (trainer/README.md,
"Log lines"); this module parses them. tests/unit/plugins/module_utils/test_log_contract.py feeds
the trainer's own functions' output through these parsers, so the two cannot drift apart.

- ``trainfleet-rank: rank=<R> local_rank=<L> world_size=<W> group_rank=<G> host=<h> [time=<t>]
  [launcher=<torchrun|mpirun|none>]`` (every process, once, after the rendezvous; launcher= since
  the trainer runs under mpirun as an MPIJob)
- ``trainfleet-epoch: epoch=<E> loss=<f> test_acc=<f> samples_per_s=<f> [time=<t>]`` (rank 0)
- ``trainfleet-result: {json}`` (rank 0, once at the end); ``trainfleet-resume: epoch=<k>
  next_epoch=<k+1> snapshot=<uri> restarts=<n>``; ``trainfleet-stopped: ...``;
  ``trainfleet-info: snapshot epoch=<k> uri=<uri>``; ``trainfleet-warning: snapshot epoch=<k>
  failed ...``; ``trainfleet-warning: storage <op> <uri> attempt <n>/<max> failed ...``
- ``trainfleet-evaluate: {json}`` (``python -m trainer.evaluate``, the evaluate step's Job)
- ``trainfleet-compile: {json}`` (rank 0 on an XLA device, after its first epoch: graphs compiled,
  compile seconds, compile cache hits and misses)

time= (UTC, ISO 8601, milliseconds) is printed by trainers since the start-up timeline; older
trainers' lines lack it and the kubelet's timestamp of the line stands in.
"""

from __future__ import annotations

import datetime
import json
import re

from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import EPOCH, parse_time, to_int

TRAINER_RANK_RE = re.compile(
    r"trainfleet-rank:\s+rank=(?P<rank>\d+)\s+local_rank=(?P<local_rank>\d+)\s+"
    r"world_size=(?P<world_size>\d+)\s+group_rank=(?P<group_rank>\d+)"
    r"(?:\s+host=(?P<host>(?:(?!trainfleet-)\S)+))?(?:\s+time=(?P<time>(?:(?!trainfleet-)\S)+))?"
    r"(?:\s+launcher=(?P<launcher>(?:(?!trainfleet-)\S)+))?")
TRAINER_RESULT_RE = re.compile(r"trainfleet-result:\s*(?P<json>\{.*\})\s*$")
TRAINER_EVALUATE_RE = re.compile(r"^trainfleet-evaluate:\s*(?P<json>\{.*\})\s*$")
TRAINER_COMPILE_RE = re.compile(r"^trainfleet-compile:\s*(?P<json>\{.*\})\s*$")
# trainer/metrics.py resume_line: "trainfleet-resume: epoch=<k> next_epoch=<k+1> snapshot=<uri> restarts=<n>"
# (restarts= since the trainer counts them).
TRAINER_RESUME_RE = re.compile(
    r"trainfleet-resume:\s+epoch=(?P<epoch>\d+)\s+next_epoch=\d+\s+snapshot=\S+(?:\s+restarts=(?P<restarts>\d+))?")
# Fields parse_trainer_result always returns (null when the trainer did not say).
TRAINER_RESULT_INT_FIELDS = ("resumed_from_epoch", "restarts")
# Lines only the trainer's global rank 0 prints, at the start of a line or after torchrun's
# "--tee" prefix "[default0]:" (other ranks prefix theirs with "[rank N] " under --verbose-ranks).
# They tell rank 0 when the head of a log, with its trainfleet-rank: line, is gone (the kubelet
# serves only the current file of a rotated log).
TEE_PREFIX_RE = re.compile(r"^\[[A-Za-z_-]*\d+\]:")
RANK0_OUTPUT_RE = re.compile(r"^(?:\[[A-Za-z_-]*\d+\]:)?trainfleet-(?:epoch|result|resume|stopped|compile):")


TRAINER_ERROR_RE = re.compile(r"^trainfleet-trainer: error:\s*(?P<message>.*?)\s*$")


def parse_error_line(line):
    """The message of a `trainfleet-trainer: error: <message>` line (what the trainer says before it
    exits 1 or 2), or None for another line."""
    match = TRAINER_ERROR_RE.match((line or "").strip())
    return match.group("message") if match else None


def parse_evaluate_line(line):
    """The JSON object of a `trainfleet-evaluate:` line, or None (another line, or not a JSON object)."""
    match = TRAINER_EVALUATE_RE.match(line or "")
    if not match:
        return None
    try:
        value = json.loads(match.group("json"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


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
                      "restarts": to_int(match.group("restarts"))}
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
        value = to_int(result.get(key))
        if value is None and resume is not None:
            value = resume[key]
        result[key] = value
    return result


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
    epoch = (utc - EPOCH).total_seconds()
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), round(epoch, 6), match.group("text")


# The trainer's log-line contract (trainer/metrics.py), as parse_trainer_line reads it.
TRAINER_EPOCH_LINE_RE = re.compile(r"^trainfleet-epoch: epoch=(?P<epoch>\d+)(?P<fields>(?: \S+=\S+)*)\s*$")
TRAINER_SNAPSHOT_LINE_RE = re.compile(r"^trainfleet-info: snapshot epoch=(?P<epoch>\d+) uri=(?P<uri>\S+)")
TRAINER_SNAPSHOT_FAILED_RE = re.compile(r"^trainfleet-warning: snapshot epoch=(?P<epoch>\d+) failed")
TRAINER_STALL_RE = re.compile(
    r"^trainfleet-stall: rank=(?P<rank>\d+) no progress for (?P<idle_s>[0-9.]+)s at epoch=(?P<epoch>\d+) step=(?P<step>\d+); (?P<why>.*)$")
TRAINER_STORAGE_RETRY_RE = re.compile(
    r"^trainfleet-warning: storage (?P<op>\S+) (?P<uri>\S+) attempt (?P<attempt>\d+)/(?P<attempts>\d+) failed")


def _float_or_none(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _time_or_none(value):
    """The trainer's time= field as RFC 3339 UTC with microseconds (like split_log_timestamp), or None."""
    parsed = parse_time(value)
    if parsed is None:
        return None
    return parsed.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_trainer_line(text):
    """What one line of the trainer's log-line contract says, as a dict with C(kind):

    epoch (epoch, loss, test_acc, samples_per_s, time), snapshot (epoch, uri: whole, and latest
    names it), snapshot_failed (epoch), storage_retry (op, uri, attempt, attempts), stall (rank,
    idle_s, epoch, step, why: the watchdog ended the rank, why names the rank that held it up), resume (epoch:
    the snapshot's, restarts), rank (rank, world_size, group_rank, time), result (the result's
    fields), compile (the compile report's fields: an XLA device's graphs and compile cache); {"kind": None}
    for any other line (a dict either way, so templates can select on it).
    time is the trainer's own (RFC 3339, UTC), null from trainers that do not print it.
    torchrun's --tee prefix ("[default0]:") is ignored.
    """
    text = TEE_PREFIX_RE.sub("", text.strip(), count=1)
    match = TRAINER_EPOCH_LINE_RE.match(text)
    if match:
        fields = dict(part.split("=", 1) for part in match.group("fields").split())
        return {"kind": "epoch", "epoch": int(match.group("epoch")), "loss": _float_or_none(fields.get("loss")),
                "test_acc": _float_or_none(fields.get("test_acc")),
                "samples_per_s": _float_or_none(fields.get("samples_per_s")),
                "time": _time_or_none(fields.get("time"))}
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
    match = TRAINER_STALL_RE.match(text)
    if match:
        return {"kind": "stall", "rank": int(match.group("rank")), "idle_s": float(match.group("idle_s")),
                "epoch": int(match.group("epoch")), "step": int(match.group("step")), "why": match.group("why")}
    match = TRAINER_RESUME_RE.match(text)
    if match:
        restarts = match.group("restarts")
        return {"kind": "resume", "epoch": int(match.group("epoch")),
                "restarts": int(restarts) if restarts is not None else None}
    match = TRAINER_RANK_RE.match(text)
    if match:
        return {"kind": "rank", "rank": int(match.group("rank")), "world_size": int(match.group("world_size")),
                "group_rank": int(match.group("group_rank")), "time": _time_or_none(match.group("time")),
                "launcher": match.group("launcher")}
    for kind, pattern in (("result", TRAINER_RESULT_RE), ("compile", TRAINER_COMPILE_RE)):
        match = pattern.match(text)
        if match:
            try:
                report = json.loads(match.group("json"))
            except ValueError:
                report = None
            if isinstance(report, dict):
                return dict(report, kind=kind)
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
