# -*- coding: utf-8 -*-
"""The start-up timeline (trainjob_info's job.timeline) from recorded API objects: the job, its pods,
their events and rank 0's log as read with the kubelet's timestamps."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.trainfleet.training.plugins.module_utils import jobinfo
from ansible_collections.trainfleet.training.plugins.module_utils import timeline as tl
from ansible_collections.trainfleet.training.plugins.module_utils.errors import LogReadError
from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import PYTORCHJOB

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "timeline")


def _recorded(name="elastic_cold"):
    with open(os.path.join(FIXTURES, name + ".yaml")) as handle:
        return yaml.safe_load(handle)


class RecordedService(object):
    """Serves the recorded events and logs (the logs already carry the kubelet's timestamps)."""

    def __init__(self, data):
        self.data = data
        self.calls = []

    def list_events(self, namespace, names):
        self.calls.append(("list_events", tuple(names)))
        return [e for e in self.data["events"] if e["involvedObject"]["name"] in names]

    def iter_log(self, namespace, pod, container=None, limit_bytes=None, timestamps=False, **kwargs):
        self.calls.append(("iter_log", pod, container, limit_bytes, timestamps))
        if pod not in self.data["logs"]:
            raise LogReadError("container is waiting to start")
        return iter([self.data["logs"][pod].encode("utf-8")])


@pytest.mark.parametrize("text,seconds", [
    ("1.2s", 1.2), ("41.297s", 41.297), ("1m1.5s", 61.5), ("850ms", 0.85), ("1h0m3s", 3603.0), ("12µs", 0.0),
    ("", None), ("soon", None), ("1.2", None),
])
def test_go_duration_seconds(text, seconds):
    assert tl.go_duration_seconds(text) == seconds


def test_pull_events_sum_the_pulls_and_say_when_the_image_was_already_there():
    events = _recorded()["events"]
    pull = tl.pull_events(events, "digits-worker-1")
    assert pull == {"pull_started": "2025-03-01T10:00:03Z", "pulled": "2025-03-01T10:00:44Z", "pull_seconds": 61.5,
                    "images_present": False}
    warm = [{"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Pulled", "firstTimestamp": "2025-03-01T10:00:04Z",
             "message": 'Container image "localhost:5001/trainfleet/trainer:1" already present on machine'}]
    assert tl.pull_events(warm, "p") == {"pull_started": None, "pulled": "2025-03-01T10:00:04Z", "pull_seconds": None,
                                         "images_present": True}
    assert tl.pull_events(events, "nobody")["images_present"] is None


def test_rank0_log_times_prefer_the_trainers_time_and_fall_back_to_the_kubelets():
    lines = _recorded()["logs"]["digits-worker-1"].splitlines()
    assert tl.rank0_log_times(lines) == ("2025-03-01T10:00:46Z", "2025-03-01T10:00:51Z")
    # an older trainer: no time= field, the kubelet's timestamp of the line stands in
    old = [line.split(" time=")[0] for line in lines]
    assert tl.rank0_log_times(old) == ("2025-03-01T10:00:47Z", "2025-03-01T10:00:51Z")
    assert tl.rank0_log_times(["no trainer here"]) == (None, None)


def test_rank0_log_times_of_a_script_that_never_heard_of_us_come_from_torchrun():
    """A plain torchrun script (LOGLEVEL=INFO, no trainfleet- lines): torchrun's rendezvous line."""
    lines = ["2025-03-01T10:00:40.100000000Z step 0 starting",
             "2025-03-01T10:00:44.250000000Z INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete "
             "for workers. Result:",
             "2025-03-01T10:00:44.251000000Z   restart_count=0",
             "2025-03-01T10:00:44.252000000Z   group_rank=0",
             "2025-03-01T10:00:50.000000000Z INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete "
             "for workers. Result:"]
    assert tl.rank0_log_times(lines) == ("2025-03-01T10:00:44Z", None)


def test_timeline_of_a_cold_start_names_every_step_and_the_time_between_them():
    data = _recorded()
    service = RecordedService(data)
    result = jobinfo.timeline(service, "trainfleet", data["job"], data["pods"], PYTORCHJOB)
    steps = dict((s["step"], s) for s in result["steps"])
    assert [s["step"] for s in result["steps"]] == [key for key, _label in tl.STEPS]
    assert steps["submitted"]["time"] == "2025-03-01T10:00:00Z" and steps["submitted"]["seconds"] is None
    assert steps["scheduled"]["time"] == "2025-03-01T10:00:02Z" and steps["scheduled"]["seconds"] == 2.0
    assert steps["image_pulled"]["time"] == "2025-03-01T10:00:44Z" and steps["image_pulled"]["seconds"] == 42.0
    assert steps["containers_started"]["time"] == "2025-03-01T10:00:45Z"
    assert steps["rendezvous"]["time"] == "2025-03-01T10:00:46Z" and steps["rendezvous"]["seconds"] == 1.0
    assert steps["first_epoch"]["time"] == "2025-03-01T10:00:51Z" and steps["first_epoch"]["seconds"] == 5.0
    assert steps["finished"]["time"] == "2025-03-01T10:01:10Z" and steps["finished"]["since_submitted"] == 70.0
    assert result["rank0_pod"] == "digits-worker-1" and result["errors"] == []
    assert result["image_pull_seconds_max"] == 61.5
    pods = dict((p["pod"], p) for p in result["pods"])
    assert pods["digits-worker-0"]["pull_seconds"] == 41.297 and pods["digits-worker-0"]["node"] == "trainfleet-worker"
    assert pods["digits-worker-0"]["containers_started"] == "2025-03-01T10:00:44Z"
    # one events read, one bounded head of each started pod's log with timestamps
    assert [c for c in service.calls if c[0] == "iter_log"] == [
        ("iter_log", "digits-worker-0", "pytorch", tl.LOG_HEAD_BYTES, True),
        ("iter_log", "digits-worker-1", "pytorch", tl.LOG_HEAD_BYTES, True)]
    lines = result["lines"]
    assert len(lines) == len(tl.STEPS)
    assert lines[0].split() == ["submitted", "2025-03-01T10:00:00Z"]
    assert lines[2].split()[:3] == ["+42.0s", "images", "pulled"]
    assert "pull 41.3s on trainfleet-worker; pull 61.5s on trainfleet-worker2" in lines[2]
    assert lines[4].endswith("(rank 0: digits-worker-1)") and lines[5].startswith("+5.0s")
    assert lines[6].split()[:2] == ["+19.0s", "finished"]


def test_a_container_restarted_after_the_rendezvous_keeps_the_start_up_steps_in_order():
    """Worker-0's container restarted at 10:01:00 (after rank 0's rendezvous at 10:00:46): the step
    is its first start, from its previous run's startedAt or, after several restarts, the kubelet's
    first Started event; without either the restart time is all there is."""
    data = _recorded()
    pods = [dict(p) for p in data["pods"]]
    restarted = dict(pods[0]["status"])
    restarted["containerStatuses"] = [dict(restarted["containerStatuses"][0], restartCount=2,
                                           state={"running": {"startedAt": "2025-03-01T10:01:00Z"}},
                                           lastState={"terminated": {"startedAt": "2025-03-01T10:00:55Z"}})]
    pods[0] = dict(pods[0], status=restarted)
    started = {"reason": "Started", "firstTimestamp": "2025-03-01T10:00:44Z", "lastTimestamp": "2025-03-01T10:01:00Z",
               "involvedObject": {"kind": "Pod", "name": pods[0]["metadata"]["name"], "fieldPath": "spec.containers{pytorch}"}}
    timeline = tl.job_timeline(data["job"], pods, data["events"] + [started], rendezvous="2025-03-01T10:00:46Z")
    times = dict((s["step"], s["time"]) for s in timeline["steps"])
    assert times["containers_started"] == "2025-03-01T10:00:45Z" < times["rendezvous"]
    assert timeline["pods"][0]["containers_started"] == "2025-03-01T10:00:44Z"
    # without the event: the previous run's start is the earliest known
    timeline = tl.job_timeline(data["job"], pods, data["events"], rendezvous="2025-03-01T10:00:46Z")
    assert timeline["pods"][0]["containers_started"] == "2025-03-01T10:00:55Z"
    # an event of another container or pod changes nothing
    other = dict(started, involvedObject=dict(started["involvedObject"], fieldPath="spec.initContainers{init-pytorch}"))
    timeline = tl.job_timeline(data["job"], pods, data["events"] + [other], rendezvous="2025-03-01T10:00:46Z")
    assert timeline["pods"][0]["containers_started"] == "2025-03-01T10:00:55Z"


def test_timeline_of_a_job_still_pulling_leaves_the_later_steps_open():
    data = _recorded()
    job = dict(data["job"], status={"conditions": [{"type": "Created", "status": "True",
                                                    "lastTransitionTime": "2025-03-01T10:00:00Z"}]})
    pods = [dict(p, status={"phase": "Pending", "conditions": p["status"]["conditions"],
                            "containerStatuses": [{"name": "pytorch", "state": {"waiting": {"reason": "ContainerCreating"}}}]})
            for p in data["pods"]]
    events = [e for e in data["events"] if e["reason"] != "Pulled"]
    result = tl.job_timeline(job, pods, events)
    times = dict((s["step"], s["time"]) for s in result["steps"])
    assert times["scheduled"] == "2025-03-01T10:00:02Z"
    assert [times[k] for k in ("image_pulled", "containers_started", "rendezvous", "first_epoch", "finished")] == [None] * 5
    assert result["pods"][0]["pull_started"] == "2025-03-01T10:00:02Z"
    assert result["lines"][2].split() == ["images", "pulled", "-"]


def test_timeline_reads_no_log_of_a_pod_whose_containers_never_started():
    data = _recorded()
    pods = [dict(data["pods"][0], status={"phase": "Pending"})]
    service = RecordedService(data)
    result = jobinfo.timeline(service, "trainfleet", data["job"], pods, PYTORCHJOB)
    assert [c for c in service.calls if c[0] == "iter_log"] == []
    assert result["rank0_pod"] is None
