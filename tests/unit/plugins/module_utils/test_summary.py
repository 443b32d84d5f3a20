# -*- coding: utf-8 -*-
"""module_utils/summary.py: the train step's summary lines, for our trainer and for any script."""

from __future__ import annotations

import pytest

from ansible_collections.trainfleet.training.plugins.filter.summary import trainjob_summary
from ansible_collections.trainfleet.training.plugins.module_utils.summary import summary_lines

TRAINER = {"final_accuracy": 0.96, "final_loss": 0.12, "epochs": 10, "world_size": 2,
           "model_uri": "s3://b/training/j/model.pt", "metrics_uri": "s3://b/training/j/metrics.jsonl",
           "plot_uri": "s3://b/training/j/plot.png", "resumed_from_epoch": 4, "restarts": 1}


def result(**fields):
    base = {"name": "j", "namespace": "ns", "phase": "Succeeded", "decision": "submitted it", "duration_seconds": 42.0,
            "start_time": "2026-01-01T00:00:00Z", "completion_time": "2026-01-01T00:00:42Z", "restarts": 0,
            "restarts_by_replica": {}, "restart_reasons": [], "rank0_pod": "j-worker-1", "rank0_method": "trainer-log",
            "log_truncated": False, "trainer": {}, "failure": None, "timeline": None, "prepull": None}
    base.update(fields)
    return base


def test_our_trainer_reports_every_field_it_printed():
    lines = summary_lines(result(trainer=TRAINER), "PyTorchJob")
    assert lines[:3] == ["PyTorchJob ns/j: Succeeded", "decision: submitted it",
                         "duration: 42.0s (2026-01-01T00:00:00Z .. 2026-01-01T00:00:42Z), restarts: 0"]
    assert "result: final accuracy 0.96, final loss 0.12, epochs 10, world size 2" in lines
    assert "model: s3://b/training/j/model.pt" in lines
    assert "metrics s3://b/training/j/metrics.jsonl, plot s3://b/training/j/plot.png" in lines
    assert "resumed from snapshot epoch 4, torchrun restarts on rank 0's node 1" in lines
    assert "rank 0: pod j-worker-1 (decided by trainer-log)" in lines


def test_a_language_models_perplexity_is_in_the_result_line():
    lines = summary_lines(result(trainer=dict(TRAINER, final_accuracy=0.36, final_perplexity=10.0)), "PyTorchJob")
    assert "result: final accuracy 0.36, final loss 0.12, perplexity 10.0, epochs 10, world size 2" in lines


def test_a_foreign_script_gets_no_blank_fields_no_question_marks_and_its_last_lines():
    log = "step 1\n\nloss 0.5\nstep 2\nloss 0.4\nstep 3\nloss 0.3\ndone\n"
    lines = summary_lines(result(rank0_method="torchrun-log", duration_seconds=None, start_time=None), "PyTorchJob", log=log)
    text = "\n".join(lines)
    assert "?" not in text and "WARNING" not in text and "model:" not in text and ": ," not in text, text
    assert "duration: not recorded, restarts: 0" in lines
    assert lines[lines.index("rank 0's last 5 line(s):") + 1:][:5] == ["  step 2", "  loss 0.4", "  step 3", "  loss 0.3", "  done"]
    assert "rank 0: pod j-worker-1 (decided by torchrun-log)" in lines


def test_a_foreign_scripts_result_line_shows_only_what_it_said():
    """restarts comes back null from a script that does not count them: no null in the summary."""
    said = {"final_loss": 0.025, "epochs": 8, "world_size": 2, "resumed_from_epoch": 3, "restarts": None}
    lines = summary_lines(result(trainer=said, rank0_method="torchrun-log"), "PyTorchJob")
    assert "result: final loss 0.025, epochs 8, world size 2" in lines
    assert "resumed from snapshot epoch 3" in lines
    assert 'trainer result: {"epochs": 8, "final_loss": 0.025, "resumed_from_epoch": 3, "world_size": 2}' in lines
    assert "null" not in "\n".join(lines) and "?" not in "\n".join(lines)


def test_a_fallback_rank0_is_called_a_guess_with_the_way_to_be_sure():
    line = [l for l in summary_lines(result(rank0_method="fallback-master-0"), "PyTorchJob") if l.startswith("rank 0:")][0]
    assert line.startswith("rank 0: pod j-worker-1, a guess (fallback-master-0)") and "LOGLEVEL=INFO" in line
    assert [l for l in summary_lines(result(rank0_pod=None), "PyTorchJob") if l.startswith("rank 0:")] == [
        "rank 0: not found (no pod of the job could be read)"]


def test_a_truncated_log_without_a_result_line_warns():
    lines = summary_lines(result(log_truncated=True), "MPIJob", log_tail_lines=500)
    assert any(l.startswith("WARNING: no trainfleet-result line in the last 500 lines") for l in lines)


def test_restarts_one_record_per_line():
    reasons = [{"pod": "j-worker-%d" % i, "replica_type": "worker", "replica_index": i, "node": "n%d" % i,
                "container": "pytorch", "restarts": 1, "run": "previous", "reason": "Error", "exit_code": 1,
                "signal_name": None, "finished_at": "t%d" % i, "message": "line one\nline two" if i == 5 else None}
               for i in range(6)]
    lines = summary_lines(result(restarts=6, restart_reasons=reasons,
                                 restarts_by_replica={"Worker": {"restarts": 6, "failed": 1}}), "PyTorchJob")
    records = [l for l in lines if l.startswith("restart: ")]
    assert len(records) == 6 and all(l.count("restart: ") == 1 for l in records)
    assert records[5] == ("restart: pod j-worker-5 (worker-5) on node n5, container pytorch: Error, exit code 1, ended t5 "
                          "(previous run; 1 restart(s)): line one line two")
    assert "restarts by replica: Worker 6 (1 failed)" in lines
    # the run's last lines follow its record, one per line; a log that could not be read says so
    reasons[0]["log_tail"] = ["step 9", "RuntimeError:   peer\tlost"]
    reasons[1]["log_error"] = "container not found"
    lines = summary_lines(result(restarts=6, restart_reasons=reasons,
                                 restarts_by_replica={"Worker": {"restarts": 6, "failed": 1}}), "PyTorchJob")
    first = lines.index(records[0])
    assert lines[first + 1:first + 5] == ["  | step 9", "  | RuntimeError: peer lost", records[1],
                                          "  (its log could not be read: container not found)"]
    # nothing restarted or failed: no line about it
    quiet = summary_lines(result(restarts_by_replica={"Worker": {"restarts": 0, "failed": 0}}), "PyTorchJob")
    assert not [l for l in quiet if l.startswith("restart")], quiet


def test_a_failed_job_names_reason_pod_log_and_events():
    failure = {"reason": "BackoffLimitExceeded", "message": "too many", "pod": "j-worker-0", "container": "pytorch",
               "container_reason": "Error", "exit_code": 3, "source": "snapshot", "hint": "see the log",
               "log_tail": "a\nb", "events": [{"type": "Warning", "reason": "Failed", "message": "boom"}]}
    lines = summary_lines(result(phase="Failed", failure=failure), "PyTorchJob")
    assert lines[:7] == ["PyTorchJob ns/j: Failed", "decision: submitted it", "reason: BackoffLimitExceeded: too many",
                         "failing pod: j-worker-0, container: pytorch (Error, exit code 3)",
                         "duration: 42.0s (2026-01-01T00:00:00Z .. 2026-01-01T00:00:42Z), restarts: 0",
                         "failure read from: snapshot", "note: see the log"]
    assert lines[-5:] == ["last log lines of j-worker-0:", "  a", "  b", "events:", "  Warning Failed boom"]


def test_the_timeline_and_the_prepull():
    timeline = {"lines": ["   submitted  t0", "+1.0s started t1"], "errors": ["pods: forbidden"]}
    lines = summary_lines(result(timeline=timeline, prepull={"seconds": 3.5, "nodes": ["a", "b"]}), "VolcanoJob")
    assert lines[-5:] == ["before the submission: image pre-pulled onto 2 node(s) in 3.5 s",
                          "start-up timeline (time since the step before, step, when):",
                          "     submitted  t0", "  +1.0s started t1", "  (not read: pods: forbidden)"]


def test_the_filter_refuses_what_is_not_a_result():
    from ansible.errors import AnsibleFilterError  # pylint: disable=import-outside-toplevel

    with pytest.raises(AnsibleFilterError, match="trainjob_result"):
        trainjob_summary("not a dict", "PyTorchJob")
    assert trainjob_summary(result(), "PyTorchJob", 200, None, None)[0] == "PyTorchJob ns/j: Succeeded"
