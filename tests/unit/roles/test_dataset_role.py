# -*- coding: utf-8 -*-
"""Role dataset: the claim copy template, the copy script it ships, and the preflight.

The template (ConfigMap + batch/v1 Job) is rendered with Jinja2 configured like Ansible's
template engine and checked for the restricted pod security of the train step's pods, the
contract's placement, credentials by reference only, and hostile values that come back verbatim
(every scalar through to_json). files/claim_copy.py runs here against a fake S3 client. The
preflight cases run playbooks/dataset.yml with ansible-playbook against nothing (they are refused
before any AWS or cluster call; tests/adversarial runs many more under a counting endpoint).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys

import jinja2
import pytest
import yaml

from ansible.plugins.filter.core import FilterModule as CoreFilters
from ansible.plugins.test.core import TestModule as CoreTests

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "dataset")
SCRIPT = os.path.join(ROLE, "files", "claim_copy.py")
EVIL = "evil\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: injected}\n"
MANIFEST = [{"path": "part-000.csv", "size": 3, "sha256": hashlib.sha256(b"abc").hexdigest()}]


def _lookup(kind, name, **_kwargs):
    assert kind == "ansible.builtin.file", kind
    with open(os.path.join(ROLE, "files", name)) as handle:
        return handle.read()


def variables(**overrides):
    values = {
        "dataset_name": "breast-cancer",
        "dataset_namespace": "trainfleet",
        "dataset_s3_bucket": "trainfleet-data",
        "dataset_s3_region": "us-east-1",
        "dataset_claim_name": "trainfleet-data",
        "dataset_claim_mount_path": "/shared",
        "dataset_image": "localhost:5001/trainfleet/trainer:test",
        "dataset_image_pull_policy": "IfNotPresent",
        "dataset_image_pull_secrets": [],
        "dataset_aws_endpoint_url": "http://172.18.0.1:5050",
        "dataset_aws_credentials_secret": "trainfleet-aws",
        "dataset_service_account": "trainfleet-trainer",
        "dataset_node_selector": {"trainfleet.dev/node-kind": "cpu"},
        "dataset_tolerations": [{"key": "dedicated", "operator": "Equal", "value": "train", "effect": "NoSchedule"}],
        "dataset_cpu_request": "100m",
        "dataset_memory_request": "256Mi",
        "dataset_memory_limit": "1Gi",
        "dataset_run_as_user": 10001,
        "dataset_run_as_group": 10001,
        "dataset_fs_group": 10001,
        "dataset_claim_timeout": 1800,
        "_dataset_job_name": "dataset-breast-cancer-0123456789",
        "_dataset_prefix": "training/datasets/breast-cancer/",
        "_dataset_s3_uri": "s3://trainfleet-data/training/datasets/breast-cancer/",
        "_dataset_claim_target": "/shared/datasets/breast-cancer",
        "_dataset_manifest": MANIFEST,
        "_dataset_manifest_sha256": "f" * 64,
    }
    values.update(overrides)
    return values


def render(**overrides):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")), trim_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters.update(CoreFilters().filters())
    env.tests.update(CoreTests().tests())
    env.globals["lookup"] = _lookup
    text = env.get_template("copy-job.yaml.j2").render(**variables(**overrides))
    return [d for d in yaml.safe_load_all(text) if d]


def test_configmap_ships_the_manifest_and_the_script():
    config, job = render()
    assert config["kind"] == "ConfigMap" and job["kind"] == "Job" and job["apiVersion"] == "batch/v1"
    assert config["metadata"]["name"] == job["metadata"]["name"] == "dataset-breast-cancer-0123456789"
    assert json.loads(config["data"]["manifest.json"]) == MANIFEST
    with open(SCRIPT) as handle:
        assert config["data"]["copy.py"] == handle.read()
    assert job["metadata"]["annotations"]["trainfleet.dev/dataset-manifest-sha256"] == "f" * 64


def test_job_runs_once_bounded_restricted_and_without_a_token():
    _config, job = render()
    spec = job["spec"]
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 1800
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                                      "seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 10001}
    (container,) = pod["containers"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                            "readOnlyRootFilesystem": True, "runAsNonRoot": True}
    assert container["command"] == ["python3", "-I", "/etc/trainfleet-dataset/copy.py"]
    assert not any("hostPath" in v for v in pod["volumes"])
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "trainfleet-data"}} in pod["volumes"]
    assert {"name": "data", "mountPath": "/shared"} in container["volumeMounts"]
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}


def test_placement_identity_and_credentials_by_reference():
    _config, job = render(dataset_image_pull_secrets=["regcred"])
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"trainfleet.dev/node-kind": "cpu"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert pod["serviceAccountName"] == "trainfleet-trainer"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["DATASET_TARGET"]["value"] == "/shared/datasets/breast-cancer"
    assert env["DATASET_PREFIX"]["value"] == "training/datasets/breast-cancer/"
    assert env["AWS_ENDPOINT_URL"]["value"] == "http://172.18.0.1:5050"
    assert env["AWS_SECRET_ACCESS_KEY"] == {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {
        "secretKeyRef": {"name": "trainfleet-aws", "key": "AWS_SECRET_ACCESS_KEY"}}}
    # AWS (Pod Identity): no endpoint, no Secret, no selector.
    _config, job = render(dataset_aws_endpoint_url="", dataset_aws_credentials_secret="", dataset_node_selector={},
                          dataset_tolerations=[], dataset_service_account="")
    pod = job["spec"]["template"]["spec"]
    names = [e["name"] for e in pod["containers"][0]["env"]]
    assert "AWS_ENDPOINT_URL" not in names and "AWS_ACCESS_KEY_ID" not in names
    assert "nodeSelector" not in pod and "tolerations" not in pod and "serviceAccountName" not in pod


def test_hostile_values_come_back_verbatim():
    docs = render(dataset_namespace=EVIL, dataset_name=EVIL, dataset_claim_name=EVIL, dataset_image=EVIL,
                  dataset_claim_mount_path=EVIL, _dataset_claim_target=EVIL, dataset_cpu_request=EVIL,
                  dataset_node_selector={"k": EVIL}, _dataset_manifest=[{"path": EVIL, "size": 1, "sha256": EVIL}])
    assert [d["kind"] for d in docs] == ["ConfigMap", "Job"]
    config, job = docs
    assert config["metadata"]["namespace"] == EVIL and job["metadata"]["labels"]["app.kubernetes.io/instance"] == EVIL
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == EVIL
    assert pod["nodeSelector"] == {"k": EVIL}
    assert json.loads(config["data"]["manifest.json"])[0]["path"] == EVIL


# --------------------------------------------------------------------------- the copy script


def _load_script():
    spec = importlib.util.spec_from_file_location("claim_copy", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeS3(object):
    def __init__(self, objects):
        self.objects = objects
        self.downloads = []

    def download_file(self, bucket, key, dest):
        self.downloads.append((bucket, key))
        with open(dest, "wb") as handle:
            handle.write(self.objects[key])


def _manifest(tmp_path, files):
    items = [{"path": p, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for p, b in sorted(files.items())]
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(items))
    return str(path)


def _env(tmp_path, manifest, target):
    return {"DATASET_NAME": "bc", "DATASET_BUCKET": "b", "DATASET_PREFIX": "p/", "DATASET_TARGET": str(target),
            "DATASET_MANIFEST": manifest}


def test_copy_script_copies_checks_and_keeps_what_it_did_not_write(tmp_path, capsys):
    copy = _load_script()
    target = tmp_path / "claim" / "datasets" / "bc"
    files = {"part-000.csv": b"1,2,0\n", "sub/part-001.csv": b"3,4,1\n"}
    s3 = FakeS3({"p/" + k: v for k, v in files.items()})
    assert copy.copy(s3, _env(tmp_path, _manifest(tmp_path, files), target)) == dict(copied=2, kept=0, removed=0)
    assert (target / "sub" / "part-001.csv").read_bytes() == b"3,4,1\n"
    (target / "mine.csv").write_bytes(b"9,9,9\n")  # not the copy's: never removed
    # Same content again: nothing downloaded. A file dropped from the manifest: removed.
    s3.downloads.clear()
    del files["sub/part-001.csv"]
    assert copy.copy(s3, _env(tmp_path, _manifest(tmp_path, files), target)) == dict(copied=0, kept=1, removed=1)
    assert s3.downloads == []
    assert not (target / "sub" / "part-001.csv").exists() and (target / "mine.csv").exists()
    assert json.loads((target / ".trainfleet-dataset.json").read_text())["files"][0]["path"] == "part-000.csv"
    assert "done: dataset bc" in capsys.readouterr().out


def test_copy_script_refuses_a_changed_object_and_a_path_outside(tmp_path):
    copy = _load_script()
    target = tmp_path / "t"
    manifest = _manifest(tmp_path, {"a.csv": b"1,0\n"})
    with pytest.raises(copy.CopyError, match="the prefix changed since the dataset step ran"):
        copy.copy(FakeS3({"p/a.csv": b"2,0\n"}), _env(tmp_path, manifest, target))
    assert not (target / "a.csv").exists()
    assert [p.name for p in target.iterdir()] == []  # no temporary file left
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"path": "../../etc/passwd", "size": 1, "sha256": "0"}]))
    with pytest.raises(copy.CopyError, match="not a relative path inside the target"):
        copy.copy(FakeS3({}), _env(tmp_path, str(bad), target))


def test_copy_script_says_why_it_cannot_write(tmp_path, monkeypatch):
    copy = _load_script()

    def refuse(path, exist_ok=False):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(copy.os, "makedirs", refuse)
    with pytest.raises(copy.CopyError, match="cannot write .* as uid .*must be writable by the Job's user"):
        copy.copy(FakeS3({}), _env(tmp_path, _manifest(tmp_path, {"a.csv": b"1,0\n"}), tmp_path / "x"))


# --------------------------------------------------------------------------- preflight


def _run(tmp_path, extra):
    vars_file = tmp_path / "vars.json"
    vars_file.write_text(json.dumps(dict({"trainfleet_aws_endpoint_url": "http://127.0.0.1:9",
                                          "platform_aws_operator_manifests": "go_module",
                                          "trainfleet_kubeconfig": str(tmp_path / "none")}, **extra)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ANSIBLE_", "TRAINFLEET_"))}
    env.update(ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1", TRAINFLEET_CACHE=str(tmp_path / "cache"),
               PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inventories/aws",
                           "playbooks/dataset.yml", "-e", "@" + str(vars_file)], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout


def test_without_a_source_the_step_does_nothing(tmp_path):
    rc, out = _run(tmp_path, {})
    assert rc == 0, out[-3000:]
    assert "no dataset to stage" in out
    assert "trainfleet.training.dataset" not in out


@pytest.mark.parametrize("variable,value,why", [
    ("dataset_source", "/nonexistent/trainfleet-dataset", "is not a directory"),
    ("dataset_source", "DIR/../DIR", "'..' components"),
    ("dataset_s3_prefix", "other/datasets/x/", "strictly under dataset_s3_owned_prefix"),
    ("dataset_s3_bucket", "someone-elses-bucket", "must be the contract's bucket"),
    ("dataset_targets", ["claim"], "that contains s3"),
])
def test_preflight_refuses_naming_the_variable(tmp_path, variable, value, why):
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.csv").write_text("1,0\n")
    extra = {"dataset_source": str(source)}
    if isinstance(value, str):
        value = value.replace("DIR", str(source))
    extra[variable] = value
    rc, out = _run(tmp_path, extra)
    assert rc != 0, out[-3000:]
    assert variable in out and why in out, out[-3000:]
    assert json.dumps(value) in out.replace('\\"', '"'), out[-3000:]
    assert "Sync the dataset" not in out
