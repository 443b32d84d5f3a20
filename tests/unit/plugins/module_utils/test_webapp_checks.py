# -*- coding: utf-8 -*-
"""module_utils/webapp_checks.py (filter input_problems): TensorBoard's and JupyterLab's input checks.

Pure data: good inputs have no problem; a bad value gives one problem that names the variable and
quotes the value as JSON; what both apps share is checked the same way for each. The same checks
run through the roles in tests/unit/roles (test_tensorboard_role.py, test_jupyter_role.py) and
tests/adversarial.
"""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.trainfleet.training.plugins.filter.checks import FilterModule
from ansible_collections.trainfleet.training.plugins.module_utils import webapp_checks

S3 = {"object_store": {"kind": "s3_compatible"}}


def shared(p):
    return {
        p + "_name": "trainfleet-" + p, p + "_namespace": "trainfleet", p + "_labels": {"team": "ml"}, p + "_state": "present",
        p + "_image": "", p + "_image_pull_secrets": [], p + "_image_repository": "localhost:5001/trainfleet/" + p,
        p + "_image_base_image": "localhost:5001/trainfleet/trainer:abc", p + "_image_registry_login": "none",
        p + "_image_build_timeout": 1800, p + "_cpu_request": "100m", p + "_cpu_limit": "1", p + "_memory_request": "256Mi",
        p + "_memory_limit": "1Gi", p + "_port": 6006, p + "_local_port": "6006", p + "_run_as_user": 10001,
        p + "_run_as_group": 10001, p + "_wait_timeout": 300, p + "_api_timeout": 30, p + "_internal_load_balancer": False,
        p + "_load_balancer_source_ranges": [], p + "_load_balancer_annotations": {}, p + "_kubeconfig": "/root/.kube/config",
        p + "_context": "", p + "_kubectl": "", p + "_manifest_dest": "",
        "_%s_labels" % p: {"app.kubernetes.io/name": "trainfleet-" + p},
    }


GOOD = {
    "tensorboard": dict(
        shared("tensorboard"), _tensorboard_logdir="s3://trainfleet-local/training", tensorboard_logdir="", tensorboard_run="",
        tensorboard_s3_bucket="trainfleet-local", tensorboard_s3_prefix="training/", tensorboard_pvc_claim_name="",
        tensorboard_pvc_mount_path="/data", tensorboard_aws_region="us-east-1", tensorboard_s3_endpoint_url="http://172.18.0.1:5050",
        tensorboard_aws_credentials_secret="s3-creds", tensorboard_service_account="", tensorboard_version="2.20.0",
        tensorboard_boto3_version="1.40.0", tensorboard_reload_interval=30, tensorboard_node_selector={},
        tensorboard_tolerations=[], tensorboard_extra_args=["--samples_per_plugin=scalars=1000"]),
    "jupyter": dict(
        shared("jupyter"), _jupyter_runs="s3://trainfleet-local/training", jupyter_run="trainfleet-digits",
        jupyter_s3_bucket="trainfleet-local", jupyter_s3_prefix="training", jupyter_pvc_claim_name="", jupyter_pvc_mount_path="/data",
        jupyter_aws_region="us-east-1", jupyter_aws_endpoint_url="", jupyter_aws_credentials_secret="", jupyter_service_account="",
        jupyter_lab_version="4.4.9", jupyter_image_python_version="3.11"),
}


def check(app, context=None, **overrides):
    return FilterModule().filters()["input_problems"](dict(GOOD[app], **overrides), app, S3 if context is None else context)


@pytest.mark.parametrize("app", sorted(GOOD))
def test_good_inputs_have_no_problem(app):
    assert set(GOOD[app]) == set({"tensorboard": webapp_checks.TENSORBOARD, "jupyter": webapp_checks.JUPYTER}[app])
    assert check(app) == []


@pytest.mark.parametrize("app", sorted(GOOD))
@pytest.mark.parametrize("suffix, value, quoted", [
    ("_name", "tb\n", '"tb\\n"'),
    ("_namespace", "kube-system", '"kube-system"'),
    ("_labels", {"app.kubernetes.io/name": "mine"}, '"mine"'),  # one of the role's own
    ("_image", "img\n", '"img\\n"'),
    ("_image_build_timeout", 10, "(got 10)"),
    ("_memory_limit", "lots", '"lots"'),
    ("_run_as_user", 0, "(got 0)"),
    ("_local_port", 80, "(got 80)"),
    ("_load_balancer_source_ranges", ["0.0.0.0/0"], '["0.0.0.0/0"]'),
    ("_load_balancer_source_ranges", ["10.0.0.0/8\nx"], '["10.0.0.0/8\\nx"]'),
    ("_manifest_dest", "/tmp/../etc/x.yaml", '"/tmp/../etc/x.yaml"'),
    ("_kubectl", "kubectl; id", '"kubectl; id"'),
])
def test_what_both_apps_share_is_checked_alike(app, suffix, value, quoted):
    found = check(app, **{app + suffix: value})
    assert len(found) == 1
    assert app + suffix in found[0] and quoted in found[0], found


def test_an_internal_load_balancer_needs_its_ranges_and_annotations():
    assert "tensorboard_load_balancer_source_ranges" in check("tensorboard", tensorboard_internal_load_balancer=True)[0]
    assert check("jupyter", jupyter_internal_load_balancer="yes", jupyter_load_balancer_source_ranges=["10.0.0.0/8"],
                 jupyter_load_balancer_annotations={"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}) == []


@pytest.mark.parametrize("app, name, value, quoted", [
    ("tensorboard", "_tensorboard_logdir", "s3://bucket-1/runs\n--bind_all", '"s3://bucket-1/runs\\n--bind_all"'),
    ("tensorboard", "tensorboard_run", "../../secrets", '"../../secrets"'),
    ("tensorboard", "tensorboard_s3_prefix", "training/../", '"training/../"'),
    ("tensorboard", "tensorboard_s3_endpoint_url", "http://x\n", '"http://x\\n"'),
    ("tensorboard", "tensorboard_version", "2.21.0; rm -rf /", '"2.21.0; rm -rf /"'),
    ("tensorboard", "tensorboard_extra_args", ["--host=0.0.0.0"], '["--host=0.0.0.0"]'),
    ("tensorboard", "tensorboard_tolerations", "NoSchedule", '"NoSchedule"'),
    ("jupyter", "jupyter_pvc_mount_path", "/work/data", '"/work/data"'),
    ("jupyter", "jupyter_s3_bucket", "Bad_Bucket", '"Bad_Bucket"'),
    ("jupyter", "jupyter_image_python_version", "3", '"3"'),
])
def test_each_apps_own_inputs(app, name, value, quoted):
    found = check(app, **{name: value})
    named = "TensorBoard reads" if name == "_tensorboard_logdir" else name  # the computed logdir: what it reads
    assert len(found) == 1 and named in found[0] and quoted in found[0], found


def test_tensorboard_on_a_claim_reads_only_under_its_mount_and_needs_the_endpoint_outside_check_mode():
    claim = {"_tensorboard_logdir": "/data/outputs", "tensorboard_pvc_claim_name": "trainfleet-data"}
    assert check("tensorboard", **claim) == []
    outside = dict(claim)
    outside["_tensorboard_logdir"] = "/etc"
    assert "tensorboard_pvc_mount_path" in check("tensorboard", **outside)[0]
    assert "tensorboard_s3_endpoint_url" in check("tensorboard", tensorboard_s3_endpoint_url="")[0]
    assert check("tensorboard", {"check_mode": True, "object_store": {"kind": "s3_compatible"}}, tensorboard_s3_endpoint_url="") == []
