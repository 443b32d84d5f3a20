"""A run that stops making progress ends, saying where it stopped and which rank held it up.

A rank that is frozen (SIGSTOP), hung (a deadlock, a dead file system) or cut off leaves the
others blocked in a collective until the process group's --timeout-s, 300 to 1800 s of nothing.
The watchdog ends that sooner: the training loop beats at every step; a rank whose last beat is
older than --stall-timeout-s prints one trainfleet-stall line and exits with EXIT_STALLED, so that
torchrun restarts the group (or the pod's restart policy starts it again) and the run resumes from
its snapshot.

Which rank held it up: every rank's watchdog thread publishes its progress (epoch, step, when it
last beat, what it is doing) every few seconds to a key-value store the ranks share: a TCPStore
client of its own on MASTER_ADDR:MASTER_PORT, with short timeouts, apart from the process group's.
A stalled rank reads every rank's entry: a rank whose entry was not refreshed is frozen or gone, a
fresh one with the oldest progress is behind. A rank in a declared I/O phase (a snapshot or the
final outputs on rank 0, a paced pause) counts as making progress while its entry is fresh, so the
others wait for it instead of ending the run; a stuck I/O call is bounded by the storage's own
timeouts. When the store does not answer (it lives in rank 0's process), the line says so: rank 0
is then the one that is stuck or gone. Every store call runs in a helper thread, bounded: against a
frozen rank 0 (its socket still accepts, nothing answers) TCPStore's check, get and connect wait
forever whatever their timeout, and the watchdog must still decide.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from datetime import timedelta

from trainer.metrics import stall_line

EXIT_STALLED = 3
KEY = "trainfleet/progress/{rank}"
STORE_TIMEOUT_S = 5.0


class _Progress:  # pylint: disable=too-few-public-methods
    """What the main thread did last; written by it, read by the watchdog thread (plain attributes)."""

    def __init__(self, now):
        self.epoch = 0
        self.step = 0
        self.at = now
        self.phase = ""  # "" while training; the I/O phase's name while in one


class Watchdog:
    """beat(epoch, step) from the loop; io(name) around I/O; start() once the first step is done.

    stall_s 0 turns it off (beat and io stay cheap no-ops)."""

    def __init__(self, stall_s, rank, world_size, store=None, emit=print, exit_process=os._exit,
                 clock=time.monotonic, wall=time.time, interval_s=None):
        self.stall_s = float(stall_s or 0)
        self.rank = rank
        self.world_size = world_size
        self.store = store  # None: no peers to name (one process), or a callable making the client
        self.emit = emit
        self.exit_process = exit_process
        self.clock = clock
        self.wall = wall
        self.interval_s = interval_s if interval_s is not None else max(0.5, min(5.0, self.stall_s / 4))
        self.progress = _Progress(clock())
        self._client = None
        self._store_error = None
        self._pending = None  # a store call that has not returned yet (its helper thread)
        self._thread = None
        self._stop = threading.Event()

    # ---------------------------------------------------------------- main thread
    def beat(self, epoch, step):
        progress = self.progress
        progress.epoch, progress.step, progress.at = epoch, step, self.clock()

    @contextmanager
    def io(self, name):
        """A phase that makes progress without beating (a snapshot upload, a paced pause)."""
        self.progress.phase = name
        try:
            yield
        finally:
            self.progress.phase = ""
            self.progress.at = self.clock()

    def start(self):
        if self.stall_s > 0 and self._thread is None:
            self.progress.at = self.clock()
            self._thread = threading.Thread(target=self._run, name="trainfleet-watchdog", daemon=True)
            self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * STORE_TIMEOUT_S)

    # ---------------------------------------------------------------- watchdog thread
    def _run(self):
        while not self._stop.wait(self.interval_s):
            self.publish()
            verdict = self.check()
            if verdict is not None:
                self.emit(verdict)
                sys.stdout.flush()
                self._stop.set()  # one line only, even where exit_process returns (tests)
                self.exit_process(EXIT_STALLED)

    def _entry(self):
        progress = self.progress
        return {"epoch": progress.epoch, "step": progress.step, "phase": progress.phase,
                "idle_s": round(self.clock() - progress.at, 1), "published": self.wall()}

    def _bounded(self, func):
        """func() in a helper thread, waited for STORE_TIMEOUT_S + 1 s at most; raises TimeoutError when it
        has not returned (the thread is left behind, and no new call starts while it hangs)."""
        if self._pending is not None and self._pending.is_alive():
            raise TimeoutError("an earlier call to the store has not returned")
        box = {}

        def call():
            try:
                box["value"] = func()
            except Exception as exc:  # pylint: disable=broad-except  # handed to the caller
                box["error"] = exc
        helper = threading.Thread(target=call, name="trainfleet-watchdog-store", daemon=True)
        helper.start()
        helper.join(STORE_TIMEOUT_S + 1)
        if helper.is_alive():
            self._pending = helper
            raise TimeoutError(f"no answer within {STORE_TIMEOUT_S + 1:g}s")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def _store(self):
        if self._client is None and self.store is not None:
            try:
                self._client = self._bounded(self.store)
            except Exception as exc:  # pylint: disable=broad-except
                self._store_error = f"{type(exc).__name__}: {exc}"
        return self._client

    def publish(self):
        client = self._store()
        if client is None:
            return
        try:
            self._bounded(lambda: client.set(KEY.format(rank=self.rank), json.dumps(self._entry())))
            self._store_error = None
        except Exception as exc:  # pylint: disable=broad-except
            self._store_error = f"{type(exc).__name__}: {exc}"

    def read_peers(self):
        """{rank: entry} of the other ranks that published; raises when the store does not answer."""
        client = self._store()
        if client is None:
            raise RuntimeError(self._store_error or "no store")

        def read():
            peers = {}
            keys = [KEY.format(rank=r) for r in range(self.world_size) if r != self.rank]
            for key in [key for key in keys if client.check([key])]:
                peers[int(key.rsplit("/", 1)[1])] = json.loads(client.get(key))
            return peers
        return self._bounded(read)

    def check(self):
        """The stall line when this rank should end, else None."""
        progress = self.progress
        idle = self.clock() - progress.at
        if progress.phase or idle < self.stall_s:
            return None
        where = {"epoch": progress.epoch, "step": progress.step}
        if self.world_size <= 1:
            return stall_line(self.rank, idle, where, "no other rank: this process itself is stuck")
        if self.store is None:
            return stall_line(self.rank, idle, where, "the other ranks cannot be asked (no MASTER_ADDR/MASTER_PORT)")
        try:
            peers = self.read_peers()
        except Exception as exc:  # pylint: disable=broad-except
            why = self._store_error or f"{type(exc).__name__}: {exc}"
            return stall_line(self.rank, idle, where, f"the ranks' shared store (in rank 0's process) did not answer "
                                                      f"({why}): rank 0 is stuck or gone")
        now = self.wall()
        fresh = 3 * self.interval_s + STORE_TIMEOUT_S
        silent = sorted(set(range(self.world_size)) - {self.rank} - set(peers))
        frozen = sorted(r for r, e in peers.items() if now - float(e.get("published", 0)) > fresh)
        busy = sorted(r for r, e in peers.items() if e.get("phase") and r not in frozen)
        if busy:
            return None  # a rank in an I/O phase that still answers: the others wait for it
        if silent or frozen:
            names = [f"rank {r} (never published)" for r in silent]
            names += [f"rank {r} (silent for {now - float(peers[r]['published']):.1f}s, last at epoch="
                      f"{peers[r]['epoch']} step={peers[r]['step']})" for r in frozen]
            return stall_line(self.rank, idle, where, "not responding: " + ", ".join(names))
        ranks = dict(peers)
        ranks[self.rank] = {"epoch": progress.epoch, "step": progress.step, "idle_s": round(idle, 1)}
        lowest = min((e["epoch"], e["step"]) for e in ranks.values())
        behind = [r for r, e in sorted(ranks.items()) if (e["epoch"], e["step"]) == lowest]
        if len(behind) == len(ranks):
            return stall_line(self.rank, idle, where, "every rank answers at the same step: a collective that never "
                                                      "completes (the network between the ranks)")
        if behind == [self.rank]:
            return stall_line(self.rank, idle, where, "behind: this rank itself, the others went on")
        return stall_line(self.rank, idle, where, "behind: " + ", ".join(
            f"rank {r} (epoch={ranks[r]['epoch']} step={ranks[r]['step']}, idle {ranks[r]['idle_s']}s)" for r in behind))


def tcp_store(env=None):
    """A callable making a TCPStore client on MASTER_ADDR:MASTER_PORT (None without them)."""
    env = os.environ if env is None else env
    host, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if not host or not port:
        return None

    def connect():
        import torch.distributed as torch_dist  # pylint: disable=import-outside-toplevel
        return torch_dist.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=STORE_TIMEOUT_S),
                                   wait_for_workers=False)
    return connect
