# -*- coding: utf-8 -*-
"""Role torchx_job (the train step's torchx launcher): preflight refusals, the render in check mode
(no cluster), and the trainjob role's report speaking of a VolcanoJob.

Runs ansible-playbook on localhost like tests/unit/roles/test_pytorchjob_template.py. The render
case needs torchx in the Python that runs the tests (requirements.txt pins it) and fails without
it; the refusals come before torchx is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "torchx_job")
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures")
PLAYBOOK_TIMEOUT = 300
IMAGE = "localhost:5001/trainfleet/trainer:test"
NODES = {kind: {"node_selector": {}, "tolerations": []} for kind in ("cpu", "gpu", "neuron")}
SHARED = {
    "trainfleet_name": "trainfleet",
    "trainfleet_cluster": {
        "kubeconfig": "/nonexistent/trainfleet-test/kubeconfig", "context": "",
        "registry": {"pull_secret": ""},
        "object_store": {"kind": "s3_compatible", "bucket": "trainfleet-local", "region": "us-east-1",
                         "endpoint_url": "http://127.0.0.1:5000",
                         "pod_endpoint_url": "http://172.18.0.1:5000", "credentials_secret": "trainfleet-aws"},
        "nodes": NODES,
    },
    "trainjob_image": IMAGE,
}


def _env(tmp_path):
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_LOCAL_TEMP"] = str(tmp_path / "ansible-tmp")
    return env


def _playbook(args, tmp_path):
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook_bin):
        playbook_bin = "ansible-playbook"
    cmd = [playbook_bin, "-i", "localhost,", "-e", json.dumps({"ansible_python_interpreter": sys.executable})] + args
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, check=False,
                          timeout=PLAYBOOK_TIMEOUT)
    return proc.returncode, proc.stdout + proc.stderr


def _run_role(tmp_path, extra_vars):
    variables = dict(SHARED, trainfleet_cache_dir=str(tmp_path / "cache"))
    variables.update(extra_vars)
    extra_file = tmp_path / "vars.json"
    extra_file.write_text(json.dumps(variables))
    return _playbook([os.path.join(FIXTURES, "torchx_job_role", "role.yml"), "-e", "@%s" % extra_file, "--check"], tmp_path)


def test_every_default_is_in_the_argument_spec():
    defaults = yaml.safe_load(open(os.path.join(ROLE, "defaults", "main.yml")))
    spec = yaml.safe_load(open(os.path.join(ROLE, "meta", "argument_specs.yml")))["argument_specs"]["main"]["options"]
    assert set(defaults) == set(spec)
    assert all(name.startswith("torchx_job_") for name in defaults)


BAD_INPUTS = {
    "name-not-dns-label": ({"trainjob_name": "Bad_Name"}, "trainjob_name"),
    "name-too-long": ({"trainjob_name": "a" * 49}, "trainjob_name"),
    "name-injection": ({"trainjob_name": "job\n---\nkind: Secret"}, "trainjob_name"),
    "namespace-system": ({"trainjob_namespace": "kube-system"}, "trainjob_namespace"),
    "queue-not-a-name": ({"torchx_job_queue": "team a"}, "torchx_job_queue"),
    "image-empty": ({"trainjob_image": ""}, "trainjob_image"),
    "image-newline": ({"trainjob_image": IMAGE + "\nx"}, "trainjob_image"),
    "nnodes-zero": ({"torchx_job_nnodes": 0}, "torchx_job_nnodes"),
    "nnodes-huge": ({"torchx_job_nnodes": 100000}, "torchx_job_nnodes"),
    "rdzv-port-low": ({"torchx_job_rdzv_port": 80}, "torchx_job_rdzv_port"),
    "launcher-empty": ({"torchx_job_launcher": []}, "torchx_job_launcher"),
    "module-not-python": ({"trainjob_trainer_module": "trainer.train; id"}, "trainjob_trainer_module"),
    "extra-arg-newline": ({"trainjob_trainer_extra_args": ["--x\n--y"]}, "trainjob_trainer_extra_args"),
    "output-dir-dotdot": ({"trainjob_trainer_output_dir": "/data/../etc"}, "trainjob_trainer_output_dir"),
    "memory-not-quantity": ({"trainjob_memory_request": "lots"}, "trainjob_memory_request"),
    "root": ({"trainjob_run_as_user": 0}, "trainjob_run_as_user"),
    # the names are quoted, never the secret value
    "literal-secret-env": ({"trainjob_env": [{"name": "HF_TOKEN", "value": "hf-literal"}]}, "trainjob_env", '["HF_TOKEN"]'),
    "prefix-dotdot": ({"trainjob_s3_prefix": "training/../other"}, "trainjob_s3_prefix"),
    "endpoint-newline": ({"trainjob_aws_endpoint_url": "http://x\n"}, "trainjob_aws_endpoint_url"),
    "wait-timeout-huge": ({"trainjob_wait_timeout": 10 ** 12}, "trainjob_wait_timeout"),
    "manifest-dest-relative": ({"trainjob_manifest_dest": "manifests/x.yaml"}, "trainjob_manifest_dest"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_preflight_refuses_and_names_the_variable(tmp_path, case):
    extra, variable = BAD_INPUTS[case][:2]
    quote = BAD_INPUTS[case][2] if len(BAD_INPUTS[case]) > 2 else json.dumps(extra[variable]).strip('"')[:20]
    rc, out = _run_role(tmp_path, extra)
    assert rc != 0, out
    assert variable in out, out
    assert quote in out, out
    assert "hf-literal" not in out
    assert "torchx_job_request" not in out.split("fatal:")[0].split("TASK [")[-1], "refused after the render"


def test_check_mode_renders_without_a_cluster(tmp_path):
    import torchx  # noqa: F401  (pinned in requirements.txt: a missing torchx fails, never skips)
    rc, out = _run_role(tmp_path, {"volcano_queues": [{"name": "team-a", "weight": 1}]})
    assert rc == 0, out
    assert "torchx 0.7.0 dist.ddp, 2x1, Volcano queue team-a, tasks train-0, train-1" in out
    assert "rank 0's node: pod trainfleet-digits-torchx-train-0-0" in out
    assert "replica 0 ${TORCHX_RANK0_HOST:=localhost}:29500, others ${VC_TRAIN_0_HOSTS:=localhost}:29500" in out
    assert "torchx status kubernetes://torchx/trainfleet:trainfleet-digits-torchx" in out
    assert "torchx log kubernetes://torchx/trainfleet:trainfleet-digits-torchx/train/0" in out
    assert "no cluster lookups" in out


def test_queue_defaults_to_volcanos_default_queue(tmp_path):
    import torchx  # noqa: F401  (pinned in requirements.txt: a missing torchx fails, never skips)
    rc, out = _run_role(tmp_path, {})
    assert rc == 0, out
    assert "Volcano queue default," in out


# --------------------------------------------------------------------------- the shared report


def _report(tmp_path, status, rank0):
    result_file = tmp_path / "outcome.json"
    extra = {
        # what the torchx_job role's render hands the trainjob role
        "trainjob_rendered": {"kind": "VolcanoJob", "manifest": {}, "companions": [], "rank0_note": "",
                              "facts": {"app_handle": "kubernetes://torchx/trainfleet:trainfleet-digits-torchx",
                                        "torchx_version": "0.7.0"}},
        "trainjob_launcher": "torchx",
        "_trainjob_decision": "no job named trainfleet-digits-torchx existed, submitted it",
        "trainjob_name": "trainfleet-digits-torchx",
        "trainjob_namespace": "trainfleet",
        "__trainjob_status": status,
        "__trainjob_rank0": rank0,
        "result_file": str(result_file),
    }
    extra_file = tmp_path / "extra.json"
    extra_file.write_text(json.dumps(extra))
    rc, out = _playbook([os.path.join(FIXTURES, "pytorchjob_role", "report.yml"), "-e", "@%s" % extra_file], tmp_path)
    assert rc == 0, out
    return json.loads(result_file.read_text()), out


def _job(phase, failure=None):
    return {"name": "trainfleet-digits-torchx", "namespace": "trainfleet", "phase": phase, "kind_phase": "Completed",
            "terminal": True, "conditions": [], "replica_statuses": {}, "start_time": "2026-01-01T00:00:00Z",
            "completion_time": "2026-01-01T00:00:42Z", "duration_seconds": 42.0, "restarts": 0,
            "pods": [], "failure": failure}


def test_report_names_the_volcano_job(tmp_path):
    rank0 = {"changed": False, "pod": "trainfleet-digits-torchx-train-0-0", "method": "trainer-log",
             "trainer_result": {"final_accuracy": 0.96, "final_loss": 0.12, "epochs": 5, "world_size": 2,
                                "model_uri": "s3://trainfleet-local/training/trainfleet-digits-torchx/model.pt"}}
    outcome, out = _report(tmp_path, {"changed": False, "exists": True, "job": _job("Succeeded")}, rank0)
    assert outcome["failure"] is None, out
    assert outcome["result"]["phase"] == "Succeeded"
    assert outcome["result"]["launcher"] == "torchx"
    assert outcome["result"]["app_handle"] == "kubernetes://torchx/trainfleet:trainfleet-digits-torchx"
    assert "VolcanoJob trainfleet/trainfleet-digits-torchx: Succeeded" in out
    assert "rank 0: pod trainfleet-digits-torchx-train-0-0 (decided by trainer-log)" in out


def test_report_failure_points_at_torchx_job_rerun(tmp_path):
    failure = {"reason": "Failed", "message": "pod failed", "pod": "trainfleet-digits-torchx-train-1-0"}
    outcome, out = _report(tmp_path, {"changed": False, "exists": True, "job": _job("Failed", failure)},
                           {"skipped": True, "changed": False})
    assert outcome["failure"].startswith("VolcanoJob trainfleet/trainfleet-digits-torchx Failed"), outcome
    assert "-e trainjob_rerun=true" in outcome["failure"]


def test_the_seeds_trainium_layout_renders(tmp_path):
    """Seed 002's launch: examples/aws/trainium.yml with the torchx launcher plans dist.ddp -j 2x32 (the pods
    themselves: tests/unit/plugins/module_utils/test_torchx_pod_settings.py, the seed's layout)."""
    with open(os.path.join(ROOT, "examples", "aws", "trainium.yml"), encoding="utf-8") as handle:
        example = yaml.safe_load(handle)
    rc, out = _run_role(tmp_path, dict(example, trainjob_name="bertcompile", trainjob_pvc_claim_name="fsx-claim",
                                       trainjob_trainer_device="xla", trainjob_compile_cache_set="bert-large",
                                       trainjob_precompile=True))
    assert rc == 0, out
    assert "torchx 0.7.0 dist.ddp, 2x32" in out, out
