# -*- coding: utf-8 -*-
"""Filter trainjob_pod (plugins/filter/pod.py): module_utils/pod_settings.pod_settings as a filter."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.filter.pod import (
    FilterModule, trainjob_pod, trainjob_prepull_plan, trainjob_prepull_pods)
from ansible_collections.trainfleet.training.plugins.module_utils import pod_settings as ps

SETTINGS = {"name": "job", "cpu_request": "1", "memory_request": "2Gi", "run_as_user": 10001, "run_as_group": 10001,
            "s3_bucket": "bucket", "aws_region": "us-east-1", "gpus": 2, "image_pull_secrets": ["regcred"]}


def test_the_filter_is_registered():
    assert FilterModule().filters() == {"trainjob_pod": trainjob_pod, "trainjob_prepull_plan": trainjob_prepull_plan,
                                        "trainjob_prepull_pods": trainjob_prepull_pods}


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
