# -*- coding: utf-8 -*-
"""eksctl_cluster on AnsibleAWSModule: the common AWS options read the state and reach eksctl.

The module reads the cluster with the region, endpoint and credentials of the common AWS options,
and runs eksctl with the same credentials (as AWS_* environment variables), never with others.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.plugins.modules.test_eksctl_cluster import AWS_ENV, run_module

RECORDER = """#!/bin/sh
echo "$AWS_REGION $AWS_ACCESS_KEY_ID $AWS_SECRET_ACCESS_KEY $AWS_SESSION_TOKEN $*" >> %s
"""


@pytest.fixture
def eks(monkeypatch):
    moto = pytest.importorskip("moto")
    for key, value in AWS_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    with moto.mock_aws():
        import boto3
        client = boto3.client("eks", region_name="eu-west-1")
        client.create_cluster(name="trainfleet", version="1.33", roleArn="arn:aws:iam::123456789012:role/eks",
                              resourcesVpcConfig={"subnetIds": ["subnet-1", "subnet-2"]})
        client.create_nodegroup(clusterName="trainfleet", nodegroupName="cpu",
                                nodeRole="arn:aws:iam::123456789012:role/n", subnets=["subnet-1"],
                                instanceTypes=["m5.large"], scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": 2})
        yield client


def test_common_options_read_the_state_and_reach_eksctl(eks, capsys, tmp_path):
    log = tmp_path / "calls"
    fake = tmp_path / "eksctl"
    fake.write_text(RECORDER % log)
    fake.chmod(0o755)
    groups = [dict(name="cpu", instance_types=["m5.large"], min_size=1, desired_size=3, max_size=3)]
    # aws_region: the common alias; the cluster exists in eu-west-1 only (the environment says us-west-2).
    run_module(dict(name="trainfleet", aws_region="eu-west-1", cluster_must_exist=True, managed_node_groups=groups,
                    eksctl_path=str(fake), access_key="AKIDEXAMPLE", secret_key="secret", session_token="token"))
    res = json.loads(capsys.readouterr().out)
    assert "failed" not in res, res
    assert res["current"]["nodegroups"]["cpu"]["desiredCapacity"] == 2
    calls = log.read_text().splitlines()
    assert len(calls) == 1
    assert calls[0].startswith("eu-west-1 AKIDEXAMPLE secret token scale nodegroup --cluster trainfleet --region eu-west-1")


def test_region_is_required(monkeypatch, capsys):
    for key in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(key, raising=False)
    run_module(dict(name="trainfleet", eksctl_path="/nonexistent/eksctl"))
    res = json.loads(capsys.readouterr().out)
    assert res["failed"] is True and res["msg"] == "missing required arguments: region"
