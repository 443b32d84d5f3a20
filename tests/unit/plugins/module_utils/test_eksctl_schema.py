# -*- coding: utf-8 -*-
"""Every ClusterConfig the eksctl_cluster module can render, checked as eksctl v0.210.0 would.

- eksctl's own published JSON Schema (draft-07, read from ../shared/eksctl/, see
  tests/support/eksctl.py) with jsonschema's Draft7Validator: a matrix of module inputs goes
  through the module's argument spec (its defaults), validate(), render_cluster_config() and
  dump_yaml() exactly as the module does, and the YAML eksctl would read must be valid;
- the schema catches real mistakes (unknown field, wrong type, bad enum, missing field);
- eksctl's semantic rules the schema cannot express (tests/support/eksctl.py semantic_errors):
  every rendered config passes them, and each rule catches a deliberately broken config.
The goldens and the inventories' examples rendered through the roles are checked in
tests/unit/plugins/modules/test_eksctl_cluster.py.
"""

from __future__ import absolute_import, division, print_function

import copy
import os
import sys

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
for _path in (ROOT, os.path.join(ROOT, ".collections")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator  # noqa: E402

from ansible_collections.trainfleet.training.plugins.module_utils import eksctl as E  # noqa: E402
from ansible_collections.trainfleet.training.plugins.modules.eksctl_cluster import argspec  # noqa: E402
from tests.support.eksctl import schema_errors, semantic_errors, validator_or_skip  # noqa: E402

ROLE_ARN = "arn:aws:iam::123456789012:role/trainfleet-training"
NODE_ROLE_ARN = "arn:aws:iam::123456789012:role/trainfleet-node"
BOUNDARY_ARN = "arn:aws:iam::123456789012:policy/trainfleet/trainfleet-boundary"


@pytest.fixture(scope="module")
def validator():
    return validator_or_skip()


def module_render(args):
    """What the module hands eksctl for these task arguments: argument spec defaults, validate, render, YAML."""
    result = ArgumentSpecValidator(argspec()).validate(args)
    assert result.error_messages == []
    params = result.validated_parameters
    E.validate(params)
    return yaml.safe_load(E.dump_yaml(E.render_cluster_config(params)))


def cluster(**kw):
    args = dict(name="trainfleet", region="us-west-2", version="1.33", availability_zones=["us-west-2a", "us-west-2b"],
                addons=[{"name": "vpc-cni"}, {"name": "coredns"}, {"name": "kube-proxy"},
                        {"name": "eks-pod-identity-agent"},
                        {"name": "aws-fsx-csi-driver", "use_default_pod_identity_associations": True}],
                log_types=["api", "audit", "authenticator"], log_retention_days=30,
                tags={"project": "trainfleet", "environment": "aws"},
                managed_node_groups=[dict(name="cpu", instance_types=["m5.large"], min_size=1, desired_size=2,
                                          max_size=3, volume_size=50)])
    args.update(kw)
    return args


# Module inputs covering every field the renderer can emit.
MATRIX = {
    "minimal": dict(name="trainfleet", region="us-east-1"),
    "cpu-example": cluster(),
    "nodegroups-step": dict(name="trainfleet", region="us-west-2", cluster_must_exist=True,
                            tags={"project": "trainfleet"},
                            managed_node_groups=[dict(name="gpu", kind="gpu", instance_types=["g5.12xlarge"],
                                                      min_size=0, desired_size=0, max_size=4)]),
    "gpu-spot-labels-taints": cluster(managed_node_groups=[
        dict(name="system", instance_types=["m5.xlarge"], min_size=1, desired_size=1, max_size=2),
        dict(name="gpu", kind="gpu", instance_types=["g5.12xlarge", "g6.12xlarge"], spot=True, min_size=0,
             desired_size=2, max_size=4, volume_size=200, availability_zones=["us-west-2a"],
             private_networking=False, labels={"trainfleet.io/accelerator": "nvidia-a10g"},
             taints=[{"key": "nvidia.com/gpu", "value": True, "effect": "NoSchedule"}])]),
    "trainium-efa-reservation": cluster(availability_zones=["us-west-2d", "us-west-2c"], managed_node_groups=[
        dict(name="trn1", kind="trainium", instance_types=["trn1.32xlarge"], efa=True, min_size=0, desired_size=2,
             max_size=2, volume_size=500, availability_zones=["us-west-2d"],
             capacity_reservation_id="cr-0123456789abcdef0", capacity_block=True,
             taints=[{"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}])]),
    "gpu-efa-own-placement-group": cluster(managed_node_groups=[
        dict(name="p5", kind="gpu", instance_types=["p5.48xlarge"], efa=True, placement_group="my-cluster-pg",
             min_size=0, desired_size=2, max_size=2, availability_zones=["us-west-2b"])]),
    "inferentia": cluster(managed_node_groups=[
        dict(name="inf2", kind="inferentia", instance_types=["inf2.48xlarge"], min_size=0, desired_size=1,
             max_size=1)]),
    "pod-identity-and-addon-options": cluster(
        with_oidc=False, nat_gateway="HighlyAvailable", endpoint_public_access=False, vpc_cidr="10.0.0.0/16",
        addons=[{"name": "vpc-cni", "version": "v1.19.2-eksbuild.1", "resolve_conflicts": "preserve",
                 "configuration_values": '{"env": {"ENABLE_PREFIX_DELEGATION": "true"}}'},
                {"name": "eks-pod-identity-agent"}],
        pod_identity_associations=[
            # The iam role's output (Pod Identity mode).
            {"namespace": "trainfleet", "serviceAccountName": "trainer", "roleARN": ROLE_ARN},
            {"namespace": "tools", "serviceAccountName": "reader", "createServiceAccount": True,
             "permissionPolicyARNs": ["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"], "tags": {"team": "ml"}},
            {"namespace": "tools", "serviceAccountName": "writer",
             "permissionPolicy": {"Version": "2012-10-17", "Statement": [
                 {"Effect": "Allow", "Action": ["s3:PutObject"], "Resource": ["arn:aws:s3:::b/*"]}]}}]),
    # What the roles render: the iam step's node role and its permissions boundary.
    "node-role-and-boundary": cluster(node_instance_role_arn=NODE_ROLE_ARN, permissions_boundary_arn=BOUNDARY_ARN,
                                      managed_node_groups=[
                                          dict(name="cpu", instance_types=["m5.large"], min_size=1, desired_size=2,
                                               max_size=3),
                                          dict(name="trn1", kind="trainium", instance_types=["trn1.32xlarge"],
                                               efa=True, min_size=0, desired_size=2, max_size=2,
                                               availability_zones=["us-west-2a"])]),
    "boundary-without-node-role": cluster(permissions_boundary_arn=BOUNDARY_ARN),
    "logging-off": cluster(log_types=[], log_retention_days=0),
    "logging-unmanaged-al2-1.32": cluster(version="1.32", log_types=None, managed_node_groups=[
        dict(name="cpu", instance_types=["m5.large"], ami_family="AmazonLinux2", min_size=1, desired_size=1,
             max_size=1)]),
}


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_module_output_is_valid_for_eksctl_schema(validator, case):
    config = module_render(MATRIX[case])
    assert schema_errors(validator, config) == []


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_module_output_passes_eksctl_semantic_rules(case):
    config = module_render(MATRIX[case])
    # Only a placement group the user named (and created) may be referenced.
    assert semantic_errors(config, existing_placement_groups=("my-cluster-pg",)) == []


def test_efa_group_without_placement_group_leaves_it_to_eksctl():
    config = module_render(cluster(managed_node_groups=[
        dict(name="trn1", kind="trainium", instance_types=["trn1.32xlarge"], efa=True, min_size=0, desired_size=2,
             max_size=2, availability_zones=["us-west-2a"])]))
    assert semantic_errors(config) == []


def test_matrix_covers_every_field_the_renderer_emits():
    """A new rendered field must get a matrix case (and so a schema check)."""
    seen = set()

    def walk(prefix, node):
        if isinstance(node, dict):
            for key, value in node.items():
                path = "%s.%s" % (prefix, key) if prefix else key
                if not (prefix.endswith(("labels", "tags", "permissionPolicy")) or ".Statement" in prefix):
                    seen.add(path)
                walk(path, value)
        elif isinstance(node, list):
            for item in node:
                walk(prefix + "[]", item)

    for case in MATRIX.values():
        walk("", module_render(case))
    for field in ("managedNodeGroups[].instanceTypes", "managedNodeGroups[].spot", "managedNodeGroups[].placement",
                  "managedNodeGroups[].capacityReservation.capacityReservationTarget.capacityReservationID",
                  "managedNodeGroups[].instanceMarketOptions.marketType", "managedNodeGroups[].taints[].value",
                  "iam.podIdentityAssociations[].permissionPolicy", "addons[].configurationValues",
                  "addons[].version", "addons[].useDefaultPodIdentityAssociations", "addonsConfig",
                  "cloudWatch.clusterLogging.logRetentionInDays", "metadata.tags", "availabilityZones",
                  "managedNodeGroups[].iam.instanceRoleARN", "managedNodeGroups[].iam.instanceRolePermissionsBoundary",
                  "iam.serviceRolePermissionsBoundary"):
        assert field in seen, field


# ---------------------------------------------------------------- the schema catches real mistakes
def _set(config, path, value):
    node = config
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


@pytest.mark.parametrize("path, value, expected", [
    # unknown or misspelled fields
    (("managedNodeGroups", 0, "efaEnable"), True,
     "managedNodeGroups/0: Additional properties are not allowed ('efaEnable' was unexpected)"),
    (("efaEnabled",), True, "(top): Additional properties are not allowed ('efaEnabled' was unexpected)"),
    (("vpc", "nat", "gateways"), "Single", "vpc/nat: Additional properties are not allowed"),
    (("addons", 0, "resolve_conflicts"), "overwrite", "addons/0: Additional properties are not allowed"),
    # wrong types
    (("managedNodeGroups", 0, "minSize"), "1", "managedNodeGroups/0/minSize: '1' is not of type 'integer'"),
    (("metadata", "version"), 1.3, "metadata/version: 1.3 is not of type 'string'"),
    (("managedNodeGroups", 0, "labels", "trainfleet.io/gpus"), 4,
     "managedNodeGroups/0/labels/trainfleet.io/gpus: 4 is not of type 'string'"),
    (("metadata", "tags", "cost-center"), 1234, "metadata/tags/cost-center: 1234 is not of type 'string'"),
    (("managedNodeGroups", 0, "privateNetworking"), "yes",
     "managedNodeGroups/0/privateNetworking: 'yes' is not of type 'boolean'"),
    (("availabilityZones",), "us-west-2a", "availabilityZones: 'us-west-2a' is not of type 'array'"),
    # enums
    (("managedNodeGroups", 0, "amiFamily"), "AL2023", "managedNodeGroups/0/amiFamily: 'AL2023' is not one of"),
    (("vpc", "nat", "gateway"), "single", "vpc/nat/gateway: 'single' is not one of"),
    (("managedNodeGroups", 0, "volumeType"), "gp4", "managedNodeGroups/0/volumeType: 'gp4' is not one of"),
    (("cloudWatch", "clusterLogging", "enableTypes"), ["apiserver"],
     "cloudWatch/clusterLogging/enableTypes/0: 'apiserver' is not one of"),
    (("kind",), "Cluster", "kind: 'Cluster' is not one of ['ClusterConfig']"),
])
def test_schema_rejects_a_wrong_config(validator, path, value, expected):
    config = module_render(cluster())
    assert schema_errors(validator, config) == []
    _set(config, path, value)
    errors = schema_errors(validator, config)
    assert any(e.startswith(expected) for e in errors), errors


def test_schema_rejects_missing_required_fields(validator):
    config = module_render(cluster())
    del config["metadata"]["region"]
    del config["managedNodeGroups"][0]["name"]
    assert schema_errors(validator, config) == [
        "managedNodeGroups/0: 'name' is a required property", "metadata: 'region' is a required property"]


# ---------------------------------------------------------------- eksctl's semantic rules catch mistakes
def _group(config):
    return config["managedNodeGroups"][0]


def _trn(config):
    group = _group(config)
    group.update(instanceType="trn1.32xlarge", efaEnabled=True, availabilityZones=["us-west-2a"])
    return group


@pytest.mark.parametrize("break_it, expected", [
    (lambda c: _trn(c).update(availabilityZones=["us-west-2a", "us-west-2b"]),
     "managedNodeGroups[0] (cpu).efaEnabled: an EFA node group takes at most one availability zone or subnet"),
    (lambda c: _trn(c).update(placement={"groupName": "trainfleet-cpu"}),
     "managedNodeGroups[0] (cpu).placement.groupName 'trainfleet-cpu' names a placement group nothing creates"),
    (lambda c: _group(c).update(placement={"groupName": ""}), "placement.groupName must be set and non-empty"),
    (lambda c: _group(c).update(disablePodIMDS=True, iam={"withAddonPolicies": {"fsx": True}}),
     "disablePodIMDS and iam.withAddonPolicies cannot be set at the same time"),
    # The node role: an existing role excludes what eksctl would create one with; no path.
    (lambda c: _group(c).update(iam={"instanceRoleARN": NODE_ROLE_ARN, "instanceRolePermissionsBoundary": BOUNDARY_ARN}),
     "managedNodeGroups[0] (cpu).iam.instanceRoleARN and managedNodeGroups[0] (cpu).iam.instanceRolePermissionsBoundary "
     "cannot be set at the same time"),
    (lambda c: _group(c).update(iam={"instanceRoleARN": NODE_ROLE_ARN, "withAddonPolicies": {"fsx": True}}),
     "iam.instanceRoleARN and managedNodeGroups[0] (cpu).iam.withAddonPolicies cannot be set at the same time"),
    (lambda c: _group(c).update(iam={"instanceRoleARN": NODE_ROLE_ARN,
                                     "attachPolicyARNs": ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"]}),
     "iam.instanceRoleARN and managedNodeGroups[0] (cpu).iam.attachPolicyARNs cannot be set at the same time"),
    (lambda c: _group(c).update(iam={"instanceRoleARN": "arn:aws:iam::123456789012:role/trainfleet/trainfleet-node"}),
     "iam.instanceRoleARN 'arn:aws:iam::123456789012:role/trainfleet/trainfleet-node' has a role path"),
    (lambda c: _group(c).update(iam={"instanceProfileARN": "arn:aws:iam::123456789012:instance-profile/p"}),
     "iam.instanceProfileARN is not supported for Managed Nodes"),
    (lambda c: _group(c).update(launchTemplate={"id": "lt-0123"}),
     "managedNodeGroups[0] (cpu).instanceType cannot be set together with launchTemplate"),
    (lambda c: _group(c).update(instanceType="p5.48xlarge", amiFamily="Bottlerocket"),
     "managedNodeGroups[0] (cpu).amiFamily: p5.48xlarge needs AmazonLinux2023 (the AL2023 NVIDIA AMI)"),
    (lambda c: _trn(c).update(amiFamily="Ubuntu2204"),
     "managedNodeGroups[0] (cpu).amiFamily: trn1.32xlarge needs AmazonLinux2023 (the AL2023 Neuron AMI)"),
    (lambda c: _group(c).update(amiFamily="AmazonLinux2"), "amiFamily: AmazonLinux2 is not supported for Kubernetes 1.33"),
    (lambda c: _group(c).update(instanceTypes=["m5.large"]), "only one of instanceType or instanceTypes"),
    (lambda c: _group(c).update(desiredCapacity=9), "minSize <= desiredCapacity <= maxSize is required, got 1/9/3"),
    (lambda c: _group(c).update(availabilityZones=["us-west-2c"]), "us-west-2c is not one of the cluster's"),
    (lambda c: _group(c).update(instanceMarketOptions={"marketType": "capacity-block"}),
     "instanceMarketOptions cannot be set without capacityReservation"),
    (lambda c: _group(c).update(capacityReservation={"capacityReservationPreference": "always"}),
     "capacityReservationPreference must be open or none"),
    (lambda c: _group(c)["labels"].update({"kubernetes.io/role": "x"}), "has a reserved prefix"),
    (lambda c: _group(c).update(taints=[{"key": "a", "value": "b", "effect": "NoRun"}]), "effect must be one of"),
    (lambda c: c["managedNodeGroups"].append(copy.deepcopy(_group(c))), "the name is used twice"),
    (lambda c: c.update(availabilityZones=["us-west-2a"]), "availabilityZones: at least 2 are required"),
    (lambda c: c["cloudWatch"]["clusterLogging"].update(enableTypes=[]),
     "logRetentionInDays cannot be set without enableTypes"),
    (lambda c: c["cloudWatch"]["clusterLogging"].update(logRetentionInDays=8), "8 is not a supported value"),
    (lambda c: c.update(addons=[a for a in c["addons"] if a["name"] != "eks-pod-identity-agent"]),
     "addons: Pod Identity associations need the eks-pod-identity-agent add-on"),
    (lambda c: c["iam"].update(podIdentityAssociations=[{"namespace": "a", "serviceAccountName": "b", "roleARN": ROLE_ARN,
                                                         "permissionPolicyARNs": ["arn:aws:iam::aws:policy/X"]}]),
     "iam.podIdentityAssociations[0]: permissionPolicyARNs cannot be set together with roleARN"),
])
def test_semantic_rules_catch_a_broken_config(break_it, expected):
    config = module_render(cluster())
    assert semantic_errors(config) == []
    break_it(config)
    errors = semantic_errors(config)
    assert any(expected in e for e in errors), errors


def test_node_role_replaces_the_group_boundary():
    """eksctl refuses instanceRoleARN with instanceRolePermissionsBoundary: the role carries the boundary itself."""
    config = module_render(MATRIX["node-role-and-boundary"])
    assert [g["iam"] for g in config["managedNodeGroups"]] == [{"instanceRoleARN": NODE_ROLE_ARN}] * 2
    assert config["iam"]["serviceRolePermissionsBoundary"] == BOUNDARY_ARN
    plain = module_render(MATRIX["boundary-without-node-role"])
    assert plain["managedNodeGroups"][0]["iam"] == {"instanceRolePermissionsBoundary": BOUNDARY_ARN}


def test_efa_group_may_name_one_zone_or_none():
    config = module_render(cluster())
    _trn(config)
    assert semantic_errors(config) == []
    del _group(config)["availabilityZones"]
    assert semantic_errors(config) == []
