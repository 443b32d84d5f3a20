#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: eksctl_cluster
short_description: Create, upgrade and delete an EKS cluster and its managed node groups with eksctl
version_added: "0.1.0"
author:
  - trainfleet developers (!UNKNOWN)
description:
  - Renders an eksctl C(ClusterConfig) (apiVersion C(eksctl.io/v1alpha5)) from validated options.
  - Reads the current state first through the EKS API (C(describe_cluster), C(describe_nodegroup), C(list_addons)),
    plans the eksctl calls that take it to the desired state and runs only those, so a second run reports no change.
  - Runs C(eksctl create cluster -f), C(eksctl upgrade cluster) (one minor version per call),
    C(eksctl utils update-cluster-logging), C(eksctl create addon), C(eksctl create nodegroup),
    C(eksctl scale nodegroup), C(eksctl delete nodegroup) and C(eksctl delete cluster).
  - eksctl's automatic NVIDIA and Neuron device plugin installs are switched off
    (C(--install-nvidia-plugin=false), C(--install-neuron-plugin=false)); the device_plugins role installs pinned versions.
  - Options left unset (V(null)) are not compared, so a play that manages only node groups leaves the cluster settings alone.
  - Compared on an existing cluster are the Kubernetes version, control plane log types, missing add-ons and node group
    sizes. Settings eksctl applies only at creation (VPC, zones, endpoint access, OIDC, node group instance types,
    labels, taints) are not compared; change them by replacing the node group or the cluster.
  - In check mode nothing is run and eksctl is not needed; the result tells what would be done.
  - O(endpoint_url) is used for reading state (EKS, IAM, STS), for example a local AWS endpoint in tests; eksctl
    is not given it. O(access_key), O(secret_key), O(session_token), O(profile) and O(aws_ca_bundle), when set, are
    passed to eksctl as their C(AWS_*) environment variables, so eksctl acts with the credentials the state was read
    with.
options:
  name:
    description: Cluster name.
    type: str
    required: true
  region:
    description:
      - AWS region of the cluster (C(metadata.region) of the ClusterConfig, eksctl's C(--region)).
      - Required by this module; the C(AWS_REGION) or C(AWS_DEFAULT_REGION) environment variable may be used instead.
    type: str
    required: true
  state:
    description: V(present) creates or updates; V(absent) deletes the cluster and its node groups.
    type: str
    choices: [present, absent]
    default: present
  version:
    description: Kubernetes minor version such as V(1.33). Not compared when unset.
    type: str
  availability_zones:
    description: At least two zones of O(region). eksctl picks zones when unset.
    type: list
    elements: str
  vpc_cidr:
    description: CIDR of the VPC eksctl creates.
    type: str
    default: 10.42.0.0/16
  nat_gateway:
    description: NAT gateway mode of the VPC.
    type: str
    choices: [Single, HighlyAvailable, Disable]
    default: Single
  endpoint_public_access:
    description: Whether the API server endpoint is reachable from the internet.
    type: bool
    default: true
  public_access_cidrs:
    description:
      - CIDRs allowed to reach the public API server endpoint (C(vpc.publicAccessCIDRs)); EKS allows 0.0.0.0/0 when empty.
      - The eks_cluster role requires them when O(endpoint_public_access=true).
    type: list
    elements: str
  endpoint_private_access:
    description: Whether the API server endpoint is reachable from inside the VPC.
    type: bool
    default: true
  with_oidc:
    description: Create the IAM OIDC provider (needed for IRSA).
    type: bool
    default: true
  permissions_boundary_arn:
    description:
      - Permissions boundary of every IAM role eksctl creates (C(iam.serviceRolePermissionsBoundary), each node
        group's C(iam.instanceRolePermissionsBoundary) unless O(node_instance_role_arn) names the node role, each pod
        identity association's C(permissionsBoundaryARN)).
      - The trainfleet deployer policy lets roles be created only with the boundary the iam role publishes.
    type: str
  node_instance_role_arn:
    description:
      - IAM role of every managed node group (C(iam.instanceRoleARN)), usually the iam role's node role
        (C(iam_node_role_arn)). eksctl then creates no node role and puts no permissions boundary on one.
      - Must be a role at path C(/) (C(arn:aws:iam::<account>:role/<name>)); eksctl 0.210.0 drops a role path
        from C(instanceRoleARN), so the node group would name a role that does not exist.
      - Unset (and no O(node_instance_role_name)), eksctl creates a role per node group. An existing node group
        keeps its role (EKS cannot change it); the module warns when it differs.
      - When node groups are managed, the role is read first (C(iam:GetRole), C(iam:ListAttachedRolePolicies)) and
        refused unless it is at path C(/), trusts C(ec2.amazonaws.com) and has C(AmazonEKSWorkerNodePolicy) and
        C(AmazonEC2ContainerRegistryPullOnly) (or C(AmazonEC2ContainerRegistryReadOnly)) attached, which the EKS
        managed node group API requires.
    type: str
  node_instance_role_name:
    description:
      - Name of the node role, looked up in IAM when O(node_instance_role_arn) is unset (the iam step creates it at
        path C(/)).
      - A role that does not exist fails the call, except in check mode, where the ARN the iam step would create
        is used (account from STS) with a warning.
    type: str
  pod_identity_associations:
    description:
      - EKS Pod Identity associations, passed to C(iam.podIdentityAssociations) as given (eksctl's field names,
        for example C(namespace), C(serviceAccountName), C(roleARN) or C(permissionPolicyARNs)).
    type: list
    elements: dict
  addons:
    description:
      - EKS add-ons. Only missing add-ons are created; versions of existing ones are left alone.
      - When set (or with O(pod_identity_associations)) the list must include V(eks-pod-identity-agent), because the
        rendered config turns on C(addonsConfig.autoApplyPodIdentityAssociations), which eksctl accepts only with it.
    type: list
    elements: dict
    suboptions:
      name:
        description: Add-on name such as V(vpc-cni), V(eks-pod-identity-agent), V(aws-fsx-csi-driver).
        type: str
        required: true
      version:
        description: Add-on version; eksctl's default when unset.
        type: str
      use_default_pod_identity_associations:
        description: Let eksctl create the add-on's recommended Pod Identity associations.
        type: bool
        default: false
      configuration_values:
        description: Add-on configuration as a JSON string.
        type: str
      resolve_conflicts:
        description: How eksctl resolves conflicts with existing fields.
        type: str
        choices: [none, overwrite, preserve]
        default: overwrite
  log_types:
    description: Control plane log types sent to CloudWatch. Not compared when unset; V([]) disables logging.
    type: list
    elements: str
  log_retention_days:
    description: Retention of the CloudWatch log group; V(0) keeps the default. Must be V(0) when O(log_types=[]).
    type: int
    default: 0
  tags:
    description: Tags for the cluster and every node group.
    type: dict
  managed_node_groups:
    description:
      - Managed node groups. Unset means node groups are not managed by this call.
      - Missing groups are created, size changes are applied with C(eksctl scale nodegroup),
        groups not listed are deleted only with O(prune_nodegroups=true).
    type: list
    elements: dict
    suboptions:
      name:
        description: Node group name.
        type: str
        required: true
      kind:
        description: What the group is for; instance types are checked against it.
        type: str
        choices: [cpu, gpu, trainium, inferentia]
        default: cpu
      instance_types:
        description: Instance types (one when O(managed_node_groups[].efa=true)).
        type: list
        elements: str
        required: true
      min_size:
        description: Minimum node count.
        type: int
        required: true
      desired_size:
        description: Desired node count.
        type: int
        required: true
      max_size:
        description: Maximum node count (at least 1).
        type: int
        required: true
      volume_size:
        description: Root volume size in GiB.
        type: int
        default: 100
      ami_family:
        description:
          - AMI family; eksctl picks the NVIDIA or Neuron variant of AmazonLinux2023 from the instance type.
          - Groups of kind V(gpu), V(trainium) or V(inferentia) must use V(AmazonLinux2023); V(AmazonLinux2) is
            refused from Kubernetes 1.33 on (eksctl 0.210.0 has no AL2 AMIs there).
        type: str
        default: AmazonLinux2023
      spot:
        description: Use spot capacity.
        type: bool
        default: false
      efa:
        description: Attach EFA interfaces and put the nodes in a cluster placement group.
        type: bool
        default: false
      placement_group:
        description:
          - An existing placement group for an EFA group. Unset, eksctl creates a cluster placement
            group for the node group itself. Only valid with O(managed_node_groups[].efa=true).
        type: str
      capacity_reservation_id:
        description: Targeted On-Demand Capacity Reservation or Capacity Block id.
        type: str
      capacity_block:
        description: The reservation is an EC2 Capacity Block for ML (needs O(managed_node_groups[].capacity_reservation_id)).
        type: bool
        default: false
      labels:
        description: Kubernetes node labels (string values; no C(kubernetes.io/) or C(k8s.io/) keys except C(node.kubernetes.io/)).
        type: dict
      taints:
        description: Kubernetes taints, each with C(key), C(value) and C(effect).
        type: list
        elements: dict
      availability_zones:
        description: Zones for this group (EFA groups take at most one zone, as eksctl requires).
        type: list
        elements: str
      private_networking:
        description: Put the nodes in private subnets.
        type: bool
        default: true
      allow_pod_imds:
        description: Let the group's pods reach the instance metadata service (C(disablePodIMDS=false)); by default they cannot.
        type: bool
        default: false
  prune_nodegroups:
    description: Delete node groups that exist in the cluster but are not in O(managed_node_groups).
    type: bool
    default: false
  cluster_must_exist:
    description:
      - Fail instead of creating the cluster when it does not exist (used by the node group step).
      - In check mode a missing cluster is reported as node groups to create instead.
    type: bool
    default: false
  efa_extra_types:
    description: Instance types to accept as EFA capable in addition to the built-in list.
    type: list
    elements: str
    default: []
  eksctl_path:
    description: eksctl executable (name on PATH or full path). Only needed when something must be changed.
    type: path
    default: eksctl
  kubeconfig:
    description: Write the cluster's kubeconfig to this file (C(eksctl utils write-kubeconfig)) when missing.
    type: path
  config_path:
    description: Also write the rendered ClusterConfig to this file for inspection (not counted as a change).
    type: path
  timeout:
    description: eksctl C(--timeout) for long operations.
    type: str
    default: 40m
requirements:
  - PyYAML
  - eksctl (only to apply changes)
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
notes:
  - Supports check mode and diff mode.
attributes:
  check_mode:
    description: Reads the state and reports the planned eksctl calls without running them.
    support: full
  diff_mode:
    description: Shows version, log types, add-ons and node group sizes before and after.
    support: full
"""

EXAMPLES = r"""
- name: Cluster with OIDC, Pod Identity agent, FSx CSI driver and a CPU node group
  trainfleet.training.eksctl_cluster:
    name: trainfleet
    region: us-west-2
    version: "1.33"
    availability_zones: [us-west-2a, us-west-2b]
    addons:
      - name: vpc-cni
      - name: coredns
      - name: kube-proxy
      - name: eks-pod-identity-agent
      - name: aws-fsx-csi-driver
        use_default_pod_identity_associations: true
    log_types: [api, audit, authenticator]
    managed_node_groups:
      - name: cpu
        instance_types: [m5.xlarge]
        min_size: 1
        desired_size: 2
        max_size: 3
    # The iam role's node role (path /): no node role is created by eksctl.
    node_instance_role_arn: arn:aws:iam::123456789012:role/trainfleet-node
    kubeconfig: ~/.kube/trainfleet
    eksctl_path: ~/.cache/trainfleet/eksctl/0.210.0/eksctl

- name: Scale the Trainium group to zero after a run (cluster settings untouched)
  trainfleet.training.eksctl_cluster:
    name: trainfleet
    region: us-west-2
    cluster_must_exist: true
    managed_node_groups:
      - name: trn1
        kind: trainium
        instance_types: [trn1.32xlarge]
        efa: true
        min_size: 0
        desired_size: 0
        max_size: 2

- name: Delete the cluster
  trainfleet.training.eksctl_cluster:
    name: trainfleet
    region: us-west-2
    state: absent
"""

RETURN = r"""
config:
  description: The rendered ClusterConfig.
  returned: always
  type: dict
  sample: {apiVersion: eksctl.io/v1alpha5, kind: ClusterConfig, metadata: {name: trainfleet, region: us-west-2}}
config_yaml:
  description: The rendered ClusterConfig as YAML, as handed to eksctl.
  returned: always
  type: str
current:
  description: The state read before any change (null when the cluster does not exist).
  returned: always
  type: dict
  sample: {name: trainfleet, version: "1.32", status: ACTIVE, log_types: [api], addons: [vpc-cni], nodegroups: {}}
actions:
  description: The planned actions, in order (run unless in check mode).
  returned: always
  type: list
  elements: dict
  sample: [{action: upgrade_cluster, name: trainfleet, version: "1.33"}]
commands:
  description: The eksctl command lines for the actions.
  returned: always
  type: list
  elements: list
node_instance_role:
  description: The node role rendered as every node group's C(iam.instanceRoleARN); C(exists) is null when it could not be read.
  returned: when node groups are managed with O(node_instance_role_arn) or O(node_instance_role_name)
  type: dict
  sample: {arn: "arn:aws:iam::123456789012:role/trainfleet-node", exists: true}
kubeconfig:
  description: Path of the kubeconfig written or kept.
  returned: when O(kubeconfig) is set
  type: str
"""

import hashlib
import json
import os
import traceback

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule, aws_argument_spec
from ansible_collections.trainfleet.training.plugins.module_utils.eksctl import (
    EksctlConfigError,
    cni_has_own_role,
    commands,
    current_from_aws,
    dump_yaml,
    kubeconfig_command,
    node_role_arn,
    node_role_errors,
    node_role_warnings,
    role_name_of,
    plan,
    render_cluster_config,
    validate,
)

try:
    import yaml
except ImportError:
    HAS_YAML = False
    YAML_IMP_ERR = traceback.format_exc()
else:
    HAS_YAML = True
    YAML_IMP_ERR = None

try:
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError:
    pass  # handled by AnsibleAWSModule

# The common AWS options this module passes on to eksctl as environment variables, so eksctl acts
# with the credentials the state was read with (endpoint_url is for reading state only).
EKSCTL_ENV = (
    ("access_key", "AWS_ACCESS_KEY_ID"),
    ("secret_key", "AWS_SECRET_ACCESS_KEY"),
    ("session_token", "AWS_SESSION_TOKEN"),
    ("profile", "AWS_PROFILE"),
    ("aws_ca_bundle", "AWS_CA_BUNDLE"),
)


def argspec():
    addon = dict(
        name=dict(type="str", required=True),
        version=dict(type="str"),
        use_default_pod_identity_associations=dict(type="bool", default=False),
        configuration_values=dict(type="str"),
        resolve_conflicts=dict(type="str", choices=["none", "overwrite", "preserve"], default="overwrite"),
    )
    group = dict(
        name=dict(type="str", required=True),
        kind=dict(type="str", choices=["cpu", "gpu", "trainium", "inferentia"], default="cpu"),
        instance_types=dict(type="list", elements="str", required=True),
        min_size=dict(type="int", required=True),
        desired_size=dict(type="int", required=True),
        max_size=dict(type="int", required=True),
        volume_size=dict(type="int", default=100),
        ami_family=dict(type="str", default="AmazonLinux2023"),
        spot=dict(type="bool", default=False),
        efa=dict(type="bool", default=False),
        placement_group=dict(type="str"),
        capacity_reservation_id=dict(type="str"),
        capacity_block=dict(type="bool", default=False),
        labels=dict(type="dict"),
        taints=dict(type="list", elements="dict"),
        availability_zones=dict(type="list", elements="str"),
        private_networking=dict(type="bool", default=True),
        allow_pod_imds=dict(type="bool", default=False),
    )
    return dict(
        name=dict(type="str", required=True),
        # AnsibleAWSModule's region (its alias and environment fallback), required here: eksctl needs
        # it (metadata.region, --region) and the zones are checked against it.
        region=dict(aws_argument_spec()["region"], type="str", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        version=dict(type="str"),
        availability_zones=dict(type="list", elements="str"),
        vpc_cidr=dict(type="str", default="10.42.0.0/16"),
        nat_gateway=dict(type="str", choices=["Single", "HighlyAvailable", "Disable"], default="Single"),
        endpoint_public_access=dict(type="bool", default=True),
        endpoint_private_access=dict(type="bool", default=True),
        public_access_cidrs=dict(type="list", elements="str"),
        with_oidc=dict(type="bool", default=True),
        pod_identity_associations=dict(type="list", elements="dict"),
        permissions_boundary_arn=dict(type="str"),
        node_instance_role_arn=dict(type="str"),
        node_instance_role_name=dict(type="str"),
        addons=dict(type="list", elements="dict", options=addon),
        log_types=dict(type="list", elements="str"),
        log_retention_days=dict(type="int", default=0),
        tags=dict(type="dict"),
        managed_node_groups=dict(type="list", elements="dict", options=group),
        prune_nodegroups=dict(type="bool", default=False),
        cluster_must_exist=dict(type="bool", default=False),
        efa_extra_types=dict(type="list", elements="str", default=[]),
        eksctl_path=dict(type="path", default="eksctl"),
        kubeconfig=dict(type="path"),
        config_path=dict(type="path"),
        timeout=dict(type="str", default="40m"),
    )


def read_current(module):
    """Describe the cluster, its node groups and add-ons; None when the cluster does not exist."""
    params = module.params
    client = module.client("eks")
    name = params["name"]
    try:
        cluster = client.describe_cluster(name=name)["cluster"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return None
        raise
    groups = []
    for page in client.get_paginator("list_nodegroups").paginate(clusterName=name):
        for group_name in page.get("nodegroups", []):
            groups.append(client.describe_nodegroup(clusterName=name, nodegroupName=group_name)["nodegroup"])
    try:
        addons = client.list_addons(clusterName=name).get("addons", [])
    except ClientError as exc:
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 404:
            raise
        # The endpoint has no add-on API (the local AWS endpoint): add-ons cannot be compared.
        module.warn("the EKS endpoint does not implement ListAddons; add-ons are not compared")
        addons = None
    return current_from_aws(cluster, groups, addons)


def _error_code(exc):
    return exc.response.get("Error", {}).get("Code")


def resolve_node_role(module):
    """The node role ARN to render (None: eksctl creates one) and whether the role exists.

    Reads the role (by the ARN's name or node_instance_role_name) and refuses one EKS would refuse.
    """
    params = module.params
    arn, name = params.get("node_instance_role_arn"), params.get("node_instance_role_name")
    if not arn and not name:
        return None, None
    role_name = role_name_of(arn) if arn else name
    client = module.client("iam")
    try:
        role = client.get_role(RoleName=role_name)["Role"]
    except ClientError as exc:
        if _error_code(exc) in ("AccessDenied", "AccessDeniedException") and arn:
            module.warn("node role %s could not be read (%s); node_instance_role_arn is used unchecked"
                        % (arn, _error_code(exc)))
            return arn, None
        if _error_code(exc) != "NoSuchEntity":
            raise
        option = "node_instance_role_arn %s" % arn if arn else "node_instance_role_name %s" % name
        if not module.check_mode:
            raise EksctlConfigError("the node role of the node groups (%s) does not exist: run the iam step first, "
                                    "which creates it" % option)
        if not arn:
            caller = module.client("sts")
            identity = caller.get_caller_identity()
            arn = node_role_arn(identity["Arn"].split(":")[1], identity["Account"], name)
        module.warn("check mode: the node role %s does not exist yet (%s); the iam step creates it" % (arn, option))
        return arn, False
    document = role.get("AssumeRolePolicyDocument")
    if isinstance(document, str):
        role["AssumeRolePolicyDocument"] = json.loads(document)
    attached = []
    for page in client.get_paginator("list_attached_role_policies").paginate(RoleName=role_name):
        attached.extend(p["PolicyArn"] for p in page.get("AttachedPolicies", []))
    errors = node_role_errors(role, attached, cni_has_own_role(params))
    if errors:
        raise EksctlConfigError("; ".join(errors))
    return role["Arn"], True


def comparable(params, config, current, manage_nodegroups):
    """Before/after views for diff mode, in one shape, holding only what this call manages."""
    after, before = {}, {}
    current = current or {}
    if params["version"] is not None:
        after["version"] = config["metadata"]["version"]
        before["version"] = current.get("version")
    if params["log_types"] is not None:
        after["log_types"] = sorted(params["log_types"])
        before["log_types"] = current.get("log_types")
    if params["addons"] is not None:
        after["addons"] = sorted(a["name"] for a in config.get("addons") or [])
        before["addons"] = current.get("addons")
    if manage_nodegroups:
        after["nodegroups"] = dict(
            (g["name"], {"minSize": g["minSize"], "desiredCapacity": g["desiredCapacity"], "maxSize": g["maxSize"]})
            for g in config.get("managedNodeGroups") or [])
        before["nodegroups"] = dict(
            (n, {"minSize": g["minSize"], "desiredCapacity": g["desiredCapacity"], "maxSize": g["maxSize"]})
            for n, g in (current.get("nodegroups") or {}).items())
    if not current:
        before = {}
    return before, after


def _digest(path):
    if not os.path.exists(path):
        return None
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _mentions(path, name):
    """True when the kubeconfig file exists and already has a context for the cluster."""
    if not os.path.exists(path):
        return False
    with open(path) as handle:
        data = yaml.safe_load(handle) or {}
    return any(name in str(ctx.get("name", "")) for ctx in data.get("contexts") or [])


def execute_module(module):
    validate(module.params)
    params = dict(module.params)
    role_exists = None
    if params["state"] == "present" and params["managed_node_groups"]:
        params["node_instance_role_arn"], role_exists = resolve_node_role(module)
    config = render_cluster_config(params)
    config_yaml = dump_yaml(config)
    manage_nodegroups = params["managed_node_groups"] is not None

    current = read_current(module)
    if current is None and params["cluster_must_exist"] and params["state"] == "present":
        if not module.check_mode:
            raise EksctlConfigError("cluster %s does not exist in %s; run the cluster step first"
                                    % (params["name"], params["region"]))
        # A check-mode run of the whole pipeline: the cluster step would have created it with these groups.
        groups = [g["name"] for g in config.get("managedNodeGroups") or []]
        actions = [{"action": "create_nodegroups", "name": params["name"], "nodegroups": groups}] if groups else []
    else:
        actions = plan(config, current, manage_nodegroups, params["prune_nodegroups"], params["state"])
    if manage_nodegroups and params["state"] == "present":
        for warning in node_role_warnings(config, current):
            module.warn(warning)

    if params["config_path"] and not module.check_mode:
        os.makedirs(os.path.dirname(os.path.abspath(params["config_path"])), exist_ok=True)
        with open(params["config_path"], "w") as handle:
            handle.write(config_yaml)
    config_file = params["config_path"]
    if not config_file:
        config_file = os.path.join(module.tmpdir, "clusterconfig.yaml")
        with open(config_file, "w") as handle:
            handle.write(config_yaml)

    kubeconfig = params["kubeconfig"]
    argvs = commands(actions, config_file, params["region"], kubeconfig, params["timeout"])
    result = dict(changed=bool(actions), config=config, config_yaml=config_yaml, current=current,
                  actions=actions, commands=[[params["eksctl_path"]] + argv for argv in argvs])
    if params["node_instance_role_arn"]:
        result["node_instance_role"] = dict(arn=params["node_instance_role_arn"], exists=role_exists)
    if module._diff:
        before, after = comparable(params, config, current, manage_nodegroups)
        result["diff"] = dict(before=before, after=after if params["state"] == "present" else {},
                              before_header="EKS %s (current)" % params["name"],
                              after_header="EKS %s (desired)" % params["name"])
    wants_kubeconfig = bool(kubeconfig) and params["state"] == "present" and (
        bool(actions) or not _mentions(kubeconfig, params["name"]))
    if kubeconfig and params["state"] == "present":
        result["kubeconfig"] = kubeconfig

    if module.check_mode:
        if wants_kubeconfig:
            result["changed"] = True
        return result

    eksctl = params["eksctl_path"]
    if actions or wants_kubeconfig:
        if os.sep not in eksctl:
            eksctl = module.get_bin_path(eksctl, required=True)
        elif not os.access(eksctl, os.X_OK):
            raise EksctlConfigError("eksctl_path %s is not an executable file; install eksctl first "
                                    "(role trainfleet.training.eks_cluster)" % eksctl)
    env = {"AWS_REGION": params["region"]}
    env.update((name, params[option]) for option, name in EKSCTL_ENV if params.get(option))
    for argv in argvs:
        rc, out, err = module.run_command([eksctl] + argv, environ_update=env)
        if rc != 0:
            module.fail_json(msg="eksctl %s failed (rc=%d): %s" % (" ".join(argv[:2]), rc, (err or out)[-4000:]),
                             **result)
    if wants_kubeconfig:
        before = _digest(kubeconfig)
        os.makedirs(os.path.dirname(os.path.abspath(kubeconfig)), exist_ok=True)
        rc, out, err = module.run_command([eksctl] + kubeconfig_command(params["name"], params["region"], kubeconfig),
                                          environ_update=env)
        if rc != 0:
            module.fail_json(msg="eksctl utils write-kubeconfig failed (rc=%d): %s" % (rc, (err or out)[-4000:]),
                             **result)
        if _digest(kubeconfig) != before:
            result["changed"] = True
    return result


def main():
    module = AnsibleAWSModule(argument_spec=argspec(), supports_check_mode=True)
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=YAML_IMP_ERR)
    try:
        result = execute_module(module)
    except EksctlConfigError as exc:
        module.fail_json(msg=str(exc))
    except (BotoCoreError, ClientError) as exc:
        module.fail_json(msg="reading the EKS state failed: %s" % exc, exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
