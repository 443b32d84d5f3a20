# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The image pre-pull before a job's submission (roles/trainjob/tasks/prepull.yml), in Python.

- ``plan(nodes, tolerations, image)``: of the Nodes the job's node selector picked (their API
  objects), the ones its pods may run on (schedulable, every NoSchedule/NoExecute taint tolerated
  by the job's tolerations) and, of those, the ones whose kubelet does not list the image yet;
- ``pod_states(pods)``: the pre-pull DaemonSet's pods as {node, ready, reason, pull_error, text}:
  pull_error when the container waits for a reason that means its node cannot get the image, the
  text saying why a pod is not ready (its container's waiting reason and message, else its phase).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import waiting_is_fatal

# Why a pre-pull pod's container waits when its node cannot get the image: the pre-pull fails at once.
PULL_ERRORS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError")
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def _get(mapping, *keys):
    """mapping[k1][k2]... with None for anything missing or null on the way."""
    for key in keys:
        if not isinstance(mapping, dict):
            return None
        mapping = mapping.get(key)
    return mapping


def tolerates(tolerations, taint):
    """Whether one of the tolerations lets a pod onto a node with this taint (Kubernetes' rules:
    an empty effect matches every effect; Exists with an empty key matches every key; Equal
    needs the same key and value)."""
    for toleration in tolerations or []:
        if not isinstance(toleration, dict):
            continue
        if (toleration.get("effect") or "") not in ("", taint.get("effect")):
            continue
        key = toleration.get("key") or ""
        if (toleration.get("operator") or "Equal") == "Exists":
            if key in ("", taint.get("key")):
                return True
        elif key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def eligible(node, tolerations):
    """A node the job's pods may be scheduled to: not cordoned, every blocking taint tolerated."""
    if _get(node, "spec", "unschedulable"):
        return False
    taints = _get(node, "spec", "taints") or []
    return all(tolerates(tolerations, taint) for taint in taints
               if isinstance(taint, dict) and taint.get("effect") in BLOCKING_EFFECTS)


def has_image(node, image):
    """Whether the node's kubelet lists the image (any of its names) in status.images."""
    for entry in _get(node, "status", "images") or []:
        if image in ((entry or {}).get("names") or []):
            return True
    return False


def plan(nodes, tolerations, image):
    """{'eligible': node names the job may run on, 'missing': those of them without the image}."""
    chosen = [node for node in nodes or [] if eligible(node, tolerations)]
    return {
        "eligible": [_get(node, "metadata", "name") for node in chosen],
        "missing": [_get(node, "metadata", "name") for node in chosen if not has_image(node, image)],
    }


def pod_states(pods):
    """The pre-pull pods: node, ready, the waiting reason (or ""), pull_error, and a line saying where each stands."""
    states = []
    for pod in pods or []:
        status = (_get(pod, "status", "containerStatuses") or [{}])[0] or {}
        waiting = _get(status, "state", "waiting") or {}
        node = _get(pod, "spec", "nodeName")
        reason = waiting.get("reason") or ""
        states.append({
            "node": node or "?",
            "ready": bool(status.get("ready")),
            "reason": reason,
            "pull_error": waiting_is_fatal(reason, waiting.get("message"), PULL_ERRORS),
            "text": "%s: %s %s" % (node or _get(pod, "metadata", "name"), reason or _get(pod, "status", "phase") or "?",
                                   waiting.get("message") or ""),
        })
    return states
