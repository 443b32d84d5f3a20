#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: eks_cluster_network_info
short_description: The VPC, subnets and cluster security group of an EKS cluster
version_added: 0.1.0
description:
  - Reads the cluster's VPC configuration (C(eks:DescribeCluster)) and its subnets (C(ec2:DescribeSubnets)).
  - Returns the VPC, the cluster security group EKS attaches to every managed node group's nodes, and the
    cluster's subnets with their zone and whether they are private (tagged C(kubernetes.io/role/internal-elb),
    or no public IP on launch).
  - The storage role puts the FSx for Lustre file system the CSI driver creates into one of the private subnets,
    with the cluster security group, so nodes and file system reach each other on every port.
  - Read-only; a missing cluster is reported with O(name) and C(exists=false), not as a failure.
author:
  - trainfleet developers (!UNKNOWN)
options:
  name:
    description: Name of the EKS cluster.
    type: str
    required: true
  availability_zone:
    description: Only return private subnets of this zone in RV(private_subnet_ids) (all zones when empty).
    type: str
    default: ""
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Where the FSx file system of the cluster goes
  trainfleet.training.eks_cluster_network_info:
    name: trainfleet
    availability_zone: us-west-2d
    region: us-west-2
  register: network

- name: Use the first private subnet and the cluster security group
  ansible.builtin.debug:
    msg: "{{ network.private_subnet_ids | first }} {{ network.cluster_security_group_id }}"
"""

RETURN = r"""
exists:
  description: Whether the cluster exists.
  returned: always
  type: bool
vpc_id:
  description: The cluster's VPC.
  returned: always
  type: str
  sample: vpc-0123456789abcdef0
cluster_security_group_id:
  description: The security group EKS created for the cluster and attaches to managed node group nodes.
  returned: always
  type: str
  sample: sg-0123456789abcdef0
security_group_ids:
  description: The additional (control plane) security groups of the cluster.
  returned: always
  type: list
  elements: str
subnets:
  description: The cluster's subnets, sorted by zone.
  returned: always
  type: list
  elements: dict
  sample: [{subnet_id: subnet-0123456789abcdef0, availability_zone: us-west-2a, private: true}]
private_subnet_ids:
  description: The private subnets (of O(availability_zone) when set), first zone first.
  returned: always
  type: list
  elements: str
"""

try:
    import botocore
except ImportError:
    pass  # handled by AnsibleAWSModule

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code
from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule
from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry

from ansible_collections.trainfleet.training.plugins.module_utils.eks_network import (
    cluster_network,
    describe,
    private_subnet_ids,
)


def argspec():
    return dict(
        name=dict(type="str", required=True),
        availability_zone=dict(type="str", default=""),
    )


def read(module):
    """(cluster or None, subnets) as the APIs answer."""
    eks = module.client("eks", retry_decorator=AWSRetry.jittered_backoff())
    try:
        cluster = eks.describe_cluster(aws_retry=True, name=module.params["name"])["cluster"]
    except is_boto3_error_code("ResourceNotFoundException"):
        return None, []
    subnet_ids = cluster_network(cluster)["subnet_ids"]
    if not subnet_ids:
        return cluster, []
    ec2 = module.client("ec2", retry_decorator=AWSRetry.jittered_backoff())
    return cluster, ec2.describe_subnets(aws_retry=True, SubnetIds=subnet_ids).get("Subnets", [])


def execute_module(module):
    try:
        cluster, subnets = read(module)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as e:
        module.fail_json_aws(e, msg="could not read the network of EKS cluster {0}".format(module.params["name"]))
    network = cluster_network(cluster)
    described = describe(subnets)
    module.exit_json(changed=False, exists=cluster is not None, vpc_id=network["vpc_id"],
                     cluster_security_group_id=network["cluster_security_group_id"],
                     security_group_ids=network["security_group_ids"], subnets=described,
                     private_subnet_ids=private_subnet_ids(described, module.params["availability_zone"]))


def main():
    module = AnsibleAWSModule(argument_spec=argspec(), supports_check_mode=True)
    execute_module(module)


if __name__ == "__main__":
    main()
