# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The figures of one fault job (faults.yml, tasks/fault_compute.yml), as a filter of the scenario.

Pure computation over what the scenario read: the pytorchjob_logs match-mode lines of the job's
pods (read at the end, and seen while waiting, also of pods since lost), the fault (epoch_s, utc,
time, action) and trainjob_info's job at the end. A program, so it is Python (tested by
tests/unit/test_fault_proofs.py) and not Jinja; the proofs over its figures stay in
tasks/fault_proofs.yml.

  recovery_s       fault -> the first trainfleet-resume line after it (a restarted process
                   loaded the snapshot), from the kubelet's timestamps of the lines
  progress_s       fault -> the first epoch completed after that resume
  epochs_lost      epochs completed before the fault that the resumed run trained again
                   (last epoch line before the fault - resumed_from_epoch; 0 with a snapshot
                   every epoch unless the fault fell between an epoch and its snapshot)
  final_segment    the epochs of the run that finished (after its last resume line): each
                   must appear once, resumed_from_epoch + 1 .. epochs
"""

from __future__ import annotations

import datetime
import json


def _kind(line):
    return (line.get("trainer") or {}).get("kind")


def _of_kind(lines, kind):
    return [line for line in lines if _kind(line) == kind]


def _trainer(line, key):
    return (line.get("trainer") or {}).get(key)


def _utc_seconds(text):
    return datetime.datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")


def fault_figures(job, read, seen, fault, job_info):
    """The figures of job `job` (see the module's text); `fault` is {} for a run without one."""
    lines, keys = [], set()
    for line in list(read or []) + list(seen or []):
        if line.get("epoch_s") is None:
            continue
        key = json.dumps(line, sort_keys=True, default=str)
        if key not in keys:
            keys.add(key)
            lines.append(line)
    lines.sort(key=lambda line: line["epoch_s"])
    fault = fault or {}
    at = float(fault.get("epoch_s") or 0)
    epochs, resumes = _of_kind(lines, "epoch"), _of_kind(lines, "resume")
    results = _of_kind(lines, "result")
    result = (results[-1].get("trainer") if results else None) or {}
    resumes_after = [line for line in resumes if line["epoch_s"] > at] if fault else []
    first_resume = resumes_after[0] if resumes_after else {}
    last_resume_s = float(resumes[-1]["epoch_s"]) if resumes else 0.0
    before = [line for line in lines if line["epoch_s"] < at]
    epochs_before = _of_kind(before, "epoch")
    last_epoch_before = max([0] + [_trainer(line, "epoch") for line in epochs_before])
    last_snapshot_before = max([0] + [_trainer(line, "epoch") for line in _of_kind(before, "snapshot")])
    first_progress = {}
    if first_resume:
        first_progress = next((line for line in epochs
                               if line["epoch_s"] > float(first_resume["epoch_s"])
                               and _trainer(line, "epoch") > int(_trainer(first_resume, "epoch") or 0)), {})
    resumed_from = int(result.get("resumed_from_epoch") or 0)
    reasons = job_info.get("restart_reasons") or []
    completion = job_info.get("completion_time")
    return {
        "job": job,
        "fault": fault.get("action", "none"),
        "fault_time": fault.get("time"),
        "phase": job_info.get("phase"),
        "submitted_to_end_s": job_info.get("elapsed_seconds"),
        "fault_to_end_s": ((_utc_seconds(completion) - _utc_seconds(fault["utc"])).total_seconds()
                           if fault and completion else None),
        "rank0_pod_at_fault": epochs_before[-1].get("pod") if epochs_before else None,
        "last_epoch_before_fault": int(last_epoch_before) if fault else None,
        "last_snapshot_before_fault": int(last_snapshot_before) if fault else None,
        "recovery_s": round(float(first_resume["epoch_s"]) - at, 1) if first_resume else None,
        "resumed_by": first_resume.get("pod"),
        "progress_s": round(float(first_progress["epoch_s"]) - at, 1) if first_progress else None,
        "resumed_from_epoch": resumed_from,
        "resumes": [_trainer(line, "epoch") for line in resumes],
        "epochs_lost": max(int(last_epoch_before) - resumed_from, 0) if fault and resumes else 0,
        "epoch_lines": [_trainer(line, "epoch") for line in epochs],
        "final_segment": [_trainer(line, "epoch") for line in epochs if line["epoch_s"] > last_resume_s],
        "snapshots": [_trainer(line, "epoch") for line in _of_kind(lines, "snapshot")],
        "snapshot_failures": [_trainer(line, "epoch") for line in _of_kind(lines, "snapshot_failed")],
        "storage_retries": len(_of_kind(lines, "storage_retry")),
        "world_sizes": [_trainer(line, "world_size") for line in _of_kind(lines, "rank")],
        "final_world_size": result.get("world_size"),
        "final_rank0_pod": results[-1].get("pod") if results else None,
        "final_rank0_node": results[-1].get("node") if results else None,
        "final_accuracy": result.get("final_accuracy"),
        "trainer_restarts": result.get("restarts"),
        "epochs": result.get("epochs"),
        "pod_restarts": job_info.get("restarts"),
        "restarts_by_replica": job_info.get("restarts_by_replica"),
        "restart_reasons": ["%s %s %s" % (r.get("pod"), r.get("reason"), r.get("exit_code")) for r in reasons],
        # container restarts whose crashed run kept its last lines (trainjob_info reads them while it waits)
        "restart_logs": len([r for r in reasons if r.get("container") and r.get("log_tail")]),
        "restart_logs_missing": [r.get("pod") for r in reasons if r.get("container") and not r.get("log_tail")],
        "failure": job_info.get("failure"),
        "conditions": [c.get("type") for c in job_info.get("conditions") or []],
    }


class FilterModule(object):
    """molecule/default's filters."""

    def filters(self):
        return {"fault_figures": fault_figures}
