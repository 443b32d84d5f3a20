# -*- coding: utf-8 -*-
"""module_utils/step_checks.py (filter input_problems): the storage and trainer_image steps' input checks.

Pure data: good inputs have no problem; a bad value gives one problem that names the variable and
quotes the value as JSON. The same checks run through the roles in tests/unit/roles
(test_storage_hostpath.py, test_trainer_image_role.py) and tests/adversarial.
"""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.trainfleet.training.plugins.filter.checks import FilterModule
from ansible_collections.trainfleet.training.plugins.module_utils import step_checks

GOOD = {
    "storage": {
        "storage_hostpath_path": "/var/local/trainfleet-data", "storage_backend": "hostpath", "storage_backends": ["hostpath"],
        "storage_size": "1200Gi", "storage_fsx_subnet_id": "", "storage_fsx_security_group_ids": [],
        "storage_fsx_s3_import_path": "", "storage_fsx_s3_export_path": "", "storage_efs_file_system_id": "",
        "storage_pvc_name": "trainfleet-data", "storage_namespace": "trainfleet", "storage_class_name": "trainfleet-hostpath",
        "storage_fsx_deployment_type": "SCRATCH_2", "storage_fsx_data_compression_type": "LZ4",
        "storage_fsx_per_unit_storage_throughput": 125, "storage_wait_timeout": 600, "storage_fsx_availability_zone": "",
        "storage_region": "us-east-1"},
    "trainer_image": {
        "trainer_image_repository": "localhost:5001/trainfleet/trainer", "trainer_image_tag": "", "trainer_image_base_image":
        "trainfleet/debian-base:bookworm", "trainer_image_build_args": {}, "trainer_image_build_timeout": 3600,
        "trainer_image_registry_login": "none", "trainer_image_variants": ["mpi", "cuda"], "trainer_image_cudnn_version": "9.0.0.312",
        "trainer_image_cuda_base_repository": "trainfleet/trainer-cuda-base", "trainer_image_neuron_base": "",
        "_trainer_image_variant_build_args": {"mpi": {}, "cuda": {}, "cuda-mpi": {}, "neuron": {}, "neuron-mpi": {}}},
}
FSX = {"storage_backend": "fsx", "storage_backends": ["fsx"]}


def check(step, context=None, **overrides):
    return FilterModule().filters()["input_problems"](dict(GOOD[step], **overrides), step, context)


@pytest.mark.parametrize("step", sorted(GOOD))
def test_good_inputs_have_no_problem(step):
    assert set(GOOD[step]) == set(getattr(step_checks, step.upper()))
    assert check(step) == []


@pytest.mark.parametrize("step, name, value, quoted", [
    ("storage", "storage_hostpath_path", "/var/lib/kubelet/x", '"/var/lib/kubelet/x"'),
    ("storage", "storage_hostpath_path", "/var", '"/var"'),
    ("storage", "storage_hostpath_path", "/var/local/../../etc", '"/var/local/../../etc"'),
    ("storage", "storage_backend", "efs", '"efs"'),  # not one of the platform's
    ("storage", "storage_size", "1200Gi\n", '"1200Gi\\n"'),
    ("storage", "storage_class_name", "Bad Class", '"Bad Class"'),
    ("storage", "storage_fsx_security_group_ids", ["sg-1", "default"], '["sg-1", "default"]'),
    ("trainer_image", "trainer_image_repository", "evil\n", '"evil\\n"'),
    ("trainer_image", "trainer_image_build_timeout", 100000, "100000"),
    ("trainer_image", "trainer_image_variants", ["rocm"], '["rocm"]'),
    ("trainer_image", "trainer_image_variants", ["mpi", "mpi"], '["mpi", "mpi"]'),
    ("trainer_image", "trainer_image_variants", "mpi", '"mpi"'),
    ("trainer_image", "trainer_image_cudnn_version", "9", '"9"'),
])
def test_a_bad_value_is_named_and_quoted(step, name, value, quoted):
    found = check(step, **{name: value})
    assert len(found) == 1 and name in found[0] and quoted in found[0], found


def test_fsx_zone_size_and_paths():
    assert check("storage", **FSX) == []
    assert '"us-west-2a"' in check("storage", storage_fsx_availability_zone="us-west-2a", **FSX)[0]
    assert "multiple of 1200Gi" in check("storage", storage_size="1000Gi", **FSX)[0]
    assert "storage_fsx_s3_import_path" in check("storage", storage_fsx_s3_import_path="s3://b/x\n", **FSX)[0]
    assert check("storage", storage_fsx_s3_import_path="s3://b/x\n") == []  # hostpath: not read


def test_efs_needs_its_file_system_outside_check_mode():
    efs = {"storage_backend": "efs", "storage_backends": ["efs"]}
    assert "storage_efs_file_system_id" in check("storage", **efs)[0]
    assert check("storage", {"check_mode": True}, **efs) == []


def test_the_neuron_variants_need_a_base_pinned_by_digest_and_a_tag_leaves_room_for_the_variant():
    neuron = {"trainer_image_variants": ["neuron"]}
    assert "@sha256:" in check("trainer_image", trainer_image_neuron_base="aws/neuron:latest", **neuron)[0]
    assert check("trainer_image", trainer_image_neuron_base="registry.example/neuron@sha256:" + "a" * 64, **neuron) == []
    long_tag = check("trainer_image", trainer_image_tag="t" * 126)[0]
    assert "trainer_image_tag" in long_tag and '"%s"' % ("t" * 126) in long_tag


IAM = {
    "iam_path": "/trainfleet/", "iam_name_prefix": "trainfleet", "iam_training_role_name": "trainfleet-training",
    "iam_node_role_name": "trainfleet-node", "iam_training_policy_name": "trainfleet-training-s3",
    "iam_node_ecr_policy_name": "trainfleet-node-ecr", "iam_permissions_boundary_name": "trainfleet-boundary",
    "iam_identity_mode": "pod_identity", "iam_irsa_oidc_issuer": "", "iam_cluster_name": "trainfleet",
    "iam_training_namespace": "trainfleet", "iam_training_service_account": "trainer", "iam_s3_bucket_name": "trainfleet-data",
    "iam_s3_prefix": "training/", "iam_s3_kms_key_arn": "", "iam_training_max_session_duration": 3600,
    "iam_node_ecr_pull_mode": "scoped", "iam_ecr_repository_names": ["trainfleet/trainer"],
    "iam_eks_addon_registry_accounts": ["602401143452"], "iam_node_managed_policy_names": ["AmazonEKSWorkerNodePolicy"],
    "iam_deployer_extra_statements": [{"Sid": "Logs", "Effect": "Allow", "Action": ["logs:PutLogEvents"],
                                       "Resource": "arn:aws:logs:us-east-1:123456789012:log-group:/trainfleet:*"}],
}


def check_iam(**overrides):
    return FilterModule().filters()["input_problems"](dict(IAM, **overrides), "iam")


def test_iam_good_inputs_have_no_problem():
    assert set(IAM) == set(step_checks.IAM) and check_iam() == []


@pytest.mark.parametrize("name, value, quoted", [
    ("iam_path", "/", '"/"'),  # the whole account
    ("iam_training_role_name", "role\nx", '"role\\nx"'),
    ("iam_identity_mode", "root", '"root"'),
    ("iam_s3_prefix", "training/../", '"training/../"'),
    ("iam_s3_kms_key_arn", "arn:aws:kms:us-west-2:123456789012:key/*", '"arn:aws:kms:us-west-2:123456789012:key/*"'),
    ("iam_node_managed_policy_names", ["AmazonEKSWorkerNodePolicy", "AdministratorAccess"], '["AdministratorAccess"]'),
    ("iam_eks_addon_registry_accounts", ["12345"], '["12345"]'),
    ("iam_deployer_extra_statements", [{"Effect": "Allow", "Action": "s3:Get?bject", "Resource": "arn:aws:s3:::b/*"}],
     '"s3:Get?bject"'),
    ("iam_deployer_extra_statements", [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}], '"Resource": "*"'),
    ("iam_deployer_extra_statements", [{"Effect": "Allow", "Action": "ec2:RunInstances", "Resource": "arn:aws:ec2:*:*:*"}],
     '"arn:aws:ec2:*:*:*"'),  # a whole service
])
def test_iam_refuses_what_could_escalate(name, value, quoted):
    found = check_iam(**{name: value})
    assert len(found) == 1 and name in found[0] and quoted in found[0], found


def test_iam_a_deny_may_name_a_whole_service_and_irsa_needs_the_issuer():
    deny = [{"Effect": "Deny", "Action": "ec2:RunInstances", "Resource": "arn:aws:ec2:us-east-1:123456789012:*"}]
    assert check_iam(iam_deployer_extra_statements=deny) == []
    assert "iam_irsa_oidc_issuer" in check_iam(iam_identity_mode="irsa")[0]
    assert check_iam(iam_identity_mode="irsa", iam_irsa_oidc_issuer="oidc.eks.us-west-2.amazonaws.com/id/ABC123") == []


EKS = {
    "eks_cluster_name": "trainfleet", "eks_cluster_region": "us-west-2", "eks_cluster_version": "1.33",
    "eks_cluster_availability_zones": [], "eks_cluster_log_types": ["api"], "eks_cluster_addons": [{"name": "vpc-cni"}],
    "eks_cluster_eksctl_version": "0.210.0", "eks_cluster_vpc_cidr": "10.42.0.0/16", "eks_cluster_timeout": "40m",
    "eks_cluster_eksctl_go_build_timeout": 1800, "eks_cluster_state": "present", "eks_cluster_endpoint_public_access": True,
    "eks_cluster_endpoint_public_access_cidrs": ["203.0.113.0/24"], "eks_cluster_endpoint_public_access_open": False,
    "eks_cluster_endpoint_private_access": True, "eks_cluster_node_instance_role_arn": "",
    "eks_cluster_node_instance_role_name": "trainfleet-node",
}
GROUP = {"name": "cpu", "kind": "cpu", "instance_types": ["m5.xlarge"], "min_size": 0, "desired_size": 1, "max_size": 2}
NODEGROUPS = {
    "nodegroups_groups": [GROUP], "nodegroups_instance_role_arn": "arn:aws:iam::123456789012:role/trainfleet-node",
    "nodegroups_instance_role_name": "trainfleet-node", "nodegroups_timeout": "40m",
    "_nodegroups_kind_families": {"gpu": ["g5", "p4d"], "trainium": ["trn1"], "inferentia": ["inf2"]},
    "_nodegroups_accelerator_families": ["g5", "p4d", "trn1", "inf2"], "_nodegroups_efa_types": ["p4d.24xlarge", "trn1.32xlarge"],
}


def check_aws(step, context=None, **overrides):
    good = {"eks_cluster": EKS, "nodegroups": NODEGROUPS}[step]
    return FilterModule().filters()["input_problems"](dict(good, **overrides), step, context)


@pytest.mark.parametrize("step", ["eks_cluster", "nodegroups"])
def test_aws_good_inputs_have_no_problem(step):
    assert set({"eks_cluster": EKS, "nodegroups": NODEGROUPS}[step]) == set(getattr(step_checks, step.upper())) and check_aws(step) == []


@pytest.mark.parametrize("name, value, quoted", [
    ("eks_cluster_vpc_cidr", "10.0.0.0/8", '"10.0.0.0/8"'),
    ("eks_cluster_vpc_cidr", "300.1.2.3/16", '"300.1.2.3/16"'),
    ("eks_cluster_timeout", "100000h", '"100000h"'),
    ("eks_cluster_timeout", "5h", '"5h"'),  # over 4 hours
    ("eks_cluster_availability_zones", ["us-west-2a"], '["us-west-2a"]'),  # one zone
    ("eks_cluster_availability_zones", ["us-west-2a", "us-east-1b"], '"us-east-1b"'),
    ("eks_cluster_eksctl_version", "0.210.0; rm -rf /", '"0.210.0; rm -rf /"'),
    ("eks_cluster_endpoint_public_access_cidrs", [], "[]"),
    ("eks_cluster_endpoint_public_access_cidrs", ["0.0.0.0/0"], '["0.0.0.0/0"]'),
    ("eks_cluster_node_instance_role_arn", "arn:aws:iam::123456789012:role/path/node", '"arn:aws:iam::123456789012:role/path/node"'),
])
def test_eks_cluster_refusals(name, value, quoted):
    found = check_aws("eks_cluster", **{name: value})
    assert len(found) == 1 and name in found[0] and quoted in found[0], found


def test_eks_cluster_without_the_endpoint_settings_when_it_only_installs_eksctl_or_deletes():
    assert check_aws("eks_cluster", {"install_only": True}, eks_cluster_endpoint_public_access_cidrs=[]) == []
    assert check_aws("eks_cluster", eks_cluster_state="absent", eks_cluster_endpoint_public_access_cidrs=[]) == []
    assert check_aws("eks_cluster", eks_cluster_endpoint_public_access_cidrs=["0.0.0.0/0"],
                     eks_cluster_endpoint_public_access_open=True) == []


@pytest.mark.parametrize("group, quoted", [
    (dict(GROUP, max_size=100000), "100000"),
    (dict(GROUP, name="cpu\n"), "cpu\n"),
    (dict(GROUP, instance_types=["g5.xlarge"]), '["g5.xlarge"]'),  # an accelerator in a cpu group
    (dict(GROUP, kind="gpu", instance_types=["trn1.32xlarge"]), '["trn1.32xlarge"]'),
    (dict(GROUP, kind="gpu", instance_types=["g5.xlarge"], efa=True), '"efa": true'),
    (dict(GROUP, min_size="0"), '"0"'),
    (dict(GROUP, spot=True, capacity_reservation_id="cr-1"), '"cr-1"'),
])
def test_nodegroups_refusals(group, quoted):
    found = check_aws("nodegroups", nodegroups_groups=[group])
    assert len(found) == 1 and "nodegroups_groups[0]" in found[0] and quoted in found[0], found


def test_nodegroups_names_role_and_timeout():
    assert '["cpu", "cpu"]' in check_aws("nodegroups", nodegroups_groups=[GROUP, GROUP])[0]
    assert check_aws("nodegroups", nodegroups_groups=[dict(GROUP, kind="trainium", instance_types=["trn1.32xlarge"], efa=True)]) == []
    assert "nodegroups_instance_role_arn" in check_aws("nodegroups", nodegroups_instance_role_arn="arn:aws:iam::1:role/x")[0]
    assert '"999h"' in check_aws("nodegroups", nodegroups_timeout="999h")[0]
    assert '{"name": "cpu"}' in check_aws("nodegroups", nodegroups_groups={"name": "cpu"})[0]
