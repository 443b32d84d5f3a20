# -*- coding: utf-8 -*-
"""module_utils/contract.py (filter contract_problems): the contract's checks beyond its argument spec.

Pure data: a good contract has no problem; each bad value gives one problem that names the
variable it came from and quotes the value as JSON. The same checks run through the platform role
in tests/unit/roles/test_platform_contract.py and tests/adversarial.
"""

from __future__ import absolute_import, division, print_function

import copy

import pytest

from ansible_collections.trainfleet.training.plugins.filter.contract import FilterModule
from ansible_collections.trainfleet.training.plugins.module_utils.contract import problems

GOOD = {
    "platform": "existing", "kubeconfig": "/home/ml/.kube/config", "context": "arn:aws:eks:us-east-1:1:cluster/x",
    "registry": {"prefix": "registry.example.com:5000/ml", "pull": "pull_secret", "pull_secret": "regcred"},
    "object_store": {"kind": "s3_compatible", "bucket": "ml-data", "endpoint_url": "https://minio.example:9000",
                     "pod_endpoint_url": "", "credentials": "secret", "credentials_secret": "s3-creds"},
    "storage": {"class_name": "azurefile-csi"},
    "operator": {"image": "registry.example.com/kubeflow/training-operator:v1-d6eb98e", "init_image": ""},
}


def bad(path, value):
    contract = copy.deepcopy(GOOD)
    node = contract
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return contract


def test_a_good_contract_and_every_launcher_have_no_problem():
    assert problems(GOOD, "existing", []) == []
    assert problems(GOOD, "existing", ["mpi_operator", "volcano"]) == []
    assert FilterModule().filters()["contract_problems"](GOOD, "existing", ["volcano"]) == []


@pytest.mark.parametrize("path, value, message", [
    (("kubeconfig",), "relative/kubeconfig", 'platform_existing_kubeconfig must be an absolute path (got "relative/kubeconfig")'),
    (("kubeconfig",), "/a\n/b", 'platform_existing_kubeconfig must be an absolute path (got "/a\\n/b")'),
    (("context",), "ctx with space", 'platform_existing_context must be a kubeconfig context name (got "ctx with space")'),
    (("registry", "prefix"), "Registry.example.com/x",
     'platform_existing_registry_prefix must be registry-host[:port]/path in lowercase (got "Registry.example.com/x")'),
    (("registry", "prefix"), "registry.example.com/x\n",
     'platform_existing_registry_prefix must be registry-host[:port]/path in lowercase (got "registry.example.com/x\\n")'),
    (("registry", "pull_secret"), "Reg_Cred", 'platform_existing_registry_pull_secret must be a DNS subdomain (got "Reg_Cred")'),
    (("object_store", "bucket"), "Not_A_Bucket", 's3_bucket_name must be an S3 bucket name (got "Not_A_Bucket")'),
    (("object_store", "endpoint_url"), "minio:9000",
     'platform_existing_s3_endpoint_url must be http(s)://host[:port][/path] (got "minio:9000")'),
    (("object_store", "pod_endpoint_url"), "http://x\n",
     'platform_existing_s3_pod_endpoint_url must be http(s)://host[:port][/path] (got "http://x\\n")'),
    (("object_store", "endpoint_url"), "", "platform_existing_s3_endpoint_url is required for an s3_compatible object store"),
    (("object_store", "credentials_secret"), "", 'platform_existing_s3_credentials_secret must be a DNS subdomain (got "")'),
    (("storage", "class_name"), "Not_A_Name", 'platform_existing_storage_class must be a DNS subdomain (got "Not_A_Name")'),
    (("operator", "init_image"), "evil\nimage", 'platform_existing_operator_init_image must be an image reference (got "evil\\nimage")'),
])
def test_each_bad_value_is_named_and_quoted(path, value, message):
    assert problems(bad(path, value), "existing", []) == [message]


def test_unchecked_fields_are_not_checked_when_their_switch_is_off():
    contract = bad(("registry", "pull"), "mirror")
    contract["registry"]["pull_secret"] = "Not A Name"
    contract["object_store"].update(kind="none", bucket="", endpoint_url="", credentials="pod_identity",
                                    credentials_secret="x y")
    contract["registry"]["prefix"] = ""
    contract["storage"]["class_name"] = ""
    assert problems(contract, "local", []) == []


@pytest.mark.parametrize("launchers, quoted", [
    (["kueue"], '["kueue"]'),
    ("mpi_operator\n", '"mpi_operator\\n"'),
    ("volcano", '"volcano"'),
    ({"volcano": True}, '{"volcano": true}'),
    (None, "null"),
    (3, "3"),
])
def test_platform_launchers_must_be_a_list_of_known_controllers(launchers, quoted):
    assert problems(GOOD, "aws", launchers) == ["platform_launchers must be a list of mpi_operator, volcano (got %s)" % quoted]


def test_every_problem_is_reported_at_once_in_order():
    contract = bad(("context",), "a b")
    contract["storage"]["class_name"] = "X"
    assert [p.split(" ")[0] for p in problems(contract, "aws", ["x"])] == [
        "platform_aws_context", "platform_aws_storage_class", "platform_launchers"]


def test_data_name_is_the_one_rule_for_the_bucket_and_the_claim():
    from ansible_collections.trainfleet.training.plugins.module_utils.names import data_name
    assert data_name("trainfleet") == "trainfleet-data"
    assert data_name("team-a") == "team-a-data"
