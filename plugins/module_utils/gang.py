# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gang that cannot be placed: the Volcano PodGroup of a training job.

With gang scheduling (the training operator's --gang-scheduler-name=volcano, mpi-operator's
--gang-scheduling=volcano) the operator creates one PodGroup (scheduling.volcano.sh/v1beta1)
per job, named after the job and owned by it, and creates no pod while the PodGroup is Pending.
A job whose gang does not fit therefore stays Created (PyTorchJob) with no pod at all, and only
the PodGroup says why:

- status.phase: Pending (not admitted by the enqueue action), Inqueue (admitted, not yet
  placed), Running, Completed, Unknown;
- status.conditions: type Unschedulable (status True, reason NotEnoughResources, message such as
  "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; Pending:
  2 Unschedulable") or Scheduled;
- the scheduler's events on it, e.g. Warning Unschedulable "0/3 nodes are unavailable: 3
  Insufficient cpu." or "pod group is not ready, 2 Pending, 2 minAvailable".

describe() reads them (a missing PodGroup CRD or a caller not allowed to read PodGroups is no
error: there is simply no podgroup), podgroup_summary() shapes them for trainjob_info and
pending_reason() says, naming the resources, why the gang is not placed.
"""

from __future__ import annotations

import re

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError

GROUP = "scheduling.volcano.sh"
VERSION = "v1beta1"
PLURAL = "podgroups"
KIND = "PodGroup"

# PodGroup phases in which the gang is not placed yet.
WAITING_PHASES = ("", "Pending", "Inqueue")
# Job phases in which a PodGroup is worth reading (no pod has started).
JOB_WAITING_PHASES = ("Pending", "Created")
# Reasons of the scheduler's Warning events on a PodGroup that mean "does not fit".
UNSCHEDULABLE_EVENT_REASONS = ("Unschedulable", "FailedScheduling", "NotEnoughResources")

_INSUFFICIENT_RE = re.compile(r"Insufficient ([A-Za-z0-9./_-]+)")
_TOO_MANY_PODS_RE = re.compile(r"\bToo many pods\b")


def _condition_summary(cond):
    return {
        "type": cond.get("type"),
        "status": cond.get("status"),
        "reason": cond.get("reason"),
        "message": cond.get("message"),
        "last_transition_time": cond.get("lastTransitionTime"),
    }


def _is_true(cond):
    return str(cond.get("status", "")).lower() == "true"


def _event_time(event):
    return (event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
            or (event.get("metadata") or {}).get("creationTimestamp") or "")


def podgroup_events(events, name):
    """The events about the PodGroup `name` (not those about the job of the same name), oldest first."""
    own = [e for e in events or []
           if (e.get("involvedObject") or {}).get("kind") == KIND
           and (e.get("involvedObject") or {}).get("name") == name]
    return sorted(own, key=_event_time)


def unschedulable_condition(podgroup):
    """The last true Unschedulable condition of a PodGroup dict, or None."""
    conds = [c for c in ((podgroup or {}).get("status") or {}).get("conditions") or []
             if c.get("type") == "Unschedulable" and _is_true(c)]
    return conds[-1] if conds else None


def _scheduled_after(podgroup, unschedulable):
    """True when a Scheduled condition is newer than the Unschedulable one (the gang got placed since)."""
    scheduled = [c for c in ((podgroup or {}).get("status") or {}).get("conditions") or []
                 if c.get("type") == "Scheduled" and _is_true(c)]
    if not scheduled or unschedulable is None:
        return bool(scheduled) and unschedulable is None
    return (scheduled[-1].get("lastTransitionTime") or "") > (unschedulable.get("lastTransitionTime") or "")


def podgroup_summary(podgroup, events=None):
    """{name, phase, min_member, queue, running, succeeded, failed, conditions, message, events}."""
    meta = podgroup.get("metadata") or {}
    spec = podgroup.get("spec") or {}
    status = podgroup.get("status") or {}
    name = meta.get("name")
    own_events = podgroup_events(events, name)
    warnings = [e for e in own_events if e.get("type") == "Warning"]
    unschedulable = unschedulable_condition(podgroup)
    message = None
    if unschedulable is not None and unschedulable.get("message"):
        message = unschedulable["message"]
    elif warnings:
        message = warnings[-1].get("message")
    return {
        "name": name,
        "phase": status.get("phase") or "",
        "min_member": spec.get("minMember"),
        "min_resources": spec.get("minResources"),
        "queue": spec.get("queue"),
        "running": status.get("running", 0),
        "succeeded": status.get("succeeded", 0),
        "failed": status.get("failed", 0),
        "conditions": [_condition_summary(c) for c in status.get("conditions") or []],
        "message": message.strip() if isinstance(message, str) else message,
        "events": [{"time": _event_time(e), "type": e.get("type"), "reason": e.get("reason"),
                    "message": (e.get("message") or "").strip(), "count": e.get("count")}
                   for e in own_events[-5:]],
    }


def insufficient_resources(texts):
    """The resource names of "Insufficient <resource>" in the texts, in order of first mention."""
    found = []
    for text in texts:
        for match in _INSUFFICIENT_RE.finditer(text or ""):
            resource = match.group(1).rstrip(".,;")
            if resource not in found:
                found.append(resource)
        if _TOO_MANY_PODS_RE.search(text or "") and "pods" not in found:
            found.append("pods")
    return found


def pending_reason(job_phase, podgroup, events=None):
    """Why the gang of a job in job_phase is not placed, naming the resources; None when it is not stuck.

    podgroup: the raw PodGroup dict. Stuck means the job has no running pod yet (Pending/Created),
    the PodGroup is Pending or Inqueue, and it has a true Unschedulable condition (newer than any
    Scheduled one) or the scheduler's Warning events say it does not fit."""
    if podgroup is None or job_phase not in JOB_WAITING_PHASES:
        return None
    summary = podgroup_summary(podgroup, events)
    if summary["phase"] not in WAITING_PHASES:
        return None
    unschedulable = unschedulable_condition(podgroup)
    if unschedulable is not None and _scheduled_after(podgroup, unschedulable):
        unschedulable = None
    warnings = [e for e in podgroup_events(events, summary["name"])
                if e.get("type") == "Warning" and e.get("reason") in UNSCHEDULABLE_EVENT_REASONS]
    if unschedulable is None and not warnings:
        return None
    texts = []
    if unschedulable is not None and unschedulable.get("message"):
        texts.append(unschedulable["message"].strip())
    for event in reversed(warnings):
        text = (event.get("message") or "").strip()
        if text and text not in texts:
            texts.append(text)
        if len(texts) >= 3:
            break
    resources = insufficient_resources(texts)
    head = "gang %s cannot be placed (PodGroup %s, minMember %s%s)" % (
        summary["name"], summary["phase"] or "without a phase", summary["min_member"],
        ", queue %s" % summary["queue"] if summary["queue"] else "")
    if resources:
        head += ": insufficient %s" % ", ".join(resources)
    elif summary.get("min_resources"):
        # Volcano's enqueue action refuses a gang bigger than the queue or the cluster before any
        # pod exists (reason NotEnoughResources): name what the gang as a whole asks for.
        head += ": %s for the gang's minResources %s" % (
            (unschedulable or {}).get("reason") or "not enough resources",
            ", ".join("%s=%s" % (key, value) for key, value in sorted(summary["min_resources"].items())))
    return "%s; %s" % (head, "; ".join(texts)) if texts else head


def describe(service, namespace, name, job_phase):
    """(podgroup summary, pending_reason) of the job `name`, or (None, None) when the job is past
    waiting, has no PodGroup, or PodGroups cannot be read (no Volcano: 404; not allowed: 403)."""
    if job_phase not in JOB_WAITING_PHASES:
        return None, None
    get = getattr(service, "get_podgroup", None)
    if get is None:
        return None, None
    try:
        podgroup = get(namespace, name)
    except TrainfleetError:
        # what the PodGroup says is an addition to the job's state, never a reason to fail
        return None, None
    if not podgroup:
        return None, None
    try:
        events = service.list_events(namespace, [name])
    except TrainfleetError:
        events = []
    summary = podgroup_summary(podgroup, events)
    return summary, pending_reason(job_phase, podgroup, events)


class UnschedulableClock(object):
    """How long a waiting job's gang has been seen unschedulable (pending_timeout of trainjob_info).

    observe(job_phase, now) reads the PodGroup (describe) and returns (summary, reason, seconds):
    seconds since the gang was first seen stuck without a break, 0 when it is not stuck."""

    def __init__(self, service, namespace, name):
        self.service = service
        self.namespace = namespace
        self.name = name
        self.since = None
        self.summary = None
        self.reason = None

    def observe(self, job_phase, now):
        self.summary, self.reason = describe(self.service, self.namespace, self.name, job_phase)
        if not self.reason:
            self.since = None
            return self.summary, None, 0.0
        if self.since is None:
            self.since = now
        return self.summary, self.reason, round(now - self.since, 3)
