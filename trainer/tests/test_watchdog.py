"""The stall watchdog (trainer/watchdog.py): its decision on a fake clock and store, then on real
processes: a rank frozen with SIGSTOP mid-run makes the other end within the stall timeout, naming
the frozen rank, and the group ends instead of waiting for the process group's timeout."""

import os
import signal
import sys
import threading
import time

import pytest

from trainer.tests.conftest import base_env
from trainer.tests.test_faults import SYNTHETIC, Run
from trainer.watchdog import EXIT_STALLED, Watchdog

STALL = 30.0


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Store:
    """TCPStore's set/get/check, in memory; down=True makes every call fail like a store that does not answer."""

    def __init__(self):
        self.data = {}
        self.down = False

    def _check_up(self):
        if self.down:
            raise TimeoutError("Socket Timeout")

    def set(self, key, value):
        self._check_up()
        self.data[key] = value.encode()

    def get(self, key):
        self._check_up()
        return self.data[key]

    def check(self, keys):
        self._check_up()
        return all(key in self.data for key in keys)


def pair(world=2, store=None):
    """Watchdogs of ranks 0..world-1 on one fake clock (monotonic and wall) and one store."""
    clock, store = Clock(), store or Store()
    dogs = [Watchdog(STALL, rank, world, store=lambda: store, clock=clock, wall=clock, interval_s=5.0)
            for rank in range(world)]
    return clock, store, dogs


def test_a_rank_that_beats_is_never_stalled_and_off_means_off():
    clock, _store, (dog, _one) = pair()
    for step in range(10):
        clock.now += STALL / 2
        dog.beat(1, step)
        assert dog.check() is None
    off = Watchdog(0, 0, 2)
    off.beat(1, 1)
    assert off.start()._thread is None  # pylint: disable=protected-access


def test_a_frozen_peer_is_named_not_responding():
    clock, _store, (zero, one) = pair()
    zero.beat(2, 10)
    one.beat(2, 10)
    zero.publish()
    one.publish()
    for _tick in range(int(STALL / 5) + 1):  # rank 1 frozen: only rank 0's thread goes on publishing
        clock.now += 5.0
        zero.publish()
    line = zero.check()
    assert line.startswith("trainfleet-stall: rank=0 no progress for 35.0s at epoch=2 step=10; not responding: rank 1 "
                           "(silent for 35.0s, last at epoch=2 step=10)"), line


def test_a_peer_behind_is_named_and_a_peer_in_io_is_waited_for():
    clock, _store, (zero, one) = pair()
    zero.beat(3, 1)  # rank 0 waits in epoch 3's first collective
    one.beat(2, 40)  # rank 1 is still in epoch 2 (hung, but its thread answers)
    clock.now += STALL + 1
    one.publish()
    zero.publish()
    assert "behind: rank 1 (epoch=2 step=40, idle 31.0s)" in zero.check()
    # the same rank 1 writing rank 0's... its snapshot: an I/O phase that still answers holds the others back
    with one.io("epoch outputs"):
        one.publish()
        assert zero.check() is None
        assert one.check() is None  # its own I/O phase is progress too


def test_every_rank_at_the_same_step_points_at_the_network():
    clock, _store, (zero, one) = pair()
    zero.beat(1, 5)
    one.beat(1, 5)
    clock.now += STALL
    one.publish()
    assert "every rank answers at the same step" in zero.check()


def test_a_store_that_does_not_answer_names_rank_0_and_a_silent_rank_is_named():
    clock, store, (_zero, one) = pair()
    one.beat(1, 5)
    clock.now += STALL
    store.down = True
    assert "the ranks' shared store (in rank 0's process) did not answer (TimeoutError: Socket Timeout): rank 0 is stuck" \
        in one.check()
    store.down = False
    assert "not responding: rank 0 (never published)" in one.check()


def test_one_process_or_no_store_says_so():
    clock = Clock()
    alone = Watchdog(STALL, 0, 1, clock=clock, wall=clock)
    clock.now += STALL
    assert "no other rank: this process itself is stuck" in alone.check()
    blind = Watchdog(STALL, 1, 2, clock=clock, wall=clock)
    clock.now += STALL
    assert "cannot be asked (no MASTER_ADDR/MASTER_PORT)" in blind.check()


def test_the_thread_prints_one_line_and_exits():
    lines, exits, done = [], [], threading.Event()

    def exit_process(code):
        exits.append(code)
        done.set()

    dog = Watchdog(0.2, 0, 1, emit=lines.append, exit_process=exit_process, interval_s=0.05)
    dog.beat(1, 3)
    dog.start()
    assert done.wait(10)
    dog.stop()
    assert exits == [EXIT_STALLED] and len(lines) == 1 and lines[0].startswith("trainfleet-stall: rank=0 ")


def _worker_pid(torchrun_pid, rank, timeout=30):
    """The pid of torchrun's worker with RANK=rank (read from /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{pid}/environ", "rb") as environ:
                    env = dict(item.split(b"=", 1) for item in environ.read().split(b"\0") if b"=" in item)
            except (OSError, ValueError, IndexError):
                continue
            if parent == torchrun_pid and env.get(b"RANK") == str(rank).encode():
                return int(pid)
        time.sleep(0.5)
    pytest.fail(f"no worker of rank {rank} under torchrun {torchrun_pid}")


class HangingStore(Store):
    """A store whose server is frozen: check and get never return (TCPStore against a SIGSTOPped rank 0)."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def check(self, keys):
        self.release.wait(60)
        return super().check(keys)


def test_a_store_call_that_never_returns_is_bounded_and_names_rank_0():
    clock, store, (_zero, one) = pair(store=HangingStore())
    one.publish()
    one.beat(1, 5)
    clock.now += STALL
    started = time.monotonic()
    try:
        line = one.check()
        assert "did not answer (TimeoutError: no answer within 6s): rank 0 is stuck or gone" in line, line
        assert "an earlier call to the store has not returned" in one.check()  # no second helper while one hangs
    finally:
        store.release.set()
    assert time.monotonic() - started < 30


FROZEN = {1: "not responding: rank 1 (", 0: "the ranks' shared store (in rank 0's process) did not answer"}


@pytest.mark.integration
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("frozen", sorted(FROZEN))
def test_a_frozen_rank_ends_the_run_within_the_stall_timeout_naming_it(tmp_path, frozen):
    """A rank stopped (SIGSTOP: a hang, not a crash) after epoch 1; the other, blocked in a collective, ends
    after --stall-timeout-s (10 s here; the process group's timeout is 300 s) saying which rank held it up.
    As in the train step's pods, torchrun does not share its rendezvous store
    (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1): the ranks' store lives in rank 0's process, so a frozen
    rank 0 freezes it too, and the other rank's watchdog must still decide."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "--max_restarts", "0",
           "-m", "trainer.train", *SYNTHETIC, "--timeout-s", "300", "--stall-timeout-s", "10", "--epochs", "30",
           "--output-dir", str(tmp_path / "out")]
    run = Run(cmd, base_env(TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1"))
    try:
        run.wait_for(r"^trainfleet-epoch: epoch=1 ")
        victim = _worker_pid(run.proc.pid, frozen)
        os.kill(victim, signal.SIGSTOP)
        frozen_at = time.monotonic()
        line = run.wait_for(r"trainfleet-stall: ", timeout=60)
        waited = time.monotonic() - frozen_at
        assert f"rank={1 - frozen} no progress for" in line and FROZEN[frozen] in line, run.output()
        assert waited < 10 + 30, (waited, run.output())  # the stall timeout and a few publish intervals, not 300 s
        os.kill(victim, signal.SIGCONT)  # so torchrun's SIGTERM ends it now, not after its 30 s grace and a SIGKILL
        assert run.finish(timeout=120) != 0, run.output()  # torchrun ends the group (max_restarts 0): no hang
        assert not run.prefixed("trainfleet-result:"), run.output()
    finally:
        run.kill()  # the whole session, the stopped worker too
