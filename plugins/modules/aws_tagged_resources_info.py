#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: aws_tagged_resources_info
short_description: List the AWS resources that carry a set of tags
description:
  - Lists every resource whose tags include all of I(tags), so a teardown can prove that
    nothing it owns is left.
  - C(tagging) asks the Resource Groups Tagging API of the region (EC2, EKS, S3, FSx,
    CloudFormation and most other regional services).
  - C(iam), C(ecr) and C(s3) list those services directly, because the tagging API does not
    cover IAM (a global service) and local endpoints may not cover all of them.
  - Read-only; never changes anything.
version_added: 0.1.0
author:
  - trainfleet developers (!UNKNOWN)
options:
  tags:
    description: Tags a resource must carry (all of them) to be listed.
    type: dict
    required: true
  services:
    description: Where to look.
    type: list
    elements: str
    choices: [tagging, iam, ecr, s3]
    default: [tagging, iam, ecr, s3]
  iam_path_prefix:
    description: Only IAM roles and policies under this path.
    type: str
    default: /
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: What is left with our tags
  trainfleet.training.aws_tagged_resources_info:
    tags:
      project: trainfleet
    region: us-west-2
  register: leftovers
"""

RETURN = r"""
resources:
  description: The tagged resources found, one per ARN.
  returned: always
  type: list
  elements: dict
  contains:
    arn:
      description: ARN of the resource.
      type: str
    source:
      description: Which listing found it (tagging, iam, ecr, s3).
      type: str
    tags:
      description: Tags of the resource.
      type: dict
arns:
  description: The ARNs of I(resources), sorted.
  returned: always
  type: list
  elements: str
skipped:
  description: Listings that could not run (for example a service the endpoint does not implement), with the reason.
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
from ansible_collections.amazon.aws.plugins.module_utils.tagging import boto3_tag_list_to_ansible_dict


def argspec():
    return dict(
        tags=dict(type="dict", required=True),
        services=dict(
            type="list", elements="str", default=["tagging", "iam", "ecr", "s3"], choices=["tagging", "iam", "ecr", "s3"]
        ),
        iam_path_prefix=dict(type="str", default="/"),
    )


def matches(tags, wanted):
    return all(tags.get(k) == v for k, v in wanted.items())


def list_tagging(module, wanted):
    client = module.client("resourcegroupstaggingapi", retry_decorator=AWSRetry.jittered_backoff())
    filters = [{"Key": k, "Values": [v]} for k, v in wanted.items()]
    for page in client.get_paginator("get_resources").paginate(TagFilters=filters):
        for item in page.get("ResourceTagMappingList", []):
            yield item["ResourceARN"], boto3_tag_list_to_ansible_dict(item.get("Tags", []))


def list_iam(module, wanted):
    client = module.client("iam", retry_decorator=AWSRetry.jittered_backoff())
    prefix = module.params["iam_path_prefix"]
    for page in client.get_paginator("list_roles").paginate(PathPrefix=prefix):
        for role in page.get("Roles", []):
            tags = boto3_tag_list_to_ansible_dict(
                client.list_role_tags(aws_retry=True, RoleName=role["RoleName"]).get("Tags", [])
            )
            if matches(tags, wanted):
                yield role["Arn"], tags
    for page in client.get_paginator("list_policies").paginate(Scope="Local", PathPrefix=prefix):
        for policy in page.get("Policies", []):
            tags = boto3_tag_list_to_ansible_dict(
                client.list_policy_tags(aws_retry=True, PolicyArn=policy["Arn"]).get("Tags", [])
            )
            if matches(tags, wanted):
                yield policy["Arn"], tags


def list_ecr(module, wanted):
    client = module.client("ecr", retry_decorator=AWSRetry.jittered_backoff())
    for page in client.get_paginator("describe_repositories").paginate():
        for repo in page.get("repositories", []):
            tags = boto3_tag_list_to_ansible_dict(
                client.list_tags_for_resource(aws_retry=True, resourceArn=repo["repositoryArn"]).get("tags", []),
                tag_name_key_name="Key",
                tag_value_key_name="Value",
            )
            if matches(tags, wanted):
                yield repo["repositoryArn"], tags


def list_s3(module, wanted):
    client = module.client("s3", retry_decorator=AWSRetry.jittered_backoff())
    partition = "aws"
    region = module.region or ""
    if region.startswith("cn-"):
        partition = "aws-cn"
    elif region.startswith("us-gov-"):
        partition = "aws-us-gov"
    for bucket in client.list_buckets(aws_retry=True).get("Buckets", []):
        try:
            tag_set = client.get_bucket_tagging(aws_retry=True, Bucket=bucket["Name"]).get("TagSet", [])
        except is_boto3_error_code(["NoSuchTagSet", "NoSuchBucket"]):
            continue
        tags = boto3_tag_list_to_ansible_dict(tag_set)
        if matches(tags, wanted):
            yield "arn:{0}:s3:::{1}".format(partition, bucket["Name"]), tags


LISTINGS = dict(tagging=list_tagging, iam=list_iam, ecr=list_ecr, s3=list_s3)


def execute_module(module):
    wanted = {str(k): str(v) for k, v in module.params["tags"].items()}
    if not wanted:
        module.fail_json(msg="tags must name at least one tag, or every resource in the account would match")
    found = {}
    skipped = []
    for service in module.params["services"]:
        try:
            for arn, tags in LISTINGS[service](module, wanted):
                found.setdefault(arn, dict(arn=arn, source=service, tags=tags))
        except is_boto3_error_code(["NotImplemented", "InvalidAction", "UnknownOperationException"]) as e:
            skipped.append("{0}: {1}".format(service, e))
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as e:  # pylint: disable=duplicate-except
            module.fail_json_aws(e, msg="could not list the {0} resources".format(service))
    arns = sorted(found)
    module.exit_json(changed=False, resources=[found[a] for a in arns], arns=arns, skipped=skipped)


def main():
    module = AnsibleAWSModule(argument_spec=argspec(), supports_check_mode=True)
    execute_module(module)


if __name__ == "__main__":
    main()
