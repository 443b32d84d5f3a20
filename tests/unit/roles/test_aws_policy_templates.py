# -*- coding: utf-8 -*-
"""Roles iam, s3, ecr: the JSON policy templates.

Each template is rendered with Jinja2 set up like Ansible's template engine (the core filters and
tests it uses) from explicit variables, parsed as JSON, and checked for least privilege: no
wildcard action in an Allow, every resource scoped to the bucket / prefix / repository, and the
trust policies pinned to one cluster, namespace and service account. The committed deployer
policy example in docs/policies/ must equal a fresh render (a golden file reviewed by hand).
"""

from __future__ import annotations

import json
import os

import jinja2
import pytest

from ansible.plugins.filter.core import FilterModule as CoreFilters
from ansible.plugins.test.core import TestModule as CoreTests

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
GOLDEN_DEPLOYER = os.path.join(ROOT, "docs", "policies", "trainfleet-deployer-policy.json")
GOLDEN_BOUNDARY = os.path.join(ROOT, "docs", "policies", "trainfleet-permissions-boundary.json")

IAM_VARS = {
    "_iam_partition": "aws",
    "_iam_account_id": "123456789012",
    "iam_aws_region": "us-west-2",
    "iam_path": "/trainfleet/",
    "iam_s3_bucket_name": "trainfleet-123456789012-us-west-2",
    "iam_s3_prefix": "training/",
    "iam_s3_kms_key_arn": "",
    "iam_cluster_name": "trainfleet",
    "iam_training_namespace": "trainfleet",
    "iam_training_service_account": "trainfleet-trainer",
    "iam_irsa_oidc_issuer": "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE",
    "iam_ecr_repository_names": ["trainfleet/trainer"],
    "iam_eks_addon_registry_accounts": ["602401143452"],
    "iam_node_managed_policy_names": ["AmazonEKSWorkerNodePolicy"],
    "iam_node_role_name": "trainfleet-node",
    "iam_node_ecr_pull_mode": "scoped",
    "iam_deployer_extra_statements": [],
    "iam_permissions_boundary_name": "trainfleet-boundary",
}
BUCKET_ARN = "arn:aws:s3:::trainfleet-123456789012-us-west-2"
KMS_ARN = "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def render(role, name, variables):
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(ROOT, "roles", role, "templates")),
        trim_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(CoreFilters().filters())
    env.tests.update(CoreTests().tests())
    return env.get_template(name).render(**variables)


def render_json(role, name, **overrides):
    variables = dict(IAM_VARS)
    variables.update(overrides)
    return json.loads(render(role, name, variables))


def actions(statement):
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def resources(statement):
    res = statement["Resource"]
    return [res] if isinstance(res, str) else list(res)


def assert_least_privilege(document, star_ok=()):
    for st in document["Statement"]:
        if st["Effect"] == "Deny":
            continue
        assert st["Effect"] == "Allow", st
        for act in actions(st):
            assert "*" not in act, "wildcard action %s" % act
        if "*" in resources(st):
            assert set(actions(st)) <= set(star_ok), "only %s may use Resource *: %s" % (star_ok, st)


# --------------------------------------------------------------------------- training role


def test_training_policy_is_scoped_to_the_bucket_prefix():
    doc = render_json("iam", "training-s3-policy.json.j2")
    assert_least_privilege(doc)
    by_sid = {st["Sid"]: st for st in doc["Statement"]}
    assert set(by_sid) == {"ListOwnPrefix", "ReadWriteOwnPrefix"}
    assert actions(by_sid["ListOwnPrefix"]) == ["s3:ListBucket"]
    assert by_sid["ListOwnPrefix"]["Resource"] == BUCKET_ARN
    assert by_sid["ListOwnPrefix"]["Condition"] == {"StringLike": {"s3:prefix": ["training/", "training/*"]}}
    assert sorted(actions(by_sid["ReadWriteOwnPrefix"])) == [
        "s3:AbortMultipartUpload",
        "s3:DeleteObject",
        "s3:GetObject",
        "s3:PutObject",
    ]
    assert by_sid["ReadWriteOwnPrefix"]["Resource"] == BUCKET_ARN + "/training/*"


def test_training_policy_gets_the_bucket_key_only_through_s3():
    doc = render_json("iam", "training-s3-policy.json.j2", iam_s3_kms_key_arn=KMS_ARN)
    assert_least_privilege(doc)
    kms = [st for st in doc["Statement"] if st["Sid"] == "UseBucketKeyThroughS3"][0]
    assert kms["Resource"] == KMS_ARN
    assert sorted(actions(kms)) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert kms["Condition"] == {"StringEquals": {"kms:ViaService": "s3.us-west-2.amazonaws.com"}}


def test_pod_identity_trust_is_pinned_to_cluster_namespace_and_service_account():
    doc = render_json("iam", "trust-pod_identity.json.j2")
    (st,) = doc["Statement"]
    assert st["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(actions(st)) == ["sts:AssumeRole", "sts:TagSession"]
    assert st["Condition"]["StringEquals"] == {
        "aws:SourceAccount": "123456789012",
        "aws:RequestTag/eks-cluster-name": "trainfleet",
        "aws:RequestTag/kubernetes-namespace": "trainfleet",
        "aws:RequestTag/kubernetes-service-account": "trainfleet-trainer",
    }


def test_irsa_trust_is_pinned_to_one_service_account_and_audience():
    doc = render_json("iam", "trust-irsa.json.j2")
    (st,) = doc["Statement"]
    issuer = IAM_VARS["iam_irsa_oidc_issuer"]
    assert st["Principal"] == {"Federated": "arn:aws:iam::123456789012:oidc-provider/" + issuer}
    assert actions(st) == ["sts:AssumeRoleWithWebIdentity"]
    assert st["Condition"]["StringEquals"] == {
        issuer + ":sub": "system:serviceaccount:trainfleet:trainfleet-trainer",
        issuer + ":aud": "sts.amazonaws.com",
    }


# --------------------------------------------------------------------------- node role


@pytest.mark.parametrize("mode, expected", [
    ("scoped", ["arn:aws:ecr:us-west-2:123456789012:repository/trainfleet/trainer",
                "arn:aws:ecr:us-west-2:602401143452:repository/*"]),
    ("managed", ["*"]),
])
def test_boundary_scopes_image_pulls_to_our_and_the_addon_repositories(mode, expected):
    """The node role needs AmazonEC2ContainerRegistryPullOnly (the EKS API requires an AWS managed ECR
    policy); the boundary, on the node role and every role eksctl creates, scopes what it grants."""
    doc = render_json("iam", "permissions-boundary.json.j2", iam_node_ecr_pull_mode=mode)
    pull = [st for st in doc["Statement"] if st["Sid"] == "PullOnlyOurAndAddonImages"][0]
    assert sorted(actions(pull)) == ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
    assert resources(pull) == expected
    others = [a for st in doc["Statement"] if st["Sid"] != "PullOnlyOurAndAddonImages" for a in actions(st)]
    assert [a for a in others if a.startswith("ecr:")] == ["ecr:GetAuthorizationToken"]


def test_ec2_trust():
    doc = render_json("iam", "trust-ec2.json.j2")
    assert doc["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    assert actions(doc["Statement"][0]) == ["sts:AssumeRole"]


# --------------------------------------------------------------------------- deployer


def deployer_document(**overrides):
    return render_json("iam", "deployer-policy.json.j2", **overrides)


def test_deployer_policy_names_every_action_and_scopes_resources():
    doc = deployer_document()
    star = [st for st in doc["Statement"] if st["Effect"] == "Allow" and "*" in resources(st)]
    # Resource "*" only for reads, the registry login, service-linked roles (conditioned on the
    # service) and the EC2 network calls eksctl makes (conditioned on the region).
    for st in star:
        assert st["Sid"] in ("ReadOnlyLookupsAndLeftoverCheck", "RegistryLogin", "ServiceLinkedRolesOfEksAndFsx",
                             "ClusterNetworkInOurRegion"), st
        if st["Sid"] == "ReadOnlyLookupsAndLeftoverCheck":
            assert all(a.split(":")[1].startswith(("Describe", "List", "Get")) for a in actions(st)), st
        if st["Sid"] == "ClusterNetworkInOurRegion":
            assert st["Condition"] == {"StringEquals": {"aws:RequestedRegion": "us-west-2"}}
    assert_least_privilege(doc, star_ok=[a for st in star for a in actions(st)])
    all_actions = [a for st in doc["Statement"] for a in actions(st)]
    assert "iam:PassRole" in all_actions
    for st in doc["Statement"]:
        if st["Effect"] == "Deny":
            continue
        for res in resources(st):
            if res.startswith("arn:aws:iam::123456789012:"):
                # Our path, eksctl's roles of our cluster, the OIDC provider, and the node role (at path /,
                # named exactly: eksctl drops a role path from instanceRoleARN).
                assert res == "arn:aws:iam::123456789012:role/trainfleet-node" or res.startswith((
                    "arn:aws:iam::123456789012:role/trainfleet/", "arn:aws:iam::123456789012:policy/trainfleet/",
                    "arn:aws:iam::123456789012:role/eksctl-trainfleet-",
                    "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/")), res
            if res.startswith("arn:aws:s3:::"):
                assert res.startswith(BUCKET_ARN)


def test_deployer_policy_requires_and_protects_the_boundary():
    doc = deployer_document()
    boundary = "arn:aws:iam::123456789012:policy/trainfleet/trainfleet-boundary"
    by_sid = {st["Sid"]: st for st in doc["Statement"]}
    for sid in ("CreateAndChangeRolesOnlyWithTheBoundary", "AttachOnlyNamedPoliciesToRolesWithTheBoundary"):
        assert by_sid[sid]["Condition"]["StringEquals"]["iam:PermissionsBoundary"] == boundary
    deny = by_sid["DenyRoleChangesWithoutTheBoundary"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"StringNotEquals": {"iam:PermissionsBoundary": boundary}}
    assert set(actions(deny)) >= {"iam:CreateRole", "iam:AttachRolePolicy", "iam:PutRolePolicy", "iam:PutRolePermissionsBoundary"}
    assert by_sid["DenyRemovingTheBoundary"]["Effect"] == "Deny"
    assert "iam:DeleteRolePermissionsBoundary" in actions(by_sid["DenyRemovingTheBoundary"])
    protect = by_sid["DenyChangingTheBoundaryPolicy"]
    assert protect["Effect"] == "Deny" and resources(protect) == [boundary]
    assert {"iam:CreatePolicyVersion", "iam:DeletePolicy", "iam:SetDefaultPolicyVersion"} <= set(actions(protect))


def test_permissions_boundary_golden_file_is_current():
    rendered = render("iam", "permissions-boundary.json.j2", IAM_VARS)
    if os.environ.get("TRAINFLEET_UPDATE_GOLDEN"):
        with open(GOLDEN_BOUNDARY, "w", encoding="utf-8") as handle:
            handle.write(rendered.rstrip("\n") + "\n")
    with open(GOLDEN_BOUNDARY, encoding="utf-8") as handle:
        assert json.loads(handle.read()) == json.loads(rendered), (
            "docs/policies/trainfleet-permissions-boundary.json is stale: rerun with TRAINFLEET_UPDATE_GOLDEN=1"
        )


def test_deployer_policy_takes_extra_statements():
    extra = {"Sid": "Eks", "Effect": "Allow", "Action": ["eks:DescribeCluster"], "Resource": ["arn:aws:eks:us-west-2:123456789012:cluster/trainfleet"]}
    doc = deployer_document(iam_deployer_extra_statements=[extra])
    assert doc["Statement"][-1] == extra


def test_deployer_policy_golden_file_is_current():
    rendered = render("iam", "deployer-policy.json.j2", IAM_VARS)
    if os.environ.get("TRAINFLEET_UPDATE_GOLDEN"):
        with open(GOLDEN_DEPLOYER, "w", encoding="utf-8") as handle:
            handle.write(rendered.rstrip("\n") + "\n")
    with open(GOLDEN_DEPLOYER, encoding="utf-8") as handle:
        assert json.loads(handle.read()) == json.loads(rendered), (
            "docs/policies/trainfleet-deployer-policy.json is stale: rerun with TRAINFLEET_UPDATE_GOLDEN=1 and review the diff"
        )


# --------------------------------------------------------------------------- s3 and ecr


@pytest.mark.parametrize(
    "region,partition",
    [("us-west-2", "aws"), ("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov")],
)
def test_bucket_policy_denies_plain_http(region, partition):
    doc = json.loads(render("s3", "tls-only-policy.json.j2", {"s3_bucket_name": "b-1", "s3_aws_region": region}))
    (st,) = doc["Statement"]
    assert st["Effect"] == "Deny"
    assert st["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert st["Resource"] == ["arn:%s:s3:::b-1" % partition, "arn:%s:s3:::b-1/*" % partition]


def test_ecr_lifecycle_policy():
    doc = json.loads(render("ecr", "lifecycle-policy.json.j2", {"ecr_untagged_expire_days": 7, "ecr_keep_images": 30}))
    rules = sorted(doc["rules"], key=lambda r: r["rulePriority"])
    assert [r["rulePriority"] for r in rules] == [1, 2]
    assert rules[0]["selection"] == {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days", "countNumber": 7}
    # The catch-all rule must have the highest priority number (ECR rejects it otherwise).
    assert rules[-1]["selection"]["tagStatus"] == "any"
    assert rules[-1]["selection"]["countNumber"] == 30
