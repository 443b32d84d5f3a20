# -*- coding: utf-8 -*-
"""trainjob_info (pytorchjob_info redirects here): arguments, errors, check mode, wait outcomes (fake service)."""

from __future__ import annotations

import copy
import functools
import json
import threading

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils import jobinfo
from ansible_collections.trainfleet.training.plugins.module_utils.errors import ApiAccessError
from ansible_collections.trainfleet.training.plugins.module_utils.waiter import JobWaiter
from ansible_collections.trainfleet.training.plugins.modules import trainjob_info as module


@pytest.fixture
def fake_time(monkeypatch):
    """Make the module's waiter use the fake clock (no real waiting)."""
    def install(clock):
        monkeypatch.setattr(jobinfo, "JobWaiter",
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


def test_one_job_reports_restarts_by_replica_and_their_reasons(run_module, fake_service, load):
    pods = [load("pods", "restarted_master_peer_lost"), load("pods", "restarted_after_oom"), load("pods", "running_worker1")]
    service = fake_service(jobs={"mnist": load("jobs", "running_after_restart")}, pods=pods)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training"}, service)
    assert not failed
    job = result["job"]
    assert job["restarts"] == 3
    assert {rtype: v["restarts"] for rtype, v in job["restarts_by_replica"].items()} == {"Master": 2, "Worker": 1}
    assert job["restarts_by_replica"]["Worker"]["pods"] == {"mnist-worker-0": 1, "mnist-worker-1": 0}
    assert [(r["pod"], r["node"], r["reason"], r["exit_code"], r["signal_name"], r["finished_at"]) for r in job["restart_reasons"]] == [
        ("mnist-worker-0", "trainfleet-worker", "OOMKilled", 137, "SIGKILL", "2025-01-01T10:02:00Z"),
        ("mnist-master-0", "trainfleet-worker2", "Error", 1, None, "2025-01-01T10:03:35Z"),
    ]
    json.dumps(result)  # plain data, as Ansible returns it


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
    assert failure["source"] == "live_pod" and failure["hint"] is None
    assert (failure["replica_type"], failure["replica_index"], failure["node"]) == ("worker", 1, "trainfleet-worker")


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


# ------------------------------------------------------------------ pods deleted by the operator
# A job past runPolicy.backoffLimit: the operator (v1.9.3) deletes its pods, then marks it Failed.


class FakePodWatch(object):
    """One round of the pod watch: its events, then open until cancelled (like a real one)."""

    def __init__(self, events, hold, delivered):
        self._events = list(events)
        self._hold = hold
        self._delivered = delivered
        self._cancelled = threading.Event()

    def events(self):
        for event in self._events:
            if self._cancelled.is_set():
                return
            yield event
        if self._events:
            self._delivered.set()  # every event has been handled by the consumer by now
        self._cancelled.wait(self._hold)

    def cancel(self):
        self._cancelled.set()


@pytest.fixture
def watching_service(fake_service):
    """A fake service with watch_pods. The job watch holds back its events until the pod watch
    delivered its own (`gate`), then the pods are `pods_after_gate` (deleted: [])."""

    class WatchingService(fake_service):
        def __init__(self, pod_watch_rounds=None, pod_watch_error=None, pods_after_gate=None, **kwargs):
            super(WatchingService, self).__init__(**kwargs)
            self.pod_watch_rounds = list(pod_watch_rounds or [])
            self.pod_watch_error = pod_watch_error
            self.pods_after_gate = pods_after_gate
            self.gate = threading.Event()
            self.use_gate = bool(self.pod_watch_rounds) or pod_watch_error is not None

        def watch_pods(self, namespace, job_name, timeout_seconds):
            self.calls.append(("watch_pods", namespace, job_name))
            if self.pod_watch_error is not None:
                raise self.pod_watch_error
            events = self.pod_watch_rounds.pop(0) if self.pod_watch_rounds else []
            return FakePodWatch(events, min(timeout_seconds, 30), self.gate)

        def list_pods(self, namespace, job_name=None):
            pods = super(WatchingService, self).list_pods(namespace, job_name)
            if self.pod_watch_error is not None and threading.current_thread().name.startswith("trainjob-pod-watch"):
                self.gate.set()
            return pods

        def watch_job(self, namespace, name, resource_version, timeout_seconds):
            if self.use_gate:
                assert self.gate.wait(10), "the pod watch did not see the pods"
                if self.pods_after_gate is not None:
                    self.pods = list(self.pods_after_gate)
            return super(WatchingService, self).watch_job(namespace, name, resource_version, timeout_seconds)

    return WatchingService


def _pod_watch_threads():
    return [t for t in threading.enumerate() if t.name.startswith("trainjob-pod-watch") and t.is_alive()]


def _backoff_events():
    def event(message, reason, when, event_type="Warning"):
        return {"involvedObject": {"kind": "PyTorchJob", "name": "mnist"}, "type": event_type, "reason": reason,
                "message": message, "firstTimestamp": when, "lastTimestamp": when, "count": 1}
    return [
        event("Created pod: mnist-master-0", "SuccessfulCreatePod", "2025-01-01T10:00:01Z", "Normal"),
        event("Pod: training.mnist-master-0 exited with code 1", "ExitedWithCode", "2025-01-01T10:00:10Z", "Normal"),
        event("Error pod mnist-master-0 container pytorch exitCode: 1 terminated message: ", "Error",
              "2025-01-01T10:00:10Z"),
        event("Deleted pod: mnist-master-0", "SuccessfulDeletePod", "2025-01-01T10:00:20Z", "Normal"),
        event("Job mnist has failed because it has reached the specified backoff limit", "PyTorchJobFailed",
              "2025-01-01T10:00:20Z", "Normal"),
        {"involvedObject": {"kind": "Pod", "name": "mnist-master-0"}, "type": "Warning", "reason": "BackOff",
         "message": "Back-off restarting failed container pytorch", "lastTimestamp": "2025-01-01T10:00:12Z"},
    ]


def _crashed_master(load):
    """mnist-master-0 the moment its trainer exited 1 (restartPolicy OnFailure)."""
    pod = load("pods", "oomkilled")
    pod["status"]["containerStatuses"][0]["state"] = {"terminated": {
        "reason": "Error", "exitCode": 1, "message": "trainer: error: unrecognized arguments",
        "startedAt": "2025-01-01T10:00:08Z", "finishedAt": "2025-01-01T10:00:10Z"}}
    return pod


def test_wait_failed_pods_deleted_after_a_snapshot(run_module, fake_time, watching_service, load, clock):
    fake_time(clock)
    crash_log = b"".join(b"step %d\n" % i for i in range(10)) + b"trainer: error: unrecognized arguments\n"
    service = watching_service(
        jobs={"mnist": load("jobs", "running")},
        pods=[_crashed_master(load)],
        pod_watch_rounds=[[("ADDED", load("pods", "running_master")), ("MODIFIED", _crashed_master(load))]],
        pods_after_gate=[],  # deleted by the operator before it marks the job Failed
        logs={("mnist-master-0", False): crash_log},
        events=_backoff_events(),
        watch_rounds=[[("MODIFIED", load("jobs", "failed_backoff_deleted"))]],
        clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True,
                                         "log_lines": 3}, service)
    assert failed
    failure = result["job"]["failure"]
    assert failure["source"] == "snapshot"
    assert (failure["pod"], failure["replica_type"], failure["replica_index"], failure["node"], failure["container"]) == \
        ("mnist-master-0", "master", 0, "trainfleet-worker", "pytorch")
    assert (failure["exit_code"], failure["container_reason"], failure["container_message"]) == \
        (1, "Error", "trainer: error: unrecognized arguments")
    assert failure["log_tail"] == ["step 8", "step 9", "trainer: error: unrecognized arguments"]
    assert failure["observed_at"]
    assert result["job"]["pods"] == []
    # the deleted pod's run is still in restart_reasons, recorded by the pod watch
    reasons = result["job"]["restart_reasons"]
    assert [(r["pod"], r["node"], r["reason"], r["exit_code"], r["run"], r["finished_at"]) for r in reasons] == [
        ("mnist-master-0", "trainfleet-worker", "Error", 1, "current", "2025-01-01T10:00:10Z")]
    assert reasons[0]["observed_at"]
    # with that run's last lines, taken from the snapshot's read (no second read, below)
    assert reasons[0]["log_tail"] == ["step 8", "step 9", "trainer: error: unrecognized arguments"]
    assert [e["reason"] for e in failure["events"]][-1] == "PyTorchJobFailed"
    assert result["msg"].startswith(
        "PyTorchJob training/mnist Failed: PyTorchJobFailed - Job mnist has failed because it has reached the "
        "specified backoff limit; pod mnist-master-0 container pytorch: Error (exit code 1), recorded at ")
    assert "last log line: trainer: error: unrecognized arguments" in result["msg"]
    assert "deleted the job's pods" in result["msg"] and "from that snapshot" in result["msg"]
    # the log was read once, while the pod existed: the current run (it had not restarted)
    assert [c for c in service.calls if c[0] == "iter_log"] == [
        ("iter_log", "mnist-master-0", "pytorch", 3, None, False, None)]
    assert not _pod_watch_threads()


def _restarted_after_oom_service(watching_service, load, clock, pods_after_gate, failed_job):
    """worker-0 running again after its OOM-killed run (the pod watch sees it), then the job failed."""
    return watching_service(
        jobs={"mnist": load("jobs", "running")},
        pod_watch_rounds=[[("MODIFIED", load("pods", "restarted_after_oom"))]],
        pods_after_gate=pods_after_gate,
        logs={("mnist-worker-0", True): b"epoch 3\nKilled\n", ("mnist-worker-0", False): b"starting again\n"},
        watch_rounds=[[("MODIFIED", load("jobs", failed_job))]],
        clock=clock)


def test_wait_failed_restarted_container_uses_its_previous_log(run_module, fake_time, watching_service, load, clock):
    fake_time(clock)
    service = _restarted_after_oom_service(watching_service, load, clock, [], "failed_backoff_deleted")  # pods deleted
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True}, service)
    assert failed
    failure = result["job"]["failure"]
    assert failure["source"] == "snapshot"
    assert (failure["pod"], failure["exit_code"], failure["container_reason"]) == ("mnist-worker-0", 137, "OOMKilled")
    assert failure["log_tail"] == ["epoch 3", "Killed"]
    assert [c[5] for c in service.calls if c[0] == "iter_log"] == [True]  # previous=True, first
    # the restart record keeps the same run's lines (the ended run, never the running one)
    assert [(r["pod"], r["run"], r["log_tail"]) for r in result["job"]["restart_reasons"]] == [
        ("mnist-worker-0", "previous", ["epoch 3", "Killed"])]
    assert not _pod_watch_threads()


def test_wait_failed_live_pod_restarted_since_its_failed_run_reads_that_runs_log(
        run_module, fake_time, watching_service, load, clock):
    """With OnFailure the kubelet may start the container again before the operator deletes the failed
    job's pods: the failure's exit code is the lastState's, so its lines are the previous run's, not
    the fresh run's start-up lines (seen in make test under load)."""
    fake_time(clock)
    service = _restarted_after_oom_service(watching_service, load, clock, [load("pods", "restarted_after_oom")], "failed")
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True}, service)
    assert failed
    failure = result["job"]["failure"]
    assert (failure["source"], failure["pod"], failure["exit_code"]) == ("live_pod", "mnist-worker-0", 137)
    assert failure["log_tail"] == ["epoch 3", "Killed"]
    assert not _pod_watch_threads()


def test_wait_keeps_every_restarted_runs_last_lines(run_module, fake_time, watching_service, load, clock):
    """A restart that fails nothing (the job goes on) still keeps the ended run's last lines, read when the pod
    watch saw it: the kubelet keeps one previous run, and the pod is gone by the end."""
    fake_time(clock)
    restarted = load("pods", "restarted_master_peer_lost")  # Master ran again after exit code 1
    crashed = b"".join(b"epoch %d\n" % i for i in range(9)) + b"RuntimeError: Connection reset by peer\n"
    service = watching_service(
        jobs={"mnist": load("jobs", "running")},
        pod_watch_rounds=[[("MODIFIED", restarted), ("MODIFIED", restarted)]],
        pods_after_gate=[],
        logs={("mnist-master-0", True): crashed, ("mnist-master-0", False): b"resumed from epoch 8\n"},
        watch_rounds=[[("MODIFIED", load("jobs", "succeeded"))]],
        clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True, "log_lines": 20},
                                service)
    assert not failed
    reasons = result["job"]["restart_reasons"]
    assert [(r["pod"], r["run"], r["exit_code"]) for r in reasons] == [("mnist-master-0", "previous", 1)]
    assert reasons[0]["log_tail"] == ["epoch 5", "epoch 6", "epoch 7", "epoch 8", "RuntimeError: Connection reset by peer"]
    assert reasons[0]["log_error"] is None
    # one read of that run (the previous one only), though the pod was seen twice: the failure snapshot's
    # (log_lines), whose last 5 lines the record keeps
    assert [c for c in service.calls if c[0] == "iter_log"] == [("iter_log", "mnist-master-0", "pytorch", 20, None, True, None)]
    assert not _pod_watch_threads()


def test_wait_reads_a_later_restart_of_the_same_container_on_its_own(run_module, fake_time, watching_service, load,
                                                                     clock):
    """The replica's failure snapshot is taken once; a later restart of the same container is another run, read by
    its restart record alone: the last 5 lines of the previous run, never the running one."""
    fake_time(clock)
    first = load("pods", "restarted_master_peer_lost")
    second = copy.deepcopy(first)
    status = second["status"]["containerStatuses"][0]
    status["restartCount"] = 3
    status["lastState"]["terminated"].update(startedAt="2025-01-01T10:03:40Z", finishedAt="2025-01-01T10:05:00Z")
    service = watching_service(
        jobs={"mnist": load("jobs", "running")},
        pod_watch_rounds=[[("MODIFIED", first), ("MODIFIED", second)]],
        pods_after_gate=[],
        logs={("mnist-master-0", True): b"".join(b"step %d\n" % i for i in range(8)),
              ("mnist-master-0", False): b"running\n"},
        watch_rounds=[[("MODIFIED", load("jobs", "succeeded"))]],
        clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True}, service)
    assert not failed
    reasons = result["job"]["restart_reasons"]
    assert [(r["finished_at"], r["log_tail"]) for r in reasons] == [
        ("2025-01-01T10:03:35Z", ["step 3", "step 4", "step 5", "step 6", "step 7"]),
        ("2025-01-01T10:05:00Z", ["step 3", "step 4", "step 5", "step 6", "step 7"])]
    assert [c[3:6] for c in service.calls if c[0] == "iter_log"] == [(50, None, True), (5, None, True)]
    assert not _pod_watch_threads()


def test_wait_reads_a_run_that_ended_after_the_pod_watchs_last_look(run_module, fake_time, watching_service,
                                                                    load, clock):
    """The job ended before the pod watch saw the restart: the end of the wait reads that run's last lines."""
    fake_time(clock)
    service = watching_service(
        jobs={"mnist": load("jobs", "running")},
        pod_watch_rounds=[[("MODIFIED", load("pods", "running_worker1"))]],
        pods_after_gate=[load("pods", "restarted_master_peer_lost")],
        logs={("mnist-master-0", True): b"".join(b"step %d\n" % i for i in range(8)),
              ("mnist-master-0", False): b"running\n"},
        watch_rounds=[[("MODIFIED", load("jobs", "succeeded"))]],
        clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True}, service)
    assert not failed
    (reason,) = result["job"]["restart_reasons"]
    assert (reason["pod"], reason["run"], reason["log_tail"], reason["log_error"]) == (
        "mnist-master-0", "previous", ["step 3", "step 4", "step 5", "step 6", "step 7"], None)
    # one read of that run (the previous one; the other read is the timeline's head of rank 0's current log)
    assert [c[1:6] for c in service.calls if c[0] == "iter_log" and c[5]] == [("mnist-master-0", "pytorch", 5, None, True)]
    assert not _pod_watch_threads()


def test_without_a_wait_no_ended_runs_log_is_read(run_module, fake_service, load):
    service = fake_service(jobs={"mnist": load("jobs", "running_after_restart")},
                           pods=[load("pods", "restarted_master_peer_lost"), load("pods", "running_worker1")])
    failed, result = run_module(module, {"name": "mnist", "namespace": "training"}, service)
    assert not failed and result["job"]["restart_reasons"]
    assert all("log_tail" not in r for r in result["job"]["restart_reasons"])
    assert not [c for c in service.calls if c[0] == "iter_log" and c[5]]  # no ended run's log


def test_wait_fails_on_a_running_job_that_prints_nothing_for_progress_timeout(run_module, fake_time, fake_service,
                                                                              load, clock):
    """The pods' newest line is far older than progress_timeout: the wait fails naming it, the job is left."""
    fake_time(clock)
    service = fake_service(jobs={"mnist": load("jobs", "running")},
                           pods=[load("pods", "running_worker0"), load("pods", "running_worker1")],
                           logs={("mnist-worker-0", False): b"init\n", ("mnist-worker-1", False): b"init\nwaiting on rank 0\n"},
                           clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True,
                                         "progress_timeout": 300}, service)
    assert failed
    assert result["msg"].startswith("PyTorchJob training/mnist made no progress: its pods printed no log line and "
                                    "started no container for ")
    assert ('(progress_timeout 300s); the last line read, from pod mnist-worker-1 at 2025-01-01T10:00:01Z: '
            '"waiting on rank 0". The job is left running') in result["msg"]
    assert result["stall"]["pod"] == "mnist-worker-1" and result["stall"]["silent_seconds"] >= 300
    assert result["job"]["phase"] == "Running" and not [c for c in service.calls if c[0] == "delete_job"]


def test_progress_timeout_must_not_be_negative(run_module, fake_service, load):
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "progress_timeout": -1},
                                fake_service(jobs={"mnist": load("jobs", "running")}))
    assert failed and result["msg"] == "progress_timeout must be 0 or more, got -1"


def test_wait_says_when_a_restarted_runs_log_is_gone(run_module, fake_time, watching_service, load, clock):
    fake_time(clock)
    service = watching_service(
        jobs={"mnist": load("jobs", "running")},
        pod_watch_rounds=[[("MODIFIED", load("pods", "restarted_master_peer_lost"))]],
        pods_after_gate=[],
        logs={},  # the previous run's log is already gone
        watch_rounds=[[("MODIFIED", load("jobs", "succeeded"))]],
        clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True}, service)
    assert not failed
    (reason,) = result["job"]["restart_reasons"]
    assert reason["log_tail"] == [] and "Cannot read the log of pod training/mnist-master-0" in reason["log_error"]
    # log_lines 0 reads no log at all
    service = watching_service(
        jobs={"mnist": load("jobs", "running")},
        pod_watch_rounds=[[("MODIFIED", load("pods", "restarted_master_peer_lost"))]],
        pods_after_gate=[], watch_rounds=[[("MODIFIED", load("jobs", "succeeded"))]], clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True, "log_lines": 0}, service)
    assert not failed and "log_tail" not in result["job"]["restart_reasons"][0]
    assert not [c for c in service.calls if c[0] == "iter_log"]


def test_wait_failed_pods_deleted_without_snapshot_uses_the_events(run_module, fake_time, watching_service, load, clock):
    fake_time(clock)
    service = watching_service(
        jobs={"mnist": load("jobs", "running")},
        pods=[],
        events=_backoff_events(),
        watch_rounds=[[("MODIFIED", load("jobs", "failed_backoff_deleted"))]],
        clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True}, service)
    assert failed
    failure = result["job"]["failure"]
    assert failure["source"] == "events"
    assert (failure["pod"], failure["replica_type"], failure["replica_index"], failure["container"],
            failure["exit_code"], failure["container_reason"]) == ("mnist-master-0", "master", 0, "pytorch", 1, "Error")
    assert failure["log_tail"] == [] and failure["observed_at"] is None
    assert not [c for c in service.calls if c[0] == "iter_log"]
    assert result["msg"].startswith(
        "PyTorchJob training/mnist Failed: PyTorchJobFailed - Job mnist has failed because it has reached the "
        "specified backoff limit; pod mnist-master-0 container pytorch: Error (exit code 1), from the operator's "
        "events. The training operator deleted the job's pods, and their logs, when the job exceeded "
        "runPolicy.backoffLimit (0)")
    assert "no log is available" in result["msg"]
    assert "restartPolicy Never" in result["msg"] and "cleanPodPolicy None" in result["msg"]
    # the kubelet's events of the deleted pod (named from the replica specs) are listed too
    listed = [c for c in service.calls if c[0] == "list_events"][-1][2]
    assert {"mnist", "mnist-master-0", "mnist-worker-0"} <= set(listed)
    assert "BackOff" in [e["reason"] for e in failure["events"]]


def test_wait_failed_live_pods_win_over_the_snapshot(run_module, fake_time, watching_service, load, clock):
    fake_time(clock)
    service = watching_service(
        jobs={"mnist": load("jobs", "running")},
        pod_watch_rounds=[[("MODIFIED", _crashed_master(load))]],
        pods_after_gate=[load("pods", "error_worker1")],
        logs={("mnist-master-0", False): b"master log\n", ("mnist-worker-1", False): b"worker log\n"},
        watch_rounds=[[("MODIFIED", load("jobs", "failed"))]],
        clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True}, service)
    assert failed
    failure = result["job"]["failure"]
    assert (failure["source"], failure["pod"], failure["log_tail"]) == ("live_pod", "mnist-worker-1", ["worker log"])


def test_wait_failed_live_pod_deleted_before_its_log_was_read(run_module, fake_time, watching_service, load, clock):
    fake_time(clock)
    service = watching_service(
        jobs={"mnist": load("jobs", "running")},
        pod_watch_rounds=[[("MODIFIED", _crashed_master(load))]],
        pods_after_gate=[_crashed_master(load)],
        logs={("mnist-master-0", False): b"the crash\n"},
        watch_rounds=[[("MODIFIED", load("jobs", "failed_backoff_deleted"))]],
        clock=clock)
    original = service.iter_log
    reads = []

    def iter_log(namespace, pod, **kwargs):
        reads.append(pod)
        if len(reads) > 1:  # the pod watch read it; by the time the module reads it, it is gone
            service.logs.clear()
        return original(namespace, pod, **kwargs)
    service.iter_log = iter_log
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True}, service)
    assert failed
    failure = result["job"]["failure"]
    assert failure["source"] == "live_pod"
    assert failure["log_tail"] == ["the crash"] and failure["observed_at"]
    assert "log_error" in failure


def test_wait_pod_watch_forbidden_falls_back_to_listing(run_module, fake_time, watching_service, load, clock,
                                                        monkeypatch):
    fake_time(clock)
    warnings = []
    monkeypatch.setattr(module.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
    service = watching_service(
        jobs={"mnist": load("jobs", "running")},
        pods=[_crashed_master(load)],
        pod_watch_error=ApiAccessError("Not allowed to watch the pods of PyTorchJob training/mnist (HTTP 403)"),
        pods_after_gate=[],
        logs={("mnist-master-0", False): b"the crash\n"},
        watch_rounds=[[("MODIFIED", load("jobs", "failed_backoff_deleted"))]],
        clock=clock)
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True,
                                         "wait_fail_reasons": []}, service)
    assert failed
    failure = result["job"]["failure"]
    assert (failure["source"], failure["pod"], failure["log_tail"]) == ("snapshot", "mnist-master-0", ["the crash"])
    assert warnings == ["Could not watch the pods of PyTorchJob training/mnist while waiting: "
                        "Not allowed to watch the pods of PyTorchJob training/mnist (HTTP 403)"]
    assert not _pod_watch_threads()


def test_wait_succeeded_stops_the_pod_watch(run_module, fake_time, watching_service, load, clock):
    fake_time(clock)
    service = watching_service(jobs={"mnist": load("jobs", "running")},
                               watch_rounds=[[("MODIFIED", load("jobs", "succeeded"))]], clock=clock)
    failed, result = run_module(module, {"name": "mnist", "wait": True}, service)
    assert not failed and result["job"]["failure"] is None
    assert ("watch_pods", "default", "mnist") in service.calls
    assert not _pod_watch_threads()


def test_failed_job_without_wait_and_without_pods_uses_the_events(run_module, fake_service, load):
    service = fake_service(jobs={"mnist": load("jobs", "failed_backoff_deleted")}, events=_backoff_events())
    failed, result = run_module(module, {"name": "mnist", "namespace": "training"}, service)
    assert not failed
    failure = result["job"]["failure"]
    assert (failure["source"], failure["pod"], failure["exit_code"]) == ("events", "mnist-master-0", 1)
    assert "backoffLimit" in failure["hint"]
