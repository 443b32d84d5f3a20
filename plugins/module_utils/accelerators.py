# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The accelerator gate: can the cluster's nodes hold every pod of a job that asks for GPUs, Neuron
devices or EFA interfaces?

A job whose pods ask for more of an extended resource than any schedulable node advertises stays
Pending until its deadline. The train step checks before it submits, in seconds: every pod of the
rendered job that requests one of ACCELERATORS is placed, first fit, on a node that is Ready and
schedulable, carries the pod's nodeSelector labels and tolerates its NoSchedule/NoExecute taints,
against the node's status.allocatable (what the device plugin advertises; other pods' use is not
counted). A pod that fits nowhere fails the check with a message naming the resource, what was
asked and what the cluster has. Jobs that ask for none of them are not checked.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import dig, kind_of, to_int
from ansible_collections.trainfleet.training.plugins.module_utils.pod_settings import EXTENDED_RESOURCES

ACCELERATORS = EXTENDED_RESOURCES
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def _count(value):
    """An extended resource's quantity (a whole number; anything else counts as 0)."""
    number = to_int(value)
    return number if number is not None and number > 0 else 0


def _asks(container, name):
    """The count of ``name`` one container asks for: the larger of its request and limit (Kubernetes
    requires them equal for extended resources)."""
    res = (container or {}).get("resources") or {}
    return max(_count((res.get("limits") or {}).get(name)), _count((res.get("requests") or {}).get(name)))


def _pods(groups):
    return sum(g["replicas"] for g in groups)


def pod_needs(pod_spec):
    """{resource: count} of ACCELERATORS the pod asks for: per container the larger of its request and
    limit (Kubernetes requires them equal for extended resources), summed over the containers; an init
    container runs alone, so the pod needs at least the largest of those."""
    needs = {}
    for name in ACCELERATORS:
        count = max([sum(_asks(c, name) for c in pod_spec.get("containers") or [])]
                    + [_asks(c, name) for c in pod_spec.get("initContainers") or []])
        if count:
            needs[name] = count
    return needs


def demand(job):
    """[{replica_type, replicas, needs, node_selector, tolerations}] of the job's pods that ask for any
    accelerator (an empty list: nothing to check)."""
    result = []
    for rtype, replicas, spec in kind_of(job).pod_templates(job):
        needs = pod_needs(spec)
        if needs and replicas:
            result.append({"replica_type": rtype, "replicas": replicas, "needs": needs,
                           "node_selector": dict(spec.get("nodeSelector") or {}),
                           "tolerations": list(spec.get("tolerations") or [])})
    return result


def tolerates(tolerations, taint):
    """Kubernetes' rule: a toleration matches a taint when the effects match (an empty effect matches
    every effect) and either the operator is Exists (an empty key with Exists matches every taint) or the
    keys and values are equal."""
    for tol in tolerations:
        tol = tol or {}
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        operator = tol.get("operator") or "Equal"
        if operator == "Exists":
            if not tol.get("key") or tol.get("key") == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def node_view(node):
    """The parts of a Node the check reads."""
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in dig(node, "status", "conditions", default=[]) or [])
    allocatable = dig(node, "status", "allocatable", default={}) or {}
    return {"name": dig(node, "metadata", "name", default=""), "ready": ready,
            "unschedulable": bool(dig(node, "spec", "unschedulable")),
            "labels": dig(node, "metadata", "labels", default={}) or {},
            "taints": [t for t in dig(node, "spec", "taints", default=[]) or [] if (t or {}).get("effect") in BLOCKING_EFFECTS],
            "allocatable": {name: _count(allocatable.get(name)) for name in ACCELERATORS}}


def why_not(node, group):
    """Why a node cannot take the group's pods whatever its devices, or None."""
    if not node["ready"]:
        return "not Ready"
    if node["unschedulable"]:
        return "cordoned"
    for key, value in group["node_selector"].items():
        if node["labels"].get(key) != value:
            return "no label %s=%s" % (key, value)
    for taint in node["taints"]:
        if not tolerates(group["tolerations"], taint):
            value = "=" + taint["value"] if taint.get("value") else ""
            return "taint %s%s:%s not tolerated" % (taint.get("key"), value, taint.get("effect"))
    return None


def _asked(groups):
    parts = []
    for group in groups:
        needs = ", ".join("%s: %d" % item for item in sorted(group["needs"].items()))
        parts.append("%d %s pod%s with %s each" % (group["replicas"], group["replica_type"],
                                                   "" if group["replicas"] == 1 else "s", needs))
    return "; ".join(parts)


def check(job, nodes):
    """{ok, checked, message, demand, placed, nodes}: whether every pod of ``job`` that asks for an
    accelerator fits (module docstring). ``nodes`` are Node objects as the API returns them."""
    groups = demand(job)
    if not groups:
        return {"ok": True, "checked": False, "message": "the job asks for no accelerator", "demand": [],
                "placed": {}, "nodes": []}
    views = [node_view(n) for n in nodes or []]
    free = {v["name"]: dict(v["allocatable"]) for v in views}
    placed = {}
    for group in groups:
        eligible = [v for v in views if why_not(v, group) is None]
        for _replica in range(group["replicas"]):
            target = next((v for v in eligible if all(free[v["name"]][r] >= c for r, c in group["needs"].items())), None)
            if target is None:
                return {"ok": False, "checked": True, "message": _shortfall(job, groups, group, views, placed),
                        "demand": groups, "placed": placed, "nodes": views}
            for resource, count in group["needs"].items():
                free[target["name"]][resource] -= count
            placed[target["name"]] = placed.get(target["name"], 0) + 1
    total = _pods(groups)
    return {"ok": True, "checked": True, "demand": groups, "placed": placed, "nodes": views,
            "message": "%s: %d pod%s fit on %s" % (
                _asked(groups), total, "" if total == 1 else "s",
                ", ".join("%s (%d)" % item for item in sorted(placed.items())))}


def _shortfall(job, groups, group, views, placed):
    name = dig(job, "metadata", "name", default="the job")
    resources = sorted(group["needs"])
    have = []
    for view in views:
        reason = why_not(view, group)
        amounts = ", ".join("%s %d" % (r, view["allocatable"][r]) for r in resources)
        have.append("%s: %s%s" % (view["name"], amounts, " (%s)" % reason if reason else ""))
    total = _pods(groups)
    return ("%s asks for %s (%s in all), but the cluster's schedulable nodes that match the pods' nodeSelector and "
            "tolerations advertise too little: only %d of its %d pod%s fit. Allocatable per node: %s. Add or scale up "
            "nodes with the device (the nodegroups step), install its device plugin (device_plugins), or ask for "
            "fewer; set trainjob_accelerator_check=false where an autoscaler adds such nodes for pending pods."
            % (name, _asked(groups), ", ".join("%s %d" % (r, sum(g["replicas"] * g["needs"].get(r, 0) for g in groups))
                                               for r in resources),
               sum(placed.values()), total, "" if total == 1 else "s",
               "; ".join(have) if have else "no nodes"))
