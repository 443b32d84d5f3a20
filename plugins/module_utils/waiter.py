# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait for a training job with the watch API, bounded by a monotonic deadline.

Succeeded and Failed both end the wait (a failed job does not wait out the timeout). While
waiting, every phase change is recorded as a transition (and passed to on_transition, which
the module uses to log it as it happens). The job watch runs in rounds of at most
check_interval seconds; between rounds the job's pods are checked for waiting reasons that
never resolve on their own (ImagePullBackOff, ...), so a job that can never start fails fast
too instead of sitting in Created until the timeout.
"""

from __future__ import annotations

import datetime
import json
import time

from ansible_collections.trainfleet.training.plugins.module_utils.errors import (
    JobNotFoundError,
    TrainfleetError,
    WatchExpiredError,
)
from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import (
    DEFAULT_FATAL_WAITING_REASONS,
    EPOCH,
    PHASE_FAILED,
    PHASE_RESTARTING,
    PHASE_RUNNING,
    format_time,
    job_condition,
    job_phase,
    job_times,
    parse_time,
    phase_reached,
    pod_belongs_to_job,
    total_epochs,
    utcnow,
)
from ansible_collections.trainfleet.training.plugins.module_utils.jobstatus import pod_summary, pods_with_problems
from ansible_collections.trainfleet.training.plugins.module_utils.k8s import iter_lines
from ansible_collections.trainfleet.training.plugins.module_utils.progress import TrainingProgress, progress_line
from ansible_collections.trainfleet.training.plugins.module_utils.trainerlog import (
    RANK0_OUTPUT_RE as TRAINER_RANK0_OUTPUT_RE,
    parse_trainer_line,
    split_log_timestamp,
)

OUTCOME_REACHED = "reached"
OUTCOME_FAILED = "failed"
OUTCOME_POD_PROBLEM = "pod_problem"
OUTCOME_TIMEOUT = "timeout"
# The job's gang (Volcano PodGroup) stayed unschedulable for pending_timeout seconds.
OUTCOME_UNSCHEDULABLE = "unschedulable"
# The job ran, but no pod printed a line (or started a container) for progress_timeout seconds.
OUTCOME_STALLED = "stalled"


class WaitResult(object):
    def __init__(self, job, outcome, transitions, elapsed, problem_pods=None, pending_reason=None, stall=None):
        self.job = job
        self.pending_reason = pending_reason
        self.stall = stall
        self.outcome = outcome
        self.transitions = transitions
        self.elapsed = elapsed
        self.problem_pods = problem_pods or []

    @property
    def phase(self):
        return job_phase(self.job)


class JobWaiter(object):
    """wait(): drive the watch until the wanted phase, a terminal phase, a fatal pod reason
    or the deadline, whichever comes first."""

    def __init__(self, service, namespace, name, wanted="terminal", timeout=3600,
                 check_interval=10, fatal_reasons=DEFAULT_FATAL_WAITING_REASONS,
                 on_transition=None, clock=time.monotonic, now=utcnow, sleep=time.sleep,
                 on_round=None, kind=None, pending_timeout=0, gang=None, progress_timeout=0, liveness=None):
        self.service = service
        self.namespace = namespace
        self.name = name
        self.wanted = wanted
        self.timeout = timeout
        self.check_interval = max(1, check_interval)
        self.fatal_reasons = tuple(fatal_reasons or ())
        self.on_transition = on_transition
        # on_round(job, pod_summaries, elapsed_seconds): called once per check round (progress).
        self.on_round = on_round
        self.kind = kind
        # pending_timeout > 0 with gang (a gang.UnschedulableClock): end the wait, not failed, once
        # the job's PodGroup has been seen unschedulable for that many seconds in a row.
        self.pending_timeout = pending_timeout or 0
        self.gang = gang
        # progress_timeout > 0 with liveness (a Rank0Tail, read by on_round): end the wait once the
        # Running job's pods printed no line and started no container for that many seconds.
        self.progress_timeout = progress_timeout or 0
        self.liveness = liveness
        self.stall = None
        self._summaries = None
        self.pending_reason = None
        self.podgroup = None
        self.clock = clock
        self.now = now
        self.sleep = sleep
        self.transitions = []
        self._start = None
        self._last_phase = None

    def _elapsed(self):
        return round(self.clock() - self._start, 3)

    def _record(self, job):
        phase = job_phase(job)
        if phase == self._last_phase:
            return
        self._last_phase = phase
        cond = job_condition(job, phase) or {}
        transition = {
            "time": format_time(self.now()),
            "elapsed_seconds": self._elapsed(),
            "phase": phase,
            "reason": cond.get("reason"),
            "message": cond.get("message"),
        }
        self.transitions.append(transition)
        if self.on_transition:
            self.on_transition(transition)

    def _result(self, job, outcome, problem_pods=None):
        return WaitResult(job, outcome, self.transitions, self._elapsed(), problem_pods, self.pending_reason,
                          self.stall)

    def _check_pods(self, job):
        if not self.fatal_reasons and not self.on_round:
            self._summaries = None
            return []
        pods = [p for p in self.service.list_pods(self.namespace, self.name)
                if pod_belongs_to_job(p, self.name, self.kind)]
        summaries = [pod_summary(p, self.kind) for p in pods]
        self._summaries = summaries
        if self.on_round:
            self.on_round(job, summaries, self._elapsed())
        if not self.fatal_reasons:
            return []
        return pods_with_problems(summaries, self.fatal_reasons)

    def _gang_stuck(self, job):
        """True when the job's gang has been unschedulable for pending_timeout seconds."""
        if self.pending_timeout <= 0 or self.gang is None:
            return False
        self.podgroup, self.pending_reason, seconds = self.gang.observe(job_phase(job), self.clock())
        return bool(self.pending_reason) and seconds >= self.pending_timeout

    def _stalled(self, job):
        """True when the Running job has been silent for progress_timeout seconds (self.stall says how)."""
        if self.progress_timeout <= 0 or self.liveness is None or self._summaries is None:
            return False
        if job_phase(job) != PHASE_RUNNING:
            return False
        for fresh in (False, True):  # a stall is told from a read of now, never an older one
            if fresh:
                self.liveness.read(self._summaries, force=True)
            silence = self.liveness.silence(self._summaries, (self.now() - EPOCH).total_seconds())
            if silence is None or silence["silent_seconds"] < self.progress_timeout:
                return False
        self.stall = dict(silence, progress_timeout=self.progress_timeout)
        return True

    def _outcome(self, job):
        if job_phase(job) == PHASE_FAILED:
            return OUTCOME_FAILED
        if phase_reached(job, self.wanted):
            return OUTCOME_REACHED
        return None

    def wait(self):
        self._start = self.clock()
        deadline = self._start + self.timeout
        job = self.service.get_job(self.namespace, self.name)
        self._record(job)
        while True:
            outcome = self._outcome(job)
            if outcome:
                return self._result(job, outcome)
            problems = self._check_pods(job)
            if problems:
                return self._result(job, OUTCOME_POD_PROBLEM, problems)
            if self._gang_stuck(job):
                return self._result(job, OUTCOME_UNSCHEDULABLE)
            if self._stalled(job):
                return self._result(job, OUTCOME_STALLED)
            remaining = deadline - self.clock()
            if remaining <= 0:
                return self._result(job, OUTCOME_TIMEOUT)
            resource_version = (job.get("metadata") or {}).get("resourceVersion")
            round_start = self.clock()
            events = None
            try:
                events = self.service.watch_job(self.namespace, self.name, resource_version,
                                                min(remaining, self.check_interval))
                for event_type, obj in events:
                    if event_type == "DELETED":
                        raise JobNotFoundError(
                            "%s %s/%s was deleted while waiting for it." % (
                                getattr(self.kind, "label", None) or "PyTorchJob", self.namespace, self.name),
                            transitions=self.transitions)
                    if event_type not in ("ADDED", "MODIFIED") or not isinstance(obj, dict):
                        continue
                    job = obj
                    self._record(job)
                    if self._outcome(job) or self.clock() >= deadline:
                        break
            except WatchExpiredError:
                # resourceVersion too old: read the job again and watch from there
                job = self.service.get_job(self.namespace, self.name)
                self._record(job)
            finally:
                close = getattr(events, "close", None)
                if close:
                    close()
            if self.clock() - round_start < 1 and not self._outcome(job):
                # a watch that returns at once must not turn into a busy loop
                self.sleep(min(1, max(0, deadline - self.clock())))


def pods_text(summaries):
    """"<pod> <phase> (<reason>), ..." of pod summaries, or "no pods"."""
    return ", ".join("%s %s%s" % (p["name"], p["phase"], " (%s)" % p["reason"] if p["reason"] else "")
                     for p in summaries) or "no pods"


def _running(summaries):
    """The pod summaries with a running container."""
    return [s for s in summaries if any(c.get("state") == "running" for c in s.get("containers") or [])]


class Rank0Tail(object):
    """Reads the end of rank 0's log while the job runs, for the progress line.

    Until rank 0 is known, the tails of the pods with a running container are read (at most
    MAX_PODS per read); the pod whose tail holds a rank=0 rank line or a line only rank 0 prints
    (trainerlog.RANK0_OUTPUT_RE) is rank 0 from then on, until it is gone. Bounded: TAIL_LINES
    lines per pod and read, at most one read per min_interval seconds. A log that cannot be read
    is skipped (the line then shows the pods' states).
    """

    TAIL_LINES = 40
    MAX_PODS = 8

    def __init__(self, service, namespace, kind, tail_lines=TAIL_LINES, min_interval=10.0, clock=time.monotonic):
        self.service = service
        self.namespace = namespace
        self.kind = kind
        self.tail_lines = tail_lines
        self.min_interval = min_interval
        self.clock = clock
        self.progress = TrainingProgress()
        self.pod = None
        self._last_read = None
        # per pod: (kubelet time in epoch seconds, text) of the newest line read, any line at all
        self.newest = {}
        self._read_ok = False

    def _container(self, summary):
        names = [c["name"] for c in summary.get("containers") or [] if not c.get("init")]
        default = getattr(self.kind, "default_container", None)
        return default if default in names or not names else names[0]

    def _lines(self, summary):
        chunks = self.service.iter_log(self.namespace, summary["name"], container=self._container(summary),
                                       tail_lines=self.tail_lines, timestamps=True)
        parsed = []
        for raw in iter_lines(chunks):
            _kubelet, kubelet_s, text = split_log_timestamp(raw)
            if kubelet_s is not None and kubelet_s >= self.newest.get(summary["name"], (0.0, ""))[0]:
                self.newest[summary["name"]] = (kubelet_s, text)
            line = parse_trainer_line(text)
            if line["kind"] is None:
                continue
            own = parse_time(line.get("time"))
            parsed.append((line, (own - EPOCH).total_seconds() if own else kubelet_s, text))
        return parsed

    def read(self, summaries, force=False):
        """Read the tail of rank 0's log (or find rank 0) unless a read happened less than min_interval
        ago (and not `force`)."""
        now = self.clock()
        if not force and self._last_read is not None and now - self._last_read < self.min_interval:
            return
        self._last_read = now
        running = _running(summaries)
        if self.pod not in [s["name"] for s in running]:
            self.pod = None
        candidates = [s for s in running if s["name"] == self.pod] if self.pod else running[:self.MAX_PODS]
        self._read_ok = False
        for summary in candidates:
            try:
                parsed = self._lines(summary)
            except TrainfleetError:
                continue
            self._read_ok = True
            rank0 = any((line["kind"] == "rank" and line["rank"] == 0) or TRAINER_RANK0_OUTPUT_RE.match(text)
                        for line, _when, text in parsed)
            if not rank0:
                continue
            self.pod = summary["name"]
            for line, when, _text in parsed:
                if line["kind"] != "rank" or line["rank"] == 0:
                    self.progress.feed(line, when)
            return

    def silence(self, summaries, now_s):
        """How long the running pods have been silent, from the last read: {silent_seconds (since the
        newest sign of life: a line any of them printed, or a container start), pod, last_line,
        last_line_at (the newest line read)}, or None when no pod runs or the last read read no log."""
        running = _running(summaries)
        if not running or not self._read_ok:
            return None
        started = [parse_time(c.get("started_at")) for s in running for c in s.get("containers") or []
                   if c.get("state") == "running"]
        starts = [(at - EPOCH).total_seconds() for at in started if at is not None]
        lines = [(self.newest[s["name"]][0], s["name"], self.newest[s["name"]][1]) for s in running if s["name"] in self.newest]
        if not starts and not lines:
            return None
        newest = max(starts + [at for at, _pod, _text in lines])
        at, pod, text = max(lines) if lines else (None, running[0]["name"], None)
        return {"silent_seconds": round(max(0.0, now_s - newest), 1), "pod": pod, "last_line": text,
                "last_line_at": format_time(datetime.datetime.fromtimestamp(at, datetime.timezone.utc)) if lines else None}


def round_progress(reporter, namespace, name, label="PyTorchJob", tail=None, wall=time.time):
    """on_round for JobWaiter: one progress line per round on the progress channel (progress.progress_line):
    the phase, and once rank 0 printed an epoch (read by tail, a Rank0Tail), epoch k/N, loss, accuracy,
    samples/s, the elapsed time and an estimate of the time left."""
    def report(job, summaries, elapsed):
        phase = job_phase(job)
        if tail is not None and phase in (PHASE_RUNNING, PHASE_RESTARTING):
            tail.read(summaries)
        last = tail.progress.last if tail is not None else None
        total = total_epochs(job)
        job_elapsed = job_times(job).get("elapsed_seconds")
        line = progress_line(
            "%s %s/%s" % (label, namespace, name), phase, job_elapsed if job_elapsed is not None else elapsed,
            epoch=(last or {}).get("epoch"), total_epochs=total, loss=(last or {}).get("loss"),
            test_acc=(last or {}).get("test_acc"), samples_per_s=(last or {}).get("samples_per_s"),
            eta=tail.progress.eta_seconds(total, wall()) if last else None, pods=pods_text(summaries))
        reporter.report(line)
    return report


class ProgressLog(object):
    """Records transitions in the system log and, optionally, a JSON-lines file."""

    def __init__(self, module, namespace, name, path=None, label="PyTorchJob"):
        self.module = module
        self.prefix = "%s %s/%s" % (label.lower(), namespace, name)
        self.path = path

    def __call__(self, transition):
        self.module.log("%s: phase %s after %ss (%s)" % (
            self.prefix, transition["phase"], transition["elapsed_seconds"],
            transition.get("reason") or "-"))
        if self.path:
            line = dict(transition, job=self.prefix.split(" ", 1)[1])
            try:
                with open(self.path, "a") as handle:
                    handle.write(json.dumps(line, sort_keys=True) + "\n")
            except (IOError, OSError) as exc:
                self.module.warn("Cannot write progress_file %s: %s" % (self.path, exc))
                self.path = None
