# -*- coding: utf-8 -*-
"""eksctl's own ClusterConfig schema and the eksctl rules a schema cannot express, for the tests.

The schema is the JSON Schema (draft-07) eksctl v0.210.0 publishes for ClusterConfig
(eksctl.io/v1alpha5). It is data that lives next to the checkout, in ../shared/eksctl/, and is
read from there (never copied into the project); TRAINFLEET_EKSCTL_SCHEMA points elsewhere.
When it is missing the tests that need it skip with a reason that starts with SKIP_PREFIX, or
fail when TRAINFLEET_REQUIRE_EKSCTL_SCHEMA=1 (scripts/test.sh sets it: in make test the file
must be there and the validation must run).

semantic_errors() holds the checks eksctl 0.210.0 makes in code (its API validation, defaulting
and CloudFormation builder) that touch the fields trainfleet renders, written down from reading
eksctl's behaviour, plus the AMI rule trainfleet relies on for accelerator nodes and the node role
path rule (eksctl drops a path from iam.instanceRoleARN).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EKSCTL_VERSION = "0.210.0"
SCHEMA_ENV = "TRAINFLEET_EKSCTL_SCHEMA"
REQUIRE_ENV = "TRAINFLEET_REQUIRE_EKSCTL_SCHEMA"
SKIP_PREFIX = "eksctl ClusterConfig schema missing"


def schema_path():
    """Where the schema is read from: $TRAINFLEET_EKSCTL_SCHEMA or ../shared/eksctl/schema-v<version>.json."""
    default = os.path.join(os.path.dirname(ROOT), "shared", "eksctl", "schema-v%s.json" % EKSCTL_VERSION)
    return os.environ.get(SCHEMA_ENV) or default


def validator_or_skip():
    """A jsonschema Draft7Validator for eksctl's schema; skips (or fails, see REQUIRE_ENV) without the file."""
    import pytest

    path = schema_path()
    if not os.path.isfile(path):
        reason = ("%s: %s does not exist, so rendered ClusterConfigs were NOT validated against eksctl v%s's "
                  "published schema (put the file there, see ../shared/eksctl/README.md, or point %s at it)"
                  % (SKIP_PREFIX, path, EKSCTL_VERSION, SCHEMA_ENV))
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail("%s; %s=1 requires it" % (reason, REQUIRE_ENV), pytrace=False)
        pytest.skip(reason)
    import jsonschema

    with open(path) as handle:
        schema = json.load(handle)
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def schema_errors(validator, config):
    """Every schema violation as 'path: message', path like managedNodeGroups/0/minSize."""
    found = []
    for error in sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path]):
        path = "/".join(str(p) for p in error.absolute_path) or "(top)"
        found.append("%s: %s" % (path, error.message))
    return found


# ---------------------------------------------------------------- eksctl's semantic rules
# Instance families by accelerator, as eksctl classifies them when it picks an AMI type
# (g4ad is an AMD GPU: no NVIDIA AMI).
NVIDIA_FAMILIES = ("p2", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6", "g3", "g3s", "g4dn", "g5", "g5g",
                   "g6", "g6e", "gr6")
NEURON_FAMILIES = ("inf1", "inf2", "trn1", "trn1n", "trn2")
LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler", "all", "*")
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653)
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
POD_IDENTITY_AGENT = "eks-pod-identity-agent"
# Kubernetes minor from which eksctl refuses amiFamily AmazonLinux2 (no EKS AL2 AMIs).
AL2_REFUSED_FROM_MINOR = 33
_QUALIFIED_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _family(instance_type):
    return str(instance_type or "").split(".", 1)[0]


def _accelerator(instance_type):
    family = _family(instance_type)
    if family in NVIDIA_FAMILIES:
        return "NVIDIA"
    if family in NEURON_FAMILIES:
        return "Neuron"
    return None


def _minor(version):
    match = re.match(r"^1\.(\d+)$", str(version or ""))
    return int(match.group(1)) if match else None


def _reserved_label(key):
    if "/" not in key:
        return False
    domain = key.split("/", 1)[0]
    if domain in ("node.kubernetes.io", "kubelet.kubernetes.io"):
        return False
    return any(domain == d or domain.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))


def _node_group_errors(path, group, cluster_zones, minor):
    errors = []
    types = [group["instanceType"]] if group.get("instanceType") else list(group.get("instanceTypes") or [])
    if group.get("instanceType") and group.get("instanceTypes"):
        errors.append("%s: only one of instanceType or instanceTypes may be set" % path)
    low, desired, high = group.get("minSize"), group.get("desiredCapacity"), group.get("maxSize")
    if None not in (low, desired, high) and not low <= desired <= high:
        errors.append("%s: minSize <= desiredCapacity <= maxSize is required, got %s/%s/%s" % (path, low, desired, high))
    zones = list(group.get("availabilityZones") or [])
    subnets = list(group.get("subnets") or [])
    if zones and subnets:
        errors.append("%s: only one of subnets or availabilityZones may be set" % path)
    for zone in zones:
        if cluster_zones and zone not in cluster_zones:
            errors.append("%s.availabilityZones: %s is not one of the cluster's availabilityZones %s"
                          % (path, zone, cluster_zones))
    # EFA: every node in one subnet, so one zone at most (eksctl picks one subnet when none is named).
    if group.get("efaEnabled") and (len(zones) > 1 or len(subnets) > 1):
        errors.append("%s.efaEnabled: an EFA node group takes at most one availability zone or subnet, got %s"
                      % (path, zones or subnets))
    # Placement groups: eksctl creates a cluster placement group for an EFA group only when
    # `placement` is unset and there is no capacityReservation; a named group must exist already.
    placement = group.get("placement")
    if placement is not None and not placement.get("groupName"):
        errors.append("%s.placement.groupName must be set and non-empty" % path)
    # Launch templates exclude the fields eksctl would put into its own launch template.
    if group.get("launchTemplate"):
        for field in ("instanceType", "volumeSize", "placement", "disablePodIMDS", "preBootstrapCommands",
                      "overrideBootstrapCommand", "maxPodsPerNode", "ami"):
            if field in group:
                errors.append("%s.%s cannot be set together with launchTemplate" % (path, field))
    # An existing node role (instanceRoleARN) excludes everything eksctl would use to create one,
    # managed groups take no instance profile, and eksctl 0.210.0 drops a role path (NormalizeARN:
    # NodeRole becomes arn:...:role/<name>, not the role's ARN, so PassRole on the path and the
    # node group's access entry fail).
    iam = group.get("iam") or {}
    if iam.get("instanceRoleARN"):
        for field in ("instanceRoleName", "attachPolicy", "attachPolicyARNs", "instanceRolePermissionsBoundary"):
            if iam.get(field):
                errors.append("%s.iam.instanceRoleARN and %s.iam.%s cannot be set at the same time" % (path, path, field))
        if any((iam.get("withAddonPolicies") or {}).values()):
            errors.append("%s.iam.instanceRoleARN and %s.iam.withAddonPolicies cannot be set at the same time"
                          % (path, path))
        resource = str(iam["instanceRoleARN"]).split(":", 5)[-1]
        if not re.match(r"^role/[^/]+$", resource):
            errors.append("%s.iam.instanceRoleARN %r has a role path: eksctl passes arn:...:role/<name> instead, "
                          "which is not that role's ARN" % (path, iam["instanceRoleARN"]))
    if iam.get("instanceProfileARN"):
        errors.append("%s.iam.instanceProfileARN is not supported for Managed Nodes" % path)
    # disablePodIMDS and the node role's add-on policies exclude each other.
    addon_policies = (group.get("iam") or {}).get("withAddonPolicies") or {}
    if group.get("disablePodIMDS") and any(addon_policies.values()):
        errors.append("%s: disablePodIMDS and iam.withAddonPolicies cannot be set at the same time" % path)
    # AMI families: no AL2 AMIs from 1.33 on; accelerators need the AL2023 NVIDIA/Neuron AMI.
    family = group.get("amiFamily") or ("AmazonLinux2023" if minor is None or minor >= 30 else "AmazonLinux2")
    if family == "AmazonLinux2" and minor is not None and minor >= AL2_REFUSED_FROM_MINOR:
        errors.append("%s.amiFamily: AmazonLinux2 is not supported for Kubernetes 1.%d" % (path, minor))
    for itype in types:
        accelerator = _accelerator(itype)
        if accelerator and family != "AmazonLinux2023":
            errors.append("%s.amiFamily: %s needs AmazonLinux2023 (the AL2023 %s AMI), got %s"
                          % (path, itype, accelerator, family))
    # Capacity reservations and Capacity Blocks.
    reservation = group.get("capacityReservation")
    market = group.get("instanceMarketOptions")
    if market is not None and reservation is None:
        errors.append("%s.instanceMarketOptions cannot be set without capacityReservation" % path)
    if market is not None and market.get("marketType") not in (None, "capacity-block"):
        errors.append("%s.instanceMarketOptions.marketType must be capacity-block, got %s" % (path, market["marketType"]))
    if reservation is not None:
        target = reservation.get("capacityReservationTarget")
        preference = reservation.get("capacityReservationPreference")
        if preference is not None and target is not None:
            errors.append("%s.capacityReservation: only one of capacityReservationPreference or "
                          "capacityReservationTarget may be set" % path)
        if preference is not None and preference not in ("open", "none"):
            errors.append("%s.capacityReservation.capacityReservationPreference must be open or none, got %s"
                          % (path, preference))
        if target and target.get("capacityReservationID") and target.get("capacityReservationResourceGroupARN"):
            errors.append("%s.capacityReservation.capacityReservationTarget: only one of capacityReservationID or "
                          "capacityReservationResourceGroupARN may be set" % path)
    # Labels and taints as Kubernetes and eksctl accept them.
    for key, value in (group.get("labels") or {}).items():
        if not _QUALIFIED_NAME.match(key) or len(key.split("/")[-1]) > 63:
            errors.append("%s.labels: %r is not a valid label key" % (path, key))
        elif _reserved_label(key):
            errors.append("%s.labels: %r has a reserved prefix (kubernetes.io/, k8s.io/)" % (path, key))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            errors.append("%s.labels[%r]: %r is not a valid label value" % (path, key, value))
    for index, taint in enumerate(group.get("taints") or []):
        if not _QUALIFIED_NAME.match(str(taint.get("key", ""))):
            errors.append("%s.taints[%d].key %r is not a valid taint key" % (path, index, taint.get("key")))
        if taint.get("effect") not in TAINT_EFFECTS:
            errors.append("%s.taints[%d].effect must be one of %s, got %r"
                          % (path, index, ", ".join(TAINT_EFFECTS), taint.get("effect")))
    return errors


def _pod_identity_errors(config):
    errors = []
    associations = (config.get("iam") or {}).get("podIdentityAssociations") or []
    addons = config.get("addons") or []
    auto_apply = (config.get("addonsConfig") or {}).get("autoApplyPodIdentityAssociations")
    wants_agent = bool(associations) or any(
        auto_apply or a.get("useDefaultPodIdentityAssociations") or a.get("podIdentityAssociations") for a in addons)
    if wants_agent and POD_IDENTITY_AGENT not in [a.get("name") for a in addons]:
        errors.append("addons: Pod Identity associations need the %s add-on in the config" % POD_IDENTITY_AGENT)
    for index, assoc in enumerate(associations):
        path = "iam.podIdentityAssociations[%d]" % index
        for key in ("namespace", "serviceAccountName"):
            if not assoc.get(key):
                errors.append("%s.%s must be set" % (path, key))
        policies = [k for k in ("permissionPolicy", "permissionPolicyARNs", "wellKnownPolicies") if assoc.get(k)]
        if not assoc.get("roleARN") and not policies:
            errors.append("%s: one of roleARN, permissionPolicy, permissionPolicyARNs, wellKnownPolicies is needed"
                          % path)
        if assoc.get("roleARN") and policies:
            errors.append("%s: %s cannot be set together with roleARN" % (path, ", ".join(policies)))
    return errors


def semantic_errors(config, existing_placement_groups=()):
    """eksctl's checks beyond the schema, as a list of messages naming the field (empty: none).

    existing_placement_groups: placement groups known to exist before eksctl runs (trainfleet
    creates none, so a named `placement.groupName` elsewhere is reported).
    """
    errors = []
    cluster_zones = list(config.get("availabilityZones") or [])
    if cluster_zones and len(cluster_zones) < 2:
        errors.append("availabilityZones: at least 2 are required, got %s" % cluster_zones)
    minor = _minor((config.get("metadata") or {}).get("version"))
    logging = (config.get("cloudWatch") or {}).get("clusterLogging") or {}
    types = logging.get("enableTypes") or []
    for log_type in types:
        if log_type not in LOG_TYPES:
            errors.append("cloudWatch.clusterLogging.enableTypes: %r is unknown" % log_type)
    retention = logging.get("logRetentionInDays") or 0
    if retention and not types:
        errors.append("cloudWatch.clusterLogging.logRetentionInDays cannot be set without enableTypes")
    if retention and retention not in LOG_RETENTION_DAYS:
        errors.append("cloudWatch.clusterLogging.logRetentionInDays: %r is not a supported value" % retention)
    errors.extend(_pod_identity_errors(config))
    seen = set()
    for index, group in enumerate(config.get("managedNodeGroups") or []):
        path = "managedNodeGroups[%d] (%s)" % (index, group.get("name"))
        if group.get("name") in seen:
            errors.append("%s: the name is used twice" % path)
        seen.add(group.get("name"))
        errors.extend(_node_group_errors(path, group, cluster_zones, minor))
        name = (group.get("placement") or {}).get("groupName")
        if name and name not in existing_placement_groups:
            errors.append("%s.placement.groupName %r names a placement group nothing creates: eksctl creates a "
                          "cluster placement group only when placement is unset and there is no "
                          "capacityReservation, and uses a named one as it is" % (path, name))
    return errors
