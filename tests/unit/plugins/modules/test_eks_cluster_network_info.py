# -*- coding: utf-8 -*-
"""eks_cluster_network_info and module_utils/eks_network.py: where the storage step puts FSx.

The cluster's own VPC configuration decides: a private subnet of the cluster (in the asked zone)
and the cluster security group EKS attaches to managed node group nodes. The AWS answers are
fixtures shaped like describe_cluster / describe_subnets of an eksctl-created cluster (the local
AWS endpoint does not return vpcId or clusterSecurityGroupId).
"""

from __future__ import absolute_import, division, print_function

import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
for _path in (ROOT, os.path.join(ROOT, ".collections")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from ansible_collections.trainfleet.training.plugins.module_utils import eks_network as N  # noqa: E402
from ansible_collections.trainfleet.training.plugins.modules import eks_cluster_network_info as M  # noqa: E402

CLUSTER = {
    "name": "trainfleet",
    "resourcesVpcConfig": {
        "vpcId": "vpc-0a",
        "clusterSecurityGroupId": "sg-0cluster",
        "securityGroupIds": ["sg-0controlplane"],
        "subnetIds": ["subnet-pub-a", "subnet-priv-b", "subnet-priv-a", "subnet-pub-b"],
    },
}


def subnet(subnet_id, zone, public, tagged=True):
    tags = [{"Key": "alpha.eksctl.io/cluster-name", "Value": "trainfleet"}]
    if tagged:
        tags.append({"Key": "kubernetes.io/role/elb" if public else N.INTERNAL_ELB_TAG, "Value": "1"})
    return {"SubnetId": subnet_id, "AvailabilityZone": zone, "MapPublicIpOnLaunch": public, "Tags": tags}


SUBNETS = [subnet("subnet-pub-a", "us-west-2a", True), subnet("subnet-priv-b", "us-west-2b", False),
           subnet("subnet-priv-a", "us-west-2a", False), subnet("subnet-pub-b", "us-west-2b", True)]


# ---------------------------------------------------------------- module_utils
def test_cluster_network_reads_the_vpc_config():
    assert N.cluster_network(CLUSTER) == {"vpc_id": "vpc-0a", "cluster_security_group_id": "sg-0cluster",
                                          "security_group_ids": ["sg-0controlplane"],
                                          "subnet_ids": CLUSTER["resourcesVpcConfig"]["subnetIds"]}
    assert N.cluster_network(None) == {"vpc_id": "", "cluster_security_group_id": "", "security_group_ids": [],
                                       "subnet_ids": []}


@pytest.mark.parametrize("given, private", [
    (subnet("s", "z", public=False), True),
    (subnet("s", "z", public=True), False),
    # Untagged (a VPC eksctl did not create): whether instances get public addresses decides.
    (subnet("s", "z", public=False, tagged=False), True),
    (subnet("s", "z", public=True, tagged=False), False),
    # The tags win: a private subnet that maps public IPs by mistake is still the private one, a
    # public one (internet-facing load balancers) that does not is still public.
    (dict(subnet("s", "z", public=False), MapPublicIpOnLaunch=True), True),
    (dict(subnet("s", "z", public=True), MapPublicIpOnLaunch=False), False),
])
def test_private_subnets(given, private):
    assert N.is_private(given) is private


def test_private_subnets_first_zone_first_or_in_the_asked_zone():
    described = N.describe(SUBNETS)
    assert [s["subnet_id"] for s in described] == ["subnet-priv-a", "subnet-pub-a", "subnet-priv-b", "subnet-pub-b"]
    assert N.private_subnet_ids(described) == ["subnet-priv-a", "subnet-priv-b"]
    assert N.private_subnet_ids(described, "us-west-2b") == ["subnet-priv-b"]
    assert N.private_subnet_ids(described, "us-west-2d") == []


# ---------------------------------------------------------------- the module, with recorded AWS answers
class NotFound(Exception):
    pass


class FakeClient(object):
    def __init__(self, calls, cluster, subnets):
        self.calls, self.cluster, self.subnets = calls, cluster, subnets

    def describe_cluster(self, aws_retry, name):
        self.calls.append(("describe_cluster", name))
        if self.cluster is None:
            raise NotFound(name)
        return {"cluster": self.cluster}

    def describe_subnets(self, aws_retry, SubnetIds):  # noqa: N803 (the boto3 keyword)
        self.calls.append(("describe_subnets", tuple(SubnetIds)))
        return {"Subnets": [s for s in self.subnets if s["SubnetId"] in SubnetIds]}


class FakeModule(object):
    def __init__(self, cluster, subnets=(), zone=""):
        self.params = {"name": "trainfleet", "availability_zone": zone}
        self.calls = []
        self.client_ = FakeClient(self.calls, cluster, list(subnets))
        self.result = None

    def client(self, service, retry_decorator=None):
        self.calls.append(("client", service))
        return self.client_

    def exit_json(self, **result):
        self.result = result
        raise SystemExit(0)

    def fail_json_aws(self, exc, msg):
        raise AssertionError(msg)


@pytest.fixture
def not_found(monkeypatch):
    monkeypatch.setattr(M, "is_boto3_error_code", lambda code: NotFound)


def run(module):
    with pytest.raises(SystemExit):
        M.execute_module(module)
    return module.result


def test_module_returns_the_cluster_network(not_found):
    res = run(FakeModule(CLUSTER, SUBNETS, zone="us-west-2b"))
    assert res["changed"] is False and res["exists"] is True
    assert res["vpc_id"] == "vpc-0a" and res["cluster_security_group_id"] == "sg-0cluster"
    assert res["private_subnet_ids"] == ["subnet-priv-b"]
    assert [s["subnet_id"] for s in res["subnets"] if s["private"]] == ["subnet-priv-a", "subnet-priv-b"]


def test_module_reads_only_the_clusters_subnets(not_found):
    module = FakeModule(CLUSTER, SUBNETS + [subnet("subnet-other", "us-west-2a", False)])
    res = run(module)
    assert res["private_subnet_ids"] == ["subnet-priv-a", "subnet-priv-b"]
    assert ("describe_subnets", tuple(CLUSTER["resourcesVpcConfig"]["subnetIds"])) in module.calls


def test_module_reports_a_missing_cluster_without_failing(not_found):
    module = FakeModule(None)
    res = run(module)
    assert res["exists"] is False and res["private_subnet_ids"] == [] and res["cluster_security_group_id"] == ""
    assert ("client", "ec2") not in module.calls


def test_module_documents_every_option():
    import yaml
    doc = yaml.safe_load(M.DOCUMENTATION)
    assert set(doc["options"]) == set(M.argspec())
    assert set(yaml.safe_load(M.RETURN)) == {"exists", "vpc_id", "cluster_security_group_id", "security_group_ids",
                                             "subnets", "private_subnet_ids"}
