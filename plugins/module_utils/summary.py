# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The train step's summary: the lines the trainjob role prints once a job has finished.

One source for those lines, for any script: our trainer, or a user's own torchrun script that
never heard of us. Only what is known is printed: no empty fields, no "?". Accuracy, loss, model
and the resume come from rank 0's ``trainfleet-result: {json}`` line (trainerlog.py), an opt-in
contract any script may print (docs/runbooks/train.md, "Your result in the summary"); without it
the summary says so once and shows rank 0's last lines instead. A rank-0 pod chosen by a fallback
is called a guess, with what would make it certain.

Pure functions over trainjob_result (roles/trainjob/tasks/report.yml): plain dicts in, a list of
lines out, one record per line.
"""

from __future__ import annotations

import json
import re

from ansible_collections.trainfleet.training.plugins.module_utils.ranks import FALLBACK_METHODS

# How much of rank 0's log the summary of a script without a result line shows.
LAST_LINES = 5
# Result fields shown on the "result:" line, in this order, with their labels.
# final_perplexity: the transformer's (its final accuracy is next-byte accuracy).
RESULT_FIELDS = (("final_accuracy", "final accuracy"), ("final_loss", "final loss"), ("final_perplexity", "perplexity"),
                 ("epochs", "epochs"), ("world_size", "world size"))
MESSAGE_LIMIT = 200


def _known(value):
    return value is not None and value != "" and value != [] and value != {}


def _one_line(text, limit=MESSAGE_LIMIT):
    text = re.sub(r"\s+", " ", str(text)).strip()
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _join_known(pairs):
    """"label value, ..." for the known values; an empty label gives the value alone."""
    return ", ".join("%s %s" % (label, value) if label else str(value) for label, value in pairs if _known(value))


def restart_lines(result):
    """restarts by replica (one line, when any restarted or failed) and why each restart happened
    (one line each, then the last lines of the run that ended, "  | " before each)."""
    lines = []
    by_replica = result.get("restarts_by_replica") or {}
    if any(int((entry or {}).get("restarts") or 0) > 0 or int((entry or {}).get("failed") or 0) > 0
           for entry in by_replica.values()):
        parts = []
        for rtype in sorted(by_replica):
            entry = by_replica[rtype] or {}
            part = "%s %s" % (rtype, entry.get("restarts") or 0)
            if int(entry.get("failed") or 0) > 0:
                part += " (%s failed)" % entry["failed"]
            parts.append(part)
        lines.append("restarts by replica: " + ", ".join(parts))
    for reason in result.get("restart_reasons") or []:
        where = reason.get("pod") or "a pod"
        if _known(reason.get("replica_type")):
            index = reason.get("replica_index")
            where += " (%s%s)" % (reason["replica_type"], "" if index is None else "-%s" % index)
        if _known(reason.get("node")):
            where += " on node %s" % reason["node"]
        what = "container %s" % reason["container"] if reason.get("container") else "whole pod"
        line = "restart: pod %s, %s: %s" % (where, what, reason.get("reason") or "no reason recorded")
        if reason.get("exit_code") is not None:
            line += ", exit code %s" % reason["exit_code"]
        if reason.get("signal_name"):
            line += " (%s)" % reason["signal_name"]
        if _known(reason.get("finished_at")):
            line += ", ended %s" % reason["finished_at"]
        run = "%s run; " % reason["run"] if _known(reason.get("run")) else ""
        line += " (%s%s restart(s))" % (run, reason.get("restarts") or 0)
        if reason.get("message"):
            line += ": " + _one_line(reason["message"])
        lines.append(line)
        # that run's last lines, kept when it ended (the kubelet keeps one previous run only)
        if reason.get("log_tail"):
            lines.extend("  | " + _one_line(text) for text in reason["log_tail"])
        elif reason.get("log_error"):
            lines.append("  (its log could not be read: %s)" % _one_line(reason["log_error"]))
    return lines


def timeline_lines(result):
    """The pre-pull before the submission and the start-up timeline (trainjob_info's job.timeline)."""
    timeline = result.get("timeline")
    if not isinstance(timeline, dict) or not timeline.get("lines"):
        return []
    lines = []
    prepull = result.get("prepull")
    if isinstance(prepull, dict):
        lines.append("before the submission: image pre-pulled onto %d node(s) in %s s"
                     % (len(prepull.get("nodes") or []), prepull.get("seconds")))
    lines.append("start-up timeline (time since the step before, step, when):")
    lines.extend("  " + line for line in timeline["lines"])
    if timeline.get("errors"):
        lines.append("  (not read: %s)" % _one_line("; ".join(timeline["errors"]), 300))
    return lines


def rank0_line(result, rank0_note=""):
    pod, method = result.get("rank0_pod"), result.get("rank0_method")
    if not pod:
        return "rank 0: not found (no pod of the job could be read)"
    if method in FALLBACK_METHODS:
        return ("rank 0: pod %s, a guess (%s): neither the script nor torchrun logged the ranks; torchrun logs "
                "them with LOGLEVEL=INFO, a script with a trainfleet-rank line%s" % (pod, method, rank0_note or ""))
    return "rank 0: pod %s (decided by %s%s)" % (pod, method, rank0_note or "")


def result_lines(result, log_tail_lines, log=None):
    """What rank 0's trainfleet-result line said; without one, that it printed none and its last lines."""
    trainer = result.get("trainer") or {}
    if not trainer:
        if result.get("log_truncated"):
            lines = ["WARNING: no trainfleet-result line in the last %s lines of rank 0's log (raise "
                     "trainjob_log_tail_lines if the script prints one)" % log_tail_lines]
        else:
            lines = ["result: rank 0 printed no trainfleet-result line (optional: docs/runbooks/train.md, "
                     "\"Your result in the summary\")"]
        tail = [line for line in (log or "").splitlines() if line.strip()][-LAST_LINES:]
        if tail:
            lines.append("rank 0's last %d line(s):" % len(tail))
            lines.extend("  " + _one_line(line, 300) for line in tail)
        return lines
    lines = []
    measured = _join_known((label, trainer.get(key)) for key, label in RESULT_FIELDS)
    if measured:
        lines.append("result: " + measured)
    if _known(trainer.get("model_uri")):
        lines.append("model: %s" % trainer["model_uri"])
    outputs = _join_known((("metrics", trainer.get("metrics_uri")), ("plot", trainer.get("plot_uri"))))
    if outputs:
        lines.append(outputs)
    resumed = _join_known((("resumed from snapshot epoch", trainer.get("resumed_from_epoch")),
                           ("torchrun restarts on rank 0's node", trainer.get("restarts"))))
    if resumed:
        lines.append(resumed)
    # what the script said, without the fields it did not (null: e.g. restarts from a script that
    # does not count them)
    lines.append("trainer result: " + json.dumps(dict((k, v) for k, v in trainer.items() if v is not None), sort_keys=True))
    return lines


def duration_line(result):
    line = "duration: %ss" % result["duration_seconds"] if _known(result.get("duration_seconds")) else "duration: not recorded"
    if _known(result.get("start_time")) and _known(result.get("completion_time")):
        line += " (%s .. %s)" % (result["start_time"], result["completion_time"])
    return line + ", restarts: %s" % (result.get("restarts") or 0)


def failure_lines(result):
    failure = result.get("failure") or {}
    lines = []
    reason = failure.get("reason") or "no reason recorded"
    lines.append("reason: %s%s" % (reason, ": " + failure["message"] if failure.get("message") else ""))
    pod = "failing pod: %s" % (failure.get("pod") or "not identified")
    if failure.get("container"):
        pod += ", container: %s" % failure["container"]
    details = _join_known((("", failure.get("container_reason")), ("exit code", failure.get("exit_code"))))
    if details:
        pod += " (%s)" % details
    lines.append(pod)
    lines.append(duration_line(result))
    # live_pod: read from the pod; snapshot: taken while waiting, before the operator deleted the
    # pods; events: the pods and their logs were gone, only the operator's events remain.
    lines.append("failure read from: %s" % (failure.get("source") or "live_pod"))
    if failure.get("hint"):
        lines.append("note: %s" % failure["hint"])
    return lines


def summary_lines(result, kind, log_tail_lines=200, rank0_note="", log=None):
    """The summary of a finished job (trainjob_result): Succeeded or Failed. log: rank 0's log tail
    (trainjob_logs), shown in part when the script printed no result line."""
    head = ["%s %s/%s: %s" % (kind, result.get("namespace"), result.get("name"), result.get("phase")),
            "decision: %s" % result.get("decision")]
    if result.get("phase") == "Failed":
        failure = result.get("failure") or {}
        tail = failure.get("log_tail") or []
        tail = tail.splitlines() if isinstance(tail, str) else list(tail)
        events = [" ".join(str(v) for v in event.values()) for event in failure.get("events") or []]
        return (head + failure_lines(result) + restart_lines(result) + timeline_lines(result)
                + ["last log lines of %s:" % (failure.get("pod") or "the failing pod")] + ["  " + line for line in tail]
                + ["events:"] + ["  " + event for event in events])
    return (head + [duration_line(result)] + result_lines(result, log_tail_lines, log) + [rank0_line(result, rank0_note)]
            + restart_lines(result) + timeline_lines(result))
