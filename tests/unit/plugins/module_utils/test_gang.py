# -*- coding: utf-8 -*-
"""gang: the Volcano PodGroup of a waiting job, why its gang cannot be placed.

Fed with PodGroups and events as Volcano v1.10.0 writes them (tests/unit/fixtures/pytorchjob/podgroups)."""

from __future__ import annotations

import functools
from unittest import mock

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.trainfleet.training.plugins.module_utils import gang, jobinfo, k8s
from ansible_collections.trainfleet.training.plugins.module_utils.errors import ApiUnreachableError
from ansible_collections.trainfleet.training.plugins.module_utils.waiter import JobWaiter
from ansible_collections.trainfleet.training.plugins.modules import trainjob_info as module


def _pg_event(reason, message, when, kind="PodGroup", name="mnist", type_="Warning", count=1):
    return {"involvedObject": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": kind, "name": name,
                               "namespace": "training"},
            "type": type_, "reason": reason, "message": message, "lastTimestamp": when, "count": count,
            "source": {"component": "volcano"}}


def _events():
    return [
        _pg_event("Unschedulable", "0/3 nodes are unavailable: 3 Insufficient cpu.", "2025-01-01T10:00:04Z", count=7),
        _pg_event("Unschedulable", "pod group is not ready, 2 Pending, 2 minAvailable", "2025-01-01T10:00:05Z"),
        # the job has the same name: its events are not the PodGroup's
        _pg_event("PyTorchJobCreated", "PyTorchJob mnist is created.", "2025-01-01T10:00:01Z",
                  kind="PyTorchJob", type_="Normal"),
        _pg_event("Unschedulable", "0/3 nodes are unavailable: 3 Insufficient memory.", "2025-01-01T10:00:06Z",
                  name="other"),
    ]


def test_summary_of_a_pending_podgroup(load):
    summary = gang.podgroup_summary(load("podgroups", "pending_unschedulable"), _events())
    assert summary["name"] == "mnist" and summary["phase"] == "Pending"
    assert summary["min_member"] == 3 and summary["queue"] == "team-a"
    assert summary["conditions"] == [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                                      "message": "3/3 tasks in gang unschedulable: pod group is not ready, 3 minAvailable",
                                      "last_transition_time": "2025-01-01T10:00:03Z"}]
    assert summary["message"] == "3/3 tasks in gang unschedulable: pod group is not ready, 3 minAvailable"
    # only the PodGroup's own events, oldest first
    assert [e["message"] for e in summary["events"]] == [
        "0/3 nodes are unavailable: 3 Insufficient cpu.", "pod group is not ready, 2 Pending, 2 minAvailable"]


@pytest.mark.parametrize("phase", ["Created", "Pending"])
def test_pending_reason_names_the_resources(load, phase):
    reason = gang.pending_reason(phase, load("podgroups", "pending_unschedulable"), _events())
    assert reason == ("gang mnist cannot be placed (PodGroup Pending, minMember 3, queue team-a): insufficient cpu; "
                      "3/3 tasks in gang unschedulable: pod group is not ready, 3 minAvailable; "
                      "pod group is not ready, 2 Pending, 2 minAvailable; 0/3 nodes are unavailable: 3 Insufficient cpu.")


def test_pending_reason_from_the_condition_alone(load):
    reason = gang.pending_reason("Created", load("podgroups", "inqueue_unschedulable"), [])
    assert reason.startswith("gang mnist cannot be placed (PodGroup Inqueue, minMember 2, queue default): ")
    # no resource named in the messages: the gang's own minResources are
    assert "for the gang's minResources " in reason
    assert reason.endswith("2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; "
                           "Pending: 2 Unschedulable")


def test_pending_reason_of_a_gang_the_enqueue_action_refuses():
    """Seen live (Volcano v1.10.0, proportion): a gang bigger than the cluster stays Pending before any pod exists."""
    podgroup = {"metadata": {"name": "launchers-nofit"},
                "spec": {"minMember": 2, "minResources": {"cpu": "2k", "memory": "1Gi"}, "queue": "team-a"},
                "status": {"phase": "Pending", "conditions": [
                    {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                     "message": "2/0 tasks in gang unschedulable: pod group is not ready, 2 minAvailable",
                     "lastTransitionTime": "2026-11-26T16:39:42Z"}]}}
    reason = gang.pending_reason("Created", podgroup, [])
    assert reason.startswith("gang launchers-nofit cannot be placed (PodGroup Pending, minMember 2, queue team-a): "
                             "NotEnoughResources for the gang's minResources cpu=2k, memory=1Gi; ")


def test_pending_reason_from_the_events_alone(load):
    podgroup = load("podgroups", "inqueue_fresh")
    assert gang.pending_reason("Created", podgroup, []) is None
    events = [_pg_event("Unschedulable", "0/3 nodes are unavailable: 1 Insufficient nvidia.com/gpu, "
                        "2 Insufficient cpu, 3 Too many pods.", "2025-01-01T10:00:04Z")]
    reason = gang.pending_reason("Created", podgroup, events)
    assert "insufficient nvidia.com/gpu, cpu, pods;" in reason
    # a Normal event is not a reason
    normal = [_pg_event("Unschedulable", "x", "2025-01-01T10:00:04Z", type_="Normal")]
    assert gang.pending_reason("Created", podgroup, normal) is None


@pytest.mark.parametrize("job_phase", ["Running", "Succeeded", "Failed", "Restarting"])
def test_no_reason_once_the_job_runs(load, job_phase):
    assert gang.pending_reason(job_phase, load("podgroups", "pending_unschedulable"), _events()) is None


def test_no_reason_once_placed(load):
    running = load("podgroups", "running")
    assert gang.pending_reason("Created", running, _events()) is None
    # placed again after an Unschedulable condition: the newer Scheduled one wins even while Inqueue
    running["status"]["phase"] = "Inqueue"
    assert gang.pending_reason("Created", running, []) is None


def test_insufficient_resources():
    assert gang.insufficient_resources(["0/3 nodes are unavailable: 3 Insufficient cpu.",
                                        "0/3 nodes are unavailable: 2 Insufficient memory, 1 Insufficient cpu."]) == [
        "cpu", "memory"]
    assert gang.insufficient_resources(["pod group is not ready, 2 Pending, 2 minAvailable"]) == []


def test_describe_skips_without_podgroup(fake_service, load):
    service = fake_service(events=_events())
    assert gang.describe(service, "training", "mnist", "Created") == (None, None)
    # a service without PodGroup support (an older fake, another kind's service) is skipped too
    assert gang.describe(object(), "training", "mnist", "Created") == (None, None)
    # a running job: not even read
    service = fake_service(podgroups={"mnist": load("podgroups", "pending_unschedulable")})
    assert gang.describe(service, "training", "mnist", "Running") == (None, None)
    assert ("get_podgroup", "training", "mnist") not in service.calls


def test_describe_skips_when_podgroups_cannot_be_read():
    service = mock.Mock()
    service.get_podgroup.side_effect = ApiUnreachableError("Cannot reach the Kubernetes API server")
    assert gang.describe(service, "training", "mnist", "Created") == (None, None)


def test_unschedulable_clock(fake_service, load):
    stuck = {"mnist": load("podgroups", "pending_unschedulable")}
    placed = {"mnist": load("podgroups", "running")}
    service = fake_service(podgroup_rounds=[stuck, stuck, placed, stuck, stuck])
    clock = gang.UnschedulableClock(service, "training", "mnist")
    assert clock.observe("Created", 100.0)[2] == 0.0
    assert clock.observe("Created", 130.0)[1].startswith("gang mnist cannot be placed")
    assert clock.since == 100.0
    assert clock.observe("Created", 140.0)[1:] == (None, 0.0)  # placed: the count starts again
    assert clock.observe("Created", 150.0)[2] == 0.0
    assert clock.observe("Created", 175.0)[2] == 25.0


# --------------------------------------------------------------------------- the API call


@pytest.fixture
def api_service():
    svc = k8s.TrainJobService.__new__(k8s.TrainJobService)
    svc.custom = mock.Mock()
    svc.request_timeout = (5, 30)
    svc.host = "https://127.0.0.1:6443"
    return svc


def test_get_podgroup_reads_volcano_v1beta1(api_service, load):
    api_service.custom.get_namespaced_custom_object.return_value = load("podgroups", "pending_unschedulable")
    assert api_service.get_podgroup("training", "mnist")["status"]["phase"] == "Pending"
    args = api_service.custom.get_namespaced_custom_object.call_args[0]
    assert args == ("scheduling.volcano.sh", "v1beta1", "training", "podgroups", "mnist")


@pytest.mark.parametrize("status", [401, 403, 404])
def test_get_podgroup_without_volcano_or_rights_is_none(api_service, status):
    api_service.custom.get_namespaced_custom_object.side_effect = ApiException(status=status, reason="x")
    assert api_service.get_podgroup("training", "mnist") is None


def test_get_podgroup_server_error_is_an_error(api_service):
    api_service.custom.get_namespaced_custom_object.side_effect = ApiException(status=500, reason="boom")
    with pytest.raises(Exception) as info:
        api_service.get_podgroup("training", "mnist")
    assert "PodGroup training/mnist" in str(getattr(info.value, "msg", info.value))


# --------------------------------------------------------------------------- through trainjob_info


@pytest.fixture
def fake_time(monkeypatch):
    def install(clock):
        monkeypatch.setattr(jobinfo, "JobWaiter", functools.partial(JobWaiter, clock=clock, sleep=clock.sleep))
    return install


def test_module_reports_the_podgroup_of_a_waiting_job(run_module, fake_service, load):
    service = fake_service(jobs={"mnist": load("jobs", "created")}, events=_events(),
                           podgroups={"mnist": load("podgroups", "pending_unschedulable")})
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "timeline": False}, service)
    assert not failed
    job = result["job"]
    assert job["podgroup"]["phase"] == "Pending" and job["podgroup"]["min_member"] == 3
    assert job["pending_reason"].startswith("gang mnist cannot be placed (PodGroup Pending, minMember 3, queue team-a): "
                                            "insufficient cpu")
    assert job["pods"] == []


def test_module_without_podgroup_adds_nothing(run_module, fake_service, load):
    service = fake_service(jobs={"mnist": load("jobs", "created")})
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "timeline": False}, service)
    assert not failed
    assert "podgroup" not in result["job"] and "pending_reason" not in result["job"]


def test_pending_timeout_ends_the_wait_early_not_failed(run_module, fake_time, fake_service, load, clock):
    fake_time(clock)
    service = fake_service(jobs={"mnist": load("jobs", "created")}, events=_events(), clock=clock,
                           podgroups={"mnist": load("podgroups", "pending_unschedulable")})
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True, "timeline": False,
                                         "wait_timeout": 600, "wait_check_interval": 10, "pending_timeout": 60},
                                service)
    assert not failed, result.get("msg")
    assert result["pending_timeout_reached"] is True
    assert 60 <= result["waited_seconds"] < 80
    assert result["job"]["phase"] == "Created" and result["job"]["pods"] == []
    assert result["job"]["podgroup"]["phase"] == "Pending"
    assert "insufficient cpu" in result["job"]["pending_reason"]


def test_without_pending_timeout_a_stuck_gang_times_out(run_module, fake_time, fake_service, load, clock):
    fake_time(clock)
    service = fake_service(jobs={"mnist": load("jobs", "created")}, events=_events(), clock=clock,
                           podgroups={"mnist": load("podgroups", "pending_unschedulable")})
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True, "timeline": False,
                                         "wait_timeout": 30}, service)
    assert failed and result["msg"].startswith("Timed out after 30s")
    assert result["msg"].endswith("phase is Created; pods: no pods; gang mnist cannot be placed (PodGroup Pending, "
                                  "minMember 3, queue team-a): insufficient cpu; 3/3 tasks in gang unschedulable: "
                                  "pod group is not ready, 3 minAvailable; pod group is not ready, 2 Pending, "
                                  "2 minAvailable; 0/3 nodes are unavailable: 3 Insufficient cpu.")
    assert result["pending_timeout_reached"] is False
    assert result["job"]["pending_reason"].startswith("gang mnist cannot be placed")


def test_pending_timeout_is_not_reached_by_a_gang_that_gets_placed(run_module, fake_time, fake_service, load, clock):
    fake_time(clock)
    stuck = {"mnist": load("podgroups", "pending_unschedulable")}
    service = fake_service(jobs={"mnist": load("jobs", "created")}, clock=clock,
                           podgroup_rounds=[stuck, stuck, {"mnist": load("podgroups", "running")}],
                           watch_rounds=[[], [], [], [("MODIFIED", load("jobs", "succeeded"))]])
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "wait": True, "timeline": False,
                                         "wait_check_interval": 10, "pending_timeout": 25}, service)
    assert not failed, result.get("msg")
    assert result["pending_timeout_reached"] is False and result["job"]["phase"] == "Succeeded"
    assert "podgroup" not in result["job"]


def test_pending_timeout_must_not_be_negative(run_module, fake_service):
    failed, result = run_module(module, {"name": "mnist", "pending_timeout": -1}, fake_service())
    assert failed and "pending_timeout" in result["msg"]
