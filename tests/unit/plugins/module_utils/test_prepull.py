# -*- coding: utf-8 -*-
"""module_utils/prepull.py: which nodes the pre-pull targets, and where its pods stand."""

from __future__ import annotations

import pytest

from ansible_collections.trainfleet.training.plugins.filter.pod import FilterModule
from ansible_collections.trainfleet.training.plugins.module_utils import prepull

IMAGE = "localhost:5001/trainfleet/trainer:abc"


def node(name, taints=None, images=None, unschedulable=None):
    spec = {"taints": taints} if taints is not None else {}
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    return {"metadata": {"name": name}, "spec": spec,
            "status": {"images": [{"names": names} for names in (images or [])]}}


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


@pytest.mark.parametrize("tolerations, taint, expected", [
    ([], GPU_TAINT, False),
    ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], GPU_TAINT, True),
    ([{"key": "nvidia.com/gpu", "operator": "Exists"}], GPU_TAINT, True),                     # empty effect: every effect
    ([{"operator": "Exists"}], GPU_TAINT, True),                                             # empty key: every key
    ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], GPU_TAINT, False),
    ([{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}], GPU_TAINT, True),  # Equal by default
    ([{"key": "nvidia.com/gpu", "value": "false", "effect": "NoSchedule"}], GPU_TAINT, False),
    ([{"key": "other", "operator": "Exists", "effect": "NoSchedule"}], GPU_TAINT, False),
    (["not-a-dict"], GPU_TAINT, False),
])
def test_tolerates(tolerations, taint, expected):
    assert prepull.tolerates(tolerations, taint) is expected


def test_plan_skips_cordoned_and_untolerated_nodes_and_those_with_the_image():
    nodes = [
        node("cpu-1", images=[["other:1"]]),
        node("cpu-2", images=[[IMAGE, "sha256:x"]]),
        node("cordoned", unschedulable=True),
        node("gpu-1", taints=[GPU_TAINT]),
        node("soft", taints=[{"key": "x", "effect": "PreferNoSchedule"}]),  # not blocking
        node("null-taints", taints=None, images=None),
    ]
    assert prepull.plan(nodes, [], IMAGE) == {
        "eligible": ["cpu-1", "cpu-2", "soft", "null-taints"], "missing": ["cpu-1", "soft", "null-taints"]}
    gpu = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert prepull.plan(nodes, gpu, IMAGE)["eligible"] == ["cpu-1", "cpu-2", "gpu-1", "soft", "null-taints"]
    assert prepull.plan([], [], IMAGE) == {"eligible": [], "missing": []}
    assert prepull.plan(None, None, IMAGE) == {"eligible": [], "missing": []}


def test_pod_states_say_where_each_pod_stands():
    pods = [
        {"metadata": {"name": "p-1"}, "spec": {"nodeName": "n1"},
         "status": {"phase": "Running", "containerStatuses": [{"ready": True, "state": {"running": {}}}]}},
        {"metadata": {"name": "p-2"}, "spec": {"nodeName": "n2"},
         "status": {"phase": "Pending", "containerStatuses": [
             {"ready": False, "state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}}]}},
        {"metadata": {"name": "p-3"}, "spec": {}, "status": {"phase": "Pending", "containerStatuses": None}},
        {"metadata": {"name": "p-4"}, "spec": {"nodeName": "n4"},
         "status": {"containerStatuses": [{"ready": False, "state": None}]}},
    ]
    assert prepull.pod_states(pods) == [
        {"node": "n1", "ready": True, "reason": "", "pull_error": False, "text": "n1: Running "},
        {"node": "n2", "ready": False, "reason": "ImagePullBackOff", "pull_error": True, "text": "n2: ImagePullBackOff not found"},
        {"node": "?", "ready": False, "reason": "", "pull_error": False, "text": "p-3: Pending "},
        {"node": "n4", "ready": False, "reason": "", "pull_error": False, "text": "n4: ? "},
    ]
    assert prepull.pod_states(None) == []


def test_filters_are_the_functions():
    filters = FilterModule().filters()
    assert filters["trainjob_prepull_plan"]([node("a")], [], IMAGE) == {"eligible": ["a"], "missing": ["a"]}
    assert filters["trainjob_prepull_pods"]([]) == []


def test_the_kubelets_cache_sync_hiccup_is_no_pull_error():
    """CreateContainerConfigError "failed to sync secret cache": the kubelet retries it (jobkinds.waiting_is_fatal)."""
    def pod(message):
        return {"metadata": {"name": "p"}, "spec": {"nodeName": "n"}, "status": {"containerStatuses": [
            {"ready": False, "state": {"waiting": {"reason": "CreateContainerConfigError", "message": message}}}]}}
    assert not prepull.pod_states([pod("failed to sync secret cache: timed out waiting for the condition")])[0]["pull_error"]
    assert prepull.pod_states([pod('secret "x" not found')])[0]["pull_error"]
