"""A compile cache set on shared storage, and the lock that keeps two jobs from using it at once.

``--compile-cache-dir DIR --cache-set NAME`` puts the compiled graphs of an XLA run in ``DIR/NAME``:
XLA's persistent compilation cache on the CPU (and TPU/GPU) runtime, the Neuron compiler's cache
(NEURON_COMPILE_CACHE_URL) on Trainium. A precompile run (``--precompile``) fills the set; the
training job that follows finds its graphs there and compiles nothing.

Neuron's documentation warns that a cache set must not be used by jobs running at once (two
writers corrupt it). The lock enforces that: ``DIR/NAME.lock`` (beside the set, so the set holds
only what the compiler wrote) is made by a hard link, which fails when the name exists: atomic on a
local file system, NFS and Lustre (FSx). It names the job that holds it (job_identity: every rank of
one job, on every node, has the same, and a restarted worker group or pod keeps it) and every process
of that job touches it every HEARTBEAT_S. A process of another job waits for it (a progress line every
30 s) up to ``--cache-lock-wait-s``, then is refused with a message naming the set and the holder.
A lock nobody has touched for STALE_S (its job died without releasing it) is taken over, and said.
Global rank 0 removes the lock when the run ends; a crashed job's lock goes stale.
"""

import json
import os
import re
import socket
import threading
import time
import uuid

HEARTBEAT_S = 10.0
STALE_S = 60.0
PROGRESS_S = 30.0
# A cache set is one path component: lower-case letters, digits, '.', '_' and '-', starting and ending
# with a letter or digit (so never '.', '..' or a hidden name), at most 63 characters.
CACHE_SET_RE = re.compile(r"^[a-z0-9](?:[a-z0-9._-]{0,61}[a-z0-9])?$")
MAX_LOCK_WAIT_S = 86400


class CacheLockBusy(RuntimeError):
    """Another job holds the cache set and did not let it go within the wait."""


def cache_set_problem(name):
    """Why ``name`` cannot be a cache set (a message quoting it), or None."""
    if not isinstance(name, str) or not CACHE_SET_RE.match(name) or ".." in name:
        return (f"expected 1-63 characters of a-z, 0-9, '.', '_' and '-', starting and ending with a letter or digit "
                f"(one directory name, never '..'), got {name!r}")
    return None


def job_identity(environ=None):
    """This process's job, the same for all its ranks on every node: TRAINFLEET_JOB_NAME (the train step
    sets it in every pod, whatever the launcher), else torchrun's TORCHELASTIC_RUN_ID (its rendezvous id;
    'none', torchrun's default for a static rendezvous, names no job), else this host and process (a
    plain single process is a job of its own)."""
    env = os.environ if environ is None else environ
    for name in ("TRAINFLEET_JOB_NAME", "TORCHELASTIC_RUN_ID"):
        value = env.get(name, "")
        if value and value != "none":
            return value
    return f"{socket.gethostname()}:{os.getpid()}"


def set_path(cache_dir, cache_set):
    """The cache set's directory (what the compiler writes); its lock is beside it (lock_path)."""
    return os.path.join(cache_dir, cache_set)


def lock_path(cache_dir, cache_set):
    return os.path.join(cache_dir, cache_set + ".lock")


def _read_record(path):
    """The holder record of a lock file; one that does not parse (damaged) reads as a holder named '?'.
    Raises OSError (FileNotFoundError: gone) when it cannot be read."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        record = json.loads(text)
    except ValueError:
        return {"job": "?"}
    return record if isinstance(record, dict) else {"job": "?"}


class CacheLock:
    """The lock of one cache set, for one process of a job (see the module's docstring).

    ``clock``/``sleep``/``emit`` are injectable for tests; ``acquire`` returns the seconds waited.
    """

    def __init__(self, cache_dir, cache_set, job, wait_s=300.0, emit=print, clock=time.monotonic, sleep=time.sleep,
                 stale_s=STALE_S, heartbeat_s=HEARTBEAT_S):  # pylint: disable=too-many-arguments
        self.path = lock_path(cache_dir, cache_set)
        self.cache_set = cache_set
        self.job = job
        self.wait_s = wait_s
        self.emit = emit
        self.clock = clock
        self.sleep = sleep
        self.stale_s = stale_s
        self.heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._thread = None

    def _record(self):
        return {"job": self.job, "host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}

    def _create(self):
        """True when this call made the lock file. It is written whole under a name of its own, then linked
        to the lock's name: link fails when that exists, so exactly one creator wins, and a reader never
        sees a half-written holder."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        draft = f"{self.path}.{uuid.uuid4().hex[:8]}.new"
        with open(draft, "w", encoding="utf-8") as handle:
            json.dump(self._record(), handle)
        try:
            os.link(draft, self.path)
        except FileExistsError:
            return False
        finally:
            os.unlink(draft)
        return True

    def holder(self):
        """(record, seconds since its last heartbeat) of the lock as it is now, or (None, None) without one."""
        try:
            age = time.time() - os.stat(self.path).st_mtime
            return _read_record(self.path), max(0.0, age)
        except FileNotFoundError:
            return None, None

    def _take_over(self, stale):
        """Move a stale lock aside (rename is atomic); False when another process moved or renewed it first."""
        aside = f"{self.path}.stale-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return False
        try:
            moved = _read_record(aside)
        except OSError:
            moved = {"job": "?"}
        if moved.get("job") != stale.get("job") or moved.get("since") != stale.get("since"):
            # A fresh lock was moved by mistake (another process took the stale one over in between): put it back.
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass
            os.unlink(aside)
            return False
        os.unlink(aside)
        return True

    def acquire(self):
        """Hold the set for this job (or join the job's own lock); returns the seconds waited. Raises
        CacheLockBusy after ``wait_s`` while another job holds it."""
        start = self.clock()
        last_note = start
        while True:
            if self._create():
                break
            record, age = self.holder()
            if record is None:
                continue  # released between the two calls
            if record.get("job") == self.job:
                break  # a rank of this job (or this job's earlier worker group) made it
            if age > self.stale_s:
                if self._take_over(record):
                    self.emit(f"compile cache set {self.cache_set!r}: taking over the lock of job {record.get('job')!r}, "
                              f"untouched for {age:.0f}s (its job ended without releasing it)")
                continue
            waited = self.clock() - start
            if waited >= self.wait_s:
                raise CacheLockBusy(
                    f"compile cache set {self.cache_set!r} is in use by job {record.get('job')!r} (host "
                    f"{record.get('host', '?')}, last heartbeat {age:.0f}s ago); a cache set must not be used by jobs "
                    f"running at once: waited {waited:.0f}s (--cache-lock-wait-s {self.wait_s:g}); let that job "
                    f"finish, or give this job another cache set")
            if self.clock() - last_note >= PROGRESS_S:
                last_note = self.clock()
                self.emit(f"compile cache set {self.cache_set!r}: waiting for job {record.get('job')!r} to release it, "
                          f"{waited:.0f}s of {self.wait_s:g}s")
            self.sleep(min(2.0, max(0.1, self.wait_s - waited)))
        self._touch()
        self._thread = threading.Thread(target=self._beat, name="compile-cache-lock", daemon=True)
        self._thread.start()
        return self.clock() - start

    def _touch(self):
        try:
            os.utime(self.path)
        except FileNotFoundError:
            pass

    def _beat(self):
        while not self._stop.wait(self.heartbeat_s):
            self._touch()

    def release(self, remove):
        """Stop the heartbeat; with ``remove`` (global rank 0 at the end of the run) delete the lock if it
        is still this job's."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if remove:
            record = self.holder()[0]
            if record is not None and record.get("job") == self.job:
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
