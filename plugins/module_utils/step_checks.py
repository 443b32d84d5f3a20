# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The storage and trainer_image steps' checks of their inputs (roles/storage, roles/trainer_image: tasks/preflight.yml).

module_utils/checks.py says how the checks run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.trainfleet.training.plugins.module_utils.checks import (
    BUCKET, DNS_1123_LABEL, DNS_LABEL_63, DOT_OR_DOTDOT, IPV4, MOUNT_PATH, REPOSITORY, first, is_list, length, matches, q, text,
    to_int)
from ansible_collections.trainfleet.training.plugins.module_utils.pod_settings import to_bool

# --------------------------------------------------------------------------- storage

# The hostPath volume is writable by the training pods on every node: never the node's root, a
# system directory or the data of the kubelet, the container runtime, etcd or the CNI (a pod writing
# there owns the node). The check runs on every backend, so that a bad value never waits for a
# backend change.
SYSTEM_TREE = re.compile(r"^/(bin|boot|dev|etc|kind|lib|lib32|lib64|libx32|proc|root|run|sbin|sys|usr"
                         r"|var/lib/(kubelet|containerd|docker|etcd|cni|dpkg|apt|systemd)|var/log|var/run|var/lock|opt/cni)(/|\Z)")
SYSTEM_DIRS = ("/", "/var", "/var/lib", "/var/local", "/opt", "/home", "/mnt", "/media", "/srv", "/tmp")
SIZE = re.compile(r"^[0-9]+(Gi|Ti)\Z")
SUBNET = re.compile(r"^subnet-[0-9a-f]+\Z")
SECURITY_GROUP = re.compile(r"^sg-[0-9a-f]+\Z")
S3_PATH = re.compile(r"^s3://[a-z0-9.-]+(/.*)?\Z")
EFS = re.compile(r"^fs-[0-9a-f]+\Z")
CLASS = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
ZONE = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9][a-z]\Z")
THROUGHPUTS = (12, 40, 50, 100, 125, 200, 250, 500, 1000)


def _storage_hostpath(v):
    path = v["storage_hostpath_path"]
    if SYSTEM_TREE.match(text(path)) or path in SYSTEM_DIRS:
        return ("storage_hostpath_path %s is a system directory of the nodes or inside one, and the training pods write to it on "
                "every node. Refused: / itself; /var, /var/lib, /var/local, /opt, /home, /mnt, /media, /srv and /tmp themselves; "
                "anything under /bin /boot /dev /etc /kind /lib* /proc /root /run /sbin /sys /usr /var/log /var/run /var/lock "
                "/opt/cni and /var/lib/{kubelet,containerd,docker,etcd,cni,dpkg,apt,systemd}. Use a directory of its own such as "
                "/var/local/trainfleet-data (the default)." % q(path))
    return None


def _storage(v, context):
    backend, path, groups = v["storage_backend"], v["storage_hostpath_path"], v["storage_fsx_security_group_ids"]
    pvc, namespace, klass = v["storage_pvc_name"], v["storage_namespace"], v["storage_class_name"]

    def s3_path(name):
        return backend != "fsx" or v[name] == "" or matches(S3_PATH, v[name])

    good = (backend in ("fsx", "efs", "hostpath", "class") and backend in (v["storage_backends"] or [])
            and matches(SIZE, v["storage_size"])
            and (v["storage_fsx_subnet_id"] == "" or matches(SUBNET, v["storage_fsx_subnet_id"]))
            and is_list(groups) and all(matches(SECURITY_GROUP, group) for group in groups)
            and s3_path("storage_fsx_s3_import_path") and s3_path("storage_fsx_s3_export_path")
            # empty only in check mode: the file system lives in the cluster VPC (checked again in apply.yml)
            and (backend != "efs" or matches(EFS, v["storage_efs_file_system_id"])
                 or (context.get("check_mode") and v["storage_efs_file_system_id"] == ""))
            and matches(DNS_1123_LABEL, pvc) and matches(MOUNT_PATH, path) and not DOT_OR_DOTDOT.search(path)
            and matches(DNS_LABEL_63, namespace) and (matches(CLASS, klass) or (backend == "class" and klass == ""))
            and len(text(pvc) + "-" + text(namespace)) <= 253
            and v["storage_fsx_deployment_type"] in ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
            and v["storage_fsx_data_compression_type"] in ("NONE", "LZ4")
            and to_int(v["storage_fsx_per_unit_storage_throughput"]) in THROUGHPUTS
            and 1 <= to_int(v["storage_wait_timeout"]) <= 3600)
    if not good:
        return ("Bad storage input: storage_backend must be one of the platform's backends %s (got %s); storage_size like 1200Gi "
                "(got %s); storage_fsx_subnet_id empty or subnet-... and storage_fsx_security_group_ids sg-... items (got %s / %s); "
                "storage_fsx_s3_import_path empty or s3://bucket/prefix (got %s); efs needs storage_efs_file_system_id fs-... (got "
                "%s); storage_pvc_name a DNS label (got %s); storage_namespace a DNS label (got %s); storage_class_name a DNS "
                "subdomain (got %s); storage_hostpath_path an absolute path of letters, digits and ._- without . or .. components "
                "(got %s); storage_fsx_deployment_type SCRATCH_1/SCRATCH_2/PERSISTENT_1/PERSISTENT_2 (got %s), "
                "storage_fsx_data_compression_type NONE or LZ4 (got %s), storage_fsx_per_unit_storage_throughput an FSx value such "
                "as 125 (got %s), storage_fsx_s3_export_path empty or s3://bucket/prefix (got %s); storage_wait_timeout 1..3600 "
                "seconds (got %s)." % tuple(q(v[name]) for name in (
                    "storage_backends", "storage_backend", "storage_size", "storage_fsx_subnet_id", "storage_fsx_security_group_ids",
                    "storage_fsx_s3_import_path", "storage_efs_file_system_id", "storage_pvc_name", "storage_namespace",
                    "storage_class_name", "storage_hostpath_path", "storage_fsx_deployment_type",
                    "storage_fsx_data_compression_type", "storage_fsx_per_unit_storage_throughput", "storage_fsx_s3_export_path",
                    "storage_wait_timeout")))
    if backend == "fsx":
        zone, region = v["storage_fsx_availability_zone"], text(v["storage_region"])
        if not (isinstance(zone, str) and (zone == "" or (ZONE.match(zone) and zone.startswith(region)))):
            return ("storage_fsx_availability_zone must be empty (the first zone with a private subnet of the cluster) or a zone of "
                    "storage_region %s such as %s (got %s)." % (q(region), q(region + "a"), q(zone)))
        size = v["storage_size"]
        if size.endswith("Gi") and to_int(size[:-2]) % 1200:
            return "storage_size must be a multiple of 1200Gi for FSx for Lustre (got %s)" % q(size)
    return None


STORAGE = (
    "storage_hostpath_path", "storage_backend", "storage_backends", "storage_size", "storage_fsx_subnet_id",
    "storage_fsx_security_group_ids", "storage_fsx_s3_import_path", "storage_fsx_s3_export_path", "storage_efs_file_system_id",
    "storage_pvc_name", "storage_namespace", "storage_class_name", "storage_fsx_deployment_type",
    "storage_fsx_data_compression_type", "storage_fsx_per_unit_storage_throughput", "storage_wait_timeout",
    "storage_fsx_availability_zone", "storage_region",
)


def storage_problems(values, context=None):
    """The first problem of the storage step's inputs, as a list. context: check_mode."""
    context = context or {}
    return first(values, STORAGE, (_storage_hostpath, lambda v: _storage(v, context)))


# --------------------------------------------------------------------------- trainer_image

TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
CUDNN = re.compile(r"^[0-9]+(\.[0-9]+){1,3}\Z")
LOCAL_REPOSITORY = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)+\Z")
DIGEST_REF = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}\Z")


def _trainer_image(v):
    tag = v["trainer_image_tag"]
    if not (matches(REPOSITORY, v["trainer_image_repository"]) and (tag == "" or matches(TAG, tag))
            and text(v["trainer_image_base_image"]) != "" and isinstance(v["trainer_image_build_args"], dict)
            and 0 < to_int(v["trainer_image_build_timeout"]) <= 14400 and v["trainer_image_registry_login"] in ("none", "ecr")):
        return ("Invalid trainer_image input: trainer_image_repository must be registry-host[:port]/path in lowercase (the "
                "platform's trainfleet_cluster.registry.trainer_repository; on aws known once the registry step ran), got %s; "
                "trainer_image_tag empty or a docker tag (got %s); trainer_image_base_image non-empty (got %s); "
                "trainer_image_build_args a dict; trainer_image_build_timeout 1..14400 (got %s); trainer_image_registry_login none "
                "or ecr (got %s)." % tuple(q(v[name]) for name in (
                    "trainer_image_repository", "trainer_image_tag", "trainer_image_base_image", "trainer_image_build_timeout",
                    "trainer_image_registry_login")))
    variants, known = v["trainer_image_variants"], list(v["_trainer_image_variant_build_args"])
    good = (is_list(variants) and all(isinstance(name, str) and name in known for name in variants)
            and len(set(variants)) == len(variants)
            # <tag>-<variant> must still be a docker tag (128 characters at most)
            and (not variants or len(text(tag)) + 1 + max(len(name) for name in variants) <= 128)
            and matches(CUDNN, v["trainer_image_cudnn_version"])
            and matches(LOCAL_REPOSITORY, v["trainer_image_cuda_base_repository"])
            and isinstance(v["trainer_image_neuron_base"], str)
            and (not [name for name in variants if name.startswith("neuron")] or DIGEST_REF.match(v["trainer_image_neuron_base"])))
    if not good:
        return ("Invalid trainer_image input: trainer_image_variants must be a list of distinct names among %s, got %s%s; "
                "trainer_image_cudnn_version a release such as 9.0.0.312 (got %s); trainer_image_cuda_base_repository a local "
                "repository name such as trainfleet/trainer-cuda-base (got %s); the neuron variants need trainer_image_neuron_base, "
                "AWS's Neuron PyTorch training image pinned by digest, <registry>/<repository>[:<tag>]@sha256:<64 hex> (got %s)."
                % (q(known), q(variants),
                   "; with variants, trainer_image_tag plus -<variant> must be at most 128 characters, got %s" % q(tag)
                   if len(text(tag)) > 119 else "",
                   q(v["trainer_image_cudnn_version"]), q(v["trainer_image_cuda_base_repository"]), q(v["trainer_image_neuron_base"])))
    return None


TRAINER_IMAGE = (
    "trainer_image_repository", "trainer_image_tag", "trainer_image_base_image", "trainer_image_build_args",
    "trainer_image_build_timeout", "trainer_image_registry_login", "trainer_image_variants", "trainer_image_cudnn_version",
    "trainer_image_cuda_base_repository", "trainer_image_neuron_base", "_trainer_image_variant_build_args",
)


def trainer_image_problems(values, context=None):  # pylint: disable=unused-argument
    """The first problem of the trainer_image step's inputs, as a list."""
    return first(values, TRAINER_IMAGE, (_trainer_image,))


# --------------------------------------------------------------------------- iam

IAM_PATH = re.compile(r"^/([A-Za-z0-9+=,.@_-]+/)+\Z")
IAM_NAME = r"^[A-Za-z0-9+=,.@_-]{1,%d}\Z"
OIDC_ISSUER = re.compile(r"^oidc\.eks\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/id/[A-Za-z0-9]+\Z")
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}\Z")
SERVICE_ACCOUNT = re.compile(r"^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?\Z")
S3_PREFIX = re.compile(r"^[A-Za-z0-9!_.()'-]+(/[A-Za-z0-9!_.()'-]+)*/\Z")
KMS_KEY = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+\Z")
ECR_REPOSITORY = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*\Z")
ACCOUNT = re.compile(r"^[0-9]{12}\Z")
# An allow-list: broad policies such as AmazonEC2FullAccess or AdministratorAccess would let every
# pod on the node use them through the instance metadata.
NODE_MANAGED_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKSWorkerNodeMinimalPolicy", "AmazonEKS_CNI_Policy",
                         "AmazonEC2ContainerRegistryReadOnly", "AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore",
                         "CloudWatchAgentServerPolicy")
# Allow-lists, not deny-lists: an action is service:Name (letters only, no * or ? wildcard), a
# resource a full ARN without wildcards in the account/region part and never "*" alone.
ACTION = re.compile(r"^[a-z0-9-]+:[A-Za-z0-9]+\Z")
ARN = re.compile(r"^arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:([0-9]{12})?:[A-Za-z0-9+=,.@_/:-]*[A-Za-z0-9+=,.@_/:*-]\Z")
WHOLE_SERVICE = re.compile(r"^arn:[^:]*:[^:]*:[^:]*:[^:]*:\*\Z")


def _flat(value):
    """`[value] | flatten`."""
    out = []
    for item in value if is_list(value) else [value]:
        out.extend(_flat(item) if is_list(item) else [item])
    return out


def _iam_names(v):
    limits = {"iam_name_prefix": 40, "iam_training_role_name": 64, "iam_node_role_name": 64, "iam_training_policy_name": 128,
              "iam_node_ecr_policy_name": 128, "iam_permissions_boundary_name": 128}
    if not (matches(IAM_PATH, v["iam_path"]) and len(v["iam_path"]) <= 512
            and all(matches(re.compile(IAM_NAME % limit), v[name]) for name, limit in limits.items())):
        return ("iam_path must start and end with '/' and name at least one path element (e.g. /trainfleet/; '/' alone would scope "
                "the deployer to every role and policy of the account), and iam_name_prefix, iam_training_role_name, "
                "iam_node_role_name (max 64), iam_training_policy_name, iam_node_ecr_policy_name, iam_permissions_boundary_name "
                "(got %s) may only use letters, digits and +=,.@_- (got path=%s, prefix=%s, roles=%s/%s, policies=%s/%s)."
                % tuple(q(v[name]) for name in ("iam_permissions_boundary_name", "iam_path", "iam_name_prefix",
                                                "iam_training_role_name", "iam_node_role_name", "iam_training_policy_name",
                                                "iam_node_ecr_policy_name")))
    mode = v["iam_identity_mode"]
    if not (mode in ("pod_identity", "irsa") and (mode != "irsa" or matches(OIDC_ISSUER, v["iam_irsa_oidc_issuer"]))
            and matches(CLUSTER_NAME, v["iam_cluster_name"]) and matches(DNS_LABEL_63, v["iam_training_namespace"])
            and matches(SERVICE_ACCOUNT, v["iam_training_service_account"])):
        return ("iam_identity_mode must be pod_identity or irsa (got %s); with irsa, iam_irsa_oidc_issuer must be the cluster's "
                "issuer without https://, e.g. oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE (got %s); "
                "iam_cluster_name, iam_training_namespace and iam_training_service_account must be valid EKS/Kubernetes names "
                "(got %s, %s, %s)." % tuple(q(v[name]) for name in (
                    "iam_identity_mode", "iam_irsa_oidc_issuer", "iam_cluster_name", "iam_training_namespace",
                    "iam_training_service_account")))
    return None


def _iam_scope(v):
    bucket, prefix, key = v["iam_s3_bucket_name"], v["iam_s3_prefix"], v["iam_s3_kms_key_arn"]
    if not (matches(BUCKET, bucket) and ".." not in bucket and matches(S3_PREFIX, prefix)
            and not set(prefix.split("/")) & {".", ".."} and (key == "" or matches(KMS_KEY, key))
            and 3600 <= to_int(v["iam_training_max_session_duration"]) <= 43200):
        return ("iam_s3_bucket_name must be a valid S3 bucket name (got %s); iam_s3_prefix must be a non-empty key prefix ending in "
                "'/' without wildcards, e.g. training/ (got %s); iam_s3_kms_key_arn must be empty or a KMS key ARN (got %s); "
                "iam_training_max_session_duration must be 3600..43200 (got %s)."
                % (q(bucket), q(prefix), q(key), q(v["iam_training_max_session_duration"])))
    repositories, accounts, policies = (v["iam_ecr_repository_names"], v["iam_eks_addon_registry_accounts"],
                                        v["iam_node_managed_policy_names"])
    refused = [name for name in policies if name not in NODE_MANAGED_POLICIES] if is_list(policies) else policies
    if not (v["iam_node_ecr_pull_mode"] in ("scoped", "managed") and is_list(repositories) and len(repositories) > 0
            and all(matches(ECR_REPOSITORY, name) for name in repositories)
            and is_list(accounts) and all(matches(ACCOUNT, account) for account in accounts) and not refused):
        return ("iam_node_ecr_pull_mode must be scoped or managed (got %s); iam_ecr_repository_names must be non-empty ECR "
                "repository names (got %s); iam_eks_addon_registry_accounts must be 12-digit account ids (got %s); "
                "iam_node_managed_policy_names may only name the node policies %s (an allow-list: broad policies such as "
                "AmazonEC2FullAccess or AdministratorAccess would let every pod on the node use them through the instance "
                "metadata); not allowed: %s in iam_node_managed_policy_names %s."
                % (q(v["iam_node_ecr_pull_mode"]), q(repositories), q(accounts), ", ".join(NODE_MANAGED_POLICIES), q(refused),
                   q(policies)))
    return None


def _bad_statement(item):
    if not isinstance(item, dict) or set(item) - {"Sid", "Effect", "Action", "Resource", "Condition"}:
        return True
    if item.get("Effect", "") not in ("Allow", "Deny") or "Action" not in item or "Resource" not in item:
        return True
    resources = _flat(item["Resource"])
    return (not all(matches(ACTION, action) for action in _flat(item["Action"]))
            or not all(matches(ARN, resource) for resource in resources) or any("?" in text(resource) for resource in resources)
            or (item["Effect"] != "Deny" and any(matches(WHOLE_SERVICE, resource) for resource in resources)))


def _iam_statements(v):
    statements = v["iam_deployer_extra_statements"]
    for item in statements if is_list(statements) else [statements]:
        if _bad_statement(item):
            return ("every entry of iam_deployer_extra_statements needs Effect (Allow or Deny), Action and Resource (and only Sid "
                    "and Condition besides); every Action must be one service:Name without wildcards (no * or ?), every Resource a "
                    "full ARN without ? and not \"*\" or a whole service (got %s)." % q(item))
    return None


IAM = (
    "iam_path", "iam_name_prefix", "iam_training_role_name", "iam_node_role_name", "iam_training_policy_name",
    "iam_node_ecr_policy_name", "iam_permissions_boundary_name", "iam_identity_mode", "iam_irsa_oidc_issuer", "iam_cluster_name",
    "iam_training_namespace", "iam_training_service_account", "iam_s3_bucket_name", "iam_s3_prefix", "iam_s3_kms_key_arn",
    "iam_training_max_session_duration", "iam_node_ecr_pull_mode", "iam_ecr_repository_names", "iam_eks_addon_registry_accounts",
    "iam_node_managed_policy_names", "iam_deployer_extra_statements",
)


def iam_problems(values, context=None):  # pylint: disable=unused-argument
    """The first problem of the iam step's inputs, as a list."""
    return first(values, IAM, (_iam_names, _iam_scope, _iam_statements))


# --------------------------------------------------------------------------- eks_cluster and nodegroups

EKS_NAME = re.compile(r"^[a-zA-Z][-a-zA-Z0-9]{0,99}\Z")
AWS_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]\Z")
EKS_VERSION = re.compile(r"^1\.[0-9]+\Z")
EKSCTL_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+\Z")
VPC_CIDR = re.compile(r"^%s/(1[6-9]|2[0-8])\Z" % IPV4)
IPV4_CIDR = re.compile(r"^%s/([0-9]|[12][0-9]|3[0-2])\Z" % IPV4)
DURATION = re.compile(r"^([1-9][0-9]{0,4})([smh])\Z")
LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
ROLE_ARN = re.compile(r"^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_-]{1,64}\Z")
ROLE_NAME = re.compile(r"^[A-Za-z0-9+=,.@_-]{1,64}\Z")
GROUP_NAME = re.compile(r"^[a-zA-Z][-a-zA-Z0-9]{0,62}\Z")


def _duration_ok(value):
    """An eksctl duration such as 40m, at most 4 hours."""
    found = DURATION.match(value) if isinstance(value, str) else None
    return found is not None and int(found.group(1)) * {"s": 1, "m": 60, "h": 3600}[found.group(2)] <= 14400


def _role(arn, name):
    return isinstance(arn, str) and (arn.strip() == "" or ROLE_ARN.match(arn.strip()) is not None) and matches(ROLE_NAME, name)


def _role_problem(prefix, arn, name):
    return ("%s_arn must be empty (look the role up by %s_name) or the ARN of an IAM role at path /, such as "
            "arn:aws:iam::123456789012:role/trainfleet-node (eksctl 0.210.0 drops a role path from iam.instanceRoleARN, so the node "
            "groups would name a role that does not exist; got %s); %s_name must be an IAM role name (got %s)."
            % (prefix, prefix, q(arn), prefix, q(name)))


def _eks_cluster(v, context):
    region, zones = v["eks_cluster_region"], v["eks_cluster_availability_zones"]
    zone = re.compile("^" + re.escape(text(region)) + r"[a-z]\Z")
    good = (matches(EKS_NAME, v["eks_cluster_name"]) and matches(AWS_REGION, region)
            and EKS_VERSION.match(text(v["eks_cluster_version"])) is not None
            and is_list(zones) and len(zones) != 1 and all(matches(zone, name) for name in zones)
            and all(kind in LOG_TYPES for kind in (v["eks_cluster_log_types"] or []))
            and all(isinstance(addon, dict) and "name" in addon for addon in (v["eks_cluster_addons"] or []))
            and matches(EKSCTL_VERSION, v["eks_cluster_eksctl_version"]) and matches(VPC_CIDR, v["eks_cluster_vpc_cidr"])
            and _duration_ok(v["eks_cluster_timeout"]) and 60 <= to_int(v["eks_cluster_eksctl_go_build_timeout"]) <= 14400)
    if not good:
        return ("Bad cluster input. Expected: eks_cluster_name letters/digits/'-' starting with a letter (got %s); eks_cluster_region "
                "like us-west-2 (got %s); eks_cluster_version like \"1.33\" (got %s); eks_cluster_availability_zones empty or >= 2 "
                "zones inside the region (got %s); eks_cluster_log_types a subset of api, audit, authenticator, controllerManager, "
                "scheduler (got %s); every eks_cluster_addons item has a name (got %s); eks_cluster_eksctl_version like 0.210.0 "
                "(got %s); eks_cluster_vpc_cidr an IPv4 CIDR with a /16../28 prefix (got %s); eks_cluster_timeout an eksctl "
                "duration such as 40m, at most 4h (got %s); eks_cluster_eksctl_go_build_timeout 60..14400 seconds (got %s)."
                % tuple(q(v[name]) for name in (
                    "eks_cluster_name", "eks_cluster_region", "eks_cluster_version", "eks_cluster_availability_zones",
                    "eks_cluster_log_types", "eks_cluster_addons", "eks_cluster_eksctl_version", "eks_cluster_vpc_cidr",
                    "eks_cluster_timeout", "eks_cluster_eksctl_go_build_timeout")))
    # deleting the cluster (teardown) and installing eksctl for other steps need no endpoint or role settings
    if v["eks_cluster_state"] != "present" or context.get("install_only"):
        return None
    public, cidrs = to_bool(v["eks_cluster_endpoint_public_access"]), v["eks_cluster_endpoint_public_access_cidrs"]
    if not ((not public or length(cidrs) > 0) and is_list(cidrs) and all(matches(IPV4_CIDR, cidr) for cidr in cidrs)
            and (to_bool(v["eks_cluster_endpoint_public_access_open"]) or "0.0.0.0/0" not in cidrs)
            and (public or to_bool(v["eks_cluster_endpoint_private_access"]))):
        return ("eks_cluster_endpoint_public_access is true, so eks_cluster_endpoint_public_access_cidrs must list the CIDRs allowed "
                "to reach the API endpoint (your operators' and CI's egress addresses; EKS would allow 0.0.0.0/0), each an IPv4 "
                "CIDR, and 0.0.0.0/0 only with eks_cluster_endpoint_public_access_open: true (got %s); or set "
                "eks_cluster_endpoint_public_access: false (the private endpoint then needs eks_cluster_endpoint_private_access: "
                "true)." % q(cidrs))
    arn, name = v["eks_cluster_node_instance_role_arn"], v["eks_cluster_node_instance_role_name"]
    if not _role(arn, name):
        return _role_problem("eks_cluster_node_instance_role", arn, name)
    return None


EKS_CLUSTER = (
    "eks_cluster_name", "eks_cluster_region", "eks_cluster_version", "eks_cluster_availability_zones", "eks_cluster_log_types",
    "eks_cluster_addons", "eks_cluster_eksctl_version", "eks_cluster_vpc_cidr", "eks_cluster_timeout",
    "eks_cluster_eksctl_go_build_timeout", "eks_cluster_state", "eks_cluster_endpoint_public_access",
    "eks_cluster_endpoint_public_access_cidrs", "eks_cluster_endpoint_public_access_open", "eks_cluster_endpoint_private_access",
    "eks_cluster_node_instance_role_arn", "eks_cluster_node_instance_role_name",
)


def eks_cluster_problems(values, context=None):
    """The first problem of the EKS cluster's inputs, as a list. context: install_only (eksctl only, for other steps)."""
    context = context or {}
    return first(values, EKS_CLUSTER, (lambda v: _eks_cluster(v, context),))


def _group_problem(v, index, group):
    kinds, accelerators, efa_types = (v["_nodegroups_kind_families"], v["_nodegroups_accelerator_families"],
                                      v["_nodegroups_efa_types"])
    group = group if isinstance(group, dict) else {}
    kind, types = group.get("kind", "cpu"), group.get("instance_types", [])
    families = [text(name).split(".", maxsplit=1)[0] for name in types] if is_list(types) else []
    sizes = [group.get(key) for key in ("min_size", "desired_size", "max_size")]
    whole_sizes = all(isinstance(size, int) and not isinstance(size, bool) for size in sizes)
    good = (matches(GROUP_NAME, group.get("name")) and kind in ("cpu", "gpu", "trainium", "inferentia")
            and is_list(types) and len(types) > 0
            and (kind == "cpu" or not set(families) - set(kinds.get(kind, [])))
            and (kind != "cpu" or not set(families) & set(accelerators))
            and (not group.get("efa", False) or (len(types) == 1 and types[0] in efa_types))
            and whole_sizes and 0 <= sizes[0] <= sizes[1] <= sizes[2] and 1 <= sizes[2] <= 1000
            and not (group.get("spot", False) and group.get("capacity_reservation_id", ""))
            and isinstance(group.get("allow_pod_imds", False), bool))
    if not good:
        return ("nodegroups_groups[%d] (%s) is invalid. Expected: name of letters, digits and '-'; kind one of cpu, gpu, trainium, "
                "inferentia (got %s); instance_types matching the kind (%s: gpu takes %s, trainium takes %s, cpu takes no "
                "accelerator family); efa only with exactly one EFA-capable type such as p4d.24xlarge, p5.48xlarge, trn1.32xlarge, "
                "trn1n.32xlarge; integers with min_size <= desired_size <= max_size and 1 <= max_size <= 1000 (got %s <= %s <= %s); "
                "spot and capacity_reservation_id not both set. The group: %s."
                % (index, text(group.get("name", "no name")), q(kind), q(types), "/".join(kinds.get("gpu", [])),
                   "/".join(kinds.get("trainium", [])), q(sizes[0]), q(sizes[1]), q(sizes[2]), q(group)))
    return None


def _nodegroups(v):
    groups = v["nodegroups_groups"]
    if not is_list(groups):
        return "nodegroups_groups must be a list of node groups, got %s." % q(groups)
    for index, group in enumerate(groups):
        problem = _group_problem(v, index, group)
        if problem:
            return problem
    names = [group.get("name") for group in groups]
    if len(set(names)) != len(names):
        return "nodegroups_groups: every name must be unique, got %s" % q(names)
    arn, name = v["nodegroups_instance_role_arn"], v["nodegroups_instance_role_name"]
    if not _role(arn, name):
        return _role_problem("nodegroups_instance_role", arn, name)
    if not _duration_ok(v["nodegroups_timeout"]):
        return "nodegroups_timeout must be an eksctl duration such as 40m, at most 4h (got %s)." % q(v["nodegroups_timeout"])
    return None


NODEGROUPS = (
    "nodegroups_groups", "nodegroups_instance_role_arn", "nodegroups_instance_role_name", "nodegroups_timeout",
    "_nodegroups_kind_families", "_nodegroups_accelerator_families", "_nodegroups_efa_types",
)


def nodegroups_problems(values, context=None):  # pylint: disable=unused-argument
    """The first problem of the node groups' inputs, as a list."""
    return first(values, NODEGROUPS, (_nodegroups,))
