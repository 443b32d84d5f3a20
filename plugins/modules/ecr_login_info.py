# -*- coding: utf-8 -*-

# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ecr_login_info
short_description: Get an Amazon ECR registry login and whether an image tag exists
version_added: 0.1.0
description:
  - Calls ECR C(GetAuthorizationToken) and returns the registry endpoint and the user name.
  - The password never leaves the module. It is added to the module's no_log values (masked in
    any message), and with O(docker_login=true) the module logs the Docker CLI in itself
    (C(docker login --password-stdin)), so callers need no task-level C(no_log) that would also
    hide every failure message. Log out (C(docker logout REGISTRY)) after the push.
  - With O(repository_name) and O(image_tag), also reports whether that tag is already in the repository,
    so that a push can be skipped.
  - Read-only; never changes anything.
author:
  - trainfleet developers (!UNKNOWN)
options:
  registry_ids:
    description: AWS account IDs of the registries; the caller's account when empty.
    type: list
    elements: str
    default: []
  repository_name:
    description: Repository to look the tag up in.
    type: str
  image_tag:
    description: Tag to look up in O(repository_name).
    type: str
  docker_login:
    description:
      - Log the Docker CLI in to the registry with the token (C(docker login --password-stdin)).
      - Not done in check mode.
    type: bool
    default: false
  docker_config:
    description: Docker CLI configuration directory (C(docker --config)); the CLI's default when unset.
    type: path
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Log in to ECR
  trainfleet.training.ecr_login_info:
    region: us-west-2
    repository_name: trainfleet/trainer
    image_tag: 0123abcd
  register: ecr

- name: Log the Docker CLI in (no password is returned or printed)
  trainfleet.training.ecr_login_info:
    region: us-west-2
    docker_login: true
"""

RETURN = r"""
registry:
  description: Registry host name (proxy endpoint without scheme).
  returned: success
  type: str
  sample: 123456789012.dkr.ecr.us-west-2.amazonaws.com
username:
  description: User name for docker login.
  returned: success
  type: str
  sample: AWS
logged_in:
  description: Whether the module logged the Docker CLI in (O(docker_login=true), not in check mode).
  returned: success
  type: bool
  sample: true
expires_at:
  description: When the token expires (ISO 8601).
  returned: success
  type: str
  sample: "2026-11-22T14:00:00+00:00"
image_exists:
  description: Whether O(image_tag) exists in O(repository_name); null when they were not given.
  returned: success
  type: bool
  sample: false
"""

import base64

try:
    import botocore
except ImportError:
    pass  # handled by AnsibleAWSModule

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code
from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule
from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry


def argspec():
    return dict(
        registry_ids=dict(type="list", elements="str", default=[]),
        repository_name=dict(type="str"),
        image_tag=dict(type="str"),
        docker_login=dict(type="bool", default=False),
        docker_config=dict(type="path"),
    )


def image_exists(client, repository_name, image_tag):
    try:
        client.describe_images(
            aws_retry=True,
            repositoryName=repository_name,
            imageIds=[dict(imageTag=image_tag)],
        )
    except is_boto3_error_code(["ImageNotFoundException", "RepositoryNotFoundException"]):
        return False
    return True


def execute_module(module):
    client = module.client("ecr", retry_decorator=AWSRetry.jittered_backoff())
    params = {}
    if module.params["registry_ids"]:
        params["registryIds"] = module.params["registry_ids"]
    try:
        data = client.get_authorization_token(aws_retry=True, **params)["authorizationData"][0]
        exists = None
        if module.params["repository_name"] and module.params["image_tag"]:
            exists = image_exists(client, module.params["repository_name"], module.params["image_tag"])
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as e:
        module.fail_json_aws(e, msg="Could not get an ECR login")

    username, password = base64.b64decode(data["authorizationToken"]).decode("utf-8").split(":", 1)
    # Masked wherever the module prints or returns it (a failure message included).
    module.no_log_values.add(password)
    registry = data["proxyEndpoint"].split("://", 1)[-1].rstrip("/")
    expires = data.get("expiresAt")
    logged_in = False
    if module.params["docker_login"] and not module.check_mode:
        docker_login(module, registry, username, password)
        logged_in = True
    module.exit_json(
        changed=False,
        registry=registry,
        username=username,
        logged_in=logged_in,
        expires_at=expires.isoformat() if hasattr(expires, "isoformat") else str(expires),
        image_exists=exists,
    )


def docker_login(module, registry, username, password):
    """docker login with the password on stdin (never on the command line)."""
    docker = module.get_bin_path("docker", required=True)
    argv = [docker]
    if module.params["docker_config"]:
        argv += ["--config", module.params["docker_config"]]
    argv += ["login", "--username", username, "--password-stdin", registry]
    rc, out, err = module.run_command(argv, data=password, binary_data=False)
    if rc != 0:
        module.fail_json(msg="docker login %s failed (rc=%d): %s" % (registry, rc, (err or out).strip()))


def main():
    module = AnsibleAWSModule(
        argument_spec=argspec(),
        required_together=[["repository_name", "image_tag"]],
        supports_check_mode=True,
    )
    execute_module(module)


if __name__ == "__main__":
    main()
