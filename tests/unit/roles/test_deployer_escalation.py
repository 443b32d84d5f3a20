# -*- coding: utf-8 -*-
"""The deployer policy cannot be escalated to admin.

A small IAM evaluator of our own (explicit Deny beats Allow, an Allow is needed, a permissions
boundary must also allow; `*`/`?` wildcards in actions and ARNs; the condition operators the
policies use, with AWS's rule that a negated operator is true when the key is absent) evaluates
the rendered deployer policy and permissions boundary:

- the escalation path is denied: a role created or changed without the boundary, the boundary
  removed, replaced or edited, an AWS policy such as AdministratorAccess attached;
- a role the deployer makes trust itself and holding an "Action": "*" policy (allowed: it carries
  the boundary) still cannot do anything in IAM, STS or other buckets: the boundary caps it;
- every step's calls are still allowed (iam, s3, registry, cluster/eksctl, storage, teardown).
"""

from __future__ import annotations

import re

import pytest

from tests.unit.roles.test_aws_policy_templates import IAM_VARS, render_json

ACCT = "123456789012"
IAM = "arn:aws:iam::%s:" % ACCT
BOUNDARY = IAM + "policy/trainfleet/trainfleet-boundary"
OTHER_BOUNDARY = IAM + "policy/trainfleet/open-boundary"
REGION = "us-west-2"
VARS = dict(IAM_VARS, iam_permissions_boundary_name="trainfleet-boundary")


# --------------------------------------------------------------------------- the evaluator


def _list(value):
    return [value] if isinstance(value, str) else list(value)


def _glob(pattern, value, case_insensitive=False):
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    flags = re.I if case_insensitive else 0
    return re.fullmatch(regex, value, flags | re.S) is not None


def _condition_holds(operator, key, expected, context):
    expected = _list(expected)
    present = key in context
    actual = _list(context[key]) if present else []
    if operator in ("StringEquals", "ArnEquals"):
        return present and any(a == e for a in actual for e in expected)
    if operator in ("StringLike", "ArnLike"):
        return present and any(_glob(e, a) for a in actual for e in expected)
    if operator in ("StringNotEquals", "ArnNotEquals"):
        return not present or not any(a == e for a in actual for e in expected)
    if operator in ("StringNotLike", "ArnNotLike"):
        return not present or not any(_glob(e, a) for a in actual for e in expected)
    raise AssertionError("operator %s is not modelled" % operator)


def _statement_applies(statement, action, resource, context):
    if not any(_glob(pattern, action, case_insensitive=True) for pattern in _list(statement["Action"])):
        return False
    if not any(_glob(pattern, resource) for pattern in _list(statement["Resource"])):
        return False
    for operator, keys in (statement.get("Condition") or {}).items():
        for key, expected in keys.items():
            if not _condition_holds(operator, key, expected, context):
                return False
    return True


def decide(policies, action, resource, context=None, boundary=None):
    """'Allow', or 'Deny' (explicit) or 'ImplicitDeny', for one request."""
    context = dict(context or {})
    context.setdefault("aws:RequestedRegion", REGION)
    documents = list(policies) + ([boundary] if boundary else [])
    for document in documents:
        for statement in document["Statement"]:
            if statement["Effect"] == "Deny" and _statement_applies(statement, action, resource, context):
                return "Deny"
    allowed = any(_statement_applies(st, action, resource, context)
                  for document in policies for st in document["Statement"] if st["Effect"] == "Allow")
    if allowed and boundary is not None:
        allowed = any(_statement_applies(st, action, resource, context)
                      for st in boundary["Statement"] if st["Effect"] == "Allow")
    return "Allow" if allowed else "ImplicitDeny"


def test_evaluator_basics():
    allow = {"Statement": [{"Effect": "Allow", "Action": "s3:Get*", "Resource": "arn:aws:s3:::b/*"}]}
    deny = {"Statement": [{"Effect": "Deny", "Action": "s3:GetObject", "Resource": "*"}]}
    assert decide([allow], "s3:GetObject", "arn:aws:s3:::b/k") == "Allow"
    assert decide([allow], "S3:getobject", "arn:aws:s3:::b/k") == "Allow"
    assert decide([allow], "s3:PutObject", "arn:aws:s3:::b/k") == "ImplicitDeny"
    assert decide([allow, deny], "s3:GetObject", "arn:aws:s3:::b/k") == "Deny"
    assert decide([allow], "s3:GetObject", "arn:aws:s3:::c/k") == "ImplicitDeny"
    qmark = {"Statement": [{"Effect": "Allow", "Action": "s3:Get?bject", "Resource": "arn:aws:s3:::b/?"}]}
    assert decide([qmark], "s3:GetObject", "arn:aws:s3:::b/k") == "Allow"
    assert decide([qmark], "s3:GetObject", "arn:aws:s3:::b/kk") == "ImplicitDeny"
    neg = {"Statement": [{"Effect": "Deny", "Action": "*", "Resource": "*",
                          "Condition": {"StringNotEquals": {"k": "v"}}}]}
    assert decide([allow, neg], "s3:GetObject", "arn:aws:s3:::b/k") == "Deny"  # key absent: negation holds
    assert decide([allow, neg], "s3:GetObject", "arn:aws:s3:::b/k", {"k": "v"}) == "Allow"
    boundary = {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}
    star = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    assert decide([star], "iam:CreateUser", "*", boundary=boundary) == "ImplicitDeny"
    assert decide([star], "s3:GetObject", "arn:aws:s3:::x/y", boundary=boundary) == "Allow"


# --------------------------------------------------------------------------- the documents


@pytest.fixture(scope="module")
def deployer():
    return render_json("iam", "deployer-policy.json.j2", **VARS)


@pytest.fixture(scope="module")
def boundary():
    return render_json("iam", "permissions-boundary.json.j2", **VARS)


def with_boundary(arn=BOUNDARY, **more):
    return dict({"iam:PermissionsBoundary": arn}, **more)


ROLE = IAM + "role/trainfleet/trainfleet-training"
# The node role: at path / (eksctl 0.210.0 drops a role path from instanceRoleARN).
NODE_ROLE = IAM + "role/trainfleet-node"
# AmazonEC2ContainerRegistryPullOnly, the AWS managed policy the node role carries (the EKS managed
# node group API requires it): image pulls on every repository, capped by the boundary.
PULL_ONLY = {"Statement": [{"Effect": "Allow", "Action": [
    "ecr:GetAuthorizationToken", "ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer",
    "ecr:BatchGetImage", "ecr:BatchImportUpstreamImage"], "Resource": "*"}]}
WORKER_NODE = {"Statement": [{"Effect": "Allow", "Action": [
    "ec2:DescribeInstances", "ec2:DescribeRouteTables", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets",
    "ec2:DescribeVolumes", "ec2:DescribeVolumesModifications", "ec2:DescribeVpcs", "eks:DescribeCluster",
    "eks-auth:AssumeRoleForPodIdentity"], "Resource": "*"}]}
EVIL_ROLE = IAM + "role/trainfleet/evil"
EVIL_POLICY = IAM + "policy/trainfleet/evil-star"
ADMIN = "arn:aws:iam::aws:policy/AdministratorAccess"


@pytest.mark.parametrize("action, resource, context", [
    # a role without the boundary, or with another one
    ("iam:CreateRole", EVIL_ROLE, {}),
    ("iam:CreateRole", EVIL_ROLE, with_boundary(OTHER_BOUNDARY)),
    ("iam:CreateRole", IAM + "role/eksctl-trainfleet-cluster-ServiceRole", {}),
    ("iam:PutRolePolicy", EVIL_ROLE, {}),
    ("iam:AttachRolePolicy", EVIL_ROLE, {"iam:PolicyARN": EVIL_POLICY}),
    ("iam:PutRolePermissionsBoundary", ROLE, with_boundary(OTHER_BOUNDARY)),
    # removing or editing the boundary
    ("iam:DeleteRolePermissionsBoundary", ROLE, with_boundary()),
    ("iam:CreatePolicyVersion", BOUNDARY, {}),
    ("iam:SetDefaultPolicyVersion", BOUNDARY, {}),
    ("iam:DeletePolicy", BOUNDARY, {}),
    ("iam:CreatePolicy", BOUNDARY, {}),
    # admin policies, even on a role with the boundary
    ("iam:AttachRolePolicy", ROLE, with_boundary(**{"iam:PolicyARN": ADMIN})),
    ("iam:AttachRolePolicy", ROLE, with_boundary(**{"iam:PolicyARN": "arn:aws:iam::aws:policy/IAMFullAccess"})),
    # anything outside our path, cluster, bucket, repositories
    ("iam:CreateRole", IAM + "role/admin", with_boundary()),
    ("iam:UpdateAssumeRolePolicy", IAM + "role/OrganizationAccountAccessRole", {}),
    ("iam:CreatePolicyVersion", IAM + "policy/admin-policy", {}),
    ("iam:PassRole", IAM + "role/admin", {"iam:PassedToService": "ec2.amazonaws.com"}),
    # the node role's exact name at path / does not open other root-path roles
    ("iam:PassRole", IAM + "role/trainfleet-node-admin", {"iam:PassedToService": "eks.amazonaws.com"}),
    ("iam:CreateRole", IAM + "role/trainfleet-nodes", with_boundary()),
    ("iam:CreateRole", NODE_ROLE, {}),
    ("iam:AttachRolePolicy", NODE_ROLE, with_boundary(**{"iam:PolicyARN": ADMIN})),
    ("iam:CreateUser", IAM + "user/evil", {}),
    ("iam:CreateAccessKey", IAM + "user/admin", {}),
    ("sts:AssumeRole", IAM + "role/admin", {}),
    ("s3:DeleteBucket", "arn:aws:s3:::someone-elses-bucket", {}),
    ("ecr:DeleteRepository", "arn:aws:ecr:us-west-2:%s:repository/other" % ACCT, {}),
    ("eks:DeleteCluster", "arn:aws:eks:us-west-2:%s:cluster/production" % ACCT, {}),
    ("cloudformation:DeleteStack", "arn:aws:cloudformation:us-west-2:%s:stack/production/x" % ACCT, {}),
    ("ec2:DeleteVpc", "arn:aws:ec2:eu-west-1:%s:vpc/vpc-1" % ACCT, {"aws:RequestedRegion": "eu-west-1"}),
])
def test_escalation_steps_are_denied(deployer, action, resource, context):
    assert decide([deployer], action, resource, context) != "Allow", (action, resource, context)


def test_the_self_trusting_star_role_is_capped_by_the_boundary(deployer, boundary):
    # What the deployer may do: a policy with Action "*" on our path, a role carrying the boundary,
    # the policy attached, the trust changed to itself.
    assert decide([deployer], "iam:CreatePolicy", EVIL_POLICY) == "Allow"
    assert decide([deployer], "iam:CreateRole", EVIL_ROLE, with_boundary()) == "Allow"
    assert decide([deployer], "iam:AttachRolePolicy", EVIL_ROLE, with_boundary(**{"iam:PolicyARN": EVIL_POLICY})) == "Allow"
    assert decide([deployer], "iam:UpdateAssumeRolePolicy", EVIL_ROLE) == "Allow"
    # What that role can then do: the boundary's services only; nothing of IAM, STS, other buckets.
    star = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    for action, resource in [
        ("iam:AttachRolePolicy", IAM + "role/admin"),
        ("iam:CreateUser", IAM + "user/evil"),
        ("iam:PutRolePolicy", EVIL_ROLE),
        ("iam:DeleteRolePermissionsBoundary", EVIL_ROLE),
        ("iam:CreatePolicyVersion", BOUNDARY),
        ("sts:AssumeRole", IAM + "role/admin"),
        ("organizations:LeaveOrganization", "*"),
        ("s3:GetObject", "arn:aws:s3:::payroll/2026.csv"),
        ("secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-west-2:%s:secret:db" % ACCT),
        ("kms:Decrypt", "arn:aws:kms:us-west-2:%s:key/other" % ACCT),
    ]:
        assert decide([star], action, resource, boundary=boundary) != "Allow", (action, resource)
    assert decide([star], "iam:CreateServiceLinkedRole", "*", {"iam:AWSServiceName": "iam.amazonaws.com"},
                  boundary=boundary) != "Allow"


@pytest.mark.parametrize("action, resource, context", [
    # iam step
    ("sts:GetCallerIdentity", "*", {}),
    ("iam:CreatePolicy", IAM + "policy/trainfleet/trainfleet-training-s3", {}),
    ("iam:CreateRole", ROLE, with_boundary()),
    ("iam:AttachRolePolicy", ROLE, with_boundary(**{"iam:PolicyARN": IAM + "policy/trainfleet/trainfleet-training-s3"})),
    ("iam:CreateRole", NODE_ROLE, with_boundary()),
    ("iam:AttachRolePolicy", NODE_ROLE,
     with_boundary(**{"iam:PolicyARN": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"})),
    ("iam:AttachRolePolicy", NODE_ROLE,
     with_boundary(**{"iam:PolicyARN": "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly"})),
    ("iam:TagRole", NODE_ROLE, {}),
    ("iam:UpdateAssumeRolePolicy", ROLE, {}),
    ("iam:TagRole", ROLE, {}),
    ("iam:PassRole", ROLE, {"iam:PassedToService": "pods.eks.amazonaws.com"}),
    # s3 step
    ("s3:CreateBucket", "arn:aws:s3:::trainfleet-123456789012-us-west-2", {}),
    ("s3:PutBucketPolicy", "arn:aws:s3:::trainfleet-123456789012-us-west-2", {}),
    ("s3:GetBucketTagging", "arn:aws:s3:::trainfleet-123456789012-us-west-2", {}),
    # registry and trainer_image
    ("ecr:CreateRepository", "arn:aws:ecr:us-west-2:%s:repository/trainfleet/trainer" % ACCT, {}),
    ("ecr:DescribeImages", "arn:aws:ecr:us-west-2:%s:repository/trainfleet/trainer" % ACCT, {}),
    ("ecr:PutImage", "arn:aws:ecr:us-west-2:%s:repository/trainfleet/trainer" % ACCT, {}),
    ("ecr:GetAuthorizationToken", "*", {}),
    # cluster and nodegroups (eksctl, CloudFormation, EC2, logs)
    ("eks:CreateCluster", "arn:aws:eks:us-west-2:%s:cluster/trainfleet" % ACCT, {}),
    ("eks:CreateNodegroup", "arn:aws:eks:us-west-2:%s:nodegroup/trainfleet/cpu/abc" % ACCT, {}),
    # the node groups use the iam step's node role: eksctl_cluster reads it, CloudFormation passes it to EKS
    ("iam:GetRole", NODE_ROLE, {}),
    ("iam:ListAttachedRolePolicies", NODE_ROLE, {}),
    ("iam:PassRole", NODE_ROLE, {"iam:PassedToService": "eks.amazonaws.com"}),
    ("eks:CreatePodIdentityAssociation", "arn:aws:eks:us-west-2:%s:podidentityassociation/trainfleet/a-1" % ACCT, {}),
    ("cloudformation:CreateStack", "arn:aws:cloudformation:us-west-2:%s:stack/eksctl-trainfleet-cluster/id" % ACCT, {}),
    ("ec2:CreateVpc", "*", {}),
    ("ec2:DescribeSubnets", "*", {}),
    ("iam:CreateRole", IAM + "role/eksctl-trainfleet-cluster-ServiceRole-X", with_boundary()),
    ("iam:AttachRolePolicy", IAM + "role/eksctl-trainfleet-cluster-ServiceRole-X",
     with_boundary(**{"iam:PolicyARN": "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"})),
    ("iam:CreateServiceLinkedRole", "*", {"iam:AWSServiceName": "eks-nodegroup.amazonaws.com"}),
    ("ssm:GetParameter", "arn:aws:ssm:us-west-2::parameter/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id", {}),
    ("logs:PutRetentionPolicy", "arn:aws:logs:us-west-2:%s:log-group:/aws/eks/trainfleet/cluster" % ACCT, {}),
    # storage and teardown's leftover check
    ("fsx:DescribeFileSystems", "*", {}),
    ("ec2:DeleteNetworkInterface", "*", {}),
    ("tag:GetResources", "*", {}),
    ("s3:DeleteObjectVersion", "arn:aws:s3:::trainfleet-123456789012-us-west-2/training/x", {}),
    ("eks:DeleteCluster", "arn:aws:eks:us-west-2:%s:cluster/trainfleet" % ACCT, {}),
    ("cloudformation:DeleteStack", "arn:aws:cloudformation:us-west-2:%s:stack/eksctl-trainfleet-nodegroup-cpu/id" % ACCT, {}),
])
def test_every_step_is_still_allowed(deployer, action, resource, context):
    assert decide([deployer], action, resource, context) == "Allow", (action, resource, context)


def test_roles_under_the_boundary_keep_what_they_need(boundary):
    training = render_json("iam", "training-s3-policy.json.j2", **VARS)
    bucket = "arn:aws:s3:::trainfleet-123456789012-us-west-2"
    assert decide([training], "s3:PutObject", bucket + "/training/ckpt.pt", boundary=boundary) == "Allow"
    assert decide([training], "s3:ListBucket", bucket, {"s3:prefix": "training/"}, boundary=boundary) == "Allow"
    # The node role: what a kubelet needs to join and to pull our and the add-on images.
    node = [PULL_ONLY, WORKER_NODE]
    for action in ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"):
        assert decide(node, action, "arn:aws:ecr:us-west-2:%s:repository/trainfleet/trainer" % ACCT,
                      boundary=boundary) == "Allow"
        assert decide(node, action, "arn:aws:ecr:us-west-2:602401143452:repository/eks/coredns",
                      boundary=boundary) == "Allow"
    assert decide(node, "ecr:GetAuthorizationToken", "*", boundary=boundary) == "Allow"
    assert decide(node, "eks:DescribeCluster", "arn:aws:eks:us-west-2:%s:cluster/trainfleet" % ACCT,
                  boundary=boundary) == "Allow"


@pytest.mark.parametrize("repository", [
    "arn:aws:ecr:us-west-2:%s:repository/payroll-service" % ACCT,
    "arn:aws:ecr:us-west-2:210987654321:repository/someone-else",
    "arn:aws:ecr:eu-west-1:602401143452:repository/eks/coredns",
])
def test_node_role_pulls_no_other_repository(boundary, repository):
    """The issue: nodes read every ECR repository. PullOnly grants that; the boundary takes it away."""
    assert decide([PULL_ONLY], "ecr:BatchGetImage", repository) == "Allow"
    assert decide([PULL_ONLY], "ecr:BatchGetImage", repository, boundary=boundary) == "ImplicitDeny"
    managed = render_json("iam", "permissions-boundary.json.j2", **dict(VARS, iam_node_ecr_pull_mode="managed"))
    assert decide([PULL_ONLY], "ecr:BatchGetImage", repository, boundary=managed) == "Allow"


def test_boundary_grants_no_iam_sts_or_foreign_bucket_action(boundary):
    for st in boundary["Statement"]:
        assert st["Effect"] == "Allow"
        for action in _list(st["Action"]):
            service = action.split(":")[0]
            assert service not in ("sts", "organizations", "account"), action
            assert service != "iam" or action == "iam:CreateServiceLinkedRole", action
            if service == "s3":
                assert all(r.startswith("arn:aws:s3:::trainfleet-123456789012-us-west-2") for r in _list(st["Resource"]))
