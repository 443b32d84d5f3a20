"""Print, as JSON, what verify.yml checks that no amazon.aws/community.aws info module returns.

Read-only test helper: IAM roles with their trust policy and attached policy documents, and ECR
repositories with scanning, tag mutability, lifecycle policy and tags.
Usage: aws_state.py ENDPOINT_URL REGION '{"roles": [...], "repositories": [...]}'
"""

import json
import sys
from urllib.parse import unquote

import boto3


def as_document(doc):
    return json.loads(unquote(doc)) if isinstance(doc, str) else doc


def roles_state(iam, names):
    out = {}
    for name in names:
        role = iam.get_role(RoleName=name)["Role"]
        attached = []
        for page in iam.get_paginator("list_attached_role_policies").paginate(RoleName=name):
            for pol in page["AttachedPolicies"]:
                meta = iam.get_policy(PolicyArn=pol["PolicyArn"])["Policy"]
                version = iam.get_policy_version(PolicyArn=pol["PolicyArn"], VersionId=meta["DefaultVersionId"])
                attached.append(
                    {
                        "arn": pol["PolicyArn"],
                        "name": pol["PolicyName"],
                        "aws_managed": pol["PolicyArn"].split(":")[4] == "aws",
                        "document": as_document(version["PolicyVersion"]["Document"]),
                    }
                )
        out[name] = {
            "arn": role["Arn"],
            "path": role["Path"],
            "boundary": (role.get("PermissionsBoundary") or {}).get("PermissionsBoundaryArn", ""),
            "trust": as_document(role["AssumeRolePolicyDocument"]),
            "attached": attached,
            "inline": iam.list_role_policies(RoleName=name)["PolicyNames"],
            "tags": {t["Key"]: t["Value"] for t in iam.list_role_tags(RoleName=name)["Tags"]},
        }
    return out


def repositories_state(ecr, names):
    out = {}
    for repo in ecr.describe_repositories(repositoryNames=names)["repositories"]:
        lifecycle = ecr.get_lifecycle_policy(repositoryName=repo["repositoryName"])["lifecyclePolicyText"]
        tags = ecr.list_tags_for_resource(resourceArn=repo["repositoryArn"])["tags"]
        out[repo["repositoryName"]] = {
            "uri": repo["repositoryUri"],
            "scan_on_push": repo["imageScanningConfiguration"]["scanOnPush"],
            "tag_mutability": repo["imageTagMutability"],
            "lifecycle": json.loads(lifecycle),
            "tags": {t["Key"]: t["Value"] for t in tags},
        }
    return out


def main(argv):
    endpoint, region, wanted = argv[1], argv[2], json.loads(argv[3])
    session = boto3.session.Session(region_name=region)
    state = {
        "roles": roles_state(session.client("iam", endpoint_url=endpoint), wanted.get("roles", [])),
        "repositories": repositories_state(session.client("ecr", endpoint_url=endpoint), wanted.get("repositories", [])),
    }
    json.dump(state, sys.stdout, default=str)


if __name__ == "__main__":
    main(sys.argv)
