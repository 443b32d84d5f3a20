# -*- coding: utf-8 -*-
"""The evaluate step's runner (module_utils/evaluation.py) on a fake cluster: what it does with a Job
that is absent, ours and done, ours for another run, not ours; how it ends on success, on a failed
evaluation, on a pod that cannot start and on a timeout."""

from __future__ import annotations

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils import evaluation as ev
from ansible_collections.trainfleet.training.plugins.module_utils.evaluation import EvaluationError, EvaluationRunner

LINE = 'trainfleet-evaluate: {"accuracy": 0.95, "agrees": true, "difference": 0.0, "reported_accuracy": 0.95}'
ERROR = "trainfleet-trainer: error: s3://b/p/run/model.pt is not a model.pt the trainer wrote: it lacks test_acc"


def manifest(name="run-evaluate"):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "ns", "labels": {
        "app.kubernetes.io/managed-by": "trainfleet"}}, "spec": {"template": {"spec": {"containers": [{"image": "i"}]}}}}


class FakeApiException(Exception):
    def __init__(self, status):
        super().__init__(status)
        self.status, self.reason = status, "Not Found"


class FakeCluster(object):
    """batch + core in one: the Job advances one step per read of it (script: phases after creation)."""

    def __init__(self, job=None, script=("Running", "Succeeded"), log=LINE, waiting=None, failed=None):
        self.job, self.script, self.log, self.waiting, self.failed = job, list(script), log, waiting, failed
        self.created = self.deleted = 0
        self.time = 0.0

    # batch
    def read_namespaced_job(self, name, namespace, **_kw):
        if self.job is None:
            raise FakeApiException(404)
        if self.created and self.script:
            phase = self.script.pop(0)
            condition = {"type": {"Succeeded": "Complete"}.get(phase, phase), "status": "True"}
            if phase == "Failed" and self.failed:
                condition.update(reason=self.failed[0], message=self.failed[1])
            self.job["status"] = {"conditions": [condition] if phase != "Running" else [], "active": 1 if phase == "Running" else 0}
        return self.job

    def create_namespaced_job(self, namespace, body, **_kw):
        self.created += 1
        self.job = dict(body, status={})

    def delete_namespaced_job(self, name, namespace, **_kw):
        self.deleted += 1
        self.job = None

    # core
    def list_namespaced_pod(self, namespace, label_selector=None, **_kw):
        status = {"phase": "Running"}
        if self.waiting:
            status["containerStatuses"] = [{"state": {"waiting": {"reason": self.waiting, "message": "not found"}}}]
        return {"items": [{"metadata": {"name": "run-evaluate-x", "creationTimestamp": "t"}, "status": status}]}

    def read_namespaced_pod_log(self, pod, namespace, **_kw):
        return self.log

    # clock
    def clock(self):
        return self.time

    def sleep(self, seconds):
        self.time += seconds


@pytest.fixture(autouse=True)
def fake_api_exception(monkeypatch):
    monkeypatch.setattr(ev, "ApiException", FakeApiException)


def runner(cluster, run_id="2026-11-29T10:00:00Z", timeout=60, job=None, reports=None):
    return EvaluationRunner(cluster, cluster, job or manifest(), run_id=run_id, timeout=timeout, poll=3,
                            report=(reports.append if reports is not None else None), clock=cluster.clock, sleep=cluster.sleep)


def test_creates_the_job_waits_and_reads_the_evaluate_line_with_progress():
    cluster, reports = FakeCluster(script=("Running", "Running", "Succeeded")), []
    result = runner(cluster, reports=reports).run()
    assert cluster.created == 1 and result["action"] == "create" and result["changed"] is True
    assert result["phase"] == "Succeeded" and result["evaluation"]["agrees"] is True and result["error"] is None
    assert cluster.job["metadata"]["annotations"][ev.IDENTITY_ANNOTATION] == ev.identity(manifest(), "2026-11-29T10:00:00Z")
    assert reports and reports[0].startswith("evaluate Job ns/run-evaluate: Running, 0 s, last log line: trainfleet-evaluate:")


def test_a_succeeded_job_for_the_same_run_is_read_again_not_run():
    cluster = FakeCluster()
    runner(cluster).run()
    again = runner(cluster).run()
    assert cluster.created == 1 and again["action"] == "keep" and again["changed"] is False
    assert again["evaluation"]["accuracy"] == 0.95


def test_another_run_or_no_run_id_replaces_our_job():
    cluster = FakeCluster()
    runner(cluster).run()
    cluster.script = ["Succeeded"]
    assert runner(cluster, run_id="2026-11-29T11:00:00Z").run()["action"] == "replace"
    cluster.script = ["Succeeded"]
    assert runner(cluster, run_id="").run()["action"] == "replace"  # an earlier run named alone: always again
    assert cluster.deleted == 2 and cluster.created == 3


def test_check_mode_says_what_it_would_do_and_changes_nothing():
    cluster = FakeCluster()
    result = runner(cluster).run(check_mode=True)
    assert result["action"] == "create" and result["changed"] is True and cluster.created == 0 and result["phase"] is None


def test_a_job_of_that_name_we_did_not_make_is_never_touched():
    theirs = {"metadata": {"name": "run-evaluate", "namespace": "ns", "labels": {}}, "status": {}}
    cluster = FakeCluster(job=theirs)
    with pytest.raises(EvaluationError, match="trainfleet did not create it"):
        runner(cluster).run()
    assert cluster.deleted == 0 and cluster.created == 0


def test_a_failed_evaluation_returns_the_trainers_error():
    cluster = FakeCluster(script=("Failed",), log="starting\n" + ERROR)
    result = runner(cluster).run()
    assert result["phase"] == "Failed" and result["evaluation"] is None
    assert result["error"].startswith("s3://b/p/run/model.pt is not a model.pt the trainer wrote")
    assert result["log_tail"][-1] == ERROR


def test_a_job_past_its_deadline_says_so():
    deadline = ("DeadlineExceeded", "Job was active longer than specified deadline")
    result = runner(FakeCluster(script=("Failed",), log="loading the dataset", failed=deadline)).run()
    assert result["phase"] == "Failed" and result["evaluation"] is None
    assert result["error"] == "DeadlineExceeded: Job was active longer than specified deadline"
    # the trainer's own error line is the better reason when there is one
    result = runner(FakeCluster(script=("Failed",), log=ERROR, failed=("BackoffLimitExceeded", "x"))).run()
    assert result["error"].endswith("is not a model.pt the trainer wrote: it lacks test_acc")


def test_a_pod_that_cannot_start_ends_the_wait_at_once():
    cluster = FakeCluster(script=("Running",) * 100, waiting="ImagePullBackOff")
    result = runner(cluster).run()
    assert result["phase"] == "Blocked" and result["error"] == "ImagePullBackOff: not found" and cluster.time == 0


def test_the_wait_is_bounded():
    cluster = FakeCluster(script=("Running",) * 1000, log="epoch 1 of 9")
    result = runner(cluster, timeout=30).run()
    assert result["phase"] == "Timeout" and "timeout 30 s" in result["error"] and 30 < cluster.time <= 36


def test_read_result_takes_the_last_evaluate_line_and_the_error():
    evaluation, error, last = ev.read_result("a\n" + LINE + "\n" + ERROR + "\n\n")
    assert evaluation["accuracy"] == 0.95 and error.startswith("s3://") and last == ERROR
    assert ev.read_result("") == (None, None, "")


def test_the_kubelets_cache_sync_hiccup_does_not_block_the_evaluation():
    def pod(message):
        return {"status": {"containerStatuses": [
            {"state": {"waiting": {"reason": "CreateContainerConfigError", "message": message}}}]}}
    assert ev.blocked_reason([pod("failed to sync configmap cache: timed out waiting for the condition")]) is None
    assert ev.blocked_reason([pod('secret "x" not found')]) == 'CreateContainerConfigError: secret "x" not found'
