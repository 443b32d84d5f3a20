# -*- coding: utf-8 -*-
"""aws_cluster_leftovers_info finds an untagged FSx file system of the cluster.

Runs the module against moto's in-process mock: the FSx CSI driver's file system carries none of
our tags, yet it is listed (it is in a subnet of the cluster VPC), with what makes it the cluster's.
"""

from __future__ import annotations

import json

import boto3
import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.trainfleet.training.plugins.modules import aws_cluster_leftovers_info as module

moto = pytest.importorskip("moto")
REGION = "us-east-1"


@pytest.fixture
def cluster_left_fsx(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    with moto.mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": [
            {"Key": "alpha.eksctl.io/cluster-name", "Value": "tfmol"}]}])["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.0.0/20")["Subnet"]["SubnetId"]
        fs = boto3.client("fsx", region_name=REGION).create_file_system(
            FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet])["FileSystem"]["FileSystemId"]
        yield fs


def run(capsys, args):
    with patch_module_args(dict({"region": REGION}, **args)):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def test_untagged_file_system_of_the_cluster_is_listed(cluster_left_fsx, capsys):  # pylint: disable=redefined-outer-name
    result = run(capsys, {"cluster_name": "tfmol", "tags": {"project": "trainfleet"}})
    assert result["changed"] is False and result["skipped"] == []
    assert result["ids"] == ["fsx_file_system/" + cluster_left_fsx]
    entry = result["resources"][0]
    assert entry["ours"] is False and entry["tags"] == {} and "in a subnet of the cluster" in entry["reason"]
    assert len(result["vpc_ids"]) == 1


def test_other_cluster_finds_nothing(cluster_left_fsx, capsys):  # pylint: disable=redefined-outer-name,unused-argument
    result = run(capsys, {"cluster_name": "other", "services": ["fsx", "ec2", "logs", "cloudformation"]})
    assert result["ids"] == [] and result["resources"] == []


def test_blank_cluster_name_is_refused(cluster_left_fsx, capsys):  # pylint: disable=redefined-outer-name,unused-argument
    result = run(capsys, {"cluster_name": " "})
    assert result["failed"] and "cluster_name must name the cluster" in result["msg"]


def test_not_implemented_is_told_from_other_errors():
    botocore = pytest.importorskip("botocore")
    lacking = botocore.exceptions.ClientError({"Error": {"Code": "NotImplemented"}}, "DescribeFileSystems")
    denied = botocore.exceptions.ClientError({"Error": {"Code": "AccessDenied"}}, "DescribeFileSystems")
    assert module.not_implemented(lacking) and not module.not_implemented(denied)
    assert not module.not_implemented(ValueError("x"))
