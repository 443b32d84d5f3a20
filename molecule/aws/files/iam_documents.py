"""Print, as JSON, the trust policy and the attached policies (with their default document) of IAM roles.

Read-only test helper for verify.yml: amazon.aws has no module that returns a managed policy's
document. Usage: iam_documents.py ENDPOINT_URL REGION ROLE [ROLE...]
"""

import json
import sys

import boto3


def main(argv):
    endpoint, region, roles = argv[1], argv[2], argv[3:]
    iam = boto3.client("iam", endpoint_url=endpoint, region_name=region)
    out = {}
    for name in roles:
        role = iam.get_role(RoleName=name)["Role"]
        attached = []
        for page in iam.get_paginator("list_attached_role_policies").paginate(RoleName=name):
            for pol in page["AttachedPolicies"]:
                meta = iam.get_policy(PolicyArn=pol["PolicyArn"])["Policy"]
                doc = iam.get_policy_version(PolicyArn=pol["PolicyArn"], VersionId=meta["DefaultVersionId"])
                attached.append(
                    {
                        "arn": pol["PolicyArn"],
                        "name": pol["PolicyName"],
                        "aws_managed": pol["PolicyArn"].split(":")[4] == "aws",
                        "document": doc["PolicyVersion"]["Document"],
                    }
                )
        inline = iam.list_role_policies(RoleName=name)["PolicyNames"]
        out[name] = {
            "arn": role["Arn"],
            "trust": role["AssumeRolePolicyDocument"],
            "attached": attached,
            "inline": inline,
        }
    json.dump(out, sys.stdout, default=str)


if __name__ == "__main__":
    main(sys.argv)
