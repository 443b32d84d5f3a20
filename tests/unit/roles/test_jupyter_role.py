# -*- coding: utf-8 -*-
"""Role jupyter (the jupyter step): manifests, preflight, check mode, the image's build arguments.

As test_tensorboard_role: ansible-playbook against localhost, no cluster and no Docker engine (a
given jupyter_image skips the build), one run for every render and bad-input case, each its own play
with the role inside block/rescue; the rendered manifests are read back from the review copy. The
token Secret is never rendered to that copy; the JupyterLab pod itself is proven in
molecule/default/verify.yml (the notebook run in it, the API refusing a request without the token).
"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
import yaml

from tests.unit.roles.test_tensorboard_role import contract, playbook, role_case_outcomes

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "jupyter")
IMAGE = "localhost:5001/trainfleet/trainer:jupyter-4.6.6-0123456789ab"


def shared(tmp_path, **object_store):
    return {"trainfleet_name": "trainfleet", "trainfleet_cache_dir": str(tmp_path / "cache"),
            "trainfleet_cluster": contract(str(tmp_path / "no-kubeconfig"), **object_store),
            "jupyter_image": IMAGE, "ansible_python_interpreter": sys.executable}


RENDER = {
    "default-newest-run-in-s3": ({}, {}),
    "one-run-and-claim": ({"jupyter_run": "trainfleet-digits", "jupyter_pvc_claim_name": "trainfleet-data"}, {}),
    "aws-pod-identity": ({"jupyter_service_account": "trainfleet-trainer", "jupyter_aws_endpoint_url": "",
                          "jupyter_aws_credentials_secret": "", "jupyter_aws_region": "us-west-2"},
                         {"kind": "s3", "bucket": "trainfleet-data", "credentials_secret": ""}),
    "claim-no-object-store": ({"jupyter_pvc_claim_name": "trainfleet-data"}, {"kind": "none", "bucket": ""}),
    "internal-lb": ({"jupyter_internal_load_balancer": True, "jupyter_load_balancer_source_ranges": ["10.42.0.0/16"]}, {}),
}
INJECT = "x\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: injected}"
BAD = {
    "name-not-dns": ({"jupyter_name": "Jupyter_Lab"}, "jupyter_name", '"Jupyter_Lab"'),
    "namespace-injection": ({"jupyter_namespace": INJECT}, "jupyter_namespace", json.dumps(INJECT)),
    "namespace-kube-system": ({"jupyter_namespace": "kube-system"}, "jupyter_namespace", '"kube-system"'),
    "labels-replace-selector": ({"jupyter_labels": {"app.kubernetes.io/name": "x"}}, "jupyter_labels", '"x"'),
    "run-traversal": ({"jupyter_run": "../other"}, "jupyter_run", '"../other"'),
    "prefix-traversal": ({"jupyter_s3_prefix": "training/../secrets"}, "jupyter_s3_prefix", '"training/../secrets"'),
    "claim-missing-without-store": ({}, "jupyter_pvc_claim_name", '""'),
    "mount-over-work": ({"jupyter_pvc_claim_name": "d", "jupyter_pvc_mount_path": "/work"}, "jupyter_pvc_mount_path", '"/work"'),
    "endpoint-newline": ({"jupyter_aws_endpoint_url": "http://a\nb"}, "jupyter_aws_endpoint_url", '"http://a\\nb"'),
    "image-newline": ({"jupyter_image": IMAGE + "\nx"}, "jupyter_image", json.dumps(IMAGE + "\nx")),
    "version-range": ({"jupyter_lab_version": ">=4"}, "jupyter_lab_version", '">=4"'),
    "memory-not-quantity": ({"jupyter_memory_limit": "lots"}, "jupyter_memory_limit", '"lots"'),
    "port-privileged": ({"jupyter_port": 80}, "jupyter_port", "80"),
    "root-user": ({"jupyter_run_as_user": 0}, "jupyter_run_as_user", "0"),
    "lb-without-cidrs": ({"jupyter_internal_load_balancer": True}, "jupyter_load_balancer_source_ranges", "[]"),
    "lb-open-to-all": ({"jupyter_internal_load_balancer": True, "jupyter_load_balancer_source_ranges": ["0.0.0.0/0"]},
                       "jupyter_load_balancer_source_ranges", '"0.0.0.0/0"'),
    "manifest-dest-escape": ({"jupyter_manifest_dest": "/tmp/../etc/j.yaml"}, "jupyter_manifest_dest", '"/tmp/../etc/j.yaml"'),
}
# the object store of each bad case's contract (the claim case has none)
BAD_STORE = {"claim-missing-without-store": {"kind": "none", "bucket": ""}}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """One ansible-playbook run (not check mode): every case's outcome and rendered manifests."""
    tmp_path = tmp_path_factory.mktemp("jupyter-role")
    cases = {}
    for case_id, (case_vars, store) in list(RENDER.items()) + [(k, (v[0], BAD_STORE.get(k, {}))) for k, v in BAD.items()]:
        variables = shared(tmp_path, **store)
        variables["jupyter_manifest_dest"] = str(tmp_path / "manifests" / ("%s.yaml" % case_id))
        variables.update(case_vars)
        cases[case_id] = variables
    return role_case_outcomes(tmp_path, "jupyter", cases), tmp_path


def manifests(outcomes_fixture, case_id):
    found, tmp_path = outcomes_fixture
    assert "cannot reach the cluster" in found[case_id] and "Nothing was created" in found[case_id], found[case_id]
    text = (tmp_path / "manifests" / ("%s.yaml" % case_id)).read_text()
    assert "token:" not in text and "kind: Secret" not in text  # the review copy never holds the token
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text) if d}


def pod_of(docs):
    return docs[("Deployment", "trainfleet-jupyter")]["spec"]["template"]["spec"]


def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_default_reads_the_newest_run_in_s3_as_the_training_pods_do(outcomes):
    docs = manifests(outcomes, "default-newest-run-in-s3")
    assert sorted(docs) == [("Deployment", "trainfleet-jupyter"), ("Service", "trainfleet-jupyter")]
    pod = pod_of(docs)
    (init,), (box,) = pod["initContainers"], pod["containers"]
    assert box["image"] == init["image"] == IMAGE
    assert box["command"] == ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", "--ServerApp.root_dir=/work"]
    assert init["command"] == ["cp", "-R", "/opt/trainfleet/notebooks/.", "/work/"]
    env = env_of(box)
    assert env["TRAINFLEET_RUNS"] == "s3://trainfleet-local/training" and "TRAINFLEET_MODEL" not in env
    assert env["AWS_ENDPOINT_URL"] == "http://172.18.0.1:5050" and env["AWS_REGION"] == "us-east-1"
    # credentials and the token only by reference: no literal secret in the manifest
    assert env["AWS_ACCESS_KEY_ID"] == {"secretKeyRef": {"name": "trainfleet-aws-local", "key": "AWS_ACCESS_KEY_ID"}}
    assert env["JUPYTER_TOKEN"] == {"secretKeyRef": {"name": "trainfleet-jupyter-token", "key": "token"}}
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in (box, init):
        assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                "capabilities": {"drop": ["ALL"]}}
    assert pod["automountServiceAccountToken"] is False
    assert {m["mountPath"] for m in box["volumeMounts"]} == {"/tmp", "/work"}
    service = docs[("Service", "trainfleet-jupyter")]
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["ports"][0]["port"] == 8888
    for doc in docs.values():
        assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trainfleet"


def test_one_run_and_the_claim_read_only(outcomes):
    pod = pod_of(manifests(outcomes, "one-run-and-claim"))
    env = env_of(pod["containers"][0])
    assert env["TRAINFLEET_MODEL"] == "s3://trainfleet-local/training/trainfleet-digits/model.pt"
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "trainfleet-data", "readOnly": True}} in pod["volumes"]
    assert {"name": "data", "mountPath": "/data", "readOnly": True} in pod["containers"][0]["volumeMounts"]


def test_aws_uses_the_service_account_and_no_endpoint_or_secret(outcomes):
    pod = pod_of(manifests(outcomes, "aws-pod-identity"))
    env = env_of(pod["containers"][0])
    assert pod["serviceAccountName"] == "trainfleet-trainer"
    assert set(env) == {"JUPYTER_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION", "TRAINFLEET_RUNS"}
    assert env["TRAINFLEET_RUNS"] == "s3://trainfleet-data/training"


def test_without_an_object_store_the_runs_are_on_the_claim(outcomes):
    env = env_of(pod_of(manifests(outcomes, "claim-no-object-store"))["containers"][0])
    assert env["TRAINFLEET_RUNS"] == "/data/outputs" and "AWS_ENDPOINT_URL" not in env


def test_internal_load_balancer_is_restricted_to_the_cidrs(outcomes):
    lb = manifests(outcomes, "internal-lb")[("Service", "trainfleet-jupyter-internal")]
    assert lb["spec"]["type"] == "LoadBalancer" and lb["spec"]["loadBalancerSourceRanges"] == ["10.42.0.0/16"]


@pytest.mark.parametrize("case_id", sorted(BAD))
def test_bad_input_is_refused_naming_the_variable_and_quoting_the_value(outcomes, case_id):
    found, tmp_path = outcomes
    _case_vars, variable, quote = BAD[case_id]
    message = found[case_id]
    assert message != "PASSED" and "cannot reach the cluster" not in message, message
    assert variable in message, message
    assert quote in message or ("got: " in message), message
    assert not (tmp_path / "manifests" / ("%s.yaml" % case_id)).exists()


def test_check_mode_without_a_kubeconfig_renders_validates_and_prints_the_command(tmp_path):
    play = [{"name": "jupyter", "hosts": "localhost", "gather_facts": False, "connection": "local",
             "roles": [{"role": "trainfleet.training.jupyter"}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "vars.json").write_text(json.dumps(shared(tmp_path)))
    rc, out, _seconds = playbook([str(tmp_path / "play.yml"), "-e", "@%s" % (tmp_path / "vars.json"), "--check"], tmp_path)
    assert rc == 0, out[-4000:]
    assert "was rendered and validated only" in out
    assert "port-forward service/trainfleet-jupyter 8888:8888" in out and "token=<the token>" in out


def test_dockerfile_takes_the_build_arguments_the_role_passes_and_the_wheels_it_downloads():
    with open(os.path.join(ROLE, "files", "image", "Dockerfile")) as handle:
        dockerfile = handle.read()
    with open(os.path.join(ROLE, "tasks", "build.yml")) as handle:
        build = yaml.safe_load(handle)
    image = [t for t in build if t.get("ansible.builtin.include_role", {}).get("tasks_from") == "build"][0]["vars"]
    assert set(image["image_build_args"]) <= set(re.findall(r"^ARG ([A-Z0-9_]+)", dockerfile, re.M))
    assert image["image_wheels"] == ["jupyterlab=={{ jupyter_lab_version }}", "ipykernel", "nbclient", "pip"]
    assert '"jupyterlab==${JUPYTERLAB_VERSION}" ipykernel nbclient' in dockerfile and "--no-index" in dockerfile
    assert "apt-get" not in re.sub(r"#.*", "", dockerfile)  # the trainer image's apt is not usable
    with open(os.path.join(ROOT, "site.yml")) as handle:
        site = yaml.safe_load(handle)
    entry = [p for p in site if p.get("ansible.builtin.import_playbook") == "playbooks/jupyter.yml"][0]
    assert entry["when"] == "jupyter_enabled | default(false) | bool" and entry["tags"] == ["jupyter"]


def test_the_notebook_is_clean_and_reads_its_parameters_from_the_pods_environment():
    with open(os.path.join(ROLE, "files", "notebooks", "evaluate.ipynb")) as handle:
        notebook = json.load(handle)
    assert notebook["nbformat"] == 4
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert code and all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    source = "".join("".join(c["source"]) for c in code)
    for name in ("TRAINFLEET_MODEL", "TRAINFLEET_RUNS", "from trainer import evaluate", "evaluate_line", "confusion_matrix"):
        assert name in source, name
