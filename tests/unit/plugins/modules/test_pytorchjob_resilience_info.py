# -*- coding: utf-8 -*-
"""pytorchjob_resilience_info: the risks of a manifest and the warnings it emits (no cluster)."""

from __future__ import annotations

import copy

from ansible.module_utils import basic

from ansible_collections.trainfleet.training.plugins.module_utils import resilience
from ansible_collections.trainfleet.training.plugins.modules import pytorchjob_resilience_info as module


def _replica(replicas, restart_policy="OnFailure", args=("--snapshot-dir=s3://b/snap",)):
    return {"replicas": replicas, "restartPolicy": restart_policy, "template": {"spec": {"containers": [
        {"name": "pytorch", "command": ["python3", "-m", "trainer.launch"],
         "args": ["--nproc_per_node=1", "-m", "trainer.train", *args]}]}}}


STATIC = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "digits"},
          "spec": {"runPolicy": {"backoffLimit": 2},
                   "pytorchReplicaSpecs": {"Master": _replica(1), "Worker": _replica(1)}}}
ELASTIC = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "digits"},
           "spec": {"runPolicy": {"backoffLimit": 4},
                    "elasticPolicy": {"minReplicas": 1, "maxReplicas": 2, "maxRestarts": 3, "rdzvBackend": "c10d"},
                    "pytorchReplicaSpecs": {"Worker": _replica(2)}}}


def _codes(manifest):
    return [r["code"] for r in resilience.lost_pod_risks(manifest)]


def test_elastic_job_with_snapshots_survives():
    assert _codes(ELASTIC) == []


def test_static_master_worker_is_a_single_point_of_failure():
    assert _codes(STATIC) == [resilience.RISK_STATIC_RENDEZVOUS]
    single = copy.deepcopy(STATIC)
    del single["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert _codes(single) == []  # one pod: a restart resumes from the snapshot


def test_restart_never_small_backoff_and_no_snapshots():
    job = copy.deepcopy(ELASTIC)
    job["spec"]["pytorchReplicaSpecs"]["Worker"] = _replica(2, restart_policy="Never", args=())
    assert _codes(job) == [resilience.RISK_RESTART_NEVER, resilience.RISK_NO_SNAPSHOTS]
    job = copy.deepcopy(ELASTIC)
    job["spec"]["runPolicy"]["backoffLimit"] = 1
    risks = resilience.lost_pod_risks(job)
    assert [r["code"] for r in risks] == [resilience.RISK_BACKOFF_LIMIT] and "pytorchjob_backoff_limit to 2" in risks[0]["message"]


def test_exit_code_policy_fails_the_job_when_a_survivor_gives_up():
    job = copy.deepcopy(ELASTIC)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    risks = resilience.lost_pod_risks(job)
    assert [r["code"] for r in risks] == [resilience.RISK_RESTART_EXIT_CODE]
    assert "exit code 1" in risks[0]["message"] and "OnFailure" in risks[0]["message"]
    single = copy.deepcopy(job)
    single["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    assert _codes(single) == []  # one pod has no survivor: its own signal exit restarts it


def test_elastic_without_restarts_or_slack():
    job = copy.deepcopy(ELASTIC)
    job["spec"]["elasticPolicy"].update(maxRestarts=0, minReplicas=2)
    assert _codes(job) == [resilience.RISK_ELASTIC_NO_RESTARTS, resilience.RISK_ELASTIC_NO_SLACK]


def test_custom_command_without_the_trainer_is_not_asked_for_snapshots():
    job = copy.deepcopy(ELASTIC)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(
        command=["sleep"], args=["60"])
    assert _codes(job) == []


def test_module_returns_the_risks_and_warns(run_module, monkeypatch):
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: warnings.append(text))
    failed, result = run_module(module, {"manifest": STATIC}, check_mode=True)
    assert not failed and result["changed"] is False and result["resilient"] is False
    assert [r["code"] for r in result["risks"]] == [resilience.RISK_STATIC_RENDEZVOUS]
    assert len(warnings) == 1 and warnings[0].startswith("PyTorchJob digits cannot survive a lost pod: static rendezvous")
    assert "pytorchjob_elastic: true" in warnings[0]

    warnings.clear()
    failed, result = run_module(module, {"manifest": STATIC, "warn": False})
    assert not failed and result["resilient"] is False and warnings == []
    failed, result = run_module(module, {"manifest": ELASTIC})
    assert not failed and result == {"changed": False, "resilient": True, "risks": []} and warnings == []


def test_module_rejects_another_kind(run_module):
    failed, result = run_module(module, {"manifest": {"kind": "Deployment"}})
    assert failed and "must be a PyTorchJob, got kind 'Deployment'" in result["msg"]
