# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where storage goes in an EKS cluster's network, from the cluster's own VPC configuration.

Pure functions (no AWS calls): the module eks_cluster_network_info hands them what
describe_cluster and describe_subnets answered, the unit tests hand them fixtures.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# eksctl (and the EKS documentation) tag the private subnets of a cluster VPC with the first, the
# public ones with the second.
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
PUBLIC_ELB_TAG = "kubernetes.io/role/elb"


def cluster_network(cluster):
    """The parts of describe_cluster's cluster that storage needs."""
    vpc = (cluster or {}).get("resourcesVpcConfig") or {}
    return {
        "vpc_id": vpc.get("vpcId") or "",
        # EKS creates this group and attaches it to every managed node group's nodes (eksctl's
        # managed node groups included); it lets members reach each other on every port.
        "cluster_security_group_id": vpc.get("clusterSecurityGroupId") or "",
        "security_group_ids": list(vpc.get("securityGroupIds") or []),
        "subnet_ids": list(vpc.get("subnetIds") or []),
    }


def _tags(subnet):
    return dict((t.get("Key"), t.get("Value")) for t in subnet.get("Tags") or [])


def is_private(subnet):
    """A private subnet: tagged for internal load balancers; else not tagged for public ones and no
    public IP on launch."""
    tags = _tags(subnet)
    if tags.get(INTERNAL_ELB_TAG) in ("1", ""):
        return True
    if tags.get(PUBLIC_ELB_TAG) in ("1", ""):
        return False
    return not subnet.get("MapPublicIpOnLaunch", False)


def describe(subnets):
    """describe_subnets' subnets as {subnet_id, availability_zone, private}, sorted by zone then id."""
    out = [{"subnet_id": s["SubnetId"], "availability_zone": s.get("AvailabilityZone", ""),
            "private": is_private(s)} for s in subnets or []]
    return sorted(out, key=lambda s: (s["availability_zone"], s["subnet_id"]))


def private_subnet_ids(subnets, zone=""):
    """The private subnets (describe() shape), in zone when one is given, first zone first."""
    return [s["subnet_id"] for s in subnets if s["private"] and (not zone or s["availability_zone"] == zone)]
