# -*- coding: utf-8 -*-
"""pytorchjob_info: arguments, errors, check mode, wait outcomes (fake service)."""

from __future__ import annotations

import functools
import json

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils.waiter import JobWaiter
from ansible_collections.trainfleet.training.plugins.modules import pytorchjob_info as module


@pytest.fixture
def fake_time(monkeypatch):
    """Make the module's waiter use the fake clock (no real waiting)."""
    def install(clock):
        monkeypatch.setattr(module, "JobWaiter",
                            functools.partial(JobWaiter, clock=clock, sleep=clock.sleep))
    return install


def _events():
    return [
        {"involvedObject": {"kind": "Pod", "name": "mnist-worker-0"}, "type": "Warning", "reason": "Failed",
         "message": 'Failed to pull image "localhost:5001/trainfleet/trainer:missing": not found',
         "lastTimestamp": "2025-01-01T10:00:05Z", "count": 2},
        {"involvedObject": {"kind": "PyTorchJob", "name": "mnist"}, "type": "Normal",
         "reason": "SuccessfulCreatePod", "message": "Created pod: mnist-worker-0",
         "lastTimestamp": "2025-01-01T10:00:02Z"},
        {"involvedObject": {"kind": "Pod", "name": "unrelated"}, "type": "Normal", "reason": "Pulled",
         "message": "x", "lastTimestamp": "2025-01-01T10:00:03Z"},
    ]


def test_one_job(run_module, fake_service, load):
    pods = [load("pods", "succeeded_worker0"), load("pods", "succeeded_master0")]
    service = fake_service(jobs={"mnist": load("jobs", "succeeded")}, pods=pods)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training"}, service)
    assert not failed
    assert result["changed"] is False
    assert result["exists"] is True
    job = result["job"]
    assert job["phase"] == "Succeeded" and job["terminal"] is True
    assert job["duration_seconds"] == 300.0
    assert [p["name"] for p in job["pods"]] == ["mnist-master-0", "mnist-worker-0"]
    assert result["jobs"] == [job]
    assert "transitions" not in result


def test_check_mode_is_the_same_read(run_module, fake_service, load):
    service = fake_service(jobs={"mnist": load("jobs", "running")})
    failed, result = run_module(module, {"name": "mnist"}, service, check_mode=True)
    assert not failed and result["changed"] is False and result["job"]["phase"] == "Running"


def test_all_jobs_with_pods_grouped(run_module, fake_service, load):
    other = load("jobs", "running")
    other["metadata"]["name"] = "other"
    pod_other = load("pods", "running_master")
    pod_other["metadata"]["name"] = "other-master-0"
    pod_other["metadata"]["labels"]["training.kubeflow.org/job-name"] = "other"
    pod_other["metadata"]["ownerReferences"][0]["name"] = "other"
    service = fake_service(jobs={"mnist": load("jobs", "succeeded"), "other": other},
                           pods=[load("pods", "succeeded_master0"), pod_other])
    failed, result = run_module(module, {"namespace": "training", "label_selector": "team=ml"}, service)
    assert not failed
    assert [j["name"] for j in result["jobs"]] == ["mnist", "other"]
    assert [p["name"] for p in result["jobs"][1]["pods"]] == ["other-master-0"]
    assert ("list_jobs", "training", "team=ml") in service.calls
    assert "job" not in result


def test_missing_job_fails_clearly(run_module, fake_service):
    failed, result = run_module(module, {"name": "nope", "namespace": "training"}, fake_service())
    assert failed
    assert result["msg"] == "PyTorchJob training/nope not found."


def test_missing_job_allowed(run_module, fake_service):
    failed, result = run_module(module, {"name": "nope", "allow_missing": True}, fake_service())
    assert not failed
    assert result["exists"] is False and result["job"] is None and result["jobs"] == []


def test_missing_crd(run_module, fake_service):
    failed, result = run_module(module, {"name": "mnist"}, fake_service(crd=False))
    assert failed and "CRD" in result["msg"]
    failed, result = run_module(module, {}, fake_service(crd=False))
    assert failed and "CRD" in result["msg"]


def test_failed_job_without_wait_is_reported_not_failed(run_module, fake_service, load, load_log):
    service = fake_service(jobs={"mnist": load("jobs", "failed")},
                           pods=[load("pods", "error_worker1"), load("pods", "running_master")],
                           logs={("mnist-worker-1", False): b"step 1\nTraceback\nValueError: boom\n"},
                           events=_events())
    failed, result = run_module(module, {"name": "mnist", "namespace": "training"}, service)
    assert not failed
    failure = result["job"]["failure"]
    assert failure["pod"] == "mnist-worker-1"
    assert failure["log_tail"] == ["step 1", "Traceback", "ValueError: boom"]
    assert [e["reason"] for e in failure["events"]] == ["SuccessfulCreatePod"]


@pytest.mark.parametrize("args,message", [
    ({"wait": True}, "wait is True but all of the following are missing: name"),
    ({"name": "a", "label_selector": "x=y"}, "mutually exclusive"),
    ({"name": "a", "wait": True, "wait_for": "Done"}, "value of wait_for must be one of"),
    ({"name": "a", "wait_timeout": -1}, "wait_timeout must be 0 or more"),
    ({"name": "a", "bogus": 1}, "Unsupported parameters"),
])
def test_argument_errors(run_module, fake_service, args, message):
    failed, result = run_module(module, args, fake_service())
    assert failed
    assert message in result["msg"]


def test_wait_succeeds_with_transitions(run_module, fake_time, fake_service, load, clock, monkeypatch, tmp_path):
    fake_time(clock)
    progress = tmp_path / "progress.jsonl"
    service = fake_service(
        jobs={"mnist": load("jobs", "created")},
        watch_rounds=[[("MODIFIED", load("jobs", "running"))], [("MODIFIED", load("jobs", "succeeded"))]],
        clock=clock)
    logged = []
    monkeypatch.setattr(module.AnsibleModule, "log", lambda self, msg, log_args=None: logged.append(msg))
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True,
                                         "progress_file": str(progress)}, service)
    assert not failed
    assert [t["phase"] for t in result["transitions"]] == ["Created", "Running", "Succeeded"]
    assert result["job"]["phase"] == "Succeeded"
    assert result["waited_seconds"] == 2.0
    progress_logs = [m for m in logged if m.startswith("pytorchjob training/mnist:")]
    assert len(progress_logs) == 3 and "phase Running after 1.0s" in progress_logs[1]
    lines = [json.loads(line) for line in progress.read_text().splitlines()]
    assert [line["phase"] for line in lines] == ["Created", "Running", "Succeeded"]
    assert lines[0]["job"] == "training/mnist"


def test_wait_fails_fast_on_failed_job_with_diagnostics(run_module, fake_time, fake_service, load, clock):
    fake_time(clock)
    log = b"".join(b"line %d\n" % i for i in range(100)) + b"RuntimeError: trainer exited\n"
    service = fake_service(
        jobs={"mnist": load("jobs", "running")},
        pods=[load("pods", "running_master"), load("pods", "error_worker1")],
        logs={("mnist-worker-1", False): log},
        events=_events(),
        watch_rounds=[[("MODIFIED", load("jobs", "failed"))]],
        clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True,
                                         "wait_timeout": 3600, "log_lines": 5}, service)
    assert failed
    assert result["msg"] == (
        "PyTorchJob training/mnist Failed: PyTorchJobFailed - PyTorchJob training/mnist is failed because "
        "1 Worker replica(s) failed.; pod mnist-worker-1 container pytorch: Error (exit code 1); "
        "last log line: RuntimeError: trainer exited")
    failure = result["job"]["failure"]
    assert len(failure["log_tail"]) == 5
    assert failure["exit_code"] == 1
    assert result["transitions"][-1]["phase"] == "Failed"
    assert result["waited_seconds"] < 5


def test_wait_failed_crashloop_reads_previous_log(run_module, fake_time, fake_service, load, clock):
    fake_time(clock)
    service = fake_service(jobs={"mnist": load("jobs", "failed_backoff")},
                           pods=[load("pods", "crashloopbackoff")],
                           logs={("mnist-worker-0", True): b"CUDA error\n"}, clock=clock)
    failed, result = run_module(module, {"name": "mnist", "wait": True}, service)
    assert failed
    assert result["job"]["failure"]["log_tail"] == ["CUDA error"]
    assert "CrashLoopBackOff (exit code 1)" in result["msg"]


def test_wait_image_pull_backoff_fails_fast(run_module, fake_time, fake_service, load, clock):
    fake_time(clock)
    service = fake_service(jobs={"mnist": load("jobs", "created")},
                           pods=[load("pods", "running_master"), load("pods", "imagepullbackoff")],
                           events=_events(), clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True}, service)
    assert failed
    assert result["msg"].startswith(
        "PyTorchJob training/mnist cannot start: pod mnist-worker-0 container pytorch is ImagePullBackOff: "
        "Back-off pulling image")
    failure = result["job"]["failure"]
    assert failure["container_reason"] == "ImagePullBackOff"
    assert failure["events"][-1]["message"].startswith("Failed to pull image")
    assert "log_error" in failure  # the container never started: no log, said so


def test_wait_timeout_names_phase_and_pods(run_module, fake_time, fake_service, load, clock):
    fake_time(clock)
    service = fake_service(jobs={"mnist": load("jobs", "created")},
                           pods=[load("pods", "running_master")], events=_events(), clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True,
                                         "wait_timeout": 30}, service)
    assert failed
    assert result["msg"] == ("Timed out after 30s waiting for PyTorchJob training/mnist to reach terminal: "
                             "phase is Created; pods: mnist-master-0 Running")
    assert [e["reason"] for e in result["events"]] == ["SuccessfulCreatePod"]


def test_wait_for_running(run_module, fake_time, fake_service, load, clock):
    fake_time(clock)
    service = fake_service(jobs={"mnist": load("jobs", "created")},
                           watch_rounds=[[("MODIFIED", load("jobs", "running"))]], clock=clock)
    failed, result = run_module(module, {"name": "mnist", "wait": True, "wait_for": "Running"}, service)
    assert not failed and result["job"]["phase"] == "Running"


def test_wait_missing_job_is_an_error_even_with_allow_missing(run_module, fake_service):
    failed, result = run_module(module, {"name": "nope", "wait": True, "allow_missing": True}, fake_service())
    assert failed and "not found" in result["msg"]


def test_bad_kubeconfig(run_module, tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text("this: [is not a kubeconfig\n")
    failed, result = run_module(module, {"name": "mnist", "kubeconfig": str(bad)})
    assert failed
    assert "kubeconfig" in result["msg"].lower()


def test_missing_kubeconfig_file(run_module, tmp_path):
    failed, result = run_module(module, {"name": "mnist", "kubeconfig": str(tmp_path / "nope")})
    assert failed
    assert result["msg"] == "kubeconfig file %s does not exist." % (tmp_path / "nope")


def test_missing_kubernetes_library(run_module, monkeypatch):
    from ansible_collections.trainfleet.training.plugins.module_utils import k8s
    monkeypatch.setattr(k8s, "HAS_K8S", False)
    failed, result = run_module(module, {"name": "mnist"})
    assert failed and "kubernetes" in result["msg"]
