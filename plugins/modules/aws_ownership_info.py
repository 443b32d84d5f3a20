# -*- coding: utf-8 -*-

# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: aws_ownership_info
short_description: Tell whether named S3 buckets, ECR repositories and IAM roles and policies exist and are ours
version_added: 0.1.0
description:
  - For each named resource, reads whether it exists and its tags, and calls it I(owned) when its
    tags include all of O(tags) (the tags trainfleet puts on what it creates).
  - The s3, ecr, iam and teardown roles call it before they create, reconfigure or delete anything,
    so a resource of the same name that trainfleet did not create is never taken over or deleted
    (unless the role's C(*_adopt_existing) is set).
  - Read-only; never changes anything.
author:
  - trainfleet developers (!UNKNOWN)
options:
  tags:
    description: Tags a resource must carry (all of them) to be ours.
    type: dict
    required: true
  s3_buckets:
    description: Bucket names.
    type: list
    elements: str
    default: []
  ecr_repositories:
    description: Repository names.
    type: list
    elements: str
    default: []
  iam_roles:
    description: Role names.
    type: list
    elements: str
    default: []
  iam_policies:
    description: Customer managed policy names under O(iam_path).
    type: list
    elements: str
    default: []
  iam_path:
    description: IAM path of O(iam_policies).
    type: str
    default: /
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Which of the named resources exist without our tags
  trainfleet.training.aws_ownership_info:
    tags:
      project: trainfleet
    s3_buckets: [trainfleet-data]
    region: us-west-2
  register: ownership
"""

RETURN = r"""
resources:
  description: One entry per named resource.
  returned: always
  type: list
  elements: dict
  contains:
    kind:
      description: s3_bucket, ecr_repository, iam_role or iam_policy.
      type: str
    name:
      description: Name of the resource.
      type: str
    exists:
      description: Whether it exists.
      type: bool
    owned:
      description: Whether it exists and carries all of O(tags).
      type: bool
    tags:
      description: Its tags (empty when it does not exist or has none).
      type: dict
unowned:
  description: The entries of RV(resources) that exist but are not ours.
  returned: always
  type: list
  elements: dict
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
        s3_buckets=dict(type="list", elements="str", default=[]),
        ecr_repositories=dict(type="list", elements="str", default=[]),
        iam_roles=dict(type="list", elements="str", default=[]),
        iam_policies=dict(type="list", elements="str", default=[]),
        iam_path=dict(type="str", default="/"),
    )


def s3_bucket(module, name):
    client = module.client("s3", retry_decorator=AWSRetry.jittered_backoff())
    try:
        client.head_bucket(aws_retry=True, Bucket=name)
    except is_boto3_error_code(["404", "NoSuchBucket", "NotFound"]):
        return False, {}
    try:
        tag_set = client.get_bucket_tagging(aws_retry=True, Bucket=name).get("TagSet", [])
    except is_boto3_error_code(["NoSuchTagSet"]):
        tag_set = []
    return True, boto3_tag_list_to_ansible_dict(tag_set)


def ecr_repository(module, name):
    client = module.client("ecr", retry_decorator=AWSRetry.jittered_backoff())
    try:
        repo = client.describe_repositories(aws_retry=True, repositoryNames=[name])["repositories"][0]
    except is_boto3_error_code(["RepositoryNotFoundException"]):
        return False, {}
    tags = client.list_tags_for_resource(aws_retry=True, resourceArn=repo["repositoryArn"]).get("tags", [])
    return True, boto3_tag_list_to_ansible_dict(tags, tag_name_key_name="Key", tag_value_key_name="Value")


def iam_role(module, name):
    client = module.client("iam", retry_decorator=AWSRetry.jittered_backoff())
    try:
        client.get_role(aws_retry=True, RoleName=name)
    except is_boto3_error_code(["NoSuchEntity"]):
        return False, {}
    return True, boto3_tag_list_to_ansible_dict(client.list_role_tags(aws_retry=True, RoleName=name).get("Tags", []))


def iam_policy(module, name):
    client = module.client("iam", retry_decorator=AWSRetry.jittered_backoff())
    path = module.params["iam_path"]
    for page in client.get_paginator("list_policies").paginate(Scope="Local", PathPrefix=path):
        for policy in page.get("Policies", []):
            if policy["PolicyName"] == name and policy["Path"] == path:
                tags = client.list_policy_tags(aws_retry=True, PolicyArn=policy["Arn"]).get("Tags", [])
                return True, boto3_tag_list_to_ansible_dict(tags)
    return False, {}


KINDS = (("s3_bucket", "s3_buckets", s3_bucket), ("ecr_repository", "ecr_repositories", ecr_repository),
         ("iam_role", "iam_roles", iam_role), ("iam_policy", "iam_policies", iam_policy))


def execute_module(module):
    wanted = {str(k): str(v) for k, v in module.params["tags"].items()}
    if not wanted:
        module.fail_json(msg="tags must name at least one tag: every resource would be ours")
    resources = []
    for kind, option, read in KINDS:
        for name in module.params[option]:
            try:
                exists, tags = read(module, name)
            except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as e:
                module.fail_json_aws(e, msg="could not read {0} {1}".format(kind, name))
            owned = exists and all(tags.get(k) == v for k, v in wanted.items())
            resources.append(dict(kind=kind, name=name, exists=exists, owned=owned, tags=tags))
    module.exit_json(changed=False, resources=resources,
                     unowned=[r for r in resources if r["exists"] and not r["owned"]])


def main():
    module = AnsibleAWSModule(argument_spec=argspec(), supports_check_mode=True)
    execute_module(module)


if __name__ == "__main__":
    main()
