# -*- coding: utf-8 -*-
"""PyTorchJob semantics on YAML fixtures: phases, terminal, replicas, pods, rank 0."""

from __future__ import annotations

import datetime
import os
import re

import pytest
import yaml

from ansible_collections.trainfleet.training.plugins.module_utils import forensics
from ansible_collections.trainfleet.training.plugins.module_utils import jobinfo
from ansible_collections.trainfleet.training.plugins.module_utils import jobkinds as kinds
from ansible_collections.trainfleet.training.plugins.module_utils import joblogs
from ansible_collections.trainfleet.training.plugins.module_utils import jobstatus as status
from ansible_collections.trainfleet.training.plugins.module_utils import ranks as rk
from ansible_collections.trainfleet.training.plugins.module_utils import trainerlog as tlog

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "pytorchjob")


def load(kind, name):
    with open(os.path.join(FIXTURES, kind, name + ".yaml")) as handle:
        return yaml.safe_load(handle)


def log_lines(name):
    with open(os.path.join(FIXTURES, "logs", name + ".log")) as handle:
        return handle.read().splitlines()


NOW = datetime.datetime(2025, 1, 1, 10, 1, 1, tzinfo=datetime.timezone.utc)


# ------------------------------------------------------------------ phases


@pytest.mark.parametrize("fixture,phase,terminal", [
    ("pending", "Pending", False),
    ("created", "Created", False),
    ("running", "Running", False),
    ("restarting", "Restarting", False),
    ("running_after_restart", "Running", False),
    ("succeeded", "Succeeded", True),
    ("failed", "Failed", True),
    ("failed_backoff", "Failed", True),
    ("suspended", "Suspended", False),
    ("reordered", "Running", False),
])
def test_phase_and_terminal(fixture, phase, terminal):
    job = load("jobs", fixture)
    assert kinds.job_phase(job) == phase
    assert kinds.is_terminal_phase(kinds.job_phase(job)) is terminal


def test_latest_true_condition_wins_by_position_when_times_equal():
    job = {"status": {"conditions": [
        {"type": "Created", "status": "True", "lastTransitionTime": "2025-01-01T10:00:00Z"},
        {"type": "Running", "status": "True", "lastTransitionTime": "2025-01-01T10:00:00Z"},
    ]}}
    assert kinds.job_phase(job) == "Running"


def test_false_conditions_are_ignored_and_unknown_types_skipped():
    job = {"status": {"conditions": [
        {"type": "Created", "status": "True"},
        {"type": "Running", "status": "False"},
        {"type": "SomethingNew", "status": "True"},
    ]}}
    assert kinds.job_phase(job) == "Created"


@pytest.mark.parametrize("fixture,wanted,reached", [
    ("created", "terminal", False),
    ("created", "Created", True),
    ("pending", "Created", False),
    ("running", "Running", True),
    ("created", "Running", False),
    ("succeeded", "Running", True),   # finished: the wait is over
    ("failed", "Running", True),
    ("restarting", "Running", False),
    ("suspended", "Suspended", True),
    ("succeeded", "terminal", True),
])
def test_phase_reached(fixture, wanted, reached):
    assert kinds.phase_reached(load("jobs", fixture), wanted) is reached


def test_failure_reason_and_message():
    failure = kinds.job_failure(load("jobs", "failed"))
    assert failure == {"reason": "PyTorchJobFailed",
                       "message": "PyTorchJob training/mnist is failed because 1 Worker replica(s) failed."}
    assert kinds.job_failure(load("jobs", "failed_backoff"))["reason"] == "BackoffLimitExceeded"
    assert kinds.job_failure(load("jobs", "succeeded")) is None


def test_replica_statuses_merge_spec_and_status():
    assert kinds.replica_statuses(load("jobs", "running")) == {
        "Master": {"replicas": 1, "active": 1, "succeeded": 0, "failed": 0},
        "Worker": {"replicas": 2, "active": 2, "succeeded": 0, "failed": 0},
    }
    assert kinds.replica_statuses(load("jobs", "failed"))["Worker"] == {
        "replicas": 2, "active": 1, "succeeded": 0, "failed": 1}
    assert kinds.replica_statuses(load("jobs", "pending"))["Worker"]["active"] == 0


def test_times_succeeded():
    times = kinds.job_times(load("jobs", "succeeded"), now=NOW)
    assert times == {"start_time": "2025-01-01T10:00:01Z", "completion_time": "2025-01-01T10:05:01Z",
                     "duration_seconds": 300.0, "elapsed_seconds": 300.0}


def test_times_running_uses_now():
    times = kinds.job_times(load("jobs", "running"), now=NOW)
    assert times["duration_seconds"] is None
    assert times["completion_time"] is None
    assert times["elapsed_seconds"] == 60.0


def test_times_failed_without_completion_time_uses_failed_condition():
    times = kinds.job_times(load("jobs", "failed"), now=NOW)
    assert times["completion_time"] == "2025-01-01T10:02:01Z"
    assert times["duration_seconds"] == 120.0


def test_times_not_started():
    assert kinds.job_times(load("jobs", "pending"))["elapsed_seconds"] is None


@pytest.mark.parametrize("value,expected", [
    ("2025-01-01T10:00:01Z", "2025-01-01T10:00:01Z"),
    ("2025-01-01T10:00:01.123456789Z", "2025-01-01T10:00:01Z"),
    ("2025-01-01T11:00:01+01:00", "2025-01-01T10:00:01Z"),
    ("2025-01-01T10:00:01", "2025-01-01T10:00:01Z"),
])
def test_parse_time(value, expected):
    assert kinds.format_time(kinds.parse_time(value)) == expected


def test_parse_time_bad_values():
    assert kinds.parse_time(None) is None
    assert kinds.parse_time("yesterday") is None


# ------------------------------------------------------------------ pods


def test_pod_selector():
    assert kinds.PYTORCHJOB.pod_selector("mnist") == "training.kubeflow.org/job-name=mnist"
    assert kinds.PYTORCHJOB.pod_selector() == "training.kubeflow.org/job-name"
    assert kinds.MPIJOB.pod_selector("m") == "training.kubeflow.org/job-name=m"
    assert kinds.VOLCANOJOB.pod_selector("v") == "volcano.sh/job-name=v"


def test_pod_belongs_to_job():
    assert kinds.pod_belongs_to_job(load("pods", "running_master"), "mnist")
    assert not kinds.pod_belongs_to_job(load("pods", "running_master"), "other")
    assert not kinds.pod_belongs_to_job(load("pods", "other_kind"), "mnist")
    pod = load("pods", "running_worker1")
    del pod["metadata"]["ownerReferences"]
    assert kinds.pod_belongs_to_job(pod, "mnist")


def test_pod_summary_running_master():
    summary = status.pod_summary(load("pods", "running_master"))
    assert summary["name"] == "mnist-master-0"
    assert summary["replica_type"] == "master"
    assert summary["replica_index"] == 0
    assert summary["job_role"] == "master"
    assert summary["node"] == "trainfleet-worker"
    assert summary["phase"] == "Running"
    assert summary["ready"] is True
    assert summary["restarts"] == 0
    assert summary["reason"] is None and summary["exit_code"] is None
    assert summary["containers"][0]["state"] == "running"


@pytest.mark.parametrize("fixture,reason,container,exit_code,restarts", [
    ("imagepullbackoff", "ImagePullBackOff", "pytorch", None, 0),
    ("errimagepull", "ErrImagePull", "pytorch", None, 0),
    ("init_imagepullbackoff", "ImagePullBackOff", "init-pytorch", None, 0),
    ("crashloopbackoff", "CrashLoopBackOff", "pytorch", 1, 4),
    ("oomkilled", "OOMKilled", "pytorch", 137, 0),
    ("error_worker1", "Error", "pytorch", 1, 0),
    ("succeeded_master0", "Completed", "pytorch", 0, 0),
    ("evicted", "Evicted", None, None, 0),
])
def test_pod_summary_reasons(fixture, reason, container, exit_code, restarts):
    summary = status.pod_summary(load("pods", fixture))
    assert summary["reason"] == reason
    assert summary["container"] == container
    assert summary["exit_code"] == exit_code
    assert summary["restarts"] == restarts


def test_pod_summary_last_state_after_oom():
    summary = status.pod_summary(load("pods", "restarted_after_oom"))
    assert summary["reason"] is None
    assert summary["last_reason"] == "OOMKilled"
    assert summary["last_exit_code"] == 137
    assert summary["restarts"] == 1


def test_pod_summary_of_empty_pod():
    summary = status.pod_summary({"metadata": {"name": "x"}})
    assert summary["name"] == "x" and summary["containers"] == [] and summary["ready"] is False


def test_fatal_reasons():
    assert status.pod_has_fatal_reason(status.pod_summary(load("pods", "imagepullbackoff")))
    assert status.pod_has_fatal_reason(status.pod_summary(load("pods", "init_imagepullbackoff")))
    assert not status.pod_has_fatal_reason(status.pod_summary(load("pods", "crashloopbackoff")))
    assert status.pod_has_fatal_reason(status.pod_summary(load("pods", "crashloopbackoff")), ["CrashLoopBackOff"])
    assert not status.pod_has_fatal_reason(status.pod_summary(load("pods", "running_master")))


def test_the_kubelets_cache_sync_hiccup_is_not_fatal():
    """CreateContainerConfigError "failed to sync secret cache" is the kubelet catching up (it retries and the
    container starts); a Secret that does not exist stays fatal."""
    def pod(message):
        return {"metadata": {"name": "p"}, "status": {"phase": "Pending", "containerStatuses": [
            {"name": "pytorch", "state": {"waiting": {"reason": "CreateContainerConfigError", "message": message}}}]}}
    assert not status.pod_has_fatal_reason(status.pod_summary(pod("failed to sync secret cache: timed out waiting for the condition")))
    assert not status.pod_has_fatal_reason(status.pod_summary(pod("failed to sync configmap cache: timed out waiting for the condition")))
    assert status.pod_has_fatal_reason(status.pod_summary(pod('secret "trainfleet-aws" not found')))
    assert status.pod_has_fatal_reason(status.pod_summary(pod(None)))


def test_failing_pod_prefers_earliest_termination():
    summaries = [status.pod_summary(load("pods", n))
                 for n in ("error_worker0_later", "error_worker1", "running_master")]
    pod, container = forensics.failing_pod(summaries)
    assert pod["name"] == "mnist-worker-1"
    assert container["exit_code"] == 1


def test_failing_pod_waiting_then_restarted_then_pod_level():
    pod, container = forensics.failing_pod([status.pod_summary(load("pods", "crashloopbackoff"))])
    assert (pod["name"], container["reason"]) == ("mnist-worker-0", "CrashLoopBackOff")
    pod, container = forensics.failing_pod([status.pod_summary(load("pods", "restarted_after_oom"))])
    assert container["last_reason"] == "OOMKilled"
    pod, container = forensics.failing_pod([status.pod_summary(load("pods", "evicted"))])
    assert pod["reason"] == "Evicted" and container is None
    assert forensics.failing_pod([status.pod_summary(load("pods", "running_master"))]) == (None, None)


def test_job_summary_succeeded():
    names = ("succeeded_worker1", "succeeded_master0", "succeeded_worker0", "other_kind")
    pods = [load("pods", n) for n in names]
    summary = jobinfo.job_summary(load("jobs", "succeeded"), pods, now=NOW)
    assert summary["phase"] == "Succeeded" and summary["terminal"] is True
    assert [p["name"] for p in summary["pods"]] == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert summary["duration_seconds"] == 300.0
    assert summary["failure"] is None
    assert summary["labels"] == {"app.kubernetes.io/part-of": "trainfleet"}
    assert summary["conditions"][-1]["type"] == "Succeeded"


def test_job_summary_failed_names_the_failing_pod():
    pods = [load("pods", n) for n in ("running_master", "error_worker0_later", "error_worker1")]
    summary = jobinfo.job_summary(load("jobs", "failed"), pods, now=NOW)
    failure = summary["failure"]
    assert failure["reason"] == "PyTorchJobFailed"
    assert failure["pod"] == "mnist-worker-1"
    assert failure["container"] == "pytorch"
    assert failure["container_reason"] == "Error"
    assert failure["exit_code"] == 1
    assert failure["log_tail"] == [] and failure["events"] == []


def test_job_summary_failed_after_restarts_reports_last_exit():
    summary = jobinfo.job_summary(load("jobs", "failed_backoff"), [load("pods", "crashloopbackoff")])
    assert summary["failure"]["container_reason"] == "CrashLoopBackOff"
    assert summary["failure"]["exit_code"] == 1
    assert summary["restarts"] == 4


def test_recent_events_sorted_and_limited():
    events = [
        {"involvedObject": {"kind": "Pod", "name": "a"}, "reason": "Pulled", "type": "Normal",
         "lastTimestamp": "2025-01-01T10:00:05Z", "message": "ok", "count": 1},
        {"involvedObject": {"kind": "Pod", "name": "a"}, "reason": "BackOff", "type": "Warning",
         "lastTimestamp": "2025-01-01T10:00:09Z", "message": "Back-off pulling image", "count": 3},
        {"regarding": {"kind": "PyTorchJob", "name": "mnist"}, "reason": "SuccessfulCreatePod",
         "eventTime": "2025-01-01T10:00:01.000000Z", "note": "Created pod: a"},
    ]
    summaries = forensics.recent_events(events, limit=2)
    assert [e["reason"] for e in summaries] == ["Pulled", "BackOff"]
    assert summaries[-1] == {"time": "2025-01-01T10:00:09Z", "type": "Warning", "reason": "BackOff",
                             "object": "Pod/a", "message": "Back-off pulling image", "count": 3}
    assert forensics.recent_events(events, limit=0)[0]["object"] == "PyTorchJob/mnist"


# ------------------------------------------------------------------ ranks


def test_parse_rank_lines_trainer_and_torchrun():
    info = rk.parse_rank_lines(log_lines("elastic_master0"))
    assert info["trainer"] == {"ranks": [2, 3], "group_rank": 1, "world_size": 6, "hosts": ["mnist-master-0"]}
    assert info["torchrun"] == {"group_rank": 1, "global_ranks": [2, 3], "restart_count": 0}


def test_parse_rank_lines_latest_round_wins():
    info = rk.parse_rank_lines(log_lines("restarted_master0"))
    assert info["trainer"]["ranks"] == [1]
    assert info["trainer"]["group_rank"] == 1
    assert info["torchrun"] == {"group_rank": 1, "global_ranks": [1], "restart_count": 1}


def test_parse_rank_lines_nothing():
    assert rk.parse_rank_lines(log_lines("plain")) == {"trainer": None, "torchrun": None, "rank0_output": False}
    assert rk.parse_rank_lines([]) == {"trainer": None, "torchrun": None, "rank0_output": False}
    assert rk.says_nothing(rk.parse_rank_lines(log_lines("plain")))


@pytest.mark.parametrize("line,rank0", [
    ("trainfleet-epoch: epoch=1 loss=0.5 test_acc=0.9 samples_per_s=100.0", True),
    ('trainfleet-result: {"final_accuracy": 0.9}', True),
    ("trainfleet-resume: epoch=2 next_epoch=3 snapshot=s3://b/p", True),
    ("trainfleet-stopped: epoch=2 reason=--stop-after-epoch", True),
    ("[default0]:trainfleet-epoch: epoch=1 loss=0.5 test_acc=0.9 samples_per_s=100.0", True),  # torchrun --tee
    ("[rank 2] trainfleet-epoch: epoch=1 loss=0.5 test_acc=0.9 samples_per_s=100.0", False),  # --verbose-ranks
    ("[default1]:[rank 3] trainfleet-epoch: epoch=1", False),
    ("echo trainfleet-result: {}", False),
    ("trainfleet-info: dataset digits", False),
])
def test_parse_rank_lines_rank0_output(line, rank0):
    info = rk.parse_rank_lines([line])
    assert info["rank0_output"] is rank0
    assert rk.says_nothing(info) is not rank0
    assert rk.pod_ranks(info) == (([0], None, "trainer-rank0-output") if rank0 else ([], None, None))


def test_find_rank0_prefers_rank_lines_over_rank0_output():
    summaries = _summaries("running_master", "running_worker0")
    infos = {"mnist-master-0": rk.parse_rank_lines(["trainfleet-epoch: epoch=1 loss=1 test_acc=0.5 samples_per_s=1"]),
             "mnist-worker-0": rk.parse_rank_lines(["trainfleet-rank: rank=0 local_rank=0 world_size=2 group_rank=0"])}
    assert rk.find_rank0(summaries, infos)["method"] == "trainer-log"
    assert rk.find_rank0(summaries, infos)["pod"]["name"] == "mnist-worker-0"
    del infos["mnist-worker-0"]
    decision = rk.find_rank0(summaries, infos)
    assert (decision["pod"]["name"], decision["method"]) == ("mnist-master-0", "trainer-rank0-output")


def test_parse_rank_lines_bytes_and_single_line_torchrun():
    info = rk.parse_rank_lines([b"[I] agent: group_rank=0 group_world_size=2 global_ranks=[0, 1]"])
    assert info["torchrun"]["group_rank"] == 0
    assert info["torchrun"]["global_ranks"] == [0, 1]


def test_parse_rank_lines_two_ranks_torn_into_one_line():
    """Two local ranks that wrote their rank lines at once, newline after newline (print under -u)."""
    info = rk.parse_rank_lines([
        "trainfleet-rank: rank=1 local_rank=1 world_size=4 group_rank=0 host=job-worker-0"
        "trainfleet-rank: rank=0 local_rank=0 world_size=4 group_rank=0 host=job-worker-0",
        "",
    ])
    assert info["trainer"] == {"ranks": [0, 1], "group_rank": 0, "world_size": 4, "hosts": ["job-worker-0"]}


def _summaries(*names):
    return [status.pod_summary(load("pods", n)) for n in names]


def test_find_rank0_by_trainer_log_when_rank0_is_not_master():
    summaries = _summaries("running_master", "running_worker0", "running_worker1")
    infos = {
        "mnist-master-0": rk.parse_rank_lines(log_lines("elastic_master0")),
        "mnist-worker-0": rk.parse_rank_lines(log_lines("elastic_worker0")),
        "mnist-worker-1": rk.parse_rank_lines(log_lines("elastic_worker1")),
    }
    decision = rk.find_rank0(summaries, infos)
    assert decision["pod"]["name"] == "mnist-worker-1"
    assert decision["method"] == "trainer-log"
    assert decision["candidates"] == ["mnist-worker-1"]


def test_find_rank0_by_torchrun_log():
    summaries = _summaries("running_master", "running_worker0")
    infos = {
        "mnist-master-0": rk.parse_rank_lines(log_lines("torchrun_only_group1")),
        "mnist-worker-0": rk.parse_rank_lines(log_lines("torchrun_only_group0")),
    }
    decision = rk.find_rank0(summaries, infos)
    assert (decision["pod"]["name"], decision["method"]) == ("mnist-worker-0", "torchrun-log")


def test_find_rank0_torchrun_group_rank_only():
    summaries = _summaries("running_master", "running_worker0")
    infos = {"mnist-worker-0": {"trainer": None,
                                "torchrun": {"group_rank": 0, "global_ranks": None, "restart_count": None}}}
    assert rk.find_rank0(summaries, infos)["pod"]["name"] == "mnist-worker-0"


def test_find_rank0_fallback_master0():
    summaries = _summaries("running_worker1", "running_worker0", "running_master")
    decision = rk.find_rank0(summaries, {})
    assert (decision["pod"]["name"], decision["method"]) == ("mnist-master-0", "fallback-master-0")


def test_find_rank0_fallback_without_master_takes_worker0():
    decision = rk.find_rank0(_summaries("running_worker1", "running_worker0"), {})
    assert decision["pod"]["name"] == "mnist-worker-0"
    assert rk.find_rank0([], {}) == {"pod": None, "method": None, "candidates": []}


def test_find_rank0_several_claims_latest_started_wins():
    # master-0 ran rank 0 before an elastic restart (stale), worker-0 started later and claims it too
    summaries = _summaries("running_master", "restarted_after_oom")
    claim = {"trainer": {"ranks": [0], "group_rank": 0, "world_size": 2, "hosts": []}, "torchrun": None}
    decision = rk.find_rank0(summaries, {"mnist-master-0": claim, "mnist-worker-0": claim})
    assert decision["pod"]["name"] == "mnist-worker-0"
    assert decision["candidates"] == ["mnist-master-0", "mnist-worker-0"]


def test_pod_ranks():
    assert rk.pod_ranks(rk.parse_rank_lines(log_lines("elastic_worker1"))) == ([0, 1], 0, "trainer-log")
    assert rk.pod_ranks(rk.parse_rank_lines(log_lines("torchrun_only_group1"))) == ([1], 1, "torchrun-log")
    assert rk.pod_ranks({"trainer": None, "torchrun": None}) == ([], None, None)


def test_parse_trainer_result():
    result = tlog.parse_trainer_result(log_lines("elastic_worker1"))
    assert result["final_accuracy"] == 0.95
    assert result["model_uri"] == "s3://trainfleet/models/mnist/model.pt"
    assert tlog.parse_trainer_result(["trainfleet-result: {not json}"]) is None
    assert tlog.parse_trainer_result([b'trainfleet-result: {"a": 1}']) == {"a": 1, "resumed_from_epoch": None, "restarts": None}


@pytest.mark.parametrize("ranks,name", [
    ([0], "worker-1-rank0.log"),
    ([2, 3], "worker-1-ranks2-3.log"),
    ([], "worker-1-rank-unknown.log"),
])
def test_log_file_name(ranks, name):
    assert rk.log_file_name(status.pod_summary(load("pods", "running_worker1")), ranks) == name


# ------------------------------------------------------------------ bounded tail


def test_tail_buffer_keeps_last_bytes_from_line_start():
    tail = joblogs.TailBuffer(10)
    for index in range(1000):
        tail.feed(b"line%04d\n" % index)
    assert tail.total == 9000
    assert tail.truncated
    assert tail.value() == b"line0999\n"
    assert len(tail._buf) <= 21  # pylint: disable=protected-access


def test_tail_buffer_window_starting_at_line_start_keeps_it():
    tail = joblogs.TailBuffer(6)
    tail.feed(b"aaaa\nbbbbb\n")
    assert tail.value() == b"bbbbb\n"


def test_tail_buffer_unbounded_and_zero():
    tail = joblogs.TailBuffer(None)
    tail.feed(b"abc")
    tail.feed(b"")
    assert tail.value() == b"abc" and not tail.truncated
    zero = joblogs.TailBuffer(0)
    zero.feed(b"abc")
    assert zero.value() == b"" and zero.total == 3 and zero.truncated


def test_tail_buffer_memory_bounded_for_large_stream():
    tail = joblogs.TailBuffer(1024)
    chunk = b"x" * 65535 + b"\n"
    for _chunk_no in range(3200):  # 200 MiB streamed
        tail.feed(chunk)
    assert tail.total == 3200 * 65536
    assert len(tail._buf) <= 3 * 1024 + 65536  # pylint: disable=protected-access
    # no full line fits in the last 1 KiB: the partial line is kept rather than nothing
    assert tail.text() == "x" * 1023 + "\n"


def test_fallback_without_master_spec_uses_job_role_label():
    # without a Master replica the operator labels worker-0 job-role=master
    worker0 = load("pods", "running_worker0")
    worker0["metadata"]["labels"]["training.kubeflow.org/job-role"] = "master"
    summaries = [status.pod_summary(load("pods", "running_worker1")), status.pod_summary(worker0)]
    decision = rk.find_rank0(summaries, {})
    assert (decision["pod"]["name"], decision["method"]) == ("mnist-worker-0", "fallback-master-0")


# ------------------------------------------------------------------ failure evidence
# (when the operator deletes the pods of a job past its backoffLimit)


def _job_event(message, reason="Error", first="2025-01-01T10:00:10Z", kind="PyTorchJob", name="mnist",
               event_type="Warning"):
    return {"involvedObject": {"kind": kind, "name": name}, "type": event_type, "reason": reason,
            "message": message, "firstTimestamp": first, "lastTimestamp": first, "count": 1}


def _operator_events():
    """What v1.9.3 records on a job whose master exits 1 (OnFailure, backoffLimit 0)."""
    return [
        _job_event("Created pod: mnist-master-0", "SuccessfulCreatePod", "2025-01-01T10:00:01Z",
                   event_type="Normal"),
        _job_event("Pod: training.mnist-master-0 exited with code 1", "ExitedWithCode",
                   "2025-01-01T10:00:10Z", event_type="Normal"),
        _job_event("Error pod mnist-master-0 container pytorch exitCode: 1 terminated message: ",
                   "Error", "2025-01-01T10:00:10Z"),
        _job_event("Error pod mnist-worker-0 container pytorch exitCode: 1 terminated message: "
                   "connection refused", "Error", "2025-01-01T10:00:14Z"),
        _job_event("Deleted pod: mnist-master-0", "SuccessfulDeletePod", "2025-01-01T10:00:20Z",
                   event_type="Normal"),
        _job_event("Job mnist has failed because it has reached the specified backoff limit",
                   "PyTorchJobFailed", "2025-01-01T10:00:20Z", event_type="Normal"),
        # kubelet's events on the (deleted) pod and another job's events are not evidence
        _job_event("Back-off restarting failed container pytorch in pod mnist-master-0_training(x)",
                   "BackOff", "2025-01-01T10:00:09Z", kind="Pod", name="mnist-master-0"),
        _job_event("Error pod other-master-0 container pytorch exitCode: 2 terminated message: ",
                   "Error", "2025-01-01T10:00:05Z", name="other"),
    ]


def test_container_failure_terminated_now():
    found = forensics.container_failure(load("pods", "error_worker1"))
    assert found == {
        "pod": "mnist-worker-1", "namespace": "training", "replica_type": "worker", "replica_index": 1,
        "node": "trainfleet-worker", "container": "pytorch", "init": False, "exit_code": 1,
        "reason": "Error", "message": None, "finished_at": "2025-01-01T10:01:58Z", "restarts": 0,
        "previous": False}


@pytest.mark.parametrize("fixture,reason,exit_code,restarts", [
    ("crashloopbackoff", "Error", 1, 4),        # waiting in CrashLoopBackOff after a crash
    ("restarted_after_oom", "OOMKilled", 137, 1),  # running again after an OOM kill
])
def test_container_failure_of_the_previous_run(fixture, reason, exit_code, restarts):
    found = forensics.container_failure(load("pods", fixture))
    assert found["previous"] is True
    assert (found["reason"], found["exit_code"], found["restarts"]) == (reason, exit_code, restarts)
    assert found["container"] == "pytorch"


def test_container_failure_none_while_healthy_or_waiting_to_start():
    for fixture in ("running_master", "succeeded_master0", "imagepullbackoff", "init_imagepullbackoff"):
        assert forensics.container_failure(load("pods", fixture)) is None, fixture


def test_container_failure_of_an_init_container():
    pod = load("pods", "running_master")
    pod["status"] = {"phase": "Pending", "initContainerStatuses": [
        {"name": "init-pytorch", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}],
        "containerStatuses": [{"name": "pytorch", "state": {"waiting": {"reason": "PodInitializing"}}}]}
    found = forensics.container_failure(pod)
    assert (found["container"], found["init"], found["previous"]) == ("init-pytorch", True, True)


def test_choose_snapshot_prefers_the_replica_type_the_condition_names():
    worker = {"pod": "mnist-worker-0", "replica_type": "worker"}
    master = {"pod": "mnist-master-0", "replica_type": "master"}
    failed = load("jobs", "failed")  # "... because 1 Worker replica(s) failed."
    assert forensics.failed_replica_type(failed) == "worker"
    assert forensics.choose_snapshot([master, worker], failed) is worker
    failed["status"]["conditions"][-1]["message"] = 'job "mnist" is failing because "Master" replica(s) failed.'
    assert forensics.choose_snapshot([worker, master], failed) is master
    backoff = load("jobs", "failed_backoff_deleted")  # names no replica: the first failure
    assert forensics.failed_replica_type(backoff) is None
    assert forensics.choose_snapshot([worker, master], backoff) is worker
    assert forensics.choose_snapshot([], backoff) is None


def test_replica_pod_names():
    assert forensics.replica_pod_names(load("jobs", "failed")) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]


def test_events_failure_the_first_exit_completed_from_its_pods_events():
    found = forensics.events_failure(_operator_events(), "mnist")
    assert found == {"pod": "mnist-master-0", "container": "pytorch", "exit_code": 1,
                     "container_reason": "Error", "container_message": None,
                     "time": "2025-01-01T10:00:10Z"}


def test_events_failure_exited_with_code_only_and_waiting_only():
    exited = [_job_event("Pod: training.mnist-worker-0 exited with code 137", "ExitedWithCode")]
    found = forensics.events_failure(exited, "mnist")
    assert (found["pod"], found["container"], found["exit_code"], found["container_reason"]) == \
        ("mnist-worker-0", "pytorch", 137, None)
    waiting = [_job_event("Error pod mnist-master-0 container pytorch waiting message: back-off 10s "
                          "restarting failed container=pytorch pod=mnist-master-0", "CrashLoopBackOff")]
    found = forensics.events_failure(waiting, "mnist")
    assert (found["pod"], found["exit_code"], found["container_reason"]) == \
        ("mnist-master-0", None, "CrashLoopBackOff")
    assert found["container_message"].startswith("back-off 10s")
    clean = [_job_event("Pod: training.mnist-master-0 exited with code 0", "ExitedWithCode")]
    assert forensics.events_failure(clean, "mnist") is None
    assert forensics.events_failure([], "mnist") is None


def test_pods_gone_hint_names_the_cause_and_the_way_to_keep_them():
    backoff = load("jobs", "failed_backoff_deleted")
    hint = forensics.pods_gone_hint(backoff, "mnist-master-0")
    assert hint.startswith("The training operator deleted the job's pods, and their logs, when the job "
                           "exceeded runPolicy.backoffLimit (0)")
    assert "no log is available, pod mnist-master-0 and its exit code come from the operator's events" in hint
    assert "restartPolicy Never" in hint and "cleanPodPolicy None" in hint
    assert "recorded while waiting" in forensics.pods_gone_hint(backoff, "mnist-master-0", have_log=True)
    assert "events name no failing pod" in forensics.pods_gone_hint(backoff)
    deadline = load("jobs", "failed_backoff_deleted")
    deadline["spec"]["runPolicy"]["activeDeadlineSeconds"] = 600
    deadline["status"]["conditions"][-1]["message"] = \
        "Job mnist has failed because it was active longer than specified deadline"
    assert "runPolicy.activeDeadlineSeconds (600)" in forensics.pods_gone_hint(deadline)
    cleaned = load("jobs", "failed")
    cleaned["spec"]["runPolicy"] = {"cleanPodPolicy": "All"}
    assert "cleanPodPolicy is All" in forensics.pods_gone_hint(cleaned)


def test_job_summary_failure_from_live_pods_says_so():
    summary = jobinfo.job_summary(load("jobs", "failed"), [load("pods", "error_worker1")])
    failure = summary["failure"]
    assert (failure["source"], failure["replica_type"], failure["replica_index"], failure["node"]) == \
        ("live_pod", "worker", 1, "trainfleet-worker")
    assert failure["hint"] is None and failure["observed_at"] is None
    assert forensics.complete_failure(failure, load("jobs", "failed"), [{"pod": "x"}], []) is failure
    assert failure["pod"] == "mnist-worker-1"


def test_complete_failure_from_a_snapshot():
    job = load("jobs", "failed_backoff_deleted")
    failure = jobinfo.job_summary(job, [])["failure"]
    assert failure["pod"] is None and failure["source"] is None
    snapshot = dict(forensics.container_failure(load("pods", "oomkilled")), observed_at="2025-01-01T10:00:11Z",
                    log_tail=["epoch 1", "Killed"], log_error=None)
    forensics.complete_failure(failure, job, [snapshot], _operator_events(), live_pods=[])
    assert failure["source"] == "snapshot"
    assert (failure["pod"], failure["container"], failure["exit_code"], failure["container_reason"]) == \
        ("mnist-master-0", "pytorch", 137, "OOMKilled")
    assert failure["observed_at"] == "2025-01-01T10:00:11Z"
    assert failure["log_tail"] == ["epoch 1", "Killed"]
    assert "recorded while waiting" in failure["hint"] and "backoffLimit (0)" in failure["hint"]


def test_complete_failure_from_events_when_nothing_was_recorded():
    job = load("jobs", "failed_backoff_deleted")
    failure = jobinfo.job_summary(job, [])["failure"]
    forensics.complete_failure(failure, job, [], _operator_events(), live_pods=[])
    assert failure["source"] == "events"
    assert (failure["pod"], failure["replica_type"], failure["replica_index"], failure["container"],
            failure["exit_code"], failure["container_reason"]) == \
        ("mnist-master-0", "master", 0, "pytorch", 1, "Error")
    assert failure["log_tail"] == [] and failure["node"] is None
    assert "no log is available" in failure["hint"]


def test_complete_failure_with_nothing_at_all():
    job = load("jobs", "failed_backoff_deleted")
    failure = forensics.complete_failure(jobinfo.job_summary(job, [])["failure"], job, [], None, live_pods=[])
    assert failure["source"] is None and failure["pod"] is None
    assert "events name no failing pod" in failure["hint"]
    # pods that still exist (none of them failing) were not deleted: no hint
    failure = forensics.complete_failure(jobinfo.job_summary(job, [])["failure"], job, [], [], live_pods=["mnist-worker-0"])
    assert failure["hint"] is None


# ------------------------------------------------------------------ restarts


@pytest.mark.parametrize("code,sig,expected", [
    (137, None, (9, "SIGKILL")),
    (143, None, (15, "SIGTERM")),
    (139, None, (11, "SIGSEGV")),
    (1, None, (None, None)),
    (0, None, (None, None)),
    (None, None, (None, None)),
    (255, None, (None, None)),
    (None, 9, (9, "SIGKILL")),
    ("137", None, (9, "SIGKILL")),
])
def test_exit_signal(code, sig, expected):
    assert status.exit_signal(code, sig) == expected


def test_restart_reasons_name_pod_container_exit_signal_node_and_time():
    pods = [load("pods", "restarted_master_peer_lost"), load("pods", "restarted_after_oom"),
            load("pods", "running_worker1")]
    reasons = status.restart_reasons(pods)
    assert [(r["pod"], r["run"]) for r in reasons] == [("mnist-worker-0", "previous"), ("mnist-master-0", "previous")]
    oom, master = reasons
    assert oom == {
        "pod": "mnist-worker-0", "replica_type": "worker", "replica_index": 0, "node": "trainfleet-worker",
        "container": "pytorch", "init": False, "restarts": 1, "run": "previous", "reason": "OOMKilled",
        "exit_code": 137, "signal": 9, "signal_name": "SIGKILL", "message": None,
        "started_at": "2025-01-01T10:00:08Z", "finished_at": "2025-01-01T10:02:00Z", "observed_at": None}
    assert master["replica_type"] == "master" and master["node"] == "trainfleet-worker2"
    assert master["restarts"] == 2 and master["exit_code"] == 1 and master["signal"] is None
    assert "Connection reset by peer" in master["message"] and master["finished_at"] == "2025-01-01T10:03:35Z"


def test_restart_reasons_of_dead_pods():
    failed = status.restart_reasons([load("pods", "error_worker1")])
    assert [(r["pod"], r["run"], r["reason"], r["exit_code"], r["restarts"]) for r in failed] == \
        [("mnist-worker-1", "current", "Error", 1, 0)]
    evicted = status.restart_reasons([load("pods", "evicted")])
    assert [(r["pod"], r["container"], r["reason"], r["message"]) for r in evicted] == \
        [("mnist-worker-1", None, "Evicted", "The node was low on resource: memory.")]
    assert status.restart_reasons([load("pods", "running_master")]) == []


def test_job_summary_reports_restarts_by_replica_and_reasons():
    job = load("jobs", "running_after_restart")
    pods = [load("pods", "restarted_master_peer_lost"), load("pods", "restarted_after_oom"), load("pods", "running_worker1")]
    summary = jobinfo.job_summary(job, pods, now=NOW)
    assert summary["restarts"] == 3
    assert summary["restarts_by_replica"] == {
        "Master": {"restarts": 2, "failed": 0, "pods": {"mnist-master-0": 2}},
        "Worker": {"restarts": 1, "failed": 0, "pods": {"mnist-worker-0": 1, "mnist-worker-1": 0}},
    }
    assert [r["pod"] for r in summary["restart_reasons"]] == ["mnist-worker-0", "mnist-master-0"]
    quiet = jobinfo.job_summary(load("jobs", "running"), [load("pods", "running_master")], now=NOW)
    assert quiet["restart_reasons"] == [] and quiet["restarts_by_replica"]["Master"]["restarts"] == 0


def test_parse_trainer_result_always_has_resume_and_restarts():
    result = tlog.parse_trainer_result(['trainfleet-result: {"epochs": 5, "resumed_from_epoch": 3, "restarts": 1}'])
    assert result["resumed_from_epoch"] == 3 and result["restarts"] == 1
    old = tlog.parse_trainer_result(["trainfleet-resume: epoch=2 next_epoch=3 snapshot=s3://b/s/snapshot-epoch-00002.pt",
                                     'trainfleet-result: {"epochs": 5}'])
    assert old["resumed_from_epoch"] == 2 and old["restarts"] is None
    newer = tlog.parse_trainer_result(["[default0]:trainfleet-resume: epoch=4 next_epoch=5 snapshot=/s/x.pt restarts=2",
                                       '[default0]:trainfleet-result: {"epochs": 6}'])
    assert newer["resumed_from_epoch"] == 4 and newer["restarts"] == 2
    fresh = tlog.parse_trainer_result(['trainfleet-result: {"epochs": 5}'])
    assert fresh["resumed_from_epoch"] is None and fresh["restarts"] is None


def test_merge_restart_reasons_keeps_the_runs_of_pods_that_are_gone():
    live = status.restart_reasons([load("pods", "restarted_master_peer_lost")])
    gone = dict(status.restart_reasons([load("pods", "error_worker1")])[0], observed_at="2025-01-01T10:02:00Z")
    same_as_live = dict(live[0], run="current", observed_at="2025-01-01T10:03:36Z")  # the same run, seen before the restart
    merged = status.merge_restart_reasons(live, [same_as_live, gone])
    assert [(r["pod"], r["run"], r["observed_at"]) for r in merged] == [
        ("mnist-worker-1", "current", "2025-01-01T10:02:00Z"), ("mnist-master-0", "previous", None)]
    assert status.merge_restart_reasons([], []) == []
    # a live run that was recorded while waiting keeps the log tail read when it ended
    with_log = dict(same_as_live, log_tail=["RuntimeError: peer lost"], log_error=None)
    merged = status.merge_restart_reasons(live, [with_log])
    assert [(r["pod"], r["run"], r["log_tail"]) for r in merged] == [("mnist-master-0", "previous", ["RuntimeError: peer lost"])]
    assert "log_tail" not in status.merge_restart_reasons(live, [same_as_live])[0]


# --------------------------------------------------------------------------- matching log lines


def test_split_log_timestamp_normalises_the_kubelets_times():
    assert tlog.split_log_timestamp("2025-01-01T10:00:05.5Z trainfleet-epoch: epoch=1") == (
        "2025-01-01T10:00:05.500000Z", 1735725605.5, "trainfleet-epoch: epoch=1")
    # nanoseconds cut to microseconds; no fraction; an offset
    assert tlog.split_log_timestamp("2025-01-01T10:00:05.123456789Z x")[0] == "2025-01-01T10:00:05.123456Z"
    assert tlog.split_log_timestamp("2025-01-01T10:00:05Z x")[:2] == ("2025-01-01T10:00:05.000000Z", 1735725605.0)
    assert tlog.split_log_timestamp("2025-01-01T12:00:05+02:00 x")[0] == "2025-01-01T10:00:05.000000Z"
    # as strings the normalised times sort like the instants (the kubelet's own form would not: "05Z" > "05.1Z")
    assert tlog.split_log_timestamp("2025-01-01T10:00:05Z a")[0] < tlog.split_log_timestamp("2025-01-01T10:00:05.1Z a")[0]
    assert tlog.split_log_timestamp("no time here") == (None, None, "no time here")
    assert tlog.split_log_timestamp("2025-13-45T10:00:05Z bad date") == (None, None, "2025-13-45T10:00:05Z bad date")


def test_match_log_lines_is_bounded_and_keeps_the_last():
    pattern = re.compile(r"^trainfleet-epoch: epoch=(\d+)")
    lines = ["2025-01-01T10:00:%02dZ trainfleet-epoch: epoch=%d" % (i % 60, i) for i in range(100)]
    lines.insert(50, "2025-01-01T10:00:00Z [rank 1] trainfleet-epoch: epoch=999")  # not at the start
    kept = tlog.match_log_lines(iter(lines), pattern, 3)
    assert [k["line"] for k in kept] == ["trainfleet-epoch: epoch=%d" % i for i in (97, 98, 99)]
    assert tlog.match_log_lines(iter(lines), pattern, 0) == []
    assert tlog.match_log_lines([b"trainfleet-epoch: epoch=1"], pattern, 5) == [
        {"time": None, "epoch_s": None, "line": "trainfleet-epoch: epoch=1",
         "trainer": {"kind": "epoch", "epoch": 1, "loss": None, "test_acc": None, "samples_per_s": None,
                     "time": None}}]


def test_sort_matches_by_time_untimed_last_stable():
    matches = [{"pod": "b", "epoch_s": 2.0}, {"pod": "a", "epoch_s": None}, {"pod": "c", "epoch_s": 1.0},
               {"pod": "d", "epoch_s": 2.0}]
    assert [m["pod"] for m in tlog.sort_matches(matches)] == ["c", "b", "d", "a"]


@pytest.mark.parametrize("line, parsed", [
    ("trainfleet-epoch: epoch=4 loss=0.123400 test_acc=0.958750 samples_per_s=1200.5",
     {"kind": "epoch", "epoch": 4, "loss": 0.1234, "test_acc": 0.95875, "samples_per_s": 1200.5, "time": None}),
    ("trainfleet-info: snapshot epoch=3 uri=s3://b/training/j/snapshots/snapshot-epoch-00003.pt",
     {"kind": "snapshot", "epoch": 3, "uri": "s3://b/training/j/snapshots/snapshot-epoch-00003.pt"}),
    ("trainfleet-warning: snapshot epoch=4 failed, training goes on (the next epoch tries again): StorageError: x",
     {"kind": "snapshot_failed", "epoch": 4}),
    ("trainfleet-warning: storage write s3://b/p/snapshot-epoch-00004.pt attempt 2/4 failed (EndpointConnectionError: "
     "Could not connect); retrying in 0.8s",
     {"kind": "storage_retry", "op": "write", "uri": "s3://b/p/snapshot-epoch-00004.pt", "attempt": 2, "attempts": 4}),
    ("trainfleet-resume: epoch=3 next_epoch=4 snapshot=s3://b/p/snapshot-epoch-00003.pt restarts=1",
     {"kind": "resume", "epoch": 3, "restarts": 1}),
    ("trainfleet-resume: epoch=3 next_epoch=4 snapshot=/data/s/snapshot-epoch-00003.pt",
     {"kind": "resume", "epoch": 3, "restarts": None}),
    ("trainfleet-rank: rank=0 local_rank=0 world_size=2 group_rank=1 host=j-worker-1",
     {"kind": "rank", "rank": 0, "world_size": 2, "group_rank": 1, "time": None, "launcher": None}),
    ("trainfleet-rank: rank=3 local_rank=1 world_size=4 group_rank=1 host=j-worker-1 time=2026-01-01T10:00:00.000Z "
     "launcher=mpirun",
     {"kind": "rank", "rank": 3, "world_size": 4, "group_rank": 1, "time": "2026-01-01T10:00:00.000000Z",
      "launcher": "mpirun"}),
    ('trainfleet-result: {"epochs": 8, "final_accuracy": 0.95, "resumed_from_epoch": 3}',
     {"kind": "result", "epochs": 8, "final_accuracy": 0.95, "resumed_from_epoch": 3}),
    ("trainfleet-result: {not json}", {"kind": None}),
    ("[rank 1] trainfleet-epoch: epoch=1 loss=0.5", {"kind": None}),
    ("INFO:torch.distributed.elastic: Rendezvous complete", {"kind": None}),
])
def test_parse_trainer_line(line, parsed):
    assert tlog.parse_trainer_line(line) == parsed


def test_parse_trainer_line_reads_what_the_trainer_prints():
    """The contract both ways: trainer.metrics formats the lines, parse_trainer_line reads them."""
    from trainer import metrics  # pylint: disable=import-outside-toplevel

    record = {"epoch": 5, "loss": 0.25, "test_loss": 0.3, "test_acc": 0.9625, "samples_per_s": 812.0}
    epoch = tlog.parse_trainer_line(metrics.epoch_line(record))
    assert dict(epoch, time=None) == {"kind": "epoch", "epoch": 5, "loss": 0.25, "test_acc": 0.9625, "samples_per_s": 812.0,
                                      "time": None}
    uri = "s3://b/training/j/snapshots/snapshot-epoch-00005.pt"
    assert tlog.parse_trainer_line(metrics.snapshot_line(5, uri)) == {"kind": "snapshot", "epoch": 5, "uri": uri}
    assert tlog.parse_trainer_line(metrics.snapshot_failed_line(6, OSError("refused"))) == {"kind": "snapshot_failed", "epoch": 6}
    retry = metrics.storage_retry_line("write", uri, 1, 4, 0.37, ConnectionResetError("reset"))
    assert tlog.parse_trainer_line(retry) == {"kind": "storage_retry", "op": "write", "uri": uri, "attempt": 1, "attempts": 4}
    assert tlog.parse_trainer_line(metrics.resume_line(5, uri, 2)) == {"kind": "resume", "epoch": 5, "restarts": 2}
    rank = tlog.parse_trainer_line(metrics.rank_line(1, 0, 2, 1, "j-worker-1"))
    assert rank["time"] and rank["time"].endswith("Z")
    assert dict(rank, time=None) == {"kind": "rank", "rank": 1, "world_size": 2, "group_rank": 1, "time": None, "launcher": None}
    rank = tlog.parse_trainer_line(metrics.rank_line(1, 0, 2, 1, "j-worker-1", launcher="mpirun"))
    assert dict(rank, time=None) == {"kind": "rank", "rank": 1, "world_size": 2, "group_rank": 1, "time": None,
                                     "launcher": "mpirun"}
    assert tlog.parse_trainer_line(metrics.result_line({"final_accuracy": 0.96, "epochs": 8}))["final_accuracy"] == 0.96
