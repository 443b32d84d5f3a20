#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ecr_repository_tags
short_description: Manage the tags of an ECR repository
description:
  - Sets the tags of an Amazon ECR repository, which C(community.aws.ecs_ecr) cannot do.
  - Changed only when the tags differ; supports check mode and diff.
version_added: 0.1.0
author:
  - trainfleet developers (!UNKNOWN)
options:
  repository_arn:
    description: ARN of the repository.
    type: str
    required: true
  tags:
    description: Tags the repository must have.
    type: dict
    required: true
  purge_tags:
    description: Remove tags that are not in I(tags).
    type: bool
    default: true
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Tag the trainer repository
  trainfleet.training.ecr_repository_tags:
    repository_arn: arn:aws:ecr:us-west-2:123456789012:repository/trainfleet/trainer
    tags:
      project: trainfleet
"""

RETURN = r"""
tags:
  description: Tags of the repository after the change.
  returned: always
  type: dict
  sample: {project: trainfleet}
added:
  description: Tags added or changed.
  returned: always
  type: dict
removed:
  description: Tag keys removed.
  returned: always
  type: list
  elements: str
"""

try:
    import botocore  # pylint: disable=unused-import
except ImportError:
    pass  # handled by AnsibleAWSModule

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code
from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule
from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry
from ansible_collections.amazon.aws.plugins.module_utils.tagging import ansible_dict_to_boto3_tag_list
from ansible_collections.amazon.aws.plugins.module_utils.tagging import boto3_tag_list_to_ansible_dict
from ansible_collections.amazon.aws.plugins.module_utils.tagging import compare_aws_tags


def argspec():
    return dict(
        repository_arn=dict(type="str", required=True),
        tags=dict(type="dict", required=True),
        purge_tags=dict(type="bool", default=True),
    )


def execute_module(module, client):
    arn = module.params["repository_arn"]
    wanted = {str(k): str(v) for k, v in module.params["tags"].items()}
    try:
        current = boto3_tag_list_to_ansible_dict(
            client.list_tags_for_resource(aws_retry=True, resourceArn=arn).get("tags", []),
            tag_name_key_name="Key",
            tag_value_key_name="Value",
        )
    except is_boto3_error_code("RepositoryNotFoundException") as e:  # pylint: disable=duplicate-except
        if module.check_mode:
            module.exit_json(changed=True, tags=wanted, added=wanted, removed=[])
        module.fail_json_aws(e, msg="repository {0} does not exist".format(arn))
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as e:  # pylint: disable=duplicate-except
        module.fail_json_aws(e, msg="could not read the tags of {0}".format(arn))

    to_set, to_remove = compare_aws_tags(current, wanted, purge_tags=module.params["purge_tags"])
    changed = bool(to_set or to_remove)
    after = dict((k, v) for k, v in current.items() if k not in to_remove)
    after.update(to_set)
    if changed and not module.check_mode:
        try:
            if to_remove:
                client.untag_resource(aws_retry=True, resourceArn=arn, tagKeys=to_remove)
            if to_set:
                client.tag_resource(aws_retry=True, resourceArn=arn, tags=ansible_dict_to_boto3_tag_list(to_set))
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as e:
            module.fail_json_aws(e, msg="could not tag {0}".format(arn))
    module.exit_json(
        changed=changed,
        tags=after,
        added=to_set,
        removed=list(to_remove),
        diff=dict(before=dict(tags=current), after=dict(tags=after)),
    )


def main():
    module = AnsibleAWSModule(argument_spec=argspec(), supports_check_mode=True)
    client = module.client("ecr", retry_decorator=AWSRetry.jittered_backoff())
    execute_module(module, client)


if __name__ == "__main__":
    main()
