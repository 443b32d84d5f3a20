# -*- coding: utf-8 -*-
"""The wait loop with a fake watch stream and a fake clock (no cluster, no real time)."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils import waiter as w
from ansible_collections.trainfleet.training.plugins.module_utils.errors import (
    JobNotFoundError,
    WatchExpiredError,
)


def _now():
    return datetime.datetime(2025, 1, 1, 10, 0, 0, tzinfo=datetime.timezone.utc)


def make_waiter(service, clock, **kwargs):
    kwargs.setdefault("timeout", 600)
    kwargs.setdefault("check_interval", 10)
    return w.JobWaiter(service, "training", "mnist", clock=clock, now=_now, sleep=clock.sleep, **kwargs)


def test_waits_through_phases_until_succeeded(load, fake_service, clock):
    seen = []
    service = fake_service(
        jobs={"mnist": load("jobs", "created")},
        watch_rounds=[[("ADDED", load("jobs", "created")), ("MODIFIED", load("jobs", "running"))],
                      [("MODIFIED", load("jobs", "running")), ("MODIFIED", load("jobs", "succeeded")),
                       ("MODIFIED", load("jobs", "failed"))]],
        clock=clock)
    result = make_waiter(service, clock, on_transition=seen.append).wait()
    assert result.outcome == w.OUTCOME_REACHED
    assert result.phase == "Succeeded"
    assert [t["phase"] for t in result.transitions] == ["Created", "Running", "Succeeded"]
    assert seen == result.transitions
    assert result.transitions[1]["reason"] == "PyTorchJobRunning"
    assert result.transitions[0]["time"] == "2025-01-01T10:00:00Z"
    assert result.elapsed == 4.0
    # the watch resumes from the resourceVersion of the last object seen
    watches = [c for c in service.calls if c[0] == "watch_job"]
    assert watches[0][3] == "1001" and watches[1][3] == "1002"


def test_failed_ends_the_wait_at_once(load, fake_service, clock):
    service = fake_service(
        jobs={"mnist": load("jobs", "running")},
        watch_rounds=[[("MODIFIED", load("jobs", "failed")), ("MODIFIED", load("jobs", "succeeded"))]],
        clock=clock)
    result = make_waiter(service, clock, timeout=3600).wait()
    assert result.outcome == w.OUTCOME_FAILED
    assert result.phase == "Failed"
    assert result.elapsed < 5


def test_already_terminal_needs_no_watch(load, fake_service, clock):
    service = fake_service(jobs={"mnist": load("jobs", "succeeded")}, clock=clock)
    result = make_waiter(service, clock).wait()
    assert result.outcome == w.OUTCOME_REACHED
    assert not [c for c in service.calls if c[0] == "watch_job"]


def test_already_failed(load, fake_service, clock):
    service = fake_service(jobs={"mnist": load("jobs", "failed_backoff")}, clock=clock)
    assert make_waiter(service, clock).wait().outcome == w.OUTCOME_FAILED


def test_wait_for_running(load, fake_service, clock):
    service = fake_service(jobs={"mnist": load("jobs", "created")},
                           watch_rounds=[[("MODIFIED", load("jobs", "running"))]], clock=clock)
    result = make_waiter(service, clock, wanted="Running").wait()
    assert result.outcome == w.OUTCOME_REACHED and result.phase == "Running"


def test_wait_for_running_but_job_finished(load, fake_service, clock):
    service = fake_service(jobs={"mnist": load("jobs", "created")},
                           watch_rounds=[[("MODIFIED", load("jobs", "succeeded"))]], clock=clock)
    result = make_waiter(service, clock, wanted="Running").wait()
    assert result.outcome == w.OUTCOME_REACHED and result.phase == "Succeeded"


def test_restarting_is_recorded_and_waited_through(load, fake_service, clock):
    service = fake_service(
        jobs={"mnist": load("jobs", "running")},
        watch_rounds=[[("MODIFIED", load("jobs", "restarting"))],
                      [("MODIFIED", load("jobs", "running_after_restart"))],
                      [("MODIFIED", load("jobs", "succeeded"))]],
        clock=clock)
    result = make_waiter(service, clock).wait()
    assert [t["phase"] for t in result.transitions] == ["Running", "Restarting", "Running", "Succeeded"]


def test_timeout(load, fake_service, clock):
    service = fake_service(jobs={"mnist": load("jobs", "created")}, clock=clock)
    result = make_waiter(service, clock, timeout=35, check_interval=10).wait()
    assert result.outcome == w.OUTCOME_TIMEOUT
    assert result.phase == "Created"
    assert result.elapsed == 35
    timeouts = [c[4] for c in service.calls if c[0] == "watch_job"]
    assert timeouts == [10, 10, 10, 5]


def test_image_pull_backoff_fails_fast(load, fake_service, clock):
    service = fake_service(
        jobs={"mnist": load("jobs", "created")},
        pod_rounds=[[load("pods", "running_master")],
                    [load("pods", "running_master"), load("pods", "imagepullbackoff")]],
        clock=clock)
    result = make_waiter(service, clock, timeout=3600).wait()
    assert result.outcome == w.OUTCOME_POD_PROBLEM
    assert [p["name"] for p in result.problem_pods] == ["mnist-worker-0"]
    assert result.elapsed == 10


def test_fail_reasons_can_be_disabled(load, fake_service, clock):
    service = fake_service(jobs={"mnist": load("jobs", "created")},
                           pods=[load("pods", "imagepullbackoff")], clock=clock)
    result = make_waiter(service, clock, timeout=20, fatal_reasons=[]).wait()
    assert result.outcome == w.OUTCOME_TIMEOUT
    assert not [c for c in service.calls if c[0] == "list_pods"]


def test_pods_of_another_job_kind_are_ignored(load, fake_service, clock):
    pod = load("pods", "imagepullbackoff")
    pod["metadata"]["ownerReferences"][0]["kind"] = "TFJob"
    service = fake_service(jobs={"mnist": load("jobs", "created")}, pods=[pod], clock=clock)
    assert make_waiter(service, clock, timeout=10).wait().outcome == w.OUTCOME_TIMEOUT


def test_watch_expired_relists(load, fake_service, clock):
    service = fake_service(jobs={"mnist": load("jobs", "created")},
                           watch_rounds=[WatchExpiredError("gone")], clock=clock)

    def expire_then_succeed(*args):
        service.jobs["mnist"] = load("jobs", "succeeded")
        raise WatchExpiredError("too old resource version")
    service.watch_job = expire_then_succeed
    result = make_waiter(service, clock).wait()
    assert result.outcome == w.OUTCOME_REACHED
    assert [c[0] for c in service.calls].count("get_job") == 2


def test_deleted_while_waiting(load, fake_service, clock):
    service = fake_service(jobs={"mnist": load("jobs", "running")},
                           watch_rounds=[[("DELETED", load("jobs", "running"))]], clock=clock)
    with pytest.raises(JobNotFoundError) as err:
        make_waiter(service, clock).wait()
    assert "deleted while waiting" in err.value.msg


def test_bookmark_and_error_free_events_are_skipped(load, fake_service, clock):
    service = fake_service(jobs={"mnist": load("jobs", "created")},
                           watch_rounds=[[("BOOKMARK", {"metadata": {"resourceVersion": "5"}}),
                                          ("MODIFIED", None), ("MODIFIED", load("jobs", "succeeded"))]],
                           clock=clock)
    assert make_waiter(service, clock).wait().phase == "Succeeded"


def test_watch_returning_at_once_does_not_spin(load, fake_service, clock):
    service = fake_service(jobs={"mnist": load("jobs", "created")}, clock=clock)
    service.watch_job = lambda *args: iter(())  # returns at once, clock does not move
    result = make_waiter(service, clock, timeout=5).wait()
    assert result.outcome == w.OUTCOME_TIMEOUT
    assert clock.sleeps == [1, 1, 1, 1, 1]


def test_missing_job(fake_service, clock):
    with pytest.raises(JobNotFoundError):
        make_waiter(fake_service(clock=clock), clock).wait()
