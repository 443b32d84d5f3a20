# -*- coding: utf-8 -*-
"""module_utils/dataset_checks.py (filter input_problems): the dataset step's checks once its source was scanned.

Pure data: good inputs have no problem; a bad value gives one problem that names the variable and
quotes the value as JSON; the claim copy's settings count only when the claim is a target. The same
checks run through the role in tests/unit/roles/test_dataset_role.py and tests/adversarial.
"""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.trainfleet.training.plugins.filter.checks import FilterModule
from ansible_collections.trainfleet.training.plugins.module_utils.dataset_checks import NAMES

STORE = {"kind": "s3_compatible", "bucket": "trainfleet-local"}
GOOD = {
    "dataset_name": "breast-cancer", "dataset_targets": ["s3"], "dataset_max_files": 10000, "dataset_s3_bucket": "trainfleet-local",
    "dataset_s3_owned_prefix": "training/", "dataset_s3_prefix": "training/datasets/breast-cancer/",
    "dataset_s3_reserved_prefixes": ["training/checkpoints/"], "dataset_s3_endpoint_url": "http://127.0.0.1:5050",
    "dataset_s3_region": "us-east-1", "dataset_namespace": "trainfleet", "dataset_claim_name": "trainfleet-data",
    "dataset_claim_mount_path": "/data", "dataset_claim_dir": "datasets", "dataset_image": "localhost:5001/trainfleet/trainer:abc",
    "dataset_image_pull_policy": "IfNotPresent", "dataset_aws_endpoint_url": "http://172.18.0.1:5050",
    "dataset_aws_credentials_secret": "s3-creds", "dataset_service_account": "", "dataset_image_pull_secrets": [],
    "dataset_run_as_user": 10001, "dataset_run_as_group": 10001, "dataset_fs_group": 10001, "dataset_cpu_request": "100m",
    "dataset_memory_request": "128Mi", "dataset_memory_limit": "512Mi", "dataset_claim_timeout": 600,
    "dataset_node_selector": {}, "dataset_tolerations": [], "dataset_manifest_dest": "", "dataset_kubeconfig": "/root/.kube/config",
}
CLAIM = {"dataset_targets": ["s3", "claim"]}


def check(context=None, **overrides):
    context = dict({"object_store": STORE, "cluster_available": True}, **(context or {}))
    return FilterModule().filters()["input_problems"](dict(GOOD, **overrides), "dataset", context)


def test_good_inputs_have_no_problem():
    assert set(GOOD) == set(NAMES)
    assert check() == [] and check(**CLAIM) == []


@pytest.mark.parametrize("name, value, quoted", [
    ("dataset_name", "Breast Cancer", '"Breast Cancer"'),
    ("dataset_targets", ["claim"], '["claim"]'),  # the copy pulls from the prefix: s3 is always a target
    ("dataset_s3_bucket", "someone-elses-bucket", '"someone-elses-bucket"'),
    ("dataset_s3_prefix", "training/", '"training/"'),  # the owned prefix itself
    ("dataset_s3_prefix", "training/checkpoints/bc/", '["training/checkpoints/"]'),  # expired by the lifecycle rule
    ("dataset_s3_prefix", "training/datasets/../../other/", '"training/datasets/../../other/"'),
    ("dataset_s3_endpoint_url", "ftp://x", '"ftp://x"'),
])
def test_a_bad_value_is_named_and_quoted(name, value, quoted):
    found = check(**{name: value})
    assert len(found) == 1 and name in found[0] and quoted in found[0], found


@pytest.mark.parametrize("name, value, quoted", [
    ("dataset_namespace", "kube-system", '"kube-system"'),
    ("dataset_claim_mount_path", "/etc", '"/etc"'),
    ("dataset_claim_dir", "../x", '"../x"'),
    ("dataset_image", "", '""'),
    ("dataset_run_as_user", 0, "(got 0"),
    ("dataset_memory_limit", "lots", '"lots"'),
])
def test_the_claim_copys_settings_count_only_for_the_claim(name, value, quoted):
    assert check(**{name: value}) == []
    found = check(**dict(CLAIM, **{name: value}))
    assert len(found) == 1 and name in found[0] and quoted in found[0], found


def test_the_store_and_the_cluster():
    assert "trainfleet_cluster.object_store.kind none" in check({"object_store": {"kind": "none"}})[0]
    assert "dataset_aws_endpoint_url" in check(dataset_aws_endpoint_url="", **CLAIM)[0]
    assert check({"check_mode": True}, dataset_aws_endpoint_url="", **CLAIM) == []
    assert '"/root/.kube/config" does not exist' in check({"cluster_available": False}, **CLAIM)[0]
    assert check({"cluster_available": False}) == []
