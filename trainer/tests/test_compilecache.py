"""The compile cache set's lock (trainer/compilecache.py) and the XLA flags' validation, without torch_xla:
on a fake clock, then between real processes (a holder in another process, a trainer refused)."""

import json
import os
import subprocess
import sys
import time

import pytest

from trainer.compilecache import CacheLock, CacheLockBusy, cache_set_problem, job_identity, lock_path
from trainer.config import ConfigError, TrainConfig, parse_config
from trainer.tests.conftest import REPO_ROOT, base_env


class Clock:
    """A monotonic clock that the fake sleep moves forward."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def lock(tmp_path, job, clock=None, wait_s=0.0, notes=None, **kwargs):
    clock = clock or Clock()
    return CacheLock(str(tmp_path), "bert-large", job, wait_s=wait_s, clock=clock, sleep=clock.sleep,
                     emit=(notes.append if notes is not None else lambda _text: None), **kwargs)


def test_first_job_holds_the_set_and_names_itself(tmp_path):
    first = lock(tmp_path, "job-a")
    assert first.acquire() == 0.0
    record, age = first.holder()
    assert record["job"] == "job-a" and record["pid"] == os.getpid() and age < 5
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".new")]  # the draft is gone
    first.release(remove=True)
    assert not os.path.exists(lock_path(str(tmp_path), "bert-large"))


def test_ranks_of_the_same_job_share_the_lock(tmp_path):
    rank0, rank1 = lock(tmp_path, "job-a"), lock(tmp_path, "job-a")
    rank0.acquire()
    assert rank1.acquire() == 0.0
    rank1.release(remove=False)
    assert rank0.holder()[0]["job"] == "job-a"
    rank0.release(remove=True)


def test_another_job_is_refused_naming_the_set_and_the_holder(tmp_path):
    holder = lock(tmp_path, "job-a")
    holder.acquire()
    with pytest.raises(CacheLockBusy) as err:
        lock(tmp_path, "job-b").acquire()
    message = str(err.value)
    assert "'bert-large'" in message and "'job-a'" in message and "--cache-lock-wait-s 0" in message
    assert holder.holder()[0]["job"] == "job-a"  # untouched
    holder.release(remove=True)


def test_a_waiting_job_reports_progress_then_gives_up(tmp_path):
    holder = lock(tmp_path, "job-a", stale_s=10**6)
    holder.acquire()
    notes, clock = [], Clock()
    with pytest.raises(CacheLockBusy) as err:
        lock(tmp_path, "job-b", clock=clock, wait_s=95.0, notes=notes, stale_s=10**6).acquire()
    assert "waited 95s" in str(err.value)
    assert len(notes) == 3 and all("waiting for job 'job-a'" in n for n in notes)  # one every 30 s
    holder.release(remove=True)


def test_a_waiting_job_gets_the_set_once_it_is_released(tmp_path):
    holder = lock(tmp_path, "job-a")
    holder.acquire()
    clock = Clock()

    def sleep(seconds):
        clock.now += seconds
        if clock.now > 110:
            holder.release(remove=True)

    waiter = CacheLock(str(tmp_path), "bert-large", "job-b", wait_s=60.0, clock=clock, sleep=sleep, emit=lambda _t: None)
    assert 10 < waiter.acquire() < 60
    assert waiter.holder()[0]["job"] == "job-b"
    waiter.release(remove=True)


def test_a_stale_lock_is_taken_over_and_said(tmp_path):
    path = lock_path(str(tmp_path), "bert-large")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"job": "job-dead", "host": "gone", "pid": 1, "since": 1.0}, handle)
    old = time.time() - 3600
    os.utime(path, (old, old))
    notes = []
    taker = lock(tmp_path, "job-b", notes=notes)
    taker.acquire()
    assert taker.holder()[0]["job"] == "job-b"
    assert len(notes) == 1 and "taking over the lock of job 'job-dead'" in notes[0]
    assert not [n for n in os.listdir(tmp_path) if ".stale-" in n]
    taker.release(remove=True)


def test_release_leaves_another_jobs_lock_alone(tmp_path):
    mine = lock(tmp_path, "job-a")
    mine.acquire()
    os.unlink(mine.path)
    theirs = lock(tmp_path, "job-b")
    theirs.acquire()
    mine.release(remove=True)
    assert theirs.holder()[0]["job"] == "job-b"
    theirs.release(remove=True)


def test_a_damaged_lock_file_reads_as_an_unknown_holder(tmp_path):
    with open(lock_path(str(tmp_path), "bert-large"), "w", encoding="utf-8") as handle:
        handle.write("{not json")
    with pytest.raises(CacheLockBusy) as err:
        lock(tmp_path, "job-b").acquire()
    assert "job '?'" in str(err.value)


def test_the_heartbeat_keeps_the_lock_fresh(tmp_path):
    holder = lock(tmp_path, "job-a", heartbeat_s=0.05)
    holder.acquire()
    old = time.time() - 3600
    os.utime(holder.path, (old, old))
    deadline = time.monotonic() + 5
    while holder.holder()[1] > 60 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert holder.holder()[1] < 60
    holder.release(remove=True)


def test_job_identity_is_the_jobs_name_else_the_torchrun_run_id():
    assert job_identity({"TRAINFLEET_JOB_NAME": "bertcompile", "TORCHELASTIC_RUN_ID": "x"}) == "bertcompile"
    assert job_identity({"TORCHELASTIC_RUN_ID": "bert-pretrain"}) == "bert-pretrain"
    # a static rendezvous (torchrun --master-addr ...): run id 'none' names no job
    assert job_identity({"TORCHELASTIC_RUN_ID": "none"}).endswith(f":{os.getpid()}")
    assert job_identity({}).endswith(f":{os.getpid()}")


@pytest.mark.parametrize("name", ["", ".", "..", "a..b", "../x", "a/b", "x\ny", "-x", "x-", "Upper", "{{ x }}", "a" * 64, 7, None])
def test_hostile_cache_sets_are_refused(name):
    assert cache_set_problem(name) is not None
    assert repr(name) in cache_set_problem(name)


@pytest.mark.parametrize("name", ["default", "bert-large", "a", "v1.2_x", "a" * 63])
def test_plain_cache_sets_pass(name):
    assert cache_set_problem(name) is None


@pytest.mark.parametrize("kwargs, flag", [
    ({"device": "xla", "precision": "bf16"}, "--precision"),
    ({"device": "xla", "compile": True}, "--compile"),
    ({"backend": "xla"}, "--backend"),
    ({"device": "xla", "backend": "nccl"}, "--backend"),
    ({"compile_cache_dir": "CACHE"}, "--compile-cache-dir"),
    ({"device": "xla", "compile_cache_dir": "s3://bucket/cache"}, "--compile-cache-dir"),
    ({"device": "xla", "compile_cache_dir": "FILE"}, "--compile-cache-dir"),
    ({"device": "xla", "compile_cache_dir": "CACHE", "cache_set": "../etc"}, "--cache-set"),
    ({"device": "xla", "precompile": True}, "--precompile"),
    ({"device": "xla", "compile_cache_dir": "CACHE", "cache_lock_wait_s": -1}, "--cache-lock-wait-s"),
    ({"device": "xla", "compile_cache_dir": "CACHE", "cache_lock_wait_s": 10**9}, "--cache-lock-wait-s"),
])
def test_xla_flags_are_checked(tmp_path, kwargs, flag):
    (tmp_path / "a-file").write_text("x")
    places = {"CACHE": str(tmp_path / "cache"), "FILE": str(tmp_path / "a-file" / "cache")}
    kwargs = {k: places.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(ConfigError) as err:
        TrainConfig(output_dir=str(tmp_path / "out"), **kwargs)
    assert err.value.argument == flag


def test_xla_flags_parse(tmp_path):
    cfg = parse_config(["--device", "xla", "--compile-cache-dir", str(tmp_path / "cc"), "--cache-set", "bert-large",
                        "--precompile", "--cache-lock-wait-s", "0", "--output-dir", str(tmp_path / "out")])
    assert cfg.precompile and cfg.cache_lock_wait_s == 0 and cfg.compile_cache_path == str(tmp_path / "cc" / "bert-large")


HOLD = """
import sys, time
from trainer.compilecache import CacheLock
lock = CacheLock(sys.argv[1], "bert-large", "precompile-job", wait_s=0)
lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_the_trainer_is_refused_while_another_process_holds_the_set(tmp_path):
    """A real holder process; the trainer's own step (loop.hold_cache_set) is refused, naming the set and
    the job, and nothing was written into the set (test_xla.py runs a whole trainer so)."""
    cache = tmp_path / "cc"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(cache)], cwd=REPO_ROOT, env=base_env(),  # pylint: disable=consider-using-with
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        from trainer import loop  # pylint: disable=import-outside-toplevel
        cfg = TrainConfig(device="xla", compile_cache_dir=str(cache), cache_set="bert-large", cache_lock_wait_s=0,
                          output_dir=str(tmp_path / "out"))
        with pytest.raises(CacheLockBusy) as err:
            loop.hold_cache_set(cfg)
        assert "'bert-large' is in use by job 'precompile-job'" in str(err.value)
        assert not (cache / "bert-large").exists()
    finally:
        holder.kill()
        holder.wait(timeout=10)
