# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The evaluate step: one Kubernetes Job runs ``python3 -m trainer.evaluate MODEL`` in the trainer
image, with the training pods' credentials and volumes, and prints one ``trainfleet-evaluate:``
line (trainer/evaluate.py). This runs that Job to its end and reads the line.

The Job carries the identity of what it evaluates (IDENTITY_ANNOTATION: a hash of its pod spec and
of the run's identity, for example the training job's completion time). A Job that Succeeded with
the same identity is kept and read again (changed=False); any other Job of ours under that name
(another run, a failed evaluation) is deleted and run again. A Job under that name that trainfleet
did not create is never touched: the step refuses.
"""

from __future__ import annotations

import hashlib
import json
import time

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import waiting_is_fatal
from ansible_collections.trainfleet.training.plugins.module_utils.trainerlog import parse_error_line, parse_evaluate_line

try:
    from kubernetes import client as k8s_client
    from kubernetes.client.rest import ApiException
except ImportError:  # pragma: no cover - require_kubernetes() reports it
    k8s_client = None
    ApiException = Exception

IDENTITY_ANNOTATION = "trainfleet.io/evaluates"
MANAGED_BY = ("app.kubernetes.io/managed-by", "trainfleet")
# A pod waiting for one of these reasons will not start without a change.
BLOCKED_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                   "CreateContainerError", "ErrImageNeverPull")
LOG_LINES = 40


class EvaluationError(TrainfleetError):
    """The evaluation Job cannot be run or read (not: the model disagrees, which is a result)."""


def identity(manifest, run_id):
    """The value of IDENTITY_ANNOTATION: what the Job evaluates, with what."""
    spec = json.dumps({"spec": manifest.get("spec"), "run": run_id}, sort_keys=True)
    return hashlib.sha256(spec.encode("utf-8")).hexdigest()[:32]


def job_phase(job):
    """Succeeded | Failed | Running, from a batch/v1 Job (a dict)."""
    status = job.get("status") or {}
    conditions = [c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"]
    if "Complete" in conditions or status.get("succeeded"):
        return "Succeeded"
    if "Failed" in conditions:
        return "Failed"
    return "Running"


def failed_reason(job):
    """'<reason>: <message>' of a Job's Failed condition (DeadlineExceeded, BackoffLimitExceeded), or None."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return "%s: %s" % (condition.get("reason") or "Failed", condition.get("message") or "")
    return None


def blocked_reason(pods):
    """'<reason>: <message>' of a container that cannot start, or None."""
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting_is_fatal(waiting.get("reason"), waiting.get("message"), BLOCKED_REASONS):
                return "%s: %s" % (waiting["reason"], waiting.get("message") or "")
    return None


def read_result(log_text):
    """(evaluation dict or None, the trainer's error message or None, last log line) from the pod's log."""
    evaluation = error = None
    lines = [line for line in (log_text or "").splitlines() if line.strip()]
    for line in lines:
        parsed = parse_evaluate_line(line.strip())
        message = None if parsed is not None else parse_error_line(line)
        if parsed is not None:
            evaluation = parsed
        elif message is not None:
            error = message
    return evaluation, error, (lines[-1] if lines else "")


class EvaluationRunner(object):
    """Runs the evaluation Job (a dict manifest) in its namespace and returns its outcome.

    batch/core: BatchV1Api and CoreV1Api-like objects (the kubernetes client's, or fakes in tests).
    report(text): the progress channel (module_utils/progress.py), called at every poll.
    """

    def __init__(self, batch, core, manifest, run_id="", timeout=600, poll=3.0, report=None,
                 clock=time.monotonic, sleep=time.sleep, request_timeout=(10, 60)):
        self.batch, self.core, self.manifest = batch, core, manifest
        self.namespace = manifest["metadata"]["namespace"]
        self.name = manifest["metadata"]["name"]
        self.identity = identity(manifest, run_id)
        self.keepable = bool(run_id)
        self.timeout, self.poll = timeout, poll
        self.report = report or (lambda text: None)
        self.clock, self.sleep, self.request_timeout = clock, sleep, request_timeout

    # ------------------------------------------------------------------ API calls, errors translated

    def _call(self, what, func, *args, **kwargs):
        kwargs.setdefault("_request_timeout", self.request_timeout)
        try:
            return func(*args, **kwargs)
        except Exception as exc:  # pylint: disable=broad-except  # the API's refusals and urllib3's connection errors
            if not isinstance(exc, ApiException):
                raise EvaluationError("Cannot %s: %s" % (what, exc))
            if getattr(exc, "status", None) == 404:
                return None
            raise EvaluationError("Cannot %s: %s %s" % (what, getattr(exc, "status", ""), getattr(exc, "reason", exc)))

    def _job(self):
        job = self._call("read Job %s/%s" % (self.namespace, self.name),
                         self.batch.read_namespaced_job, self.name, self.namespace)
        return self._dict(job)

    def _pods(self):
        pods = self._call("list the pods of Job %s/%s" % (self.namespace, self.name), self.core.list_namespaced_pod,
                          self.namespace, label_selector="job-name=%s" % self.name)
        items = (self._dict(pods) or {}).get("items") or []
        return sorted(items, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")

    def _log(self, pod):
        """The pod's last LOG_LINES lines; "" while it has none to give (not started, its node gone)."""
        try:
            text = self._call("read the log of pod %s/%s" % (self.namespace, pod), self.core.read_namespaced_pod_log,
                              pod, self.namespace, tail_lines=LOG_LINES)
        except EvaluationError:
            return ""
        return text if isinstance(text, str) else ""

    def _dict(self, obj):
        if obj is None or isinstance(obj, dict):
            return obj
        return self.batch.api_client.sanitize_for_serialization(obj)

    # ------------------------------------------------------------------ the run

    def _decide(self, job):
        """keep | create | replace | wait, or raises when the Job is not ours."""
        if job is None:
            return "create"
        meta = job.get("metadata") or {}
        if (meta.get("labels") or {}).get(MANAGED_BY[0]) != MANAGED_BY[1]:
            raise EvaluationError(
                "Job %s/%s exists and trainfleet did not create it (no label %s=%s): not touching it. Delete it "
                "or choose another run name." % (self.namespace, self.name, MANAGED_BY[0], MANAGED_BY[1]))
        same = (meta.get("annotations") or {}).get(IDENTITY_ANNOTATION) == self.identity
        phase = job_phase(job)
        if same and self.keepable and phase == "Succeeded":
            return "keep"
        if same and phase == "Running":
            return "wait"
        return "replace"

    def _delete(self):
        self._call("delete Job %s/%s" % (self.namespace, self.name), self.batch.delete_namespaced_job, self.name,
                   self.namespace, propagation_policy="Foreground")
        deadline = self.clock() + 120
        while self._job() is not None:
            if self.clock() > deadline:
                raise EvaluationError("Job %s/%s was not gone 120 s after its deletion" % (self.namespace, self.name))
            self.sleep(1)

    def _wait(self, started):
        """The Job's phase once it ended, or ('Blocked', reason) / ('Timeout', ...)."""
        while True:
            job = self._job()
            if job is None:
                raise EvaluationError("Job %s/%s disappeared while it ran" % (self.namespace, self.name))
            phase = job_phase(job)
            pods = self._pods()
            if phase != "Running":
                return phase, failed_reason(job), pods
            blocked = blocked_reason(pods)
            if blocked:
                return "Blocked", blocked, pods
            elapsed = self.clock() - started
            if elapsed > self.timeout:
                return "Timeout", "no result after %d s (timeout %d s)" % (elapsed, self.timeout), pods
            pod = pods[-1] if pods else {}
            state = (pod.get("status") or {}).get("phase") or "no pod yet"
            last = read_result(self._log(pod["metadata"]["name"]))[2] if state == "Running" else ""
            tail = (", last log line: " + last[:200]) if last else ""
            self.report("evaluate Job %s/%s: %s, %d s%s" % (self.namespace, self.name, state, elapsed, tail))
            self.sleep(self.poll)

    def run(self, check_mode=False):
        """{changed, action, phase, evaluation, error, log_tail, pod, seconds}."""
        started = self.clock()
        action = self._decide(self._job())
        result = {"changed": action != "keep", "action": action, "job": "%s/%s" % (self.namespace, self.name),
                  "phase": None, "evaluation": None, "error": None, "log_tail": [], "pod": None}
        if check_mode and action != "keep":
            return dict(result, seconds=0.0)
        if action == "replace":
            self._delete()
        if action in ("create", "replace"):
            manifest = json.loads(json.dumps(self.manifest))
            manifest["metadata"].setdefault("annotations", {})[IDENTITY_ANNOTATION] = self.identity
            self._call("create Job %s/%s" % (self.namespace, self.name), self.batch.create_namespaced_job,
                       self.namespace, manifest)
        phase, reason, pods = self._wait(started)
        result["phase"] = phase
        if pods:
            result["pod"] = pods[-1]["metadata"]["name"]
            text = self._log(result["pod"]) if phase in ("Succeeded", "Failed", "Timeout") else ""
            result["evaluation"], error, _last = read_result(text)
            result["log_tail"] = [line for line in text.splitlines() if line.strip()][-10:]
            # the trainer's own words first; else why the Job ended (its deadline, the pod that never started)
            result["error"] = (error or reason) if phase == "Failed" else (reason or error)
        else:
            result["error"] = reason or "the Job made no pod"
        result["seconds"] = round(self.clock() - started, 1)
        return result


def runner_for(api_client, manifest, **kwargs):
    """An EvaluationRunner on the kubernetes client's APIs."""
    return EvaluationRunner(k8s_client.BatchV1Api(api_client), k8s_client.CoreV1Api(api_client), manifest, **kwargs)
