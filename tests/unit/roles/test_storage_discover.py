# -*- coding: utf-8 -*-
"""roles/storage tasks/discover.yml against a local AWS endpoint (moto): the FSx subnet and
security group come from the cluster's VPC configuration, nothing is typed by hand.

moto's describe_cluster returns the subnets but no clusterSecurityGroupId, so the cases here give
the security group where the cluster would; the module's own tests cover that field.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import boto3
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VENV_BIN = os.path.dirname(sys.executable)
REGION = "us-west-2"
PLAY = """
- name: Discover where FSx goes
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Run the storage role's discovery
      ansible.builtin.include_role:
        name: trainfleet.training.storage
        tasks_from: discover
    - name: Write what it chose
      ansible.builtin.copy:
        content: "{{ {'subnet': _storage_fsx_subnet_id, 'groups': _storage_fsx_security_group_ids,
                      'tags': _storage_fsx_tags} | to_json }}"
        dest: "{{ chosen_out }}"
        mode: "0644"
      check_mode: false
"""


def aws(endpoint, service):
    return boto3.client(service, region_name=REGION, endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing")


@pytest.fixture(scope="module")
def cluster(moto_endpoint):
    """An eksctl-like VPC: a public and a private subnet in each of two zones, and the cluster on them."""
    ec2 = aws(moto_endpoint, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    ids = {}
    for index, (zone, kind) in enumerate([("us-west-2b", "private"), ("us-west-2a", "public"),
                                          ("us-west-2a", "private"), ("us-west-2b", "public")]):
        tag = "kubernetes.io/role/internal-elb" if kind == "private" else "kubernetes.io/role/elb"
        sid = ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.%d.0/24" % index, AvailabilityZone=zone,
                                TagSpecifications=[{"ResourceType": "subnet", "Tags": [{"Key": tag, "Value": "1"}]}]
                                )["Subnet"]["SubnetId"]
        ids[(zone, kind)] = sid
    # Another VPC's private subnet in the same zone: never chosen.
    other = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    ec2.create_subnet(VpcId=other, CidrBlock="10.9.0.0/24", AvailabilityZone="us-west-2a",
                      TagSpecifications=[{"ResourceType": "subnet",
                                          "Tags": [{"Key": "kubernetes.io/role/internal-elb", "Value": "1"}]}])
    aws(moto_endpoint, "eks").create_cluster(
        name="trainfleet", roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": list(ids.values()), "securityGroupIds": ["sg-0controlplane"]})
    return ids


def discover(endpoint, tmp_path, check=False, **extra):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    out = tmp_path / "chosen.json"
    variables = dict({"trainfleet_aws_endpoint_url": endpoint, "trainfleet_aws_region": REGION,
                      "trainfleet_platform": "aws", "chosen_out": str(out),
                      "trainfleet_tags": {"project": "trainfleet", "environment": "aws"}}, **extra)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", "localhost,", str(play),
            "-e", "ansible_python_interpreter=" + sys.executable, "-e", json.dumps(variables)]
    proc = subprocess.run(argv + (["--check"] if check else []), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    chosen = json.loads(out.read_text()) if out.exists() else None
    return proc, chosen


def test_fsx_goes_into_a_private_subnet_of_the_cluster(moto_endpoint, cluster, tmp_path):
    proc, chosen = discover(moto_endpoint, tmp_path, storage_fsx_security_group_ids=["sg-0cluster"])
    assert proc.returncode == 0, proc.stdout[-3000:]
    # First zone first, private only, only the cluster's subnets.
    assert chosen == {"subnet": cluster[("us-west-2a", "private")], "groups": ["sg-0cluster"],
                      "tags": {"project": "trainfleet", "environment": "aws"}}


def test_fsx_zone_picks_that_zones_private_subnet(moto_endpoint, cluster, tmp_path):
    proc, chosen = discover(moto_endpoint, tmp_path, storage_fsx_availability_zone="us-west-2b",
                            storage_fsx_security_group_ids=["sg-0cluster"])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert chosen["subnet"] == cluster[("us-west-2b", "private")]


def test_zone_without_a_private_subnet_is_refused_naming_the_variable(moto_endpoint, cluster, tmp_path):
    proc, chosen = discover(moto_endpoint, tmp_path, storage_fsx_availability_zone="us-west-2c",
                            storage_fsx_security_group_ids=["sg-0cluster"])
    assert proc.returncode != 0 and chosen is None
    assert 'has no private subnet in \\"us-west-2c\\" (storage_fsx_availability_zone)' in proc.stdout \
        or 'has no private subnet in "us-west-2c" (storage_fsx_availability_zone)' in proc.stdout, proc.stdout[-3000:]


def test_missing_cluster_is_refused_outside_check_mode_and_planned_in_check_mode(moto_endpoint, tmp_path):
    proc, chosen = discover(moto_endpoint, tmp_path, trainfleet_name="absent-cluster")
    assert proc.returncode != 0 and chosen is None
    assert "(storage_cluster_name)" in proc.stdout and "does not exist: run the cluster step first" in proc.stdout
    proc, chosen = discover(moto_endpoint, tmp_path, check=True, trainfleet_name="absent-cluster")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert chosen == {"subnet": "", "groups": [], "tags": {"project": "trainfleet", "environment": "aws"}}
