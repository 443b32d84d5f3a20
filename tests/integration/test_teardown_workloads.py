# -*- coding: utf-8 -*-
"""The teardown's workloads part (roles/teardown/tasks/workloads.yml), run the way users run it.

The teardown role with only that part on (cluster, account, proof and local stack off), against:
- no kubeconfig, and a kubeconfig whose server accepts connections and never answers: the part
  is skipped with the reason, within a bounded time, and nothing fails (also with --check);
- an API that refuses our credentials: refused before anything is deleted;
- an in-memory API (tests/integration/fake_kube_api.py) holding what the storage, pytorchjob and
  training_operator steps create, next to what they did not: --check deletes nothing; the run
  deletes exactly ours (jobs, the tensorboard step's Deployments and Services, claims and the CSI
  volume behind them, the static volume, the StorageClass, our namespace) and keeps, and lists, everything else (a pre-existing namespace
  with its contents, someone's job, claim and StorageClass, and the training operator, whose CRDs
  would take someone's job with them); a second run changes nothing; once that job is gone the
  operator and its namespace go too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.fake_kube_api import FakeKubeApi, write_kubeconfig
from tests.support.net import silent_listener

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
TIMEOUT = 600
RECAP_RE = re.compile(
    r"^localhost\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)\s+"
    r"failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)", re.M)
PLAYBOOK = """---
- name: The teardown's workloads part alone
  hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: trainfleet.training.teardown
      vars:
        teardown_cluster: false
        teardown_aws_account: false
        teardown_verify_empty: false
        teardown_local_stack: false
"""
OURS = {"app.kubernetes.io/managed-by": "trainfleet"}
OPERATOR = dict(OURS, **{"app.kubernetes.io/component": "training-operator"})


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    base = tmp_path_factory.mktemp("teardown-workloads")
    (base / "play.yml").write_text(PLAYBOOK)
    (base / "tmp").mkdir()
    return base


def run(workdir, extra, args=()):
    """ansible-playbook play.yml -e ...; returns rc, output, recap dict and seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ANSIBLE_", "KUBECONFIG", "K8S_AUTH_", "TRAINFLEET_"))}
    env.update(PATH=str(VENV_BIN) + os.pathsep + env.get("PATH", ""), ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_NOCOLOR="1", TMPDIR=str(workdir / "tmp"), HOME=str(workdir))
    argv = [str(VENV_BIN / "ansible-playbook"), str(workdir / "play.yml"),
            "-e", "trainfleet_cache_dir=%s" % (workdir / "cache")]
    for key, value in extra.items():
        argv += ["-e", json.dumps({key: value})]
    argv += list(args)
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=TIMEOUT, check=False)
    match = RECAP_RE.search(proc.stdout)
    return dict(rc=proc.returncode, out=proc.stdout, recap=match.groupdict() if match else None,
                seconds=time.monotonic() - started)


@pytest.mark.parametrize("args", [[], ["--check"]], ids=["run", "check"])
def test_missing_kubeconfig_is_skipped_with_the_reason(workdir, args):
    result = run(workdir, {}, args)
    assert result["rc"] == 0, result["out"][-4000:]
    assert result["recap"]["failed"] == "0" and result["recap"]["changed"] == "0"
    kubeconfig = workdir / "cache" / "kubeconfig-trainfleet"
    assert ("teardown workloads skipped: kubeconfig %s does not exist" % kubeconfig) in result["out"]
    assert "Nothing on a cluster was read or deleted." in result["out"]
    assert "Find the training jobs" not in result["out"]  # the rest of the part is not even included


def test_silent_api_is_skipped_within_the_timeout(workdir, tmp_path):
    """A server that accepts every connection and never answers (a cluster being torn down)."""
    with silent_listener() as (port, _held):
        url = "http://127.0.0.1:%d" % port
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig-silent", url)
        result = run(workdir, {"teardown_kubeconfig": str(kubeconfig), "teardown_api_timeout": 2})
    assert result["rc"] == 0, result["out"][-4000:]
    assert result["recap"]["failed"] == "0" and result["recap"]["changed"] == "0"
    assert re.search(r"teardown workloads skipped: the API server (%s )?(does not answer|did not answer within)" % re.escape(url),
                     result["out"]), result["out"][-3000:]
    assert result["seconds"] < 60, result["seconds"]


def test_refused_credentials_stop_before_anything_is_deleted(workdir, tmp_path):
    with FakeKubeApi(refuse=True) as api:
        result = run(workdir, {"teardown_kubeconfig": str(api.kubeconfig(tmp_path / "kubeconfig-refused"))})
        deletes = api.store.deletes()
    assert result["rc"] != 0
    assert "Refuse when the cluster refuses our credentials" in result["out"]
    assert "teardown cannot remove the workloads" in result["out"] and "credentials refused" in result["out"]
    assert deletes == []


def seed(store):
    """What the steps create (labelled ours) next to what they did not."""
    store.add("Namespace", "trainfleet", labels=dict(OURS, **{"app.kubernetes.io/part-of": "trainfleet"}))
    store.add("Namespace", "shared")  # existed before trainfleet: never labelled, never deleted
    store.add("Namespace", "kubeflow", labels=OPERATOR)
    for namespace in ("trainfleet", "shared", "kubeflow"):
        store.add("ConfigMap", "kube-root-ca.crt", namespace)
        store.add("ServiceAccount", "default", namespace)
    store.add("PyTorchJob", "digits", "trainfleet", labels=OURS)
    store.add("Pod", "digits-master-0", "trainfleet", metadata={"ownerReferences": [{"kind": "PyTorchJob", "name": "digits"}]})
    store.add("ServiceAccount", "trainfleet-trainer", "trainfleet", labels=OURS)
    store.add("Secret", "trainfleet-aws", "trainfleet", labels=OURS, data={"AWS_SECRET_ACCESS_KEY": "c2VjcmV0LXZhbHVl"})
    store.add("PersistentVolumeClaim", "trainfleet-data", "trainfleet", labels=OURS, spec={"volumeName": "pvc-fsx-1"})
    store.add("PersistentVolume", "pvc-fsx-1", spec={
        "persistentVolumeReclaimPolicy": "Delete", "csi": {"driver": "fsx.csi.aws.com", "volumeHandle": "fs-0123"},
        "claimRef": {"namespace": "trainfleet", "name": "trainfleet-data"}})
    store.add("PersistentVolumeClaim", "scratch", "trainfleet", labels=OURS, spec={"volumeName": "scratch-trainfleet"})
    store.add("PersistentVolume", "scratch-trainfleet", labels=OURS, spec={
        "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/var/local/trainfleet-data"},
        "claimRef": {"namespace": "trainfleet", "name": "scratch"}})
    store.add("StorageClass", "trainfleet-fsx", labels=OURS, provisioner="fsx.csi.aws.com")
    store.add("StorageClass", "standard", provisioner="rancher.io/local-path")
    store.add("PyTorchJob", "ours-in-shared", "shared", labels=OURS)
    store.add("PyTorchJob", "their-job", "shared")
    store.add("PersistentVolumeClaim", "their-data", "shared", spec={"volumeName": "pvc-theirs"})
    store.add("PersistentVolume", "pvc-theirs", spec={
        "persistentVolumeReclaimPolicy": "Delete", "csi": {"driver": "ebs.csi.aws.com"},
        "claimRef": {"namespace": "shared", "name": "their-data"}})
    store.add("ConfigMap", "their-config", "shared")
    # the tensorboard step's objects (an internal load balancer among them), and someone's
    store.add("Deployment", "trainfleet-tensorboard", "trainfleet", labels=dict(OURS, **{"app.kubernetes.io/component": "tensorboard"}))
    store.add("Service", "trainfleet-tensorboard", "trainfleet", labels=dict(OURS, **{"app.kubernetes.io/component": "tensorboard"}))
    store.add("Service", "trainfleet-tensorboard-internal", "trainfleet", labels=dict(OURS, **{"app.kubernetes.io/component": "tensorboard"}),
              spec={"type": "LoadBalancer", "loadBalancerSourceRanges": ["10.42.0.0/16"]})
    store.add("Deployment", "tb-shared", "shared", labels=dict(OURS, **{"app.kubernetes.io/component": "tensorboard"}))
    store.add("Service", "tb-shared", "shared", labels=dict(OURS, **{"app.kubernetes.io/component": "tensorboard"}))
    store.add("Deployment", "their-app", "shared")
    store.add("Service", "their-app", "shared")
    # the jupyter step's token Secret and the evaluate step's Job (ours), next to someone's Secret and Job
    store.add("Secret", "lab-token", "shared", labels=dict(OURS, **{"app.kubernetes.io/component": "jupyter"}),
              data={"token": "bGFiLXRva2Vu"})
    store.add("Job", "digits-evaluate", "shared", labels=dict(OURS, **{"app.kubernetes.io/component": "evaluate"}))
    store.add("Secret", "their-secret", "shared", data={"password": "dGhlaXJz"})
    store.add("Job", "their-batch", "shared")
    store.add("Deployment", "training-operator", "kubeflow", labels=dict(OPERATOR, **{"control-plane": "kubeflow-training-operator"}),
              metadata={"annotations": {"trainfleet.io/manifests-sha256": "0123abcd"}})
    store.add("Pod", "training-operator-5d9f", "kubeflow", metadata={"ownerReferences": [{"kind": "ReplicaSet", "name": "x"}]})
    store.add("Service", "training-operator", "kubeflow", labels=OPERATOR)
    store.add("ServiceAccount", "training-operator", "kubeflow", labels=OPERATOR)
    store.add("ConfigMap", "training-operator-init-container", "kubeflow", labels=OPERATOR)
    store.add("Secret", "training-operator-webhook-cert", "kubeflow", labels=OPERATOR, data={"tls.key": "d2ViaG9vay1rZXk="})
    store.add("ClusterRole", "training-operator", labels=OPERATOR)
    store.add("ClusterRoleBinding", "training-operator", labels=OPERATOR)
    store.add("ValidatingWebhookConfiguration", "validator.training-operator.kubeflow.org", labels=OPERATOR)
    store.add("CustomResourceDefinition", "pytorchjobs.kubeflow.org", labels=OPERATOR, spec={
        "group": "kubeflow.org", "names": {"kind": "PyTorchJob", "plural": "pytorchjobs"},
        "versions": [{"name": "v1", "served": True, "storage": True}]})


KEPT = ["PyTorchJob shared/their-job", "PersistentVolumeClaim shared/their-data", "StorageClass standard", "Namespace shared"]


def test_removes_only_what_is_ours(workdir, tmp_path):
    with FakeKubeApi() as api:
        seed(api.store)
        before = sorted(api.store.objects)
        extra = {"teardown_kubeconfig": str(api.kubeconfig(tmp_path / "kubeconfig-fake")),
                 "teardown_namespaces": ["trainfleet", "shared"]}

        check = run(workdir, extra, ["--check"])
        assert check["rc"] == 0, check["out"][-5000:]
        assert api.store.deletes() == [] and sorted(api.store.objects) == before
        assert "would remove (check mode)" in check["out"]

        first = run(workdir, extra)
        assert first["rc"] == 0, first["out"][-5000:]
        deleted = api.store.deletes()
        assert sorted(deleted) == sorted([
            "/apis/kubeflow.org/v1/namespaces/trainfleet/pytorchjobs/digits",
            "/apis/kubeflow.org/v1/namespaces/shared/pytorchjobs/ours-in-shared",
            "/api/v1/namespaces/trainfleet/services/trainfleet-tensorboard",
            "/api/v1/namespaces/trainfleet/services/trainfleet-tensorboard-internal",
            "/apis/apps/v1/namespaces/trainfleet/deployments/trainfleet-tensorboard",
            "/api/v1/namespaces/shared/services/tb-shared",
            "/apis/apps/v1/namespaces/shared/deployments/tb-shared",
            "/api/v1/namespaces/trainfleet/secrets/trainfleet-aws",
            "/api/v1/namespaces/shared/secrets/lab-token",
            "/apis/batch/v1/namespaces/shared/jobs/digits-evaluate",
            "/api/v1/namespaces/trainfleet/persistentvolumeclaims/trainfleet-data",
            "/api/v1/namespaces/trainfleet/persistentvolumeclaims/scratch",
            "/api/v1/persistentvolumes/scratch-trainfleet",
            "/apis/storage.k8s.io/v1/storageclasses/trainfleet-fsx",
            "/api/v1/namespaces/trainfleet",
        ])
        # jobs before claims, claims before volumes and classes, the namespace last
        assert deleted.index("/api/v1/namespaces/trainfleet/persistentvolumeclaims/trainfleet-data") > \
            deleted.index("/apis/kubeflow.org/v1/namespaces/trainfleet/pytorchjobs/digits")
        assert deleted[-1] == "/api/v1/namespaces/trainfleet"
        assert api.store.names("PersistentVolume") == ["pvc-theirs"]  # the CSI volume of our claim went with it
        assert api.store.names("PyTorchJob") == ["their-job"]
        assert api.store.names("ConfigMap", "shared") == ["kube-root-ca.crt", "their-config"]
        assert api.store.names("Deployment", "kubeflow") == ["training-operator"]
        assert api.store.names("Deployment", "shared") == ["their-app"] and api.store.names("Service", "shared") == ["their-app"]
        assert api.store.names("Secret", "shared") == ["their-secret"] and api.store.names("Job", "shared") == ["their-batch"]
        # the load balancer's Service goes before the namespace (its cloud load balancer needs the cluster's controller)
        assert deleted.index("/api/v1/namespaces/trainfleet/services/trainfleet-tensorboard-internal") < \
            deleted.index("/api/v1/namespaces/trainfleet/persistentvolumeclaims/trainfleet-data")
        assert re.search(r'workloads \[[^]]*Service trainfleet/trainfleet-tensorboard-internal', first["out"]), first["out"][-3000:]
        assert "kept: not created by trainfleet: " + ", ".join(KEPT) in first["out"]
        assert "kept: Deployment kubeflow/training-operator (jobs that are not ours would go with its CRDs: " \
               "PyTorchJob shared/their-job)" in first["out"]
        assert "c2VjcmV0LXZhbHVl" not in first["out"] and "d2ViaG9vay1rZXk=" not in first["out"]
        assert "bGFiLXRva2Vu" not in first["out"] and "dGhlaXJz" not in first["out"]

        api.store.requests[:] = []
        second = run(workdir, extra)
        assert second["rc"] == 0, second["out"][-5000:]
        assert second["recap"]["changed"] == "0", second["out"][-5000:]
        assert api.store.deletes() == []

        api.store.delete("PyTorchJob", "shared", "their-job")
        api.store.requests[:] = []
        third = run(workdir, extra)
        assert third["rc"] == 0, third["out"][-5000:]
        assert "training operator yes" in third["out"]
        assert api.store.names("CustomResourceDefinition") == [] and api.store.names("ClusterRole") == []
        assert api.store.names("ValidatingWebhookConfiguration") == [] and api.store.names("Namespace") == ["shared"]
        assert api.store.deletes()[-1] == "/api/v1/namespaces/kubeflow"
        assert "d2ViaG9vay1rZXk=" not in third["out"]
