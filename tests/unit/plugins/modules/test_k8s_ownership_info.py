# -*- coding: utf-8 -*-
"""k8s_ownership_info: one run reads what the teardown needs through the API reader (here an
in-memory one) and returns it sorted; Secret values never come back; API errors fail it."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils.errors import ApiAccessError
from ansible_collections.trainfleet.training.plugins.modules import k8s_ownership_info as module

OURS = {"app.kubernetes.io/managed-by": "trainfleet"}
OPERATOR = dict(OURS, **{"app.kubernetes.io/component": "training-operator"})


def selector_matches(selector, labels):
    for term in filter(None, (selector or "").split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        else:
            key, value = term.split("=", 1)
            if labels.get(key) != value:
                return False
    return True


class FakeReader(object):
    """Stand-in for module_utils.k8s.ResourceReader over {(api_version, kind): [objects]}."""

    served = ("v1", "apps/v1", "storage.k8s.io/v1", "apiextensions.k8s.io/v1", "kubeflow.org/v1",
              "rbac.authorization.k8s.io/v1", "batch/v1", "networking.k8s.io/v1")

    def __init__(self, fail_on=None):
        self.objects = {}
        self.calls = []
        self.fail_on = fail_on

    def add(self, api_version, kind, name, namespace=None, labels=None, **fields):
        meta = {"name": name}
        if namespace:
            meta["namespace"] = namespace
        if labels:
            meta["labels"] = dict(labels)
        meta.update(fields.pop("metadata", {}))
        self.objects.setdefault((api_version, kind), []).append(dict(fields, metadata=meta))

    def list(self, api_version, kind, namespace=None, label_selector=None):
        self.calls.append(("list", kind, namespace, label_selector))
        if kind == self.fail_on:
            raise ApiAccessError("Not allowed to list %ss (HTTP 403): forbidden" % kind, status=403)
        if api_version not in self.served:
            return []
        return [copy.deepcopy(o) for o in self.objects.get((api_version, kind), [])
                if (namespace is None or o["metadata"].get("namespace") == namespace)
                and selector_matches(label_selector, o["metadata"].get("labels") or {})]

    def get(self, api_version, kind, name, namespace=None):
        self.calls.append(("get", kind, namespace, name))
        for o in self.objects.get((api_version, kind), []):
            if o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace:
                return copy.deepcopy(o)
        return None


def seeded():
    r = FakeReader()
    r.add("v1", "Namespace", "trainfleet", labels=OURS)
    r.add("v1", "Namespace", "shared")
    r.add("v1", "Namespace", "kubeflow", labels=OPERATOR)
    r.add("v1", "Namespace", "mixed", labels=OURS)
    for ns in ("trainfleet", "shared", "kubeflow", "mixed"):
        r.add("v1", "ConfigMap", "kube-root-ca.crt", ns)
        r.add("v1", "ServiceAccount", "default", ns)
    r.add("v1", "Secret", "default-token", "mixed", type="kubernetes.io/service-account-token", data={"token": "dG9rZW4="})
    r.add("v1", "Secret", "their-creds", "mixed", type="Opaque", data={"password": "c2VjcmV0LXZhbHVl"})
    r.add("kubeflow.org/v1", "PyTorchJob", "digits", "trainfleet", OURS)
    r.add("kubeflow.org/v1", "PyTorchJob", "their-job", "shared")
    r.add("v1", "Service", "tb", "trainfleet", dict(OURS, **{"app.kubernetes.io/component": "tensorboard"}))
    r.add("apps/v1", "Deployment", "tb", "trainfleet", dict(OURS, **{"app.kubernetes.io/component": "tensorboard"}))
    r.add("apps/v1", "Deployment", "their-app", "shared")
    r.add("v1", "PersistentVolumeClaim", "data", "trainfleet", OURS, spec={"volumeName": "pvc-1"})
    r.add("v1", "PersistentVolumeClaim", "their-data", "shared", spec={"volumeName": "pvc-2"})
    r.add("v1", "PersistentVolume", "pvc-1", spec={"persistentVolumeReclaimPolicy": "Delete", "claimRef": {"namespace": "trainfleet"}})
    r.add("v1", "PersistentVolume", "pvc-2", spec={"persistentVolumeReclaimPolicy": "Delete", "claimRef": {"namespace": "shared"}})
    r.add("storage.k8s.io/v1", "StorageClass", "trainfleet-fsx", labels=OURS)
    r.add("storage.k8s.io/v1", "StorageClass", "standard")
    r.add("apps/v1", "Deployment", "training-operator", "kubeflow", OPERATOR,
          metadata={"annotations": {"trainfleet.io/manifests-sha256": "0123"}})
    r.add("apiextensions.k8s.io/v1", "CustomResourceDefinition", "pytorchjobs.kubeflow.org", labels=OPERATOR, spec={
        "group": "kubeflow.org", "names": {"kind": "PyTorchJob", "plural": "pytorchjobs"},
        "versions": [{"name": "v1", "storage": True}]})
    return r


ARGS = {"kubeconfig": "/nonexistent/kubeconfig", "namespaces": ["trainfleet", "shared", "mixed"],
        "storage_class_names": ["trainfleet-fsx", "trainfleet-efs"]}


@pytest.fixture
def run(run_module, monkeypatch):
    def runner(reader, args=None, check_mode=False):
        monkeypatch.setattr(module, "require_kubernetes", lambda mod: None)
        monkeypatch.setattr(module, "get_api_client", lambda params: object())
        monkeypatch.setattr(module, "ResourceReader", lambda api_client: reader)
        return run_module(module, dict(ARGS, **(args or {})), check_mode=check_mode)
    return runner


def test_sorts_ours_from_theirs_in_one_run(run):
    reader = seeded()
    failed, result = run(reader, check_mode=True)
    assert not failed and result["changed"] is False
    assert [j["ref"] for j in result["jobs"]] == ["PyTorchJob trainfleet/digits"]
    assert result["jobs"][0]["api_version"] == "kubeflow.org/v1"
    assert [w["ref"] for w in result["workloads"]] == ["Service trainfleet/tb", "Deployment trainfleet/tb"]
    assert [c["ref"] for c in result["claims"]] == ["PersistentVolumeClaim trainfleet/data"]
    assert result["dynamic_volumes"] == ["pvc-1"] and result["static_volumes"] == []
    assert result["storage_classes"] == ["trainfleet-fsx"]
    assert result["operator"] == dict(exists=True, ours=True, marked=True, remove=False, blockers=["PyTorchJob shared/their-job"],
                                      selectors=["app.kubernetes.io/managed-by=trainfleet", "app.kubernetes.io/component=training-operator"])
    assert result["namespaces"] == ["trainfleet"]
    assert result["namespaces_kept"] == {"mixed": ["Secret/their-creds"]}
    assert result["kept"] == ["PyTorchJob shared/their-job", "PersistentVolumeClaim shared/their-data", "StorageClass standard",
                              "Namespace shared"]
    assert result["kept_why"] == [
        "Deployment kubeflow/training-operator (jobs that are not ours would go with its CRDs: PyTorchJob shared/their-job)",
        "Namespace mixed (holds what is not ours: Secret/their-creds)"]
    # MPIJob (kubeflow.org/v2beta1) is not served: read as no jobs, not an error
    assert ("list", "MPIJob", "trainfleet", None) in reader.calls
    # our workloads are read by label, the operator's left out
    assert ("list", "Service", "trainfleet", "app.kubernetes.io/managed-by=trainfleet,app.kubernetes.io/component!=training-operator") \
        in reader.calls


def test_secret_values_never_come_back(run):
    failed, result = run(seeded())
    assert not failed
    text = repr(result)
    assert "c2VjcmV0LXZhbHVl" not in text and "dG9rZW4=" not in text


def test_the_operator_and_its_namespace_go_once_nothing_blocks(run):
    reader = seeded()
    reader.objects[("kubeflow.org/v1", "PyTorchJob")] = [
        o for o in reader.objects[("kubeflow.org/v1", "PyTorchJob")] if o["metadata"]["name"] != "their-job"]
    failed, result = run(reader)
    assert not failed
    assert result["operator"]["remove"] is True and result["operator"]["blockers"] == []
    assert result["namespaces"] == ["trainfleet", "kubeflow"]
    assert result["kept"] == ["PersistentVolumeClaim shared/their-data", "StorageClass standard", "Namespace shared"]


def test_operator_off_is_kept_and_its_crds_not_read(run):
    reader = seeded()
    failed, result = run(reader, {"training_operator": False})
    assert not failed and result["operator"]["remove"] is False
    assert "Deployment kubeflow/training-operator (teardown_training_operator is false)" in result["kept_why"]
    assert not [c for c in reader.calls if c[1] == "CustomResourceDefinition"]


def test_job_api_versions_option(run):
    reader = seeded()
    reader.add("kubeflow.org/v1", "TFJob", "tf", "trainfleet", OURS)
    failed, result = run(reader, {"job_kinds": ["TFJob"], "job_api_versions": {"TFJob": "kubeflow.org/v1"}})
    assert not failed and [j["ref"] for j in result["jobs"]] == ["TFJob trainfleet/tf"]


def test_volcano_jobs_are_read_as_volcanos_job_kind(run):
    """VolcanoJob (what the torchx launcher submits) is Volcano's Job in batch.volcano.sh/v1alpha1:
    ours are deleted by that API kind, others kept; a batch/v1 Job of the same name is not one."""
    reader = seeded()
    reader.served = reader.served + ("batch.volcano.sh/v1alpha1",)
    reader.add("batch.volcano.sh/v1alpha1", "Job", "digits-torchx", "trainfleet", OURS)
    reader.add("batch.volcano.sh/v1alpha1", "Job", "theirs", "trainfleet")
    reader.add("batch/v1", "Job", "digits-torchx", "trainfleet", OURS)
    failed, result = run(reader)
    assert not failed
    volcano = [j for j in result["jobs"] if j["ref"].startswith("VolcanoJob")]
    assert volcano == [{"api_version": "batch.volcano.sh/v1alpha1", "kind": "Job", "namespace": "trainfleet",
                        "name": "digits-torchx", "ref": "VolcanoJob trainfleet/digits-torchx"}]
    assert "VolcanoJob trainfleet/theirs" in result["kept"]


def test_volcano_jobs_where_volcano_is_not_served_are_none(run):
    failed, result = run(seeded(), {"job_kinds": ["VolcanoJob"]})
    assert not failed and result["jobs"] == []


def test_an_api_error_fails_with_its_message(run):
    reader = seeded()
    reader.fail_on = "PersistentVolume"
    failed, result = run(reader)
    assert failed and "Not allowed to list PersistentVolumes (HTTP 403)" in result["msg"] and result["status"] == 403


def test_namespaces_are_required(run):
    failed, result = run(seeded(), {"namespaces": None})
    assert failed and "namespaces" in result["msg"]
