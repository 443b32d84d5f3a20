# -*- coding: utf-8 -*-
"""Filters of plugins/filter/pod.py: trainjob_pod (module_utils/pod_settings.pod_settings as a filter),
the pre-pull filters, node_lost_tolerations, controller_pod_patch and pods_blocked."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.filter.pod import (
    FilterModule, controller_pod_patch, node_lost_tolerations, pods_blocked, trainjob_pod, trainjob_prepull_plan,
    trainjob_prepull_pods)
from ansible_collections.trainfleet.training.plugins.module_utils import pod_settings as ps

SETTINGS = {"name": "job", "cpu_request": "1", "memory_request": "2Gi", "run_as_user": 10001, "run_as_group": 10001,
            "s3_bucket": "bucket", "aws_region": "us-east-1", "gpus": 2, "image_pull_secrets": ["regcred"]}


def test_the_filter_is_registered():
    assert FilterModule().filters() == {"trainjob_pod": trainjob_pod, "trainjob_prepull_plan": trainjob_prepull_plan,
                                        "trainjob_prepull_pods": trainjob_prepull_pods,
                                        "node_lost_tolerations": node_lost_tolerations,
                                        "controller_pod_patch": controller_pod_patch, "pods_blocked": pods_blocked}


def _pod(name, *waits, init=()):
    def statuses(entries):
        return [{"name": f"c{i}", "state": {"waiting": {"reason": reason, "message": message}} if reason else {"running": {}}}
                for i, (reason, message) in enumerate(entries)]
    return {"metadata": {"name": name}, "status": {"containerStatuses": statuses(waits), "initContainerStatuses": statuses(init)}}


def test_pods_blocked_names_the_containers_that_cannot_start_and_not_the_kubelets_cache_hiccup():
    reasons = ["ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError"]
    pods = [_pod("copy-a", ("ContainerCreating", ""), (None, None)),
            _pod("copy-b", ("CreateContainerConfigError", "failed to sync secret cache: timed out waiting for the condition")),
            _pod("copy-c", ("CreateContainerConfigError", 'secret "aws" not found'), init=[("ImagePullBackOff", "Back-off pulling")]),
            {"metadata": {"name": "copy-d"}, "status": {}}]
    assert pods_blocked(pods, reasons) == ["copy-c/c0: ImagePullBackOff: Back-off pulling",
                                           'copy-c/c0: CreateContainerConfigError: secret "aws" not found']
    assert pods_blocked(pods, ["ErrImagePull"]) == [] and pods_blocked(None, reasons) == []


def test_node_lost_tolerations_are_the_train_steps_own():
    assert node_lost_tolerations(30) == ps.node_lost_tolerations([], 30) == [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]
    assert node_lost_tolerations("45")[0]["tolerationSeconds"] == 45
    with pytest.raises(AnsibleFilterError, match=r"node_lost_tolerations: node_lost_toleration_seconds must be an integer, got 'soon'"):
        node_lost_tolerations("soon")


def test_the_filter_returns_pod_settings():
    result = FilterModule().filters()["trainjob_pod"](SETTINGS)
    assert result == ps.pod_settings(SETTINGS)
    assert list(result) == list(ps.OUTPUT_KEYS)
    assert result["resources"] == {"requests": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": 2},
                                   "limits": {"memory": "2Gi", "nvidia.com/gpu": 2}}
    assert result["image_pull_secrets"] == [{"name": "regcred"}]
    assert result["output_dir"] == "s3://bucket/training/job"


@pytest.mark.parametrize("settings, message", [
    ({k: v for k, v in SETTINGS.items() if k != "aws_region"}, "trainjob_pod: missing required job setting: aws_region"),
    (dict(SETTINGS, pytorchjob_name="x"), "trainjob_pod: unknown job settings pytorchjob_name"),
    ("job", "trainjob_pod: the job settings must be a dict, got str"),
])
def test_errors_become_filter_errors(settings, message):
    with pytest.raises(AnsibleFilterError, match=message):
        trainjob_pod(settings)
