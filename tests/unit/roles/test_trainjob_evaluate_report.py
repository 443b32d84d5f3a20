# -*- coding: utf-8 -*-
"""The evaluate step's verdict (roles/trainjob/tasks/evaluate.yml, "Report the evaluation") on the
module's possible results, in one ansible-playbook run: it passes only when the evaluated accuracy
equals the run's figure (model.pt's and rank 0's line), and every failure names both numbers or says
why there is no result."""

from __future__ import annotations

import os
import sys

import yaml

from tests.unit.roles.test_tensorboard_role import playbook

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MODEL = "s3://b/training/run/model.pt"


def _evaluation(accuracy, reported):
    return {"accuracy": accuracy, "reported_accuracy": reported, "agrees": abs(accuracy - reported) <= 1e-6,
            "difference": abs(accuracy - reported), "tolerance": 1e-6, "loss": 0.12, "samples": 359, "world_size": 2}


def _result(evaluation, phase="Succeeded", error=None, action="create"):
    return {"job": "t/run-evaluate", "phase": phase, "error": error, "log_tail": ["one", "two"], "action": action,
            "seconds": 6.1, "evaluation": evaluation}


CASES = {
    "agrees": (_result(_evaluation(0.96657, 0.96657)), 0.96657),
    "read-again": (_result(_evaluation(0.96657, 0.96657), action="keep"), None),
    "model-disagrees": (_result(_evaluation(0.5, 0.9), phase="Failed"), None),
    "log-disagrees": (_result(_evaluation(0.9, 0.9)), 0.8),
    "no-result": (_result(None, phase="Failed", error=MODEL + " is not a model.pt the trainer wrote: it lacks test_acc"), None),
    "blocked": (_result(None, phase="Blocked", error="ImagePullBackOff: not found"), None),
}


def test_the_verdict_names_both_numbers_or_why_there_is_none(tmp_path):
    tasks = yaml.safe_load(open(os.path.join(ROOT, "roles", "trainjob", "tasks", "evaluate.yml")))
    report = [t for t in tasks if t["name"] == "Report the evaluation"][0]
    report = {k: v for k, v in report.items() if k != "when"}
    plays = []
    for case_id, (result, logged) in CASES.items():
        variables = {"trainjob_evaluation": result, "_trainjob_evaluate_model": MODEL, "ansible_python_interpreter": sys.executable}
        if logged is not None:
            variables["trainjob_result"] = {"final_accuracy": logged}
        plays.append({"name": case_id, "hosts": "localhost", "gather_facts": False, "connection": "local", "vars": variables,
                      "tasks": [{"block": [report, {"ansible.builtin.debug": {"msg": "CASE %s PASSED: {{ ansible_facts | length }}" % case_id}}],
                                 "rescue": [{"ansible.builtin.debug": {"msg": "CASE %s FAILED: {{ ansible_failed_result.msg }}" % case_id}}]}]})
    (tmp_path / "report.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    rc, out, _seconds = playbook([str(tmp_path / "report.yml")], tmp_path)
    assert rc == 0, out[-3000:]
    lines = {line.split('"msg": "CASE ', 1)[1].split(" ", 1)[0]: line for line in out.splitlines() if '"msg": "CASE ' in line}
    assert set(lines) == set(CASES), out[-3000:]
    assert "PASSED" in lines["agrees"] and "PASSED" in lines["read-again"]
    assert "evaluated accuracy 0.5 differs from the run's reported 0.9 (difference 0.4" in lines["model-disagrees"]
    assert "evaluated accuracy 0.9 differs from the run's reported 0.8" in lines["log-disagrees"]
    assert "ended Failed without a result: %s is not a model.pt the trainer wrote" % MODEL in lines["no-result"]
    assert "ended Blocked without a result: ImagePullBackOff" in lines["blocked"]
    assert "equals the run's reported 0.96657" in out and "read again from Job t/run-evaluate" in out
