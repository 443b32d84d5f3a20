#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: aws_cluster_leftovers_info
short_description: List what an EKS cluster left in the account, tagged by us or not
description:
  - Lists the resources of one EKS cluster that keep costing or block a delete after the cluster
    is gone, whether or not they carry trainfleet's tags (the FSx CSI driver, EKS and eksctl
    create them without ours).
  - C(fsx) FSx file systems in the cluster network (VPCs tagged C(alpha.eksctl.io/cluster-name)
    with O(cluster_name), and their subnets), or carrying all of O(tags).
  - C(cloudformation) stacks named C(eksctl-<cluster_name>-*) or tagged with the cluster name,
    in any state but C(DELETE_COMPLETE) (an interrupted create leaves C(ROLLBACK_COMPLETE) or
    C(CREATE_FAILED) stacks).
  - C(logs) log groups under C(/aws/eks/<cluster_name>/) and C(/aws/containerinsights/<cluster_name>/).
  - C(ec2) network interfaces in the cluster network, tagged C(cluster.k8s.amazonaws.com/name)
    with the cluster name (VPC CNI), or described C(Amazon EKS <cluster_name>) (control plane).
  - Read-only; never changes anything. A listing the endpoint does not implement is reported in
    RV(skipped) instead of failing.
version_added: 0.1.0
author:
  - trainfleet developers (!UNKNOWN)
options:
  cluster_name:
    description: Name of the EKS cluster (eksctl's C(metadata.name)).
    type: str
    required: true
  tags:
    description:
      - FSx file systems carrying all of these tags are listed wherever they are (the storage
        step's StorageClass puts them on every file system the CSI driver creates).
      - Every entry of RV(resources) says whether it carries them (RV(resources[].ours)).
      - Empty lists only what is in the cluster network or named after the cluster.
    type: dict
    default: {}
  services:
    description: Where to look.
    type: list
    elements: str
    choices: [fsx, cloudformation, logs, ec2]
    default: [fsx, cloudformation, logs, ec2]
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: What the cluster left behind
  trainfleet.training.aws_cluster_leftovers_info:
    cluster_name: trainfleet
    tags:
      project: trainfleet
    region: us-west-2
  register: cluster_leftovers

- name: Only the FSx file systems in the cluster VPC
  trainfleet.training.aws_cluster_leftovers_info:
    cluster_name: trainfleet
    services: [fsx]
    region: us-west-2
"""

RETURN = r"""
resources:
  description: What was found, sorted by kind and id.
  returned: always
  type: list
  elements: dict
  contains:
    kind:
      description: fsx_file_system, cloudformation_stack, log_group or network_interface.
      type: str
    id:
      description: File system id, stack name, log group name or interface id.
      type: str
    name:
      description: Name of the resource (the id where it has no other).
      type: str
    reason:
      description: Why it belongs to the cluster (in its VPC, named after it, our tags, ...).
      type: str
    state:
      description: Lifecycle, stack status or interface status; empty when the API gives none.
      type: str
    arn:
      description: ARN where the API returns one, else empty.
      type: str
    tags:
      description: Its tags.
      type: dict
    ours:
      description: Whether it carries all of O(tags) (always false when O(tags) is empty).
      type: bool
ids:
  description: C(kind/id) of each of RV(resources).
  returned: always
  type: list
  elements: str
vpc_ids:
  description: The cluster VPCs found (empty when none is left or no listing needed them).
  returned: always
  type: list
  elements: str
skipped:
  description: Listings the endpoint does not implement, with the reason.
  returned: always
  type: list
  elements: str
"""

try:
    import botocore
except ImportError:
    pass  # handled by AnsibleAWSModule

from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule
from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry

from ansible_collections.trainfleet.training.plugins.module_utils import aws_leftovers


def argspec():
    return dict(
        cluster_name=dict(type="str", required=True),
        tags=dict(type="dict", default={}),
        services=dict(type="list", elements="str", default=list(aws_leftovers.SERVICES),
                      choices=list(aws_leftovers.SERVICES)),
    )


def not_implemented(exc):
    """True for an error meaning the endpoint does not implement the call."""
    if not isinstance(exc, botocore.exceptions.ClientError):
        return False
    return exc.response.get("Error", {}).get("Code") in aws_leftovers.NOT_IMPLEMENTED_CODES


def execute_module(module):
    cluster = module.params["cluster_name"]
    if not cluster or not cluster.strip():
        module.fail_json(msg="cluster_name must name the cluster")

    def clients(service):
        return module.client(service, retry_decorator=AWSRetry.jittered_backoff())

    try:
        resources, skipped, vpcs = aws_leftovers.find(clients, cluster, module.params["services"],
                                                      module.params["tags"], is_not_implemented=not_implemented)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as e:
        module.fail_json_aws(e, msg="could not list what cluster {0} left".format(cluster))
    module.exit_json(changed=False, resources=resources, skipped=skipped, vpc_ids=vpcs,
                     ids=["{0}/{1}".format(r["kind"], r["id"]) for r in resources])


def main():
    module = AnsibleAWSModule(argument_spec=argspec(), supports_check_mode=True)
    execute_module(module)


if __name__ == "__main__":
    main()
