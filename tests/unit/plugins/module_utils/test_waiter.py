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


# --------------------------------------------------------------------------- progress while waiting


class _Reporter(object):
    def __init__(self):
        self.lines = []

    def report(self, text, force=False):  # pylint: disable=unused-argument
        self.lines.append(text)
        return True


def _running_job(load):
    job = load("jobs", "running")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"] = {"spec": {"containers": [
        {"name": "pytorch", "command": ["torchrun"], "args": ["-m", "trainer.train", "--epochs=5"]}]}}
    return job


def test_round_progress_reads_rank0s_tail_and_estimates_the_time_left(load, fake_service, clock):
    """worker-1 ran rank 0 (its tail has the rank=0 line and the epoch lines); the trainer's time= wins
    over the kubelet's timestamp; the line says epoch k/N (N from the job's --epochs), loss, accuracy,
    samples/s, elapsed and the time left."""
    from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import PYTORCHJOB  # pylint: disable=import-outside-toplevel
    from ansible_collections.trainfleet.training.plugins.module_utils.jobstatus import pod_summary  # pylint: disable=import-outside-toplevel

    logs = {
        ("mnist-worker-0", False): b"trainfleet-rank: rank=1 local_rank=0 world_size=2 group_rank=1 host=w0\n",
        ("mnist-worker-1", False): (
            b"trainfleet-rank: rank=0 local_rank=0 world_size=2 group_rank=0 host=w1 time=2025-01-01T10:01:00.000Z\n"
            b"trainfleet-epoch: epoch=1 loss=0.900000 test_acc=0.700000 samples_per_s=800.0 time=2025-01-01T10:01:10.000Z\n"
            b"trainfleet-info: snapshot epoch=1 uri=s3://b/s.pt\n"
            b"trainfleet-epoch: epoch=2 loss=0.400000 test_acc=0.912345 samples_per_s=812.4 time=2025-01-01T10:01:20.000Z\n"),
    }
    service = fake_service(logs=logs)
    pods = [load("pods", name) for name in ("running_master", "running_worker0", "running_worker1")]
    summaries = [pod_summary(p) for p in pods]
    reporter = _Reporter()
    wall = [datetime.datetime(2025, 1, 1, 10, 1, 25, tzinfo=datetime.timezone.utc).timestamp()]
    tail = w.Rank0Tail(service, "training", PYTORCHJOB, clock=clock)
    report = w.round_progress(reporter, "training", "mnist", "PyTorchJob", tail=tail, wall=lambda: wall[0])
    job = _running_job(load)

    report(job, summaries, 30.0)
    assert tail.pod == "mnist-worker-1"
    line = reporter.lines[-1]
    assert line.startswith("PyTorchJob training/mnist Running: epoch 2/5, loss 0.4000, acc 0.9123, 812 samples/s; elapsed ")
    assert line.endswith(", about 25s left")  # 3 epochs at 10 s, 5 s into the next
    reads = [c for c in service.calls if c[0] == "iter_log"]
    assert all(c[3] == w.Rank0Tail.TAIL_LINES and c[-1] is True for c in reads)  # bounded tails, with timestamps

    # within min_interval no log is read again; afterwards only rank 0's
    report(job, summaries, 35.0)
    assert len([c for c in service.calls if c[0] == "iter_log"]) == len(reads)
    clock.advance(10)
    report(job, summaries, 40.0)
    assert [c[1] for c in service.calls if c[0] == "iter_log"][len(reads):] == ["mnist-worker-1"]


def test_round_progress_before_the_first_epoch_names_the_pods(load, fake_service, clock):
    reporter = _Reporter()
    tail = w.Rank0Tail(fake_service(logs={}), "training", None, clock=clock)
    from ansible_collections.trainfleet.training.plugins.module_utils.jobstatus import pod_summary  # pylint: disable=import-outside-toplevel
    summaries = [pod_summary(load("pods", "imagepullbackoff"))]
    job = load("jobs", "created")
    job["status"].pop("startTime", None)  # not started: the wait's own elapsed time stands in
    w.round_progress(reporter, "training", "mnist", tail=tail)(job, summaries, 12.0)
    assert reporter.lines[-1] == "PyTorchJob training/mnist Created: pods: %s %s (%s); elapsed 12s" % (
        summaries[0]["name"], summaries[0]["phase"], summaries[0]["reason"])
    assert [c for c in tail.service.calls if c[0] == "iter_log"] == []  # no log read before Running


def _silent_job(load, fake_service, clock, logs, **kwargs):
    """A Running job whose three pods started by 10:00:08 and whose logs stay as given; the waiter's
    wall clock follows the fake clock from 10:00:00."""
    from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import PYTORCHJOB  # pylint: disable=import-outside-toplevel
    service = fake_service(jobs={"mnist": load("jobs", "running")},
                           pods=[load("pods", name) for name in ("running_master", "running_worker0", "running_worker1")],
                           logs=logs, clock=clock)
    tail = w.Rank0Tail(service, "training", PYTORCHJOB, clock=clock)
    start = clock()
    waiter = w.JobWaiter(service, "training", "mnist", clock=clock, sleep=clock.sleep, timeout=600, check_interval=10,
                         now=lambda: _now() + datetime.timedelta(seconds=clock() - start), kind=PYTORCHJOB,
                         on_round=w.round_progress(_Reporter(), "training", "mnist", tail=tail), liveness=tail, **kwargs)
    return waiter.wait(), service


def test_a_running_job_whose_pods_print_nothing_ends_the_wait_naming_the_newest_line(load, fake_service, clock):
    """A user's script hung in a collective: no trainfleet line, no rank 0 known; the pods last printed at
    10:00:02 and the last container started at 10:00:08, so the wait ends 60 s after that."""
    logs = {("mnist-master-0", False): b"init\nwaiting for rank 1\n",
            ("mnist-worker-0", False): b"init\n",
            ("mnist-worker-1", False): b"init\nloading\nall_reduce step 0\n"}
    result, _service = _silent_job(load, fake_service, clock, logs, progress_timeout=60)
    assert result.outcome == w.OUTCOME_STALLED and result.phase == "Running"
    stall = result.stall
    assert stall["progress_timeout"] == 60 and 60 <= stall["silent_seconds"] < 80
    assert (stall["pod"], stall["last_line_at"], stall["last_line"]) == (
        "mnist-worker-1", "2025-01-01T10:00:02Z", "all_reduce step 0")


def test_a_line_is_a_sign_of_life(load, fake_service, clock):
    """The same job whose rank printed until 10:00:58 (the fake kubelet stamps line i at second i): the
    wait ends 60 s after that line, not after the container starts."""
    logs = {("mnist-worker-1", False): b"".join(b"step %d\n" % i for i in range(59))}
    result, _service = _silent_job(load, fake_service, clock, logs, progress_timeout=60)
    assert result.outcome == w.OUTCOME_STALLED
    assert (result.stall["last_line_at"], result.stall["last_line"]) == ("2025-01-01T10:00:58Z", "step 58")
    assert result.elapsed >= 118  # 10:00:58 + 60 s


@pytest.mark.parametrize("logs, progress_timeout", [
    ({("mnist-worker-1", False): b"init\n"}, 0),  # off
    ({}, 60),  # no log could be read: never called a stall
])
def test_no_stall_when_off_or_when_no_log_could_be_read(load, fake_service, clock, logs, progress_timeout):
    result, _service = _silent_job(load, fake_service, clock, logs, progress_timeout=progress_timeout)
    assert result.outcome == w.OUTCOME_TIMEOUT and result.stall is None


def test_a_job_not_running_is_never_called_stalled(load, fake_service, clock):
    from ansible_collections.trainfleet.training.plugins.module_utils.jobstatus import pod_summary  # pylint: disable=import-outside-toplevel
    tail = w.Rank0Tail(fake_service(logs={("mnist-worker-1", False): b"x\n"}), "training", None, clock=clock)
    summaries = [pod_summary(load("pods", "running_worker1"))]
    tail.read(summaries)
    assert tail.silence(summaries, _now().timestamp() + 3600)["silent_seconds"] == 3600 - 6
    waiter = w.JobWaiter(tail.service, "training", "mnist", clock=clock, now=lambda: _now() + datetime.timedelta(hours=1),
                         progress_timeout=60, liveness=tail)
    waiter._summaries = summaries  # pylint: disable=protected-access
    assert not waiter._stalled(load("jobs", "created"))  # pylint: disable=protected-access
    assert waiter._stalled(load("jobs", "running"))  # pylint: disable=protected-access


def test_a_stall_is_told_from_a_fresh_read_never_an_older_one(load, fake_service, clock):
    """The last read (rate-limited) saw a line of 10:00:00; a line printed since must keep the job alive."""
    from ansible_collections.trainfleet.training.plugins.module_utils.jobstatus import pod_summary  # pylint: disable=import-outside-toplevel
    service = fake_service(logs={("mnist-worker-1", False): b"x\n"})
    tail = w.Rank0Tail(service, "training", None, clock=clock)
    summaries = [pod_summary(load("pods", "running_worker1"))]  # started 10:00:06
    tail.read(summaries)
    seconds = [50]
    waiter = w.JobWaiter(service, "training", "mnist", clock=clock,
                         now=lambda: _now() + datetime.timedelta(seconds=seconds[0]), progress_timeout=40, liveness=tail)
    waiter._summaries = summaries  # pylint: disable=protected-access
    service.logs[("mnist-worker-1", False)] = b"".join(b"step %d\n" % i for i in range(50))  # newest at 10:00:49
    assert not waiter._stalled(load("jobs", "running"))  # pylint: disable=protected-access
    # nothing new 51 s after that line: the fresh read confirms the stall
    seconds[0] = 100
    assert waiter._stalled(load("jobs", "running"))  # pylint: disable=protected-access
    assert (waiter.stall["silent_seconds"], waiter.stall["last_line"]) == (51.0, "step 49")
