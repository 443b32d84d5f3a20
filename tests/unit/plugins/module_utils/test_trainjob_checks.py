# -*- coding: utf-8 -*-
"""module_utils/trainjob_checks.py (filter input_problems): the train step's checks of its shared inputs.

Pure data: good inputs have no problem; a bad value gives one problem that names the variable and
quotes the value as JSON, and the checks stop at the first. The same checks run through the role in
tests/unit/roles/test_pytorchjob_template.py (BAD_INPUTS, OPT_IN_INPUTS) and tests/adversarial.
"""

from __future__ import absolute_import, division, print_function

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.filter.checks import FilterModule
from ansible_collections.trainfleet.training.plugins.module_utils.trainjob_checks import NAMES, problems

S3 = {"kind": "s3", "endpoint_url": ""}

# What the inventories hand over, roughly: every value good.
GOOD = {
    "trainjob_name": "trainfleet-digits", "trainjob_namespace": "trainfleet", "trainjob_launcher": "pytorchjob",
    "trainjob_image": "localhost:5001/trainfleet/trainer:abc", "trainjob_image_variant": "",
    "trainjob_labels": {"team": "ml"}, "trainjob_annotations": {}, "trainjob_pod_annotations": {},
    "trainjob_image_pull_policy": "IfNotPresent", "trainjob_image_pull_secrets": [],
    "trainjob_trainer_extra_args": ["--lr=0.01"], "trainjob_trainer_module": "trainer.train", "trainjob_trainer_epochs": 5,
    "trainjob_trainer_batch_size": "64", "trainjob_trainer_dataset": "digits", "trainjob_trainer_backend": "gloo",
    "trainjob_trainer_output_dir": "", "trainjob_trainer_snapshot_dir": "", "trainjob_trainer_device": "auto",
    "trainjob_compile_cache_set": "", "trainjob_precompile": False, "trainjob_neuron_devices": 0,
    "trainjob_pvc_claim_name": "", "trainjob_cpu_request": "500m", "trainjob_memory_request": "1Gi", "trainjob_cpu_limit": "",
    "trainjob_memory_limit": "2Gi", "trainjob_shm_size": "", "trainjob_gpus": 0, "trainjob_efa_devices": 0,
    "trainjob_node_selector": {}, "trainjob_tolerations": [], "trainjob_affinity": {}, "trainjob_security_context": {},
    "trainjob_node_lost_toleration_seconds": 30, "trainjob_pvc_mount_path": "/data", "trainjob_extra_volumes": [],
    "trainjob_extra_volume_mounts": [], "trainjob_script_dir": "", "trainjob_script_mount_path": "/opt/script",
    "trainjob_s3_bucket": "trainfleet-data", "trainjob_s3_prefix": "runs/", "trainjob_aws_region": "us-east-1",
    "trainjob_aws_endpoint_url": "http://172.18.0.1:5050", "trainjob_env": [{"name": "OMP_NUM_THREADS", "value": "1"}],
    "trainjob_env_from": [], "trainjob_aws_credentials_secret": "", "trainjob_aws_credentials_create": False,
    "trainjob_aws_access_key_id": "", "trainjob_aws_secret_access_key": "", "trainjob_service_account": "trainer",
    "trainjob_service_account_create": True, "trainjob_service_account_annotations": {},
    "trainjob_container_security_context": {}, "trainjob_run_as_user": 10001, "trainjob_run_as_group": "10001",
    "trainjob_allow_system_namespace": False, "trainjob_allow_root": False, "trainjob_allow_privileged": False,
    "trainjob_allow_privilege_escalation": False, "trainjob_allow_host_path": False, "trainjob_rerun": False,
    "trainjob_wait": "yes", "trainjob_delete_timeout": 300, "trainjob_prepull": True, "trainjob_accelerator_check": True,
    "trainjob_prepull_timeout": 900, "trainjob_wait_timeout": 3600, "trainjob_progress_timeout": 0,
    "trainjob_log_tail_lines": 200, "trainjob_failure_log_lines": 60, "trainjob_evaluate": False,
    "trainjob_evaluate_timeout": "600", "trainjob_manifest_dest": "/tmp/trainfleet/job.yaml", "trainjob_log_dest": "",
    "trainjob_progress_file": "", "trainjob_kubeconfig": "/root/.kube/config",
}


def check(check_mode=False, cluster_available=True, object_store=None, **overrides):
    return problems(dict(GOOD, **overrides), {"check_mode": check_mode, "cluster_available": cluster_available,
                                              "object_store": S3 if object_store is None else object_store})


def test_good_inputs_have_no_problem():
    assert set(GOOD) == set(NAMES)
    assert check() == []
    assert FilterModule().filters()["input_problems"](GOOD, "trainjob", {"object_store": S3}) == []


def test_a_missing_input_is_named():
    values = dict(GOOD)
    del values["trainjob_wait"]
    with pytest.raises(AnsibleFilterError, match="trainjob_wait"):
        FilterModule().filters()["input_problems"](values, "trainjob")


@pytest.mark.parametrize("name, value, quoted", [
    ("trainjob_name", "job\n", '"job\\n"'),
    ("trainjob_namespace", "kube system", '"kube system"'),
    ("trainjob_image", "img\n", '"img\\n"'),
    ("trainjob_trainer_epochs", True, "true"),  # a boolean is not a number, whatever `| int` says
    ("trainjob_trainer_epochs", "0", '"0"'),
    ("trainjob_trainer_extra_args", ["--x\n--y"], '["--x\\n--y"]'),
    ("trainjob_trainer_output_dir", "/out/../etc", '"/out/../etc"'),
    ("trainjob_memory_request", "lots", '"lots"'),
    ("trainjob_tolerations", ["NoSchedule"], '["NoSchedule"]'),
    ("trainjob_node_lost_toleration_seconds", "10\n", '"10\\n"'),
    ("trainjob_pvc_mount_path", "/data/../etc", '"/data/../etc"'),
    ("trainjob_s3_prefix", "s3://bucket/x", '"s3://bucket/x"'),
    ("trainjob_aws_endpoint_url", "http://x\n", '"http://x\\n"'),
    ("trainjob_run_as_user", -1, "-1"),
    ("trainjob_progress_timeout", 5, "5"),
    ("trainjob_log_dest", "/tmp/../etc/x.log", '"/tmp/../etc/x.log"'),
])
def test_a_bad_value_is_named_and_quoted(name, value, quoted):
    found = check(**{name: value})
    assert len(found) == 1
    assert name in found[0] and quoted in found[0], found


def test_each_widening_needs_its_own_opt_in():
    assert "trainjob_allow_system_namespace" in check(trainjob_namespace="kube-system")[0]
    assert check(trainjob_namespace="kube-system", trainjob_allow_system_namespace=True) == []
    assert "trainjob_allow_root" in check(trainjob_security_context={"runAsNonRoot": "no"})[0]
    assert "trainjob_allow_privileged" in check(trainjob_container_security_context={"capabilities": {"add": ["cap_net_admin"]}})[0]
    assert check(trainjob_container_security_context={"capabilities": {"add": ["NET_BIND_SERVICE"]}}) == []
    # SYS_ADMIN implies privilege escalation: the privileged opt-in alone is not enough
    sys_admin = {"capabilities": {"add": ["CAP_SYS_ADMIN"]}}
    assert "trainjob_allow_privilege_escalation" in check(trainjob_container_security_context=sys_admin,
                                                          trainjob_allow_privileged=True)[0]
    assert check(trainjob_container_security_context=sys_admin, trainjob_allow_privileged=True,
                 trainjob_allow_privilege_escalation="yes") == []
    host = [{"name": "host", "hostPath": {"path": "/var/log"}}]
    assert '{"path": "/var/log"}' in check(trainjob_extra_volumes=host)[0]
    assert check(trainjob_extra_volumes=host, trainjob_allow_host_path=True) == []


def test_credentials_reach_the_pods_only_through_a_secret():
    literal = check(trainjob_env=[{"name": "AWS_SECRET_ACCESS_KEY", "value": "inline"}])[0]
    assert "trainjob_aws_credentials_secret" in literal and "inline" not in literal
    secretish = check(trainjob_env=[{"name": "HF_Token", "value": "hf-literal"}])[0]
    assert '["HF_Token"]' in secretish and "hf-literal" not in secretish
    assert check(trainjob_env=[{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]) == []


def test_the_checks_stop_at_the_first_problem():
    found = check(trainjob_name="Bad_Name", trainjob_wait_timeout=0)
    assert len(found) == 1 and "trainjob_name" in found[0] and "trainjob_wait_timeout" not in found[0]


def test_the_cluster_and_the_object_store_must_be_reachable_outside_check_mode():
    assert '"/root/.kube/config" does not exist' in check(cluster_available=False)[0]
    assert check(cluster_available=False, check_mode=True) == []
    compatible = {"kind": "s3_compatible", "endpoint_url": "http://127.0.0.1:5050"}
    assert "trainjob_aws_endpoint_url" in check(object_store=compatible, trainjob_aws_endpoint_url="")[0]
    assert check(object_store=compatible, trainjob_aws_endpoint_url="", check_mode=True) == []
    claimless = check(object_store={"kind": "none"}, trainjob_trainer_output_dir="/data/out")[0]
    assert "trainjob_pvc_claim_name (got \"\")" in claimless
    assert check(object_store={"kind": "none"}, trainjob_trainer_output_dir="/data/out", trainjob_pvc_claim_name="data") == []
