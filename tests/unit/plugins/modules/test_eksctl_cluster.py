# -*- coding: utf-8 -*-
"""Tests of trainfleet.training.eksctl_cluster and module_utils/eksctl.py.

- pure rendering, validation and planning (no AWS);
- the module against an in-process moto EKS (unit level: reads state, plans, check mode, diff);
- the golden ClusterConfigs: the real eks_cluster + nodegroups roles run with --check through
  ansible-playbook against a real moto server for every example scenario (examples/aws/*.yml) and
  for inventories/aws alone; the examples' output must equal tests/golden/eksctl/<scenario>.yaml;
  the goldens and every rendered config (cluster step and nodegroups step) must validate against
  eksctl v0.210.0's own published schema (Draft7Validator, read from ../shared/eksctl/, see
  tests/support/eksctl.py) and pass eksctl's semantic rules the schema cannot express;
- bad input through the roles fails in preflight, naming the variable, before the module runs.
Regenerate goldens (then review the diff by hand): TRAINFLEET_UPDATE_GOLDENS=1 pytest -k golden
"""

from __future__ import absolute_import, division, print_function

import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
for _path in (ROOT, os.path.join(ROOT, ".collections")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from ansible_collections.trainfleet.training.plugins.module_utils import eksctl as E  # noqa: E402
from tests.support.eksctl import schema_errors, semantic_errors, validator_or_skip  # noqa: E402

GOLDEN_DIR = os.path.join(ROOT, "tests", "golden", "eksctl")
# Every example scenario has a golden; a new examples/aws/<name>.yml needs tests/golden/eksctl/<name>.yaml.
SCENARIOS = tuple(sorted(os.path.splitext(name)[0] for name in os.listdir(os.path.join(ROOT, "examples", "aws"))
                         if name.endswith(".yml")))
# inventories/aws on its own (no example file): rendered and checked, no golden.
INVENTORY = "inventories-aws"
VENV_BIN = os.path.dirname(sys.executable)
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-west-2"}


def group(**kw):
    base = dict(name="cpu", kind="cpu", instance_types=["m5.large"], min_size=1, desired_size=2, max_size=3)
    base.update(kw)
    return base


def params(**kw):
    base = dict(name="trainfleet", region="us-west-2", version="1.33", availability_zones=["us-west-2a", "us-west-2b"],
                addons=[{"name": "vpc-cni"}, {"name": "eks-pod-identity-agent"}], log_types=["api"],
                log_retention_days=30, tags={"project": "trainfleet"}, managed_node_groups=[group()])
    base.update(kw)
    return base


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize("bad, expected", [
    (group(kind="cpu", instance_types=["p4d.24xlarge"]), "is an accelerator type, but kind is cpu"),
    (group(kind="gpu", instance_types=["trn1.32xlarge"]), "is not a gpu instance type"),
    (group(kind="trainium", instance_types=["m5.large"]), "is not a trainium instance type"),
    (group(efa=True, instance_types=["m5.large"]), "does not support EFA"),
    (group(kind="trainium", efa=True, instance_types=["trn1.32xlarge", "trn1n.32xlarge"]), "exactly one instance type"),
    (group(min_size=3, desired_size=1, max_size=2), "min_size <= desired_size <= max_size"),
    (group(min_size=0, desired_size=0, max_size=0), "max_size must be >= 1"),
    (group(min_size=0, desired_size=1, max_size=100000), "max_size must be <= 1000, got 100000"),
    (group(name="ng\n"), "name must match"),
    (group(taints=[{"key": "a", "effect": "Nope"}]), "effect must be one of"),
    (group(spot=True, capacity_reservation_id="cr-0123456789abcdef0"), "exclude each other"),
    (group(capacity_reservation_id="reservation"), "capacity_reservation_id must look like"),
    (group(kind="gpu", instance_types=["g5.xlarge"], ami_family="Ubuntu2204"),
     "ami_family must be AmazonLinux2023 for kind gpu (eksctl then picks the AL2023 NVIDIA or Neuron AMI for the "
     "instance type), got 'Ubuntu2204'"),
    # eksctl's semantic rules (v0.210.0) that its schema cannot express, checked before rendering:
    (group(kind="gpu", instance_types=["p5.48xlarge"], ami_family="Bottlerocket"),
     "ami_family must be AmazonLinux2023 for kind gpu"),
    (group(kind="trainium", instance_types=["trn1.32xlarge"], ami_family="AmazonLinux2"),
     "ami_family must be AmazonLinux2023 for kind trainium (eksctl then picks the AL2023 NVIDIA or Neuron AMI for "
     "the instance type), got 'AmazonLinux2'"),
    (group(kind="inferentia", instance_types=["inf2.48xlarge"], ami_family="Ubuntu2404"),
     "ami_family must be AmazonLinux2023 for kind inferentia"),
    (group(ami_family="AmazonLinux2"), "ami_family 'AmazonLinux2' has no EKS AMI for Kubernetes 1.33"),
    (group(kind="trainium", instance_types=["trn1.32xlarge"], efa=True, availability_zones=["us-west-2a", "us-west-2b"]),
     "availability_zones: an efa group must stay in one zone (eksctl refuses efaEnabled groups with more than one), "
     "got ['us-west-2a', 'us-west-2b']"),
    (group(placement_group="my-pg"), "placement_group is only used with efa: true, got 'my-pg'"),
    (group(capacity_block=True), "capacity_block needs capacity_reservation_id"),
    (group(labels={"kubernetes.io/role": "gpu"}), "labels: 'kubernetes.io/role' uses a prefix eksctl reserves"),
    (group(labels={"team.k8s.io/x": "a"}), "labels: 'team.k8s.io/x' uses a prefix eksctl reserves"),
    (group(labels={"trainfleet.io/gpus": 4}), "labels['trainfleet.io/gpus'] must be a string (quote it in YAML), got 4"),
])
def test_bad_node_group_names_the_field(bad, expected):
    with pytest.raises(E.EksctlConfigError) as err:
        E.validate(params(managed_node_groups=[bad]))
    assert expected in str(err.value)
    assert "managed_node_groups[0]" in str(err.value)


def test_al2_is_fine_before_1_33_and_kubelet_labels_are_allowed():
    E.validate(params(version="1.32", managed_node_groups=[group(ami_family="AmazonLinux2")]))
    # Without a version (the nodegroups step) the AMI family is not compared with one.
    E.validate(params(version=None, managed_node_groups=[group(ami_family="AmazonLinux2")]))
    E.validate(params(managed_node_groups=[group(labels={"node.kubernetes.io/lifecycle": "normal"})]))
    # One zone, or none (eksctl then picks one subnet), is what efaEnabled accepts.
    E.validate(params(managed_node_groups=[group(name="trn", kind="trainium", instance_types=["trn1.32xlarge"],
                                                 efa=True, availability_zones=["us-west-2b"])]))


@pytest.mark.parametrize("override, expected", [
    (dict(name="1bad"), "name must start with a letter"),
    (dict(version="1.33.1"), "version must look like 1.33"),
    (dict(availability_zones=["eu-west-1a", "eu-west-1b"]), "is not in region us-west-2"),
    (dict(availability_zones=["us-west-2a"]), "at least 2 zones"),
    (dict(log_types=["apiserver"]), "log_types"),
    (dict(log_retention_days=8), "log_retention_days must be one of"),
    (dict(managed_node_groups=[group(), group()]), "is used twice"),
    (dict(managed_node_groups=[group(availability_zones=["us-west-2c"])]), "not one of the cluster's"),
    (dict(pod_identity_associations=[{"namespace": "ns"}]), "serviceAccountName is required"),
    (dict(log_types=[], log_retention_days=30),
     "log_retention_days 30 needs at least one log type (eksctl refuses logRetentionInDays without enableTypes)"),
    (dict(tags={"cost-center": 1234}), "tags['cost-center'] must be a string (quote it in YAML), got 1234"),
    (dict(pod_identity_associations=[{"namespace": "ns", "serviceAccountName": "sa",
                                      "roleARN": "arn:aws:iam::123456789012:role/r",
                                      "permissionPolicyARNs": ["arn:aws:iam::aws:policy/ReadOnlyAccess"]}]),
     "pod_identity_associations[0].permissionPolicyARNs cannot be set together with roleARN "
     "'arn:aws:iam::123456789012:role/r'"),
    (dict(addons=[{"name": "vpc-cni"}]),
     "addons must include eks-pod-identity-agent: eksctl creates Pod Identity associations "
     "(addonsConfig.autoApplyPodIdentityAssociations) only with that add-on, got addons ['vpc-cni']"),
    (dict(addons=None, pod_identity_associations=[{"namespace": "ns", "serviceAccountName": "sa",
                                                   "roleARN": "arn:aws:iam::123456789012:role/r"}]),
     "addons must include eks-pod-identity-agent: eksctl creates Pod Identity associations "
     "(pod_identity_associations) only with that add-on, got addons []"),
])
def test_bad_cluster_input(override, expected):
    with pytest.raises(E.EksctlConfigError) as err:
        E.validate(params(**override))
    assert expected in str(err.value)


def test_valid_accelerator_groups_pass():
    E.validate(params(managed_node_groups=[
        group(),
        group(name="gpu", kind="gpu", instance_types=["p5.48xlarge"], efa=True, min_size=0),
        group(name="trn", kind="trainium", instance_types=["trn1n.32xlarge"], efa=True, min_size=0,
              capacity_reservation_id="cr-0123456789abcdef0", capacity_block=True),
    ]))


# ---------------------------------------------------------------- rendering
def test_render_trainium_group():
    cfg = E.render_cluster_config(params(managed_node_groups=[
        group(name="trn1", kind="trainium", instance_types=["trn1.32xlarge"], efa=True, min_size=0,
              capacity_reservation_id="cr-0123456789abcdef0")]))
    ng = cfg["managedNodeGroups"][0]
    assert ng["instanceType"] == "trn1.32xlarge"
    assert ng["efaEnabled"] is True
    # no placement block: eksctl creates the EFA group's cluster placement group itself
    assert "placement" not in ng
    assert ng["labels"]["trainfleet.io/kind"] == "trainium"
    assert ng["labels"]["trainfleet.io/efa"] == "true"
    assert ng["capacityReservation"]["capacityReservationTarget"]["capacityReservationID"] == "cr-0123456789abcdef0"
    assert ng["amiFamily"] == "AmazonLinux2023"
    assert cfg["metadata"]["version"] == "1.33"
    assert cfg["addonsConfig"] == {"autoApplyPodIdentityAssociations": True}


def test_render_puts_the_permissions_boundary_on_every_role_eksctl_creates():
    arn = "arn:aws:iam::123456789012:policy/trainfleet/trainfleet-boundary"
    cfg = E.render_cluster_config(params(
        permissions_boundary_arn=arn, managed_node_groups=[group()],
        pod_identity_associations=[{"namespace": "trainfleet", "serviceAccountName": "sa",
                                    "permissionPolicyARNs": ["arn:aws:iam::123456789012:policy/trainfleet/p"]}]))
    assert cfg["iam"]["serviceRolePermissionsBoundary"] == arn
    assert [a["permissionsBoundaryARN"] for a in cfg["iam"]["podIdentityAssociations"]] == [arn]
    assert [g["iam"]["instanceRolePermissionsBoundary"] for g in cfg["managedNodeGroups"]] == [arn]
    plain = E.render_cluster_config(params(managed_node_groups=[group()]))
    assert "serviceRolePermissionsBoundary" not in plain["iam"] and "iam" not in plain["managedNodeGroups"][0]


def test_render_limits_the_public_endpoint_and_blocks_pod_imds():
    cfg = E.render_cluster_config(params(public_access_cidrs=["198.51.100.0/24"],
                                         managed_node_groups=[group(), group(name="open", allow_pod_imds=True)]))
    assert cfg["vpc"]["publicAccessCIDRs"] == ["198.51.100.0/24"]
    assert [g["disablePodIMDS"] for g in cfg["managedNodeGroups"]] == [True, False]
    private = E.render_cluster_config(params(endpoint_public_access=False, public_access_cidrs=["198.51.100.0/24"]))
    assert "publicAccessCIDRs" not in private["vpc"]


def test_render_spot_uses_instance_types():
    ng = E.render_node_group(group(spot=True, instance_types=["m5.large", "m5a.large"]), "c")
    assert ng["spot"] is True and ng["instanceTypes"] == ["m5.large", "m5a.large"] and "instanceType" not in ng


def test_version_is_a_quoted_string_in_yaml():
    text = yaml.safe_dump(E.render_cluster_config(params(version="1.30")), sort_keys=False)
    assert "version: '1.30'" in text


NODE_ROLE = "arn:aws:iam::123456789012:role/trainfleet-node"
EC2_TRUST = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": ["sts:AssumeRole"]}]}
AWS_POLICY = "arn:aws:iam::aws:policy/"


@pytest.mark.parametrize("arn", [
    "arn:aws:iam::123456789012:role/trainfleet/trainfleet-node",
    "arn:aws:iam::123456789012:role/a/b/trainfleet-node",
    "arn:aws:iam::123456789012:instance-profile/trainfleet-node",
    "trainfleet-node",
    "arn:aws:iam::12345:role/trainfleet-node",
])
def test_node_role_arn_must_be_a_role_at_path_root(arn):
    with pytest.raises(E.EksctlConfigError) as err:
        E.validate(params(node_instance_role_arn=arn))
    assert "node_instance_role_arn must be the ARN of an IAM role at path /" in str(err.value)
    assert repr(arn) in str(err.value)


def test_render_uses_the_node_role_and_leaves_the_boundary_to_it():
    boundary = "arn:aws:iam::123456789012:policy/trainfleet/trainfleet-boundary"
    for partition_arn in (NODE_ROLE, "arn:aws-cn:iam::123456789012:role/trainfleet-node"):
        E.validate(params(node_instance_role_arn=partition_arn))
    cfg = E.render_cluster_config(params(
        node_instance_role_arn=NODE_ROLE, permissions_boundary_arn=boundary,
        managed_node_groups=[group(), group(name="gpu", kind="gpu", instance_types=["g5.xlarge"])],
        pod_identity_associations=[{"namespace": "trainfleet", "serviceAccountName": "sa",
                                    "roleARN": "arn:aws:iam::123456789012:role/trainfleet/trainfleet-training"}]))
    assert [g["iam"] for g in cfg["managedNodeGroups"]] == [{"instanceRoleARN": NODE_ROLE}] * 2
    # The roles eksctl still creates keep the boundary.
    assert cfg["iam"]["serviceRolePermissionsBoundary"] == boundary
    assert cfg["iam"]["podIdentityAssociations"][0]["permissionsBoundaryARN"] == boundary


def role(path="/", trust=None, name="trainfleet-node"):
    return {"RoleName": name, "Path": path, "Arn": "arn:aws:iam::123456789012:role%s%s" % (path, name),
            "AssumeRolePolicyDocument": EC2_TRUST if trust is None else trust}


@pytest.mark.parametrize("kwargs, expected", [
    (dict(role=role(path="/trainfleet/")), "node role trainfleet-node is under path /trainfleet/: eksctl 0.210.0 drops"),
    (dict(role=role(trust={"Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"},
                                          "Action": "sts:AssumeRole"}]})),
     "node role trainfleet-node does not let ec2.amazonaws.com assume it"),
    (dict(attached=[AWS_POLICY + "AmazonEC2ContainerRegistryPullOnly"]),
     "lacks the AWS managed policies AmazonEKSWorkerNodePolicy (the EKS managed node group API refuses"),
    (dict(attached=[AWS_POLICY + "AmazonEKSWorkerNodePolicy",
                    "arn:aws:iam::123456789012:policy/trainfleet/trainfleet-node-ecr-pull"]),
     "lacks the AWS managed policies AmazonEC2ContainerRegistryPullOnly or AmazonEC2ContainerRegistryReadOnly"),
    (dict(cni_own_role=False), "has no AmazonEKS_CNI_Policy and the VPC CNI gets no role of its own"),
])
def test_node_role_errors_name_what_eks_would_refuse(kwargs, expected):
    args = dict(role=role(), attached=[AWS_POLICY + "AmazonEKSWorkerNodePolicy",
                                       AWS_POLICY + "AmazonEC2ContainerRegistryPullOnly"], cni_own_role=True)
    args.update(kwargs)
    errors = E.node_role_errors(args["role"], args["attached"], args["cni_own_role"])
    assert any(expected in e for e in errors), errors


def test_node_role_errors_accept_what_the_iam_step_creates():
    attached = [AWS_POLICY + "AmazonEKSWorkerNodePolicy", AWS_POLICY + "AmazonEC2ContainerRegistryPullOnly"]
    for cni in (True, None):
        assert E.node_role_errors(role(), attached, cni) == []
    assert E.node_role_errors(role(), attached + [AWS_POLICY + "AmazonEKS_CNI_Policy"], False) == []
    assert E.node_role_errors(role(), [AWS_POLICY + "AmazonEKSWorkerNodePolicy",
                                       AWS_POLICY + "AmazonEC2ContainerRegistryReadOnly"]) == []


@pytest.mark.parametrize("override, expected", [
    (dict(), True), (dict(addons=None), None), (dict(addons=[], with_oidc=True), True),
    (dict(addons=[], with_oidc=False), False), (dict(addons=[{"name": "vpc-cni"}], with_oidc=False), True),
])
def test_cni_has_own_role_follows_eksctl(override, expected):
    assert E.cni_has_own_role(params(**override)) is expected


def test_node_role_warnings_for_groups_eksctl_gave_their_own_role():
    cfg = E.render_cluster_config(params(node_instance_role_arn=NODE_ROLE,
                                         managed_node_groups=[group(), group(name="new")]))
    have = current(groups={"cpu": {"minSize": 1, "desiredCapacity": 2, "maxSize": 3,
                                   "nodeRole": "arn:aws:iam::123456789012:role/eksctl-trainfleet-nodegroup-cpu-NodeInstanceRole-X"}})
    warnings = E.node_role_warnings(cfg, have)
    assert len(warnings) == 1 and warnings[0].startswith("node group cpu runs with node role arn:aws:iam::123456789012:"
                                                         "role/eksctl-trainfleet-nodegroup-cpu-NodeInstanceRole-X, not "
                                                         + NODE_ROLE)
    # eksctl hands EKS the role without its path; the same role name is not a difference.
    same = current(groups={"cpu": {"minSize": 1, "desiredCapacity": 2, "maxSize": 3, "nodeRole": NODE_ROLE}})
    assert E.node_role_warnings(cfg, same) == [] and E.node_role_warnings(cfg, None) == []


# ---------------------------------------------------------------- planning
def current(version="1.33", groups=None, log_types=None, addons=None, status="ACTIVE"):
    return {"name": "trainfleet", "version": version, "status": status, "log_types": log_types or ["api"],
            "addons": addons if addons is not None else ["eks-pod-identity-agent", "vpc-cni"],
            "nodegroups": groups if groups is not None else {
                "cpu": {"minSize": 1, "desiredCapacity": 2, "maxSize": 3, "instanceTypes": ["m5.large"]}}}


def test_plan_create_when_absent():
    cfg = E.render_cluster_config(params())
    acts = E.plan(cfg, None, True, False, "present")
    assert acts == [{"action": "create_cluster", "name": "trainfleet", "nodegroups": ["cpu"]}]
    argv = E.commands(acts, "/tmp/c.yaml", "us-west-2", "/tmp/kc")[0]
    assert argv[:4] == ["create", "cluster", "-f", "/tmp/c.yaml"]
    assert "--install-nvidia-plugin=false" in argv and "--install-neuron-plugin=false" in argv
    assert argv[-2:] == ["--kubeconfig", "/tmp/kc"]


def test_plan_noop_when_equal():
    assert E.plan(E.render_cluster_config(params()), current(), True, False, "present") == []


def test_plan_upgrades_one_minor_at_a_time():
    acts = E.plan(E.render_cluster_config(params(version="1.33")), current(version="1.31"), True, False, "present")
    assert [a.get("version") for a in acts] == ["1.32", "1.33"]
    argv = E.commands(acts, "c.yaml", "us-west-2")[0]
    assert argv[:2] == ["upgrade", "cluster"] and "--approve" in argv


def test_plan_refuses_downgrade():
    with pytest.raises(E.EksctlConfigError, match="cannot downgrade"):
        E.plan(E.render_cluster_config(params(version="1.30")), current(version="1.33"), True, False, "present")


def test_plan_refuses_cluster_in_transition():
    with pytest.raises(E.EksctlConfigError, match="CREATING"):
        E.plan(E.render_cluster_config(params()), current(status="CREATING"), True, False, "present")


def test_plan_scale_create_prune_logging_addons():
    cfg = E.render_cluster_config(params(
        log_types=["api", "audit"],
        addons=[{"name": "vpc-cni"}, {"name": "aws-fsx-csi-driver"}],
        managed_node_groups=[group(min_size=0, desired_size=0), group(name="gpu", kind="gpu",
                                                                      instance_types=["g5.xlarge"])]))
    have = current(groups={"cpu": {"minSize": 1, "desiredCapacity": 2, "maxSize": 3},
                           "old": {"minSize": 1, "desiredCapacity": 1, "maxSize": 1}})
    acts = E.plan(cfg, have, True, True, "present")
    kinds = [a["action"] for a in acts]
    assert kinds == ["update_logging", "create_addons", "create_nodegroups", "scale_nodegroup", "delete_nodegroup"]
    assert acts[1]["addons"] == ["aws-fsx-csi-driver"]
    assert acts[2]["nodegroups"] == ["gpu"]
    assert acts[3]["to"] == [0, 0, 3]
    assert acts[4]["nodegroup"] == "old"
    scale = E.commands([acts[3]], "c.yaml", "us-west-2")[0]
    assert scale[:2] == ["scale", "nodegroup"] and scale[scale.index("--nodes") + 1] == "0"
    # Without prune, the unknown group is left alone; without node group management, groups are ignored.
    assert "delete_nodegroup" not in [a["action"] for a in E.plan(cfg, have, True, False, "present")]
    assert [a["action"] for a in E.plan(cfg, have, False, True, "present")] == ["update_logging", "create_addons"]


def test_plan_absent():
    cfg = E.render_cluster_config(params())
    assert E.plan(cfg, None, True, False, "absent") == []
    acts = E.plan(cfg, current(), True, False, "absent")
    argv = E.commands(acts, "c.yaml", "us-west-2")[0]
    assert argv[:2] == ["delete", "cluster"] and "--wait" in argv


def test_current_from_aws_shape():
    cur = E.current_from_aws(
        {"name": "c", "version": "1.33", "status": "ACTIVE",
         "logging": {"clusterLogging": [{"types": ["api", "audit"], "enabled": True},
                                        {"types": ["scheduler"], "enabled": False}]}},
        [{"nodegroupName": "cpu", "scalingConfig": {"minSize": 1, "maxSize": 3, "desiredSize": 2},
          "instanceTypes": ["m5.large"], "status": "ACTIVE"}], ["vpc-cni"])
    assert cur["log_types"] == ["api", "audit"]
    assert cur["nodegroups"]["cpu"]["desiredCapacity"] == 2


# ---------------------------------------------------------------- the module against in-process moto
def run_module(args, check_mode=False, diff=False):
    """Run the module's main() in-process and return its JSON result."""
    from ansible.module_utils.testing import patch_module_args
    from ansible_collections.trainfleet.training.plugins.modules import eksctl_cluster

    args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            eksctl_cluster.main()


@pytest.fixture
def moto_eks(monkeypatch):
    moto = pytest.importorskip("moto")
    for key, value in AWS_ENV.items():
        monkeypatch.setenv(key, value)
    # The AWS managed policies a node role needs (AmazonEKSWorkerNodePolicy, ...), as on AWS.
    monkeypatch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
    with moto.mock_aws():
        import boto3
        yield boto3.client("eks", region_name="us-west-2")


def module_args(**kw):
    args = dict(name="trainfleet", region="us-west-2", version="1.33", log_types=["api"],
                managed_node_groups=[dict(name="cpu", instance_types=["m5.large"], min_size=1, desired_size=2,
                                          max_size=3)], eksctl_path="/nonexistent/eksctl")
    args.update(kw)
    return args


def result_of(capsys):
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    # Once controller code is imported in this process (other tests do), module warnings are
    # displayed on stderr instead of returned: keep both.
    result["_stderr"] = captured.err
    return result


def warnings_of(res):
    """The warning texts of a module result (ansible-core 2.19 returns them as event summaries)."""
    returned = [w["event"]["msg"] if isinstance(w, dict) else w for w in res.get("warnings", [])]
    return returned + [" ".join(res.get("_stderr", "").split())]


def make_cluster(eks, desired=2):
    eks.create_cluster(name="trainfleet", version="1.33", roleArn="arn:aws:iam::123456789012:role/eks",
                       resourcesVpcConfig={"subnetIds": ["subnet-1", "subnet-2"]},
                       logging={"clusterLogging": [{"types": ["api"], "enabled": True}]})
    eks.create_nodegroup(clusterName="trainfleet", nodegroupName="cpu", nodeRole="arn:aws:iam::123456789012:role/n",
                         subnets=["subnet-1"], instanceTypes=["m5.large"],
                         scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": desired})


def test_module_check_mode_plans_create_without_eksctl(moto_eks, capsys, tmp_path):
    run_module(module_args(kubeconfig=str(tmp_path / "kc")), check_mode=True, diff=True)
    res = result_of(capsys)
    assert res["changed"] is True
    assert res["current"] is None
    assert [a["action"] for a in res["actions"]] == ["create_cluster"]
    assert res["commands"][0][0] == "/nonexistent/eksctl"
    assert res["diff"]["before"] == {} and res["diff"]["after"]["nodegroups"]["cpu"]["desiredCapacity"] == 2
    assert "kind: ClusterConfig" in res["config_yaml"]
    assert not (tmp_path / "kc").exists()


def test_module_noop_is_unchanged_and_needs_no_eksctl(moto_eks, capsys):
    make_cluster(moto_eks)
    run_module(module_args())
    res = result_of(capsys)
    assert res["changed"] is False, res
    assert res["actions"] == [] and res["current"]["version"] == "1.33"


def test_module_scale_in_check_mode(moto_eks, capsys):
    make_cluster(moto_eks, desired=2)
    groups = [dict(name="cpu", instance_types=["m5.large"], min_size=0, desired_size=0, max_size=3)]
    run_module(module_args(managed_node_groups=groups), check_mode=True, diff=True)
    res = result_of(capsys)
    assert res["changed"] is True
    assert res["actions"] == [{"action": "scale_nodegroup", "name": "trainfleet", "nodegroup": "cpu",
                               "from": [1, 2, 3], "to": [0, 0, 3]}]
    assert res["diff"]["before"]["nodegroups"]["cpu"]["desiredCapacity"] == 2


def test_module_apply_fails_clearly_without_eksctl(moto_eks, capsys):
    run_module(module_args())
    res = result_of(capsys)
    assert res["failed"] is True and "eksctl_path /nonexistent/eksctl is not an executable" in res["msg"]


def test_module_cluster_must_exist(moto_eks, capsys):
    run_module(module_args(cluster_must_exist=True))
    res = result_of(capsys)
    assert res["failed"] is True and "run the cluster step first" in res["msg"]


def test_module_bad_input_fails_before_reading_state(capsys):
    # No moto here: validation must fail before any AWS call.
    bad = [dict(name="x", kind="cpu", instance_types=["m5.large"], efa=True, min_size=1, desired_size=1, max_size=1)]
    run_module(module_args(managed_node_groups=bad))
    res = result_of(capsys)
    assert res["failed"] is True and "managed_node_groups[0] (x).efa" in res["msg"]


def test_module_runs_planned_eksctl_calls(moto_eks, capsys, tmp_path):
    """A recording stand-in for eksctl (unit level): the module runs exactly the planned argv."""
    make_cluster(moto_eks, desired=2)
    log = tmp_path / "calls"
    fake = tmp_path / "eksctl"
    fake.write_text("#!/bin/sh\necho \"$@\" >> %s\n" % log)
    fake.chmod(0o755)
    groups = [dict(name="cpu", instance_types=["m5.large"], min_size=1, desired_size=3, max_size=3)]
    run_module(module_args(managed_node_groups=groups, eksctl_path=str(fake)))
    res = result_of(capsys)
    assert res["changed"] is True
    calls = log.read_text().splitlines()
    assert len(calls) == 1 and calls[0].startswith("scale nodegroup --cluster trainfleet --region us-west-2 --name cpu")


NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")


def make_node_role(name="trainfleet-node", path="/", policies=NODE_POLICIES):
    import boto3
    iam = boto3.client("iam", region_name="us-east-1")
    arn = iam.create_role(RoleName=name, Path=path, AssumeRolePolicyDocument=json.dumps(EC2_TRUST))["Role"]["Arn"]
    for policy in policies:
        iam.attach_role_policy(RoleName=name, PolicyArn=AWS_POLICY + policy)
    return arn


def test_module_renders_the_node_role_read_from_iam(moto_eks, capsys):
    arn = make_node_role()
    run_module(module_args(node_instance_role_name="trainfleet-node"), check_mode=True)
    res = result_of(capsys)
    assert res["node_instance_role"] == {"arn": arn, "exists": True}
    assert res["config"]["managedNodeGroups"][0]["iam"] == {"instanceRoleARN": arn}
    assert "instanceRoleARN: " + arn in res["config_yaml"]


def test_module_checks_a_given_node_role_arn(moto_eks, capsys):
    arn = make_node_role(policies=("AmazonEKSWorkerNodePolicy",))
    run_module(module_args(node_instance_role_arn=arn), check_mode=True)
    res = result_of(capsys)
    assert res["failed"] is True
    assert "node role trainfleet-node lacks the AWS managed policies AmazonEC2ContainerRegistryPullOnly" in res["msg"]


def test_module_refuses_a_node_role_under_a_path(moto_eks, capsys):
    make_node_role(path="/trainfleet/")
    run_module(module_args(node_instance_role_name="trainfleet-node"), check_mode=True)
    res = result_of(capsys)
    assert res["failed"] is True and "is under path /trainfleet/: eksctl 0.210.0 drops a role path" in res["msg"]


def test_module_refuses_a_missing_node_role_outside_check_mode(moto_eks, capsys):
    run_module(module_args(node_instance_role_name="trainfleet-node"))
    res = result_of(capsys)
    assert res["failed"] is True
    assert res["msg"] == ("the node role of the node groups (node_instance_role_name trainfleet-node) does not exist: "
                          "run the iam step first, which creates it")


def test_module_check_mode_uses_the_role_the_iam_step_would_create(moto_eks, capsys):
    run_module(module_args(node_instance_role_name="trainfleet-node"), check_mode=True)
    res = result_of(capsys)
    assert res["node_instance_role"] == {"arn": NODE_ROLE, "exists": False}
    assert res["config"]["managedNodeGroups"][0]["iam"] == {"instanceRoleARN": NODE_ROLE}
    assert any("check mode: the node role %s does not exist yet" % NODE_ROLE in w for w in warnings_of(res))


def test_module_warns_when_a_group_runs_with_another_role(moto_eks, capsys):
    arn = make_node_role()
    make_cluster(moto_eks)
    run_module(module_args(node_instance_role_arn=arn), check_mode=True)
    res = result_of(capsys)
    assert res["actions"] == []
    assert any("node group cpu runs with node role arn:aws:iam::123456789012:role/n, not " + arn in w
               for w in warnings_of(res)), warnings_of(res)


def test_module_without_node_groups_reads_no_role(moto_eks, capsys):
    make_cluster(moto_eks)
    run_module(module_args(managed_node_groups=None, node_instance_role_name="trainfleet-node"), check_mode=True)
    res = result_of(capsys)
    assert "node_instance_role" not in res and "failed" not in res


# ---------------------------------------------------------------- goldens through the real roles
def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def moto_server():
    """A real moto server (the local AWS endpoint) on a free loopback port, stopped after the tests."""
    port = free_port()
    # With the AWS managed policies: the node role the tests seed has them attached, as on AWS.
    env = dict(os.environ, MOTO_IAM_LOAD_MANAGED_POLICIES="true", **AWS_ENV)
    proc = subprocess.Popen([os.path.join(VENV_BIN, "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("moto server did not start within 60 s")
    yield "http://127.0.0.1:%d" % port
    proc.terminate()
    proc.wait(timeout=30)


# The eks_cluster role requires the CIDRs allowed to reach a public API endpoint.
API_CIDRS = ["-e", json.dumps({"eks_cluster_endpoint_public_access_cidrs": ["198.51.100.0/24"]})]


def ansible_playbook(args, timeout=600):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1", **AWS_ENV)
    return subprocess.run([os.path.join(VENV_BIN, "ansible-playbook")] + args, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def render_scenario(endpoint, scenario, out):
    example = [] if scenario == INVENTORY else ["-e", "@examples/aws/%s.yml" % scenario]
    return ansible_playbook(["--check", "-i", "inventories/aws", "tests/golden/render_eksctl.yml"] + example +
                            ["-e", "trainfleet_aws_endpoint_url=%s" % endpoint, "-e", "golden_out=%s" % out,
                             "-e", "golden_out_nodegroups=%s.nodegroups" % out] + API_CIDRS)


@pytest.fixture(scope="module")
def rendered_runs(moto_server, tmp_path_factory):
    """{scenario: (cluster step ClusterConfig YAML, nodegroups step ClusterConfig YAML)} for the
    examples and inventories/aws alone, each through the real roles and the module."""
    out_dir = tmp_path_factory.mktemp("rendered")
    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = dict((s, pool.submit(render_scenario, moto_server, s, str(out_dir / ("%s.yaml" % s))))
                    for s in SCENARIOS + (INVENTORY,))
    results = {}
    for scenario, future in runs.items():
        proc = future.result()
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        results[scenario] = ((out_dir / ("%s.yaml" % scenario)).read_text(),
                             (out_dir / ("%s.yaml.nodegroups" % scenario)).read_text())
    return results


@pytest.fixture(scope="module")
def rendered(rendered_runs):
    return dict((scenario, texts[0]) for scenario, texts in rendered_runs.items())


@pytest.fixture(scope="module")
def eksctl_schema():
    return validator_or_skip()


def _golden(scenario):
    with open(os.path.join(GOLDEN_DIR, "%s.yaml" % scenario)) as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_clusterconfig(rendered, scenario):
    golden = os.path.join(GOLDEN_DIR, "%s.yaml" % scenario)
    if os.environ.get("TRAINFLEET_UPDATE_GOLDENS") == "1":
        with open(golden, "w") as handle:
            handle.write(rendered[scenario])
    with open(golden) as handle:
        assert rendered[scenario] == handle.read(), "rendered %s differs from %s" % (scenario, golden)


def test_every_example_has_a_golden():
    assert SCENARIOS and all(os.path.exists(os.path.join(GOLDEN_DIR, "%s.yaml" % s)) for s in SCENARIOS), SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_validates_against_eksctl_schema(eksctl_schema, scenario):
    config = _golden(scenario)
    assert schema_errors(eksctl_schema, config) == []
    # The accelerator scenarios carry the settings the seeds need.
    groups = dict((g["name"], g) for g in config.get("managedNodeGroups", []))
    if scenario == "trainium":
        assert groups["trn1"]["efaEnabled"] is True and "placement" not in groups["trn1"]
        assert groups["trn1"]["availabilityZones"] == ["us-west-2d"]
    if scenario == "gpu":
        assert groups["gpu"]["taints"][0]["key"] == "nvidia.com/gpu"
    assert "eks-pod-identity-agent" in [a["name"] for a in config["addons"]]


@pytest.mark.parametrize("scenario", SCENARIOS + (INVENTORY,))
def test_rendered_configs_validate_against_eksctl_schema(eksctl_schema, rendered_runs, scenario):
    """What the cluster step and the nodegroups step hand eksctl, for every example and the inventory."""
    for step, text in zip(("cluster", "nodegroups"), rendered_runs[scenario]):
        config = yaml.safe_load(text)
        assert config["kind"] == "ClusterConfig", (step, text)
        assert schema_errors(eksctl_schema, config) == [], (step, text)


@pytest.mark.parametrize("scenario", list(SCENARIOS) + [INVENTORY])
def test_rendered_node_groups_use_the_iam_steps_node_role(rendered_runs, scenario):
    """The node groups of both steps run with the iam step's node role (at path /, in check mode of a
    first run the ARN that step would create), not a role eksctl creates with ECR read on every repository."""
    for step, text in zip(("cluster", "nodegroups"), rendered_runs[scenario]):
        groups = yaml.safe_load(text)["managedNodeGroups"]
        assert groups and [g["iam"] for g in groups] == [{"instanceRoleARN": NODE_ROLE}] * len(groups), (step, text)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_passes_eksctl_semantic_rules(scenario):
    assert semantic_errors(_golden(scenario)) == []


@pytest.mark.parametrize("scenario", list(SCENARIOS) + [INVENTORY])
def test_rendered_configs_pass_eksctl_semantic_rules(rendered_runs, scenario):
    for text in rendered_runs[scenario]:
        assert semantic_errors(yaml.safe_load(text)) == [], text


def test_efa_groups_in_our_configs_name_their_one_zone():
    """Our examples pin the EFA group's zone (eksctl would pick one subnet at random, maybe not the FSx zone)."""
    for scenario in SCENARIOS:
        for group in _golden(scenario).get("managedNodeGroups", []):
            if group.get("efaEnabled"):
                assert len(group.get("availabilityZones", [])) == 1, (scenario, group["name"])


def test_role_preflight_rejects_bad_node_group_before_anything(moto_server, tmp_path):
    bad = {"nodegroups_groups": [{"name": "cpu", "kind": "cpu", "instance_types": ["m5.large"], "efa": True,
                                  "min_size": 1, "desired_size": 1, "max_size": 1}]}
    extra = tmp_path / "bad.json"
    extra.write_text(json.dumps(bad))
    out = tmp_path / "never.yaml"
    proc = ansible_playbook(
        ["--check", "-i", "inventories/aws", "tests/golden/render_eksctl.yml", "-e", "@examples/aws/cpu.yml",
         "-e", "@%s" % extra, "-e", "trainfleet_aws_endpoint_url=%s" % moto_server, "-e", "golden_out=%s" % out]
        + API_CIDRS)
    assert proc.returncode != 0
    assert "nodegroups_groups[0] (cpu) is invalid" in proc.stdout
    assert "Reconcile the EKS cluster" not in proc.stdout
    assert not out.exists()


# ---------------------------------------------------------------- role-level idempotence (recording eksctl stand-in)
STUB = """#!/bin/sh
echo "$@" >> %(log)s
case "$1" in
  version) echo 0.210.0 ;;
  utils)
    while [ $# -gt 0 ]; do
      if [ "$1" = --kubeconfig ]; then
        shift
        printf 'apiVersion: v1\\nkind: Config\\ncontexts:\\n  - name: admin@trainfleet.eksctl.io\\n' > "$1"
      fi
      shift
    done ;;
esac
"""


def seed_cluster(endpoint, region, groups):
    """What eksctl would have created, put into the moto server through the EKS API."""
    import boto3
    eks = boto3.client("eks", region_name=region, endpoint_url=endpoint, aws_access_key_id="testing",
                       aws_secret_access_key="testing")
    eks.create_cluster(name="trainfleet", version="1.33", roleArn="arn:aws:iam::123456789012:role/eks",
                       resourcesVpcConfig={"subnetIds": ["subnet-1", "subnet-2"]},
                       logging={"clusterLogging": [{"types": ["api", "audit", "authenticator"], "enabled": True}]})
    # The iam step's node role (path /, EC2 trust, worker and ECR pull policies).
    iam = boto3.client("iam", region_name=region, endpoint_url=endpoint, aws_access_key_id="testing",
                       aws_secret_access_key="testing")
    if "trainfleet-node" not in [r["RoleName"] for r in iam.list_roles()["Roles"]]:
        iam.create_role(RoleName="trainfleet-node", Path="/", AssumeRolePolicyDocument=json.dumps(EC2_TRUST))
        for policy in ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly"):
            iam.attach_role_policy(RoleName="trainfleet-node", PolicyArn=AWS_POLICY + policy)
    for name, itype, (low, desired, high) in groups:
        eks.create_nodegroup(clusterName="trainfleet", nodegroupName=name, nodeRole=NODE_ROLE,
                             subnets=["subnet-1"], instanceTypes=[itype],
                             scalingConfig={"minSize": low, "desiredSize": desired, "maxSize": high})


def run_with_stub(endpoint, scenario, tmp_path, *extra):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "eksctl-calls"
    stub = bin_dir / "eksctl"
    stub.write_text(STUB % {"log": log})
    stub.chmod(0o755)
    args = ["-i", "inventories/aws", "tests/golden/render_eksctl.yml", "-e", "@examples/aws/%s.yml" % scenario,
            "-e", "trainfleet_aws_endpoint_url=%s" % endpoint, "-e", "golden_out=%s" % (tmp_path / "out.yaml"),
            "-e", "eks_cluster_eksctl_install_method=path", "-e", "trainfleet_kubeconfig=%s" % (tmp_path / "kc"),
            "-e", "eks_cluster_config_path=%s" % (tmp_path / "cfg.yaml")] + API_CIDRS + list(extra)
    old_path = os.environ["PATH"]
    os.environ["PATH"] = "%s:%s" % (bin_dir, old_path)
    try:
        proc = ansible_playbook(args)
    finally:
        os.environ["PATH"] = old_path
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    calls = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return proc.stdout, [c for c in calls if c != "version"]


def recap_changed(stdout):
    line = [l for l in stdout.splitlines() if l.startswith("localhost")][-1]
    return int(line.split("changed=")[1].split()[0])


def test_roles_change_nothing_when_the_cluster_matches(moto_server, tmp_path):
    seed_cluster(moto_server, "us-east-1", [("cpu", "m5.large", (1, 2, 3))])
    out, calls = run_with_stub(moto_server, "cpu", tmp_path)
    # First run: only the missing kubeconfig is written.
    assert calls == ["utils write-kubeconfig --cluster trainfleet --region us-east-1 --kubeconfig %s" % (tmp_path / "kc")]
    out, calls = run_with_stub(moto_server, "cpu", tmp_path)
    assert calls == [] and recap_changed(out) == 0, out[-2500:]
    assert "actions: none" in out


def test_scale_accelerators_to_zero_calls_eksctl_scale(moto_server, tmp_path):
    seed_cluster(moto_server, "us-west-2", [("system", "m5.xlarge", (1, 1, 2)), ("gpu", "g5.12xlarge", (0, 2, 4))])
    out, calls = run_with_stub(moto_server, "gpu", tmp_path, "-e", "nodegroups_scale_accelerators_to_zero=true")
    scale = [c for c in calls if c.startswith("scale nodegroup")]
    assert len(scale) == 1, calls
    assert "--name gpu --nodes 0 --nodes-min 0 --nodes-max 4" in scale[0]
    assert not [c for c in calls if c.startswith(("create", "delete", "upgrade"))]


# ---------------------------------------------------------------- device plugin and storage manifests
MANIFESTS = ("nvidia-device-plugin", "neuron-rbac", "neuron-device-plugin", "efa-device-plugin", "fsx", "efs", "hostpath")


@pytest.fixture(scope="module")
def manifests(tmp_path_factory):
    out = tmp_path_factory.mktemp("manifests")
    proc = ansible_playbook(["-i", "inventories/aws", "tests/golden/render_manifests.yml", "-e", "manifests_out=%s" % out])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return dict((name, [d for d in yaml.safe_load_all((out / ("%s.yaml" % name)).read_text()) if d])
                for name in MANIFESTS)


def test_manifests_are_well_formed(manifests):
    for name, docs in manifests.items():
        assert docs, name
        for doc in docs:
            assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"], (name, doc)
            assert doc["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by") == "trainfleet", (name, doc)


def test_device_plugins_select_their_nodes_and_pin_versions(manifests):
    nvidia = manifests["nvidia-device-plugin"][0]["spec"]["template"]["spec"]
    term = nvidia["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"][0] == {"key": "trainfleet.io/kind", "operator": "In", "values": ["gpu"]}
    assert nvidia["containers"][0]["image"].endswith(":v0.17.2")
    neuron = manifests["neuron-device-plugin"][0]["spec"]["template"]["spec"]
    assert neuron["serviceAccountName"] == "neuron-device-plugin"
    assert {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"} in neuron["tolerations"]
    kinds = [d["kind"] for d in manifests["neuron-rbac"]]
    assert kinds == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
    efa = manifests["efa-device-plugin"][0]
    assert efa["metadata"]["name"] != "aws-efa-k8s-device-plugin-daemonset"  # never overwrites eksctl's
    assert efa["spec"]["template"]["spec"]["nodeSelector"] == {"trainfleet.io/efa": "true"}


def test_storage_manifests(manifests):
    fsx = dict((d["kind"], d) for d in manifests["fsx"])
    assert fsx["StorageClass"]["provisioner"] == "fsx.csi.aws.com"
    params_ = fsx["StorageClass"]["parameters"]
    assert params_["subnetId"].startswith("subnet-") and params_["securityGroupIds"].startswith("sg-")
    assert params_["s3ImportPath"] == params_["s3ExportPath"] == "s3://trainfleet-data/train"
    # The CSI driver tags each file system (inventories/aws trainfleet_tags + the step)
    assert params_["extraTags"] == "environment=aws,project=trainfleet,trainfleet-step=storage"
    assert fsx["PersistentVolumeClaim"]["spec"]["resources"]["requests"]["storage"] == "1200Gi"
    assert fsx["PersistentVolumeClaim"]["spec"]["accessModes"] == ["ReadWriteMany"]
    local = dict((d["kind"], d) for d in manifests["hostpath"])
    assert local["PersistentVolume"]["spec"]["hostPath"]["type"] == "DirectoryOrCreate"
    assert local["PersistentVolumeClaim"]["spec"]["volumeName"] == local["PersistentVolume"]["metadata"]["name"]
    assert dict((d["kind"], d) for d in manifests["efs"])["StorageClass"]["parameters"]["fileSystemId"].startswith("fs-")
