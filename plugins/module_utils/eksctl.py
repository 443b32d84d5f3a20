# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place that knows how trainfleet maps its variables to an eksctl ClusterConfig.

Pure functions only (no AWS, no subprocess): render the ClusterConfig, validate node groups,
turn `aws eks describe-*` answers into the same shape, and plan the eksctl commands that take
the current state to the desired one. The module eksctl_cluster and the unit tests use them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError

try:
    import yaml
except ImportError:
    HAS_YAML = False
else:
    HAS_YAML = True

    class _IndentedDumper(yaml.SafeDumper):
        """Indents list items under their key (the style yamllint and kubectl users expect)."""

        def increase_indent(self, flow=False, indentless=False):
            return super(_IndentedDumper, self).increase_indent(flow, False)

API_VERSION = "eksctl.io/v1alpha5"

# Instance families by accelerator. Anything not listed is a CPU family.
NVIDIA_FAMILIES = ("g4dn", "g5", "g6", "g6e", "gr6", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6")
NEURON_FAMILIES = ("trn1", "trn1n", "trn2", "inf1", "inf2")
# The kinds a node group may declare, and the families each kind accepts.
KIND_FAMILIES = {
    "gpu": NVIDIA_FAMILIES,
    "trainium": ("trn1", "trn1n", "trn2"),
    "inferentia": ("inf1", "inf2"),
}
# Instance types that support EFA (the sizes relevant to training; extend with efa_extra_types).
EFA_TYPES = frozenset([
    "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
    "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "inf2.48xlarge",
    "g4dn.8xlarge", "g4dn.12xlarge", "g4dn.16xlarge", "g4dn.metal",
    "g5.8xlarge", "g5.12xlarge", "g5.16xlarge", "g5.24xlarge", "g5.48xlarge",
    "g6.8xlarge", "g6.12xlarge", "g6.16xlarge", "g6.24xlarge", "g6.48xlarge",
    "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge", "g6e.48xlarge",
    "c5n.9xlarge", "c5n.18xlarge", "c5n.metal", "m5n.24xlarge", "m5dn.24xlarge",
    "c6in.32xlarge", "m6i.32xlarge", "c7i.48xlarge", "m7i.48xlarge",
])
AMI_FAMILIES = ("AmazonLinux2023", "AmazonLinux2", "Bottlerocket", "Ubuntu2204", "Ubuntu2404")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
NAT_MODES = ("Single", "HighlyAvailable", "Disable")
# EKS accepts only these retention values for CloudWatch log groups (0 = keep eksctl's default).
LOG_RETENTION_DAYS = (0, 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653)
# The add-on eksctl needs before it creates any Pod Identity association (ours, or an add-on's own).
POD_IDENTITY_AGENT = "eks-pod-identity-agent"
# eksctl 0.210.0 refuses AmazonLinux2 node groups from this Kubernetes minor on (no AL2 AMIs for 1.33+).
AL2_LAST_MINOR = 32
# Label key prefixes eksctl reserves (kubernetes.io, k8s.io and their subdomains), except the ones
# the kubelet may set itself.
_RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
_KUBELET_LABEL_DOMAINS = ("node.kubernetes.io", "kubelet.kubernetes.io")

# Upper bound of a node group (the nodegroups role checks the same).
MAX_GROUP_SIZE = 1000

_NAME_RE = re.compile(r"^[a-zA-Z][-a-zA-Z0-9]{0,99}\Z")
_VERSION_RE = re.compile(r"^1\.(\d+)\Z")
_TYPE_RE = re.compile(r"^([a-z][a-z0-9-]*)\.([a-z0-9]+)\Z")
_LABEL_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
# A node role ARN eksctl 0.210.0 passes on unchanged: a role at path "/". eksctl strips any role path
# from iam.instanceRoleARN (NormalizeARN: the AWS::EKS::Nodegroup NodeRole and the access entry then
# name arn:...:role/<name>, which is not the role's ARN: iam:PassRole scoped to the path is denied
# and the node group ends Degraded).
_NODE_ROLE_ARN_RE = re.compile(r"^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_-]{1,64}\Z")


class EksctlConfigError(TrainfleetError):
    """A bad input; the message names the option and what was expected."""


def instance_family(instance_type):
    match = _TYPE_RE.match(instance_type or "")
    return match.group(1) if match else None


def accelerator_of(instance_type):
    """'nvidia', 'neuron' or 'cpu' for an instance type such as p4d.24xlarge."""
    family = instance_family(instance_type)
    if family in NVIDIA_FAMILIES:
        return "nvidia"
    if family in NEURON_FAMILIES:
        return "neuron"
    return "cpu"


def _reserved_label(key):
    """True for a label key under kubernetes.io or k8s.io that the kubelet does not own."""
    if "/" not in key:
        return False
    domain = key.split("/", 1)[0]
    if domain in _KUBELET_LABEL_DOMAINS:
        return False
    return any(domain == d or domain.endswith("." + d) for d in _RESERVED_LABEL_DOMAINS)


def _group_errors(index, group, efa_extra_types, minor=None):
    """Every problem of one node group, each naming the field; minor is the cluster's Kubernetes minor."""
    where = "managed_node_groups[%d]" % index
    errors = []
    name = group.get("name")
    if not name or not _NAME_RE.match(str(name)):
        errors.append("%s.name must match %s, got %r" % (where, _NAME_RE.pattern, name))
    else:
        where = "managed_node_groups[%d] (%s)" % (index, name)
    kind = group.get("kind") or "cpu"
    if kind not in ("cpu", "gpu", "trainium", "inferentia"):
        errors.append("%s.kind must be one of cpu, gpu, trainium, inferentia, got %r" % (where, kind))
        return errors
    types = group.get("instance_types") or []
    if not types:
        errors.append("%s.instance_types must list at least one instance type" % where)
    for itype in types:
        family = instance_family(itype)
        if family is None:
            errors.append("%s.instance_types: %r is not an instance type like m5.xlarge" % (where, itype))
            continue
        if kind == "cpu" and accelerator_of(itype) != "cpu":
            errors.append("%s.instance_types: %s is an accelerator type, but kind is cpu (use kind gpu/trainium)"
                          % (where, itype))
        if kind != "cpu" and family not in KIND_FAMILIES[kind]:
            errors.append("%s.instance_types: %s is not a %s instance type (families: %s)"
                          % (where, itype, kind, ", ".join(KIND_FAMILIES[kind])))
        if group.get("efa") and itype not in EFA_TYPES and itype not in (efa_extra_types or []):
            errors.append("%s.efa is true but %s does not support EFA (EFA types include p4d.24xlarge, "
                          "p5.48xlarge, trn1.32xlarge, trn1n.32xlarge, g5.48xlarge)" % (where, itype))
    if group.get("efa") and len(types) > 1:
        errors.append("%s.efa needs exactly one instance type, got %d" % (where, len(types)))
    sizes = {}
    for key in ("min_size", "desired_size", "max_size"):
        value = group.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            errors.append("%s.%s must be an integer >= 0, got %r" % (where, key, value))
        else:
            sizes[key] = value
    if len(sizes) == 3:
        if not sizes["min_size"] <= sizes["desired_size"] <= sizes["max_size"]:
            errors.append("%s: min_size <= desired_size <= max_size is required, got %d <= %d <= %d"
                          % (where, sizes["min_size"], sizes["desired_size"], sizes["max_size"]))
        if sizes["max_size"] < 1:
            errors.append("%s.max_size must be >= 1 (EKS needs room for one node), got 0" % where)
        if sizes["max_size"] > MAX_GROUP_SIZE:
            errors.append("%s.max_size must be <= %d, got %d" % (where, MAX_GROUP_SIZE, sizes["max_size"]))
    ami = group.get("ami_family") or "AmazonLinux2023"
    if ami not in AMI_FAMILIES:
        errors.append("%s.ami_family must be one of %s, got %r" % (where, ", ".join(AMI_FAMILIES), ami))
    elif kind != "cpu" and ami != "AmazonLinux2023":
        # eksctl maps AmazonLinux2023 + an NVIDIA or Neuron instance type to the AL2023 NVIDIA or Neuron
        # AMI (drivers, EFA host components); the device_plugins step is built for those nodes.
        errors.append("%s.ami_family must be AmazonLinux2023 for kind %s (eksctl then picks the AL2023 NVIDIA or "
                      "Neuron AMI for the instance type), got %r" % (where, kind, ami))
    elif ami == "AmazonLinux2" and minor is not None and minor > AL2_LAST_MINOR:
        errors.append("%s.ami_family 'AmazonLinux2' has no EKS AMI for Kubernetes 1.%d (eksctl refuses it from "
                      "1.%d on); use AmazonLinux2023" % (where, minor, AL2_LAST_MINOR + 1))
    zones = group.get("availability_zones") or []
    if group.get("efa") and len(zones) > 1:
        errors.append("%s.availability_zones: an efa group must stay in one zone (eksctl refuses efaEnabled "
                      "groups with more than one), got %r" % (where, list(zones)))
    if group.get("placement_group") and not group.get("efa"):
        errors.append("%s.placement_group is only used with efa: true, got %r with efa false"
                      % (where, group.get("placement_group")))
    if group.get("capacity_block") and not group.get("capacity_reservation_id"):
        errors.append("%s.capacity_block needs capacity_reservation_id (eksctl sets instanceMarketOptions only "
                      "with a capacityReservation)" % where)
    if group.get("spot") and group.get("capacity_reservation_id"):
        errors.append("%s: spot and capacity_reservation_id exclude each other" % where)
    reservation = group.get("capacity_reservation_id")
    if reservation and not re.match(r"^cr-[0-9a-f]{8,17}\Z", reservation):
        errors.append("%s.capacity_reservation_id must look like cr-0123456789abcdef0, got %r" % (where, reservation))
    for key, value in (group.get("labels") or {}).items():
        if not _LABEL_KEY_RE.match(str(key)):
            errors.append("%s.labels: %r is not a valid label key" % (where, key))
        elif _reserved_label(str(key)):
            errors.append("%s.labels: %r uses a prefix eksctl reserves (kubernetes.io/, k8s.io/); use your own "
                          "prefix such as trainfleet.io/" % (where, key))
        if not isinstance(value, str):
            errors.append("%s.labels[%r] must be a string (quote it in YAML), got %r" % (where, key, value))
    for tindex, taint in enumerate(group.get("taints") or []):
        if not isinstance(taint, dict) or not taint.get("key"):
            errors.append("%s.taints[%d] needs a key" % (where, tindex))
        elif taint.get("effect") not in TAINT_EFFECTS:
            errors.append("%s.taints[%d].effect must be one of %s, got %r"
                          % (where, tindex, ", ".join(TAINT_EFFECTS), taint.get("effect")))
    volume = group.get("volume_size", 100)
    if not isinstance(volume, int) or volume < 20:
        errors.append("%s.volume_size must be an integer >= 20 (GiB), got %r" % (where, volume))
    return errors


def validate(params):
    """Raise EksctlConfigError listing every bad input; the names are the module's option names."""
    errors = []
    name = params.get("name")
    if not name or not _NAME_RE.match(name):
        errors.append("name must start with a letter and contain only letters, digits and '-' "
                      "(at most 100 characters), got %r" % name)
    version = params.get("version")
    if version is not None and not _VERSION_RE.match(str(version)):
        errors.append("version must look like 1.33 (a string, quoted in YAML), got %r" % version)
    zones = params.get("availability_zones") or []
    region = params.get("region") or ""
    for zone in zones:
        if not str(zone).startswith(region):
            errors.append("availability_zones: %s is not in region %s" % (zone, region))
    if zones and len(zones) < 2:
        errors.append("availability_zones needs at least 2 zones (EKS requirement), got %d" % len(zones))
    for log_type in params.get("log_types") or []:
        if log_type not in LOG_TYPES:
            errors.append("log_types: %r is not one of %s" % (log_type, ", ".join(LOG_TYPES)))
    if params.get("log_retention_days", 0) not in LOG_RETENTION_DAYS:
        errors.append("log_retention_days must be one of %s, got %r"
                      % (", ".join(str(d) for d in LOG_RETENTION_DAYS), params.get("log_retention_days")))
    elif params.get("log_retention_days") and params.get("log_types") is not None and not params["log_types"]:
        errors.append("log_retention_days %r needs at least one log type (eksctl refuses logRetentionInDays "
                      "without enableTypes); set log_retention_days to 0 with log_types []"
                      % params["log_retention_days"])
    for key, value in (params.get("tags") or {}).items():
        if not isinstance(value, str):
            errors.append("tags[%r] must be a string (quote it in YAML), got %r" % (key, value))
    errors.extend(_pod_identity_errors(params))
    role_arn = params.get("node_instance_role_arn")
    if role_arn and not _NODE_ROLE_ARN_RE.match(str(role_arn)):
        errors.append("node_instance_role_arn must be the ARN of an IAM role at path / such as "
                      "arn:aws:iam::123456789012:role/trainfleet-node (eksctl 0.210.0 drops a role path from "
                      "iam.instanceRoleARN, so the node groups would name a role that does not exist), got %r"
                      % role_arn)
    seen = set()
    minor = _minor(version)
    for index, group in enumerate(params.get("managed_node_groups") or []):
        errors.extend(_group_errors(index, group, params.get("efa_extra_types"), minor))
        if group.get("name") in seen:
            errors.append("managed_node_groups[%d].name %r is used twice" % (index, group.get("name")))
        seen.add(group.get("name"))
        for zone in group.get("availability_zones") or []:
            if zones and zone not in zones:
                errors.append("managed_node_groups[%d].availability_zones: %s is not one of the cluster's "
                              "availability_zones %s" % (index, zone, zones))
    if errors:
        raise EksctlConfigError("; ".join(errors))


def _pod_identity_errors(params):
    """The Pod Identity rules eksctl checks before it creates anything."""
    errors = []
    associations = params.get("pod_identity_associations") or []
    for index, assoc in enumerate(associations):
        for key in ("namespace", "serviceAccountName"):
            if not assoc.get(key):
                errors.append("pod_identity_associations[%d].%s is required" % (index, key))
        if not (assoc.get("roleARN") or assoc.get("permissionPolicyARNs") or assoc.get("permissionPolicy")):
            errors.append("pod_identity_associations[%d] needs roleARN, permissionPolicyARNs or permissionPolicy"
                          % index)
        for key in ("permissionPolicyARNs", "permissionPolicy"):
            if assoc.get("roleARN") and assoc.get(key):
                errors.append("pod_identity_associations[%d].%s cannot be set together with roleARN %r"
                              % (index, key, assoc["roleARN"]))
    addons = params.get("addons")
    names = [a.get("name") for a in addons or []]
    # Any add-on turns on addonsConfig.autoApplyPodIdentityAssociations (see render_cluster_config).
    if (associations or addons) and POD_IDENTITY_AGENT not in names:
        errors.append("addons must include %s: eksctl creates Pod Identity associations (%s) only with that "
                      "add-on, got addons %r" % (POD_IDENTITY_AGENT,
                                                 "pod_identity_associations" if associations
                                                 else "addonsConfig.autoApplyPodIdentityAssociations", names))
    return errors


def render_node_group(group, cluster_name, tags=None, instance_role_arn=None):
    """One eksctl managedNodeGroups entry from a trainfleet node group.

    instance_role_arn: the node role (the iam step's) instead of one eksctl creates per group.
    """
    kind = group.get("kind") or "cpu"
    types = list(group["instance_types"])
    labels = {"trainfleet.io/nodegroup": group["name"], "trainfleet.io/kind": kind}
    labels.update(group.get("labels") or {})
    out = {"name": group["name"], "amiFamily": group.get("ami_family") or "AmazonLinux2023"}
    if len(types) == 1 and not group.get("spot"):
        out["instanceType"] = types[0]
    else:
        out["instanceTypes"] = types
    out["minSize"] = group["min_size"]
    out["desiredCapacity"] = group["desired_size"]
    out["maxSize"] = group["max_size"]
    out["volumeSize"] = group.get("volume_size", 100)
    out["volumeType"] = "gp3"
    out["privateNetworking"] = bool(group.get("private_networking", True))
    if group.get("availability_zones"):
        out["availabilityZones"] = list(group["availability_zones"])
    if group.get("spot"):
        out["spot"] = True
    # Pods do not reach the instance metadata service (and so not the node role): they use
    # Pod Identity / IRSA. allow_pod_imds: true opts a group out.
    out["disablePodIMDS"] = not group.get("allow_pod_imds", False)
    out["labels"] = labels
    taints = [{"key": t["key"], "value": str(t.get("value", "")), "effect": t["effect"]}
              for t in (group.get("taints") or [])]
    if taints:
        out["taints"] = taints
    if group.get("efa"):
        labels["trainfleet.io/efa"] = "true"
        out["efaEnabled"] = True
        # eksctl creates a cluster placement group for an EFA group itself when `placement` is unset;
        # a name given here must name a group that already exists.
        if group.get("placement_group"):
            out["placement"] = {"groupName": group["placement_group"]}
    if group.get("capacity_reservation_id"):
        out["capacityReservation"] = {
            "capacityReservationTarget": {"capacityReservationID": group["capacity_reservation_id"]}}
        if group.get("capacity_block"):
            out["instanceMarketOptions"] = {"marketType": "capacity-block"}
    # No withAddonPolicies: add-ons such as the VPC CNI and the FSx CSI driver get their own Pod
    # Identity roles, so the node role needs no add-on policy.
    out["tags"] = dict(tags or {})
    out["tags"]["trainfleet.io/nodegroup"] = group["name"]
    if instance_role_arn:
        # The iam step's node role (worker policy, ECR pull, the permissions boundary) instead of a
        # role eksctl would create per node group.
        out["iam"] = {"instanceRoleARN": instance_role_arn}
    return out


def render_cluster_config(params):
    """The ClusterConfig dict (insertion order is the order written to YAML)."""
    tags = dict(params.get("tags") or {})
    metadata = {"name": params["name"], "region": params["region"]}
    if params.get("version") is not None:
        metadata["version"] = str(params["version"])
    if tags:
        metadata["tags"] = tags
    config = {"apiVersion": API_VERSION, "kind": "ClusterConfig", "metadata": metadata}
    if params.get("availability_zones"):
        config["availabilityZones"] = list(params["availability_zones"])
    config["vpc"] = {
        "cidr": params.get("vpc_cidr") or "10.42.0.0/16",
        "nat": {"gateway": params.get("nat_gateway") or "Single"},
        "clusterEndpoints": {"publicAccess": bool(params.get("endpoint_public_access", True)),
                             "privateAccess": bool(params.get("endpoint_private_access", True))},
    }
    if params.get("endpoint_public_access", True) and params.get("public_access_cidrs"):
        # Who may reach the public API endpoint (EKS defaults to 0.0.0.0/0).
        config["vpc"]["publicAccessCIDRs"] = list(params["public_access_cidrs"])
    iam = {"withOIDC": bool(params.get("with_oidc", True))}
    if params.get("pod_identity_associations"):
        iam["podIdentityAssociations"] = copy.deepcopy(params["pod_identity_associations"])
    config["iam"] = iam
    addons = []
    for addon in params.get("addons") or []:
        item = {"name": addon["name"]}
        if addon.get("version"):
            item["version"] = addon["version"]
        if addon.get("use_default_pod_identity_associations"):
            item["useDefaultPodIdentityAssociations"] = True
        if addon.get("configuration_values"):
            item["configurationValues"] = addon["configuration_values"]
        item["resolveConflicts"] = addon.get("resolve_conflicts") or "overwrite"
        addons.append(item)
    if addons:
        config["addons"] = addons
        config["addonsConfig"] = {"autoApplyPodIdentityAssociations": True}
    if params.get("log_types") is not None:
        logging = {"enableTypes": list(params["log_types"])}
        if params.get("log_retention_days"):
            logging["logRetentionInDays"] = params["log_retention_days"]
        config["cloudWatch"] = {"clusterLogging": logging}
    groups = params.get("managed_node_groups")
    if groups:
        config["managedNodeGroups"] = [render_node_group(g, params["name"], tags, params.get("node_instance_role_arn"))
                                       for g in groups]
    boundary = params.get("permissions_boundary_arn")
    if boundary:
        # Every role eksctl creates carries the boundary the deployer policy requires.
        iam["serviceRolePermissionsBoundary"] = boundary
        for assoc in iam.get("podIdentityAssociations") or []:
            assoc.setdefault("permissionsBoundaryARN", boundary)
        for group in config.get("managedNodeGroups") or []:
            # A given instanceRoleARN already carries the boundary (eksctl refuses both together).
            if "instanceRoleARN" not in group.get("iam", {}):
                group.setdefault("iam", {})["instanceRolePermissionsBoundary"] = boundary
    return config


def current_from_aws(cluster, nodegroups, addons):
    """Comparable view of what AWS reports (describe_cluster / describe_nodegroup / list_addons).

    addons None means the endpoint could not tell (no add-on API); they are then not compared.
    """
    if not cluster:
        return None
    enabled = []
    for entry in (cluster.get("logging") or {}).get("clusterLogging") or []:
        if entry.get("enabled"):
            enabled.extend(entry.get("types") or [])
    groups = {}
    for group in nodegroups or []:
        scaling = group.get("scalingConfig") or {}
        groups[group["nodegroupName"]] = {
            "minSize": scaling.get("minSize"),
            "desiredCapacity": scaling.get("desiredSize"),
            "maxSize": scaling.get("maxSize"),
            "instanceTypes": sorted(group.get("instanceTypes") or []),
            "status": group.get("status"),
            "nodeRole": group.get("nodeRole"),
        }
    return {
        "name": cluster.get("name"),
        "version": cluster.get("version"),
        "status": cluster.get("status"),
        "endpoint": cluster.get("endpoint"),
        "log_types": sorted(set(enabled)),
        "addons": None if addons is None else sorted(addons),
        "nodegroups": groups,
    }


# What EKS managed node groups need from the node role: EC2 may assume it, and the CreateNodegroup
# API refuses a role without AmazonEKSWorkerNodePolicy and an AWS managed ECR pull policy attached
# ("The provided role doesn't have the Amazon EKS Managed Policies associated with it").
NODE_ROLE_TRUSTED_SERVICE = "ec2.amazonaws.com"
NODE_ROLE_REQUIRED_POLICIES = ("AmazonEKSWorkerNodePolicy",)
NODE_ROLE_ECR_POLICIES = ("AmazonEC2ContainerRegistryPullOnly", "AmazonEC2ContainerRegistryReadOnly")


def _trusts(document, service):
    """True when a trust policy document lets the service principal call sts:AssumeRole."""
    for statement in (document or {}).get("Statement") or []:
        if statement.get("Effect") != "Allow":
            continue
        actions = statement.get("Action") or []
        actions = [actions] if isinstance(actions, str) else actions
        principals = (statement.get("Principal") or {}).get("Service") or []
        principals = [principals] if isinstance(principals, str) else principals
        if "sts:AssumeRole" in actions and service in principals:
            return True
    return False


def cni_has_own_role(params):
    """Whether eksctl gives the VPC CNI a role of its own; None when this call cannot tell.

    eksctl 0.210.0 creates the vpc-cni add-on (a default add-on) with a Pod Identity association
    when addonsConfig.autoApplyPodIdentityAssociations is on (we render it with any add-on), else
    with an IRSA role when the cluster has OIDC; without either the CNI uses the node role.
    """
    if params.get("addons") is None:
        return None
    return bool(params.get("addons")) or bool(params.get("with_oidc", True))


def node_role_errors(role, attached_policy_arns, cni_own_role=None):
    """Why an existing IAM role cannot be the node role of EKS managed node groups (empty: it can).

    role: get_role's Role (Path, Arn, AssumeRolePolicyDocument as a dict); attached_policy_arns:
    the ARNs of its attached managed policies; cni_own_role: cni_has_own_role() of the cluster
    (False: the node role must carry AmazonEKS_CNI_Policy).
    """
    errors = []
    name = role.get("RoleName") or role_name_of(role.get("Arn"))
    if role.get("Path", "/") != "/":
        errors.append("node role %s is under path %s: eksctl 0.210.0 drops a role path from iam.instanceRoleARN, so "
                      "the node group would name a role that does not exist; create the role at path /"
                      % (name, role.get("Path")))
    if not _trusts(role.get("AssumeRolePolicyDocument"), NODE_ROLE_TRUSTED_SERVICE):
        errors.append("node role %s does not let %s assume it (EKS refuses it as a node role)"
                      % (name, NODE_ROLE_TRUSTED_SERVICE))
    attached = set(str(arn).rsplit("/", 1)[-1] for arn in attached_policy_arns
                   if ":iam::aws:policy/" in str(arn))
    missing = [p for p in NODE_ROLE_REQUIRED_POLICIES if p not in attached]
    if not attached.intersection(NODE_ROLE_ECR_POLICIES):
        missing.append(" or ".join(NODE_ROLE_ECR_POLICIES))
    if missing:
        errors.append("node role %s lacks the AWS managed policies %s (the EKS managed node group API refuses a node "
                      "role without them)" % (name, ", ".join(missing)))
    if cni_own_role is False and "AmazonEKS_CNI_Policy" not in attached:
        errors.append("node role %s has no AmazonEKS_CNI_Policy and the VPC CNI gets no role of its own (no add-ons and "
                      "with_oidc false): list add-ons (eks-pod-identity-agent, vpc-cni), enable OIDC, or attach "
                      "AmazonEKS_CNI_Policy to the node role" % name)
    return errors


def node_role_arn(partition, account, name):
    """The ARN of role <name> at path / (what the iam step creates)."""
    return "arn:%s:iam::%s:role/%s" % (partition, account, name)


def role_name_of(arn):
    """The role name of a role ARN (its last path element), None for anything else."""
    if not arn or ":role/" not in str(arn):
        return None
    return str(arn).rsplit("/", 1)[-1]


def node_role_warnings(config, current):
    """Existing node groups whose node role is not the wanted instanceRoleARN (EKS cannot change it)."""
    warnings = []
    if not current:
        return warnings
    existing = current.get("nodegroups") or {}
    for group in config.get("managedNodeGroups") or []:
        wanted = (group.get("iam") or {}).get("instanceRoleARN")
        have = (existing.get(group["name"]) or {}).get("nodeRole")
        if wanted and have and role_name_of(have) != role_name_of(wanted):
            warnings.append("node group %s runs with node role %s, not %s (node_instance_role_arn): EKS cannot change "
                            "a node group's role; replace the group (delete it, or rename it in the list, and run "
                            "again) to move its nodes to the new role" % (group["name"], have, wanted))
    return warnings


def _minor(version):
    match = _VERSION_RE.match(str(version or ""))
    return int(match.group(1)) if match else None


def plan(config, current, manage_nodegroups, prune_nodegroups, state):
    """Ordered list of actions: dicts with an 'action' and what it acts on."""
    name = config["metadata"]["name"]
    if state == "absent":
        return [{"action": "delete_cluster", "name": name}] if current else []
    groups = config.get("managedNodeGroups") or []
    if not current:
        return [{"action": "create_cluster", "name": name, "nodegroups": [g["name"] for g in groups]}]
    if current.get("status") not in (None, "ACTIVE"):
        raise EksctlConfigError("cluster %s is %s; wait until it is ACTIVE and run again" % (name, current["status"]))
    actions = []
    want, have = _minor(config["metadata"].get("version")), _minor(current.get("version"))
    if want is not None and have is not None:
        if want < have:
            raise EksctlConfigError("version %s is older than the running %s; EKS cannot downgrade"
                                    % (config["metadata"]["version"], current["version"]))
        if want > have:
            # eksctl upgrades one minor version per call; repeat until the target is reached.
            for minor in range(have + 1, want + 1):
                actions.append({"action": "upgrade_cluster", "name": name, "version": "1.%d" % minor})
    logging = (config.get("cloudWatch") or {}).get("clusterLogging")
    if logging is not None and sorted(logging.get("enableTypes") or []) != current.get("log_types"):
        actions.append({"action": "update_logging", "name": name,
                        "from": current.get("log_types"), "to": sorted(logging.get("enableTypes") or [])})
    known = current.get("addons")
    missing_addons = [] if known is None else [a["name"] for a in config.get("addons") or [] if a["name"] not in known]
    if missing_addons:
        actions.append({"action": "create_addons", "name": name, "addons": missing_addons})
    if manage_nodegroups:
        existing = current.get("nodegroups") or {}
        missing = [g["name"] for g in groups if g["name"] not in existing]
        if missing:
            actions.append({"action": "create_nodegroups", "name": name, "nodegroups": missing})
        for group in groups:
            have_group = existing.get(group["name"])
            if not have_group:
                continue
            wanted = (group["minSize"], group["desiredCapacity"], group["maxSize"])
            actual = (have_group["minSize"], have_group["desiredCapacity"], have_group["maxSize"])
            if wanted != actual:
                actions.append({"action": "scale_nodegroup", "name": name, "nodegroup": group["name"],
                                "from": list(actual), "to": list(wanted)})
        if prune_nodegroups:
            wanted_names = set(g["name"] for g in groups)
            for extra in sorted(set(existing) - wanted_names):
                actions.append({"action": "delete_nodegroup", "name": name, "nodegroup": extra})
    return actions


def commands(actions, config_path, region, kubeconfig=None, timeout="40m"):
    """The eksctl argv for each action (same order)."""
    argvs = []
    no_auto_plugins = ["--install-nvidia-plugin=false", "--install-neuron-plugin=false"]
    for act in actions:
        kind = act["action"]
        if kind == "create_cluster":
            argv = ["create", "cluster", "-f", config_path, "--timeout", timeout] + no_auto_plugins
            if kubeconfig:
                argv += ["--kubeconfig", kubeconfig]
        elif kind == "upgrade_cluster":
            argv = ["upgrade", "cluster", "--name", act["name"], "--region", region,
                    "--version", act["version"], "--approve", "--timeout", timeout]
        elif kind == "update_logging":
            argv = ["utils", "update-cluster-logging", "-f", config_path, "--approve"]
        elif kind == "create_addons":
            argv = ["create", "addon", "-f", config_path]
        elif kind == "create_nodegroups":
            argv = ["create", "nodegroup", "-f", config_path, "--include", ",".join(act["nodegroups"]),
                    "--timeout", timeout] + no_auto_plugins
        elif kind == "scale_nodegroup":
            low, desired, high = act["to"]
            argv = ["scale", "nodegroup", "--cluster", act["name"], "--region", region, "--name", act["nodegroup"],
                    "--nodes", str(desired), "--nodes-min", str(low), "--nodes-max", str(high), "--wait",
                    "--timeout", timeout]
        elif kind == "delete_nodegroup":
            argv = ["delete", "nodegroup", "--cluster", act["name"], "--region", region, "--name", act["nodegroup"],
                    "--wait", "--timeout", timeout]
        elif kind == "delete_cluster":
            argv = ["delete", "cluster", "--name", act["name"], "--region", region, "--wait",
                    "--disable-nodegroup-eviction", "--timeout", timeout]
        else:
            raise EksctlConfigError("unknown action %s" % kind)
        argvs.append(argv)
    return argvs


def kubeconfig_command(name, region, kubeconfig):
    return ["utils", "write-kubeconfig", "--cluster", name, "--region", region, "--kubeconfig", kubeconfig]


def dump_yaml(config):
    """The ClusterConfig as a YAML document, as handed to eksctl and kept in the golden files."""
    return "---\n" + yaml.dump(config, Dumper=_IndentedDumper, sort_keys=False, default_flow_style=False, width=120)
