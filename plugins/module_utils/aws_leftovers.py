# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an EKS cluster can leave behind in an account, found without relying on our tags.

The FSx CSI driver, EKS and eksctl create resources trainfleet never tags itself: a file system
per dynamic claim, network interfaces in the cluster VPC, CloudFormation stacks (an interrupted
create leaves them in ROLLBACK_COMPLETE or CREATE_FAILED) and the control-plane log group. A
leftover check that only asks "what carries our tags" misses all of them, so this one looks for
what belongs to the cluster by name, network and eksctl's own tags:

- the cluster network: VPCs (and their subnets) tagged alpha.eksctl.io/cluster-name=<cluster>
  (or eksctl's older eksctl.cluster.k8s.io/v1alpha1/cluster-name);
- FSx file systems in that network, or carrying all of the wanted tags (StorageClass extraTags);
- CloudFormation stacks named eksctl-<cluster>-* or tagged with the cluster name;
- log groups under /aws/eks/<cluster>/ and /aws/containerinsights/<cluster>/;
- network interfaces in that network, tagged cluster.k8s.amazonaws.com/name=<cluster> (VPC CNI)
  or described "Amazon EKS <cluster>" (control plane).

Every listing uses the clients' paginators (plain boto3 clients, or AnsibleAWSModule's) and
returns plain dicts. Read-only.
"""

from __future__ import annotations

CLUSTER_TAGS = ("alpha.eksctl.io/cluster-name", "eksctl.cluster.k8s.io/v1alpha1/cluster-name")
CNI_CLUSTER_TAG = "cluster.k8s.amazonaws.com/name"
SERVICES = ("fsx", "cloudformation", "logs", "ec2")
# Errors meaning "this endpoint does not implement the call" (a local endpoint): the listing is
# reported as skipped instead of failing the check.
NOT_IMPLEMENTED_CODES = ("NotImplemented", "InvalidAction", "UnknownOperationException", "NotImplementedError")


def tag_dict(tags, key="Key", value="Value"):
    """[{Key: k, Value: v}, ...] -> {k: v} (None -> {})."""
    return dict((t[key], t.get(value, "")) for t in tags or [] if key in t)


def carries(tags, wanted):
    """True when tags hold every wanted key with its value (an empty wanted never matches)."""
    return bool(wanted) and all(tags.get(k) == v for k, v in wanted.items())


def log_group_prefixes(cluster):
    return ["/aws/eks/%s/" % cluster, "/aws/containerinsights/%s/" % cluster]


def stack_prefix(cluster):
    return "eksctl-%s-" % cluster


def leftover(kind, ident, name, reason, state="", arn="", tags=None):
    return dict(kind=kind, id=ident, name=name, reason=reason, state=state or "", arn=arn or "",
                tags=dict(tags or {}))


class ClusterLeftovers(object):
    """Lists what an EKS cluster left; clients: a callable service name -> client."""

    def __init__(self, clients, cluster, wanted_tags=None):
        if not cluster:
            raise ValueError("cluster must be named")
        self.clients = clients
        self.cluster = cluster
        self.wanted = dict((str(k), str(v)) for k, v in (wanted_tags or {}).items())
        self._network = None

    # ------------------------------------------------------------------ network

    def network(self):
        """(VPC ids, subnet ids) of the cluster network, read once."""
        if self._network is None:
            ec2 = self.clients("ec2")
            vpcs = set()
            for tag in CLUSTER_TAGS:
                filters = [{"Name": "tag:" + tag, "Values": [self.cluster]}]
                for page in ec2.get_paginator("describe_vpcs").paginate(Filters=filters):
                    vpcs.update(v["VpcId"] for v in page.get("Vpcs", []))
            subnets = set()
            if vpcs:
                filters = [{"Name": "vpc-id", "Values": sorted(vpcs)}]
                for page in ec2.get_paginator("describe_subnets").paginate(Filters=filters):
                    subnets.update(s["SubnetId"] for s in page.get("Subnets", []))
            self._network = (vpcs, subnets)
        return self._network

    def known_vpcs(self):
        """The cluster VPC ids if a listing read them, else []."""
        return sorted(self._network[0]) if self._network is not None else []

    # ------------------------------------------------------------------ listings

    def fsx(self):
        """FSx file systems in the cluster network or carrying all of the wanted tags."""
        vpcs, subnets = self.network()
        found = []
        fsx = self.clients("fsx")
        for page in fsx.get_paginator("describe_file_systems").paginate():
            for fs in page.get("FileSystems", []):
                tags = tag_dict(fs.get("Tags"))
                reasons = []
                if fs.get("VpcId") in vpcs:
                    reasons.append("in the cluster VPC %s" % fs["VpcId"])
                elif subnets.intersection(fs.get("SubnetIds") or []):
                    reasons.append("in a subnet of the cluster (%s)" % ", ".join(sorted(subnets.intersection(fs["SubnetIds"]))))
                if carries(tags, self.wanted):
                    reasons.append("carries our tags")
                if any(tags.get(t) == self.cluster for t in CLUSTER_TAGS):
                    reasons.append("tagged with the cluster name")
                if reasons:
                    found.append(leftover("fsx_file_system", fs["FileSystemId"], fs["FileSystemId"],
                                          "; ".join(reasons), fs.get("Lifecycle"), fs.get("ResourceARN"), tags))
        return found

    def cloudformation(self):
        """Stacks eksctl made for the cluster (named eksctl-<cluster>-* or tagged with it), not deleted."""
        prefix = stack_prefix(self.cluster)
        found = []
        cfn = self.clients("cloudformation")
        for page in cfn.get_paginator("describe_stacks").paginate():
            for stack in page.get("Stacks", []):
                if stack.get("StackStatus") == "DELETE_COMPLETE":
                    continue
                tags = tag_dict(stack.get("Tags"))
                if stack["StackName"].startswith(prefix):
                    reason = "named %s*" % prefix
                elif any(tags.get(t) == self.cluster for t in CLUSTER_TAGS):
                    reason = "tagged with the cluster name"
                else:
                    continue
                found.append(leftover("cloudformation_stack", stack["StackName"], stack["StackName"], reason,
                                      stack.get("StackStatus"), stack.get("StackId"), tags))
        return found

    def logs(self):
        """Log groups of the cluster (EKS control plane, Container Insights)."""
        found = []
        logs = self.clients("logs")
        for prefix in log_group_prefixes(self.cluster):
            for page in logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=prefix):
                for group in page.get("logGroups", []):
                    found.append(leftover("log_group", group["logGroupName"], group["logGroupName"],
                                          "named %s*" % prefix, arn=group.get("arn")))
        return found

    def ec2(self):
        """Network interfaces in the cluster network, made by its VPC CNI or by its control plane."""
        vpcs, _subnets = self.network()
        queries = [([{"Name": "tag:" + CNI_CLUSTER_TAG, "Values": [self.cluster]}], "tagged %s" % CNI_CLUSTER_TAG),
                   ([{"Name": "description", "Values": ["Amazon EKS %s" % self.cluster]}], "EKS control plane interface")]
        if vpcs:
            queries.insert(0, ([{"Name": "vpc-id", "Values": sorted(vpcs)}], "in the cluster VPC"))
        found = {}
        ec2 = self.clients("ec2")
        for filters, reason in queries:
            for page in ec2.get_paginator("describe_network_interfaces").paginate(Filters=filters):
                for eni in page.get("NetworkInterfaces", []):
                    ident = eni["NetworkInterfaceId"]
                    if ident in found:
                        continue
                    detail = reason
                    if reason == "in the cluster VPC":
                        detail = "in the cluster VPC %s" % eni.get("VpcId")
                    if eni.get("Description"):
                        detail += " (%s)" % eni["Description"]
                    found[ident] = leftover("network_interface", ident, ident, detail, eni.get("Status"),
                                            tags=tag_dict(eni.get("TagSet")))
        return [found[k] for k in sorted(found)]

    def listing(self, service):
        """One listing; each entry also says whether it carries all of the wanted tags (ours)."""
        found = getattr(self, service)()
        for item in found:
            item["ours"] = carries(item["tags"], self.wanted)
        return found


def find(clients, cluster, services=SERVICES, wanted_tags=None, is_not_implemented=None):
    """(resources, skipped, vpc_ids): every leftover of the cluster, sorted by kind and id.

    is_not_implemented(exc) -> bool tells a call the endpoint does not implement (the listing is
    then skipped, with the reason); any other error propagates.
    """
    finder = ClusterLeftovers(clients, cluster, wanted_tags)
    resources, skipped = [], []
    for service in services:
        if service not in SERVICES:
            raise ValueError("unknown service %s" % service)
        try:
            resources.extend(finder.listing(service))
        except Exception as exc:  # pylint: disable=broad-except
            if is_not_implemented is not None and is_not_implemented(exc):
                skipped.append("%s: %s" % (service, exc))
                continue
            raise
    resources.sort(key=lambda r: (r["kind"], r["id"]))
    return resources, skipped, finder.known_vpcs()
