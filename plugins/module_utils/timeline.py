# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A job's start-up timeline: where the time from submission to the first epoch went.

From what the API server keeps: the job's creationTimestamp (submitted), each pod's PodScheduled
condition (scheduled), the kubelet's Pulling/Pulled events (image pull, and how long it took:
"Successfully pulled image "x" in 1.2s (1.2s including waiting)"; "Container image "x" already
present on machine" when nothing was pulled), the containers' first startedAt (started), and the
job's Succeeded/Failed condition (finished). From rank 0's log: the trainer's rank line (printed
once the rendezvous is complete) and its first epoch line, at the trainer's own time= or, for
older trainers, the kubelet's timestamp of the line.
"""

from __future__ import annotations

import re

from ansible_collections.trainfleet.training.plugins.module_utils.errors import LogReadError
from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import (
    TERMINAL_PHASES,
    dig,
    format_time,
    job_condition,
    job_phase,
    parse_time,
    seconds_between,
)
from ansible_collections.trainfleet.training.plugins.module_utils.jobstatus import pod_summary
from ansible_collections.trainfleet.training.plugins.module_utils.k8s import iter_lines
from ansible_collections.trainfleet.training.plugins.module_utils.progress import elapsed_text
from ansible_collections.trainfleet.training.plugins.module_utils.ranks import TORCHRUN_RDZV_RE, find_rank0, parse_rank_lines
from ansible_collections.trainfleet.training.plugins.module_utils.trainerlog import parse_trainer_line, split_log_timestamp

# How much of each pod's log (with timestamps) is read for the rank and first epoch lines.
LOG_HEAD_BYTES = 256 * 1024

# The steps of the timeline, in order: (key, label).
STEPS = (
    ("submitted", "submitted"),
    ("scheduled", "pods scheduled"),
    ("image_pulled", "images pulled"),
    ("containers_started", "containers started"),
    ("rendezvous", "rendezvous complete"),
    ("first_epoch", "first epoch done"),
    ("finished", "finished"),
)

# Go's time.Duration text as the kubelet prints it: 1.234s, 850ms, 1m2.5s, 1h0m3s, 12µs.
_DURATION_PART_RE = re.compile(r"(?P<value>\d+(?:\.\d+)?)(?P<unit>h|ms|m|s|µs|us|ns)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}
_PULLED_IN_RE = re.compile(r"\bin (?P<duration>(?:\d+(?:\.\d+)?(?:h|ms|m|s|µs|us|ns))+)")
_ALREADY_PRESENT_RE = re.compile(r"already present on machine")


def go_duration_seconds(text):
    """Seconds of a Go duration ("1m2.5s" -> 62.5), or None when it is not one."""
    if not text:
        return None
    parts = list(_DURATION_PART_RE.finditer(text))
    if not parts or "".join(p.group(0) for p in parts) != text:
        return None
    return round(sum(float(p.group("value")) * _UNITS[p.group("unit")] for p in parts), 3)


def _event_time(event):
    return (event.get("firstTimestamp") or event.get("eventTime") or event.get("lastTimestamp")
            or dig(event, "metadata", "creationTimestamp"))


def _pod_events(events, pod_name):
    """The events about pod `pod_name` (core/v1 involvedObject or events.k8s.io regarding)."""
    for event in events or []:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        if involved.get("kind", "Pod") == "Pod" and involved.get("name") == pod_name:
            yield event


def pull_events(events, pod_name):
    """What the kubelet's events say about a pod's image pulls: pull_started, pulled (RFC 3339),
    pull_seconds (summed over the images pulled), images_present (True when every image was
    already on the node, False when one was pulled, None without Pulled events)."""
    started = pulled = None
    seconds = None
    present = None
    for event in _pod_events(events, pod_name):
        when = parse_time(_event_time(event))
        message = event.get("message") or event.get("note") or ""
        if event.get("reason") == "Pulling" and when and (started is None or when < started):
            started = when
        elif event.get("reason") == "Pulled":
            if when and (pulled is None or when > pulled):
                pulled = when
            if _ALREADY_PRESENT_RE.search(message):
                present = True if present is None else present
                continue
            present = False
            match = _PULLED_IN_RE.search(message)
            duration = go_duration_seconds(match.group("duration")) if match else None
            if duration is not None:
                seconds = round((seconds or 0.0) + duration, 3)
    return {"pull_started": format_time(started), "pulled": format_time(pulled),
            "pull_seconds": seconds, "images_present": present}


def _scheduled(pod):
    for cond in dig(pod, "status", "conditions", default=[]) or []:
        if cond.get("type") == "PodScheduled" and str(cond.get("status")).lower() == "true":
            return cond.get("lastTransitionTime")
    return None


def _started_events(events, pod_name):
    """{container name: the first time the kubelet said it started it} from the pod's Started events
    (aggregated by the API server: firstTimestamp is the first start, whatever the restarts since)."""
    firsts = {}
    for event in _pod_events(events, pod_name):
        if event.get("reason") != "Started":
            continue
        involved = event.get("involvedObject") or event.get("regarding") or {}
        match = re.match(r"spec\.containers\{(?P<name>[^}]+)\}$", involved.get("fieldPath") or "")
        when = parse_time(_event_time(event))
        if match and when and (match.group("name") not in firsts or when < firsts[match.group("name")]):
            firsts[match.group("name")] = when
    return firsts


def _containers_started(pod, events=None):
    """When the pod's last main container first started (None until all started): a container that
    restarted counts from its first start (its previous run's startedAt, or the kubelet's first
    Started event), so a restart later in the run does not move the start-up step after it."""
    latest = None
    statuses = dig(pod, "status", "containerStatuses", default=[]) or []
    first_events = _started_events(events, dig(pod, "metadata", "name"))
    for cstatus in statuses:
        state = cstatus.get("state") or {}
        started = parse_time((state.get("running") or state.get("terminated") or {}).get("startedAt"))
        if started is None:
            return None
        earlier = [parse_time(dig(cstatus, "lastState", "terminated", "startedAt")), first_events.get(cstatus.get("name"))]
        started = min([started] + [t for t in earlier if t is not None])
        latest = started if latest is None or started > latest else latest
    return format_time(latest)


def pod_timeline(pod, events):
    """One pod's steps: created, scheduled, pull_started, pulled, pull_seconds, images_present,
    containers_started, with pod, node and the seconds the pull took (events) or None."""
    meta = pod.get("metadata") or {}
    entry = {"pod": meta.get("name"), "node": dig(pod, "spec", "nodeName"),
             "created": meta.get("creationTimestamp"), "scheduled": _scheduled(pod)}
    entry.update(pull_events(events, meta.get("name")))
    entry["containers_started"] = _containers_started(pod, events)
    return entry


def rank0_log_times(lines):
    """(rendezvous, first epoch) times from rank 0's log lines (read with the kubelet's timestamps or
    not): the first rank line and the first epoch line, at the trainer's time= or else the kubelet's.
    A script without a trainfleet-rank line: the rendezvous is torchrun's first "Rendezvous complete"
    line (LOGLEVEL=INFO), at the kubelet's time."""
    rendezvous = first_epoch = torchrun_rendezvous = None
    for raw in lines:
        kubelet_time, _epoch, text = split_log_timestamp(raw)
        parsed = parse_trainer_line(text)
        if parsed["kind"] == "rank" and rendezvous is None:
            rendezvous = parsed.get("time") or kubelet_time
        elif parsed["kind"] == "epoch" and first_epoch is None:
            first_epoch = parsed.get("time") or kubelet_time
        elif torchrun_rendezvous is None and TORCHRUN_RDZV_RE.search(text):
            torchrun_rendezvous = kubelet_time
        if rendezvous and first_epoch:
            break
    return format_time(parse_time(rendezvous or torchrun_rendezvous)), format_time(parse_time(first_epoch))


def read_rank0_times(service, namespace, pods, kind, limit_bytes=LOG_HEAD_BYTES):
    """Read the head of every started pod's log (with timestamps), find rank 0 and its rendezvous and
    first epoch times. Returns (rank-0 pod name or None, rendezvous, first epoch, errors)."""
    heads, errors = {}, []
    summaries = [pod_summary(p, kind) for p in pods]
    for pod, summary in zip(pods, summaries):
        if not any(c.get("started_at") for c in summary.get("containers") or []):
            continue
        try:
            chunks = service.iter_log(namespace, summary["name"], container=kind.container_for(pod),
                                      limit_bytes=limit_bytes, timestamps=True)
            heads[summary["name"]] = list(iter_lines(chunks))
        except LogReadError as exc:
            errors.append(exc.msg)
    if not heads:
        return None, None, None, errors
    infos = dict((name, parse_rank_lines(split_log_timestamp(line)[2] for line in lines)) for name, lines in heads.items())
    decision = find_rank0([s for s in summaries if s["name"] in heads], infos)
    name = decision["pod"]["name"] if decision["pod"] else None
    rendezvous, first_epoch = rank0_log_times(heads.get(name) or [])
    return name, rendezvous, first_epoch, errors


def _latest(values):
    times = [parse_time(v) for v in values]
    if not times or any(t is None for t in times):
        return None  # a step is done when every pod did it
    return format_time(max(times))


def job_timeline(job, pods, events, rank0=None, rendezvous=None, first_epoch=None):
    """The timeline of a job: steps (in order: key, label, time, seconds since the step before that
    has a time, seconds since submitted), per pod entries, rank-0 pod, and summary lines."""
    pod_entries = sorted((pod_timeline(p, events) for p in pods or []), key=lambda e: e["pod"] or "")
    phase = job_phase(job)
    finished = None
    if phase in TERMINAL_PHASES:
        finished = (job_condition(job, phase) or {}).get("last_transition_time") or dig(job, "status", "completionTime")
    times = {
        "submitted": dig(job, "metadata", "creationTimestamp"),
        "scheduled": _latest([e["scheduled"] for e in pod_entries]),
        "image_pulled": _latest([e["pulled"] for e in pod_entries]),
        "containers_started": _latest([e["containers_started"] for e in pod_entries]),
        "rendezvous": rendezvous,
        "first_epoch": first_epoch,
        "finished": format_time(parse_time(finished)),
    }
    steps, previous = [], None
    for key, label in STEPS:
        when = times[key]
        steps.append({"step": key, "label": label, "time": when,
                      "seconds": seconds_between(previous, when) if previous else None,
                      "since_submitted": seconds_between(times["submitted"], when)})
        previous = when or previous
    pulls = [e["pull_seconds"] for e in pod_entries if e["pull_seconds"] is not None]
    result = {"steps": steps, "pods": pod_entries, "rank0_pod": rank0,
              "image_pull_seconds_max": max(pulls) if pulls else None}
    result["lines"] = timeline_lines(result)
    return result


def duration_text(seconds):
    """4.25 -> '4.2s' (tenths below a minute), 75 -> '1m15s'."""
    if seconds < 60:
        return "%.1fs" % max(0.0, seconds)
    return elapsed_text(seconds)


def timeline_lines(timeline):
    """The timeline as text, one line per step with the time it took since the step before:
    "  +4s   images pulled  10:00:12 (pull 3.2s on trainfleet-worker; already present on 1 node(s))"."""
    lines = []
    for step in timeline["steps"]:
        if step["time"] is None:
            lines.append("%-8s %-20s -" % ("", step["label"]))
            continue
        delta = "" if step["seconds"] is None else "+" + duration_text(step["seconds"])
        note = ""
        if step["step"] == "image_pulled":
            pulled = [e for e in timeline["pods"] if e["images_present"] is False]
            present = [e for e in timeline["pods"] if e["images_present"] is True]
            parts = ["pull %.1fs on %s" % (e["pull_seconds"] or 0.0, e["node"] or e["pod"]) for e in pulled]
            if present:
                parts.append("already present for %d pod(s)" % len(present))
            note = " (%s)" % "; ".join(parts) if parts else ""
        elif step["step"] == "rendezvous" and timeline.get("rank0_pod"):
            note = " (rank 0: %s)" % timeline["rank0_pod"]
        lines.append("%-8s %-20s %s%s" % (delta, step["label"], step["time"], note))
    return lines
