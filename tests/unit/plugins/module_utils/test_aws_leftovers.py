# -*- coding: utf-8 -*-
"""What an EKS cluster leaves in the account, found without our tags.

Runs module_utils.aws_leftovers against moto's in-process mock of EC2, FSx, CloudFormation and
CloudWatch Logs: an untagged FSx file system in a subnet of the cluster (what the CSI driver makes
without extraTags) must be found, one in someone else's network must not.
"""

from __future__ import annotations

import json

import boto3
import botocore
import pytest

from ansible_collections.trainfleet.training.plugins.module_utils import aws_leftovers

moto = pytest.importorskip("moto")
REGION = "us-east-1"
CLUSTER = "tf"
OURS = {"project": "trainfleet"}
TEMPLATE = json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})


def client(service):
    return boto3.client(service, region_name=REGION)


@pytest.fixture
def account(monkeypatch):
    """The cluster's network, someone else's network, and what each holds (ids in the dict)."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    with moto.mock_aws():
        ec2, fsx = client("ec2"), client("fsx")
        ids = {}
        vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": [
            {"Key": "alpha.eksctl.io/cluster-name", "Value": CLUSTER}]}])["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.0.0/20")["Subnet"]["SubnetId"]
        other_vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": [
            {"Key": "alpha.eksctl.io/cluster-name", "Value": CLUSTER + "2"}]}])["Vpc"]["VpcId"]
        other_subnet = ec2.create_subnet(VpcId=other_vpc, CidrBlock="10.9.0.0/20")["Subnet"]["SubnetId"]
        ids.update(vpc=vpc, subnet=subnet, other_subnet=other_subnet)

        def file_system(subnet_id, tags=None):
            kwargs = dict(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet_id])
            if tags:
                kwargs["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
            return fsx.create_file_system(**kwargs)["FileSystem"]["FileSystemId"]

        ids["fs_untagged"] = file_system(subnet, {"CSIVolumeName": "pvc-1"})
        ids["fs_theirs"] = file_system(other_subnet)
        ids["fs_tagged_elsewhere"] = file_system(other_subnet, dict(OURS, CSIVolumeName="pvc-2"))

        ids["eni_vpc"] = ec2.create_network_interface(SubnetId=subnet, Description="ENI for FSx")[
            "NetworkInterface"]["NetworkInterfaceId"]
        ids["eni_cni"] = ec2.create_network_interface(SubnetId=other_subnet, TagSpecifications=[{
            "ResourceType": "network-interface", "Tags": [{"Key": "cluster.k8s.amazonaws.com/name", "Value": CLUSTER}]}])[
            "NetworkInterface"]["NetworkInterfaceId"]
        ids["eni_eks"] = ec2.create_network_interface(SubnetId=other_subnet, Description="Amazon EKS " + CLUSTER)[
            "NetworkInterface"]["NetworkInterfaceId"]
        ids["eni_theirs"] = ec2.create_network_interface(SubnetId=other_subnet, Description="Amazon EKS " + CLUSTER + "2")[
            "NetworkInterface"]["NetworkInterfaceId"]

        cfn = client("cloudformation")
        cfn.create_stack(StackName="eksctl-%s-cluster" % CLUSTER, TemplateBody=TEMPLATE,
                         Tags=[{"Key": "alpha.eksctl.io/cluster-name", "Value": CLUSTER}, {"Key": "project", "Value": "trainfleet"}])
        cfn.create_stack(StackName="eksctl-%s-nodegroup-cpu" % CLUSTER, TemplateBody=TEMPLATE)
        cfn.create_stack(StackName="renamed-addon", TemplateBody=TEMPLATE,
                         Tags=[{"Key": "alpha.eksctl.io/cluster-name", "Value": CLUSTER}])
        cfn.create_stack(StackName="eksctl-%s2-cluster" % CLUSTER, TemplateBody=TEMPLATE)

        logs = client("logs")
        for name in ("/aws/eks/%s/cluster" % CLUSTER, "/aws/containerinsights/%s/application" % CLUSTER,
                     "/aws/eks/%s2/cluster" % CLUSTER, "/aws/lambda/tf"):
            logs.create_log_group(logGroupName=name)
        yield ids


def by_kind(resources, kind):
    return dict((r["id"], r) for r in resources if r["kind"] == kind)


def test_finds_what_the_cluster_left_and_nothing_else(account):
    resources, skipped, vpcs = aws_leftovers.find(client, CLUSTER, wanted_tags=OURS)
    assert skipped == [] and vpcs == [account["vpc"]]

    fsx = by_kind(resources, "fsx_file_system")
    assert sorted(fsx) == sorted([account["fs_untagged"], account["fs_tagged_elsewhere"]])
    assert "in a subnet of the cluster (%s)" % account["subnet"] in fsx[account["fs_untagged"]]["reason"]
    assert not fsx[account["fs_untagged"]]["ours"]
    assert fsx[account["fs_tagged_elsewhere"]]["reason"] == "carries our tags" and fsx[account["fs_tagged_elsewhere"]]["ours"]

    stacks = by_kind(resources, "cloudformation_stack")
    assert sorted(stacks) == ["eksctl-tf-cluster", "eksctl-tf-nodegroup-cpu", "renamed-addon"]
    assert stacks["eksctl-tf-cluster"]["ours"] and not stacks["eksctl-tf-nodegroup-cpu"]["ours"]
    assert stacks["renamed-addon"]["reason"] == "tagged with the cluster name"
    assert stacks["eksctl-tf-cluster"]["state"] == "CREATE_COMPLETE"

    assert sorted(by_kind(resources, "log_group")) == ["/aws/containerinsights/tf/application", "/aws/eks/tf/cluster"]

    enis = by_kind(resources, "network_interface")
    assert sorted(enis) == sorted([account["eni_vpc"], account["eni_cni"], account["eni_eks"]])
    assert enis[account["eni_vpc"]]["reason"].startswith("in the cluster VPC %s" % account["vpc"])
    assert enis[account["eni_cni"]]["reason"] == "tagged cluster.k8s.amazonaws.com/name"
    assert enis[account["eni_eks"]]["reason"].startswith("EKS control plane interface")

    assert [(r["kind"], r["id"]) for r in resources] == sorted((r["kind"], r["id"]) for r in resources)


def test_untagged_file_system_is_found_without_any_wanted_tags(account):
    resources, _skipped, _vpcs = aws_leftovers.find(client, CLUSTER, services=["fsx"])
    assert [r["id"] for r in resources] == [account["fs_untagged"]]


def test_nothing_left_when_the_network_is_gone(account):
    fsx, ec2 = client("fsx"), client("ec2")
    for key in ("fs_untagged", "fs_theirs", "fs_tagged_elsewhere"):
        fsx.delete_file_system(FileSystemId=account[key])
    for key in ("eni_vpc", "eni_cni", "eni_eks"):
        ec2.delete_network_interface(NetworkInterfaceId=account[key])
    ec2.delete_subnet(SubnetId=account["subnet"])
    ec2.delete_vpc(VpcId=account["vpc"])
    resources, skipped, vpcs = aws_leftovers.find(client, CLUSTER, services=["fsx", "ec2"], wanted_tags=OURS)
    assert (resources, skipped, vpcs) == ([], [], [])


def test_another_cluster_of_a_longer_name_is_not_ours(account):  # pylint: disable=unused-argument
    resources, _skipped, _vpcs = aws_leftovers.find(client, CLUSTER + "2", services=["cloudformation", "logs"])
    assert sorted(r["id"] for r in resources) == ["/aws/eks/tf2/cluster", "eksctl-tf2-cluster"]


def test_a_listing_the_endpoint_lacks_is_skipped_not_failed(account):  # pylint: disable=unused-argument
    error = botocore.exceptions.ClientError({"Error": {"Code": "NotImplemented", "Message": "no fsx here"}},
                                            "DescribeFileSystems")

    class NoFsx(object):
        def get_paginator(self, name):
            raise error

    def clients(service):
        return NoFsx() if service == "fsx" else client(service)

    def not_implemented(exc):
        return isinstance(exc, botocore.exceptions.ClientError) and exc.response["Error"]["Code"] == "NotImplemented"

    resources, skipped, _vpcs = aws_leftovers.find(clients, CLUSTER, services=["fsx", "logs"],
                                                   is_not_implemented=not_implemented)
    assert len(skipped) == 1 and skipped[0].startswith("fsx: ") and "NotImplemented" in skipped[0]
    assert sorted(r["id"] for r in resources) == ["/aws/containerinsights/tf/application", "/aws/eks/tf/cluster"]
    with pytest.raises(botocore.exceptions.ClientError):
        aws_leftovers.find(clients, CLUSTER, services=["fsx"])


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        aws_leftovers.find(client, "")
    with pytest.raises(ValueError):
        aws_leftovers.find(lambda service: None, CLUSTER, services=["iam"])


@pytest.mark.parametrize("tags, wanted, expected", [
    ({"project": "trainfleet", "x": "1"}, {"project": "trainfleet"}, True),
    ({"project": "other"}, {"project": "trainfleet"}, False),
    ({}, {"project": "trainfleet"}, False),
    ({"project": "trainfleet"}, {}, False),
])
def test_carries(tags, wanted, expected):
    assert aws_leftovers.carries(tags, wanted) is expected
