# -*- coding: utf-8 -*-
"""k8s_ownership: the teardown's rules for what on a cluster is trainfleet's (pure data)."""

from __future__ import annotations

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.k8s_ownership import (
    OwnershipError,
    crd_job_kind,
    decide_operator,
    foreign_content,
    is_ours,
    job_api_version,
    operator_blockers,
    operator_state,
    sort_claims_and_volumes,
    sort_jobs,
    sort_namespaces,
    sort_storage_classes,
)

OURS = {"app.kubernetes.io/managed-by": "trainfleet"}
OPERATOR = dict(OURS, **{"app.kubernetes.io/component": "training-operator"})


def obj(name, namespace=None, labels=None, **fields):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels is not None:
        meta["labels"] = labels
    meta.update(fields.pop("metadata", {}))
    return dict(fields, metadata=meta)


def pv(name, policy, claim_ns, labels=None):
    return obj(name, labels=labels, spec={"persistentVolumeReclaimPolicy": policy, "claimRef": {"namespace": claim_ns}})


def test_ours_is_the_managed_by_label_only():
    assert is_ours(obj("a", labels=OURS))
    assert not is_ours(obj("a", labels={"app.kubernetes.io/managed-by": "helm"}))
    assert not is_ours(obj("a", labels=None)) and not is_ours(obj("a"))


def test_job_api_versions_default_to_kubeflow_v1():
    assert job_api_version("MPIJob") == "kubeflow.org/v2beta1"
    assert job_api_version("TFJob") == "kubeflow.org/v1"
    assert job_api_version("TFJob", {"TFJob": "example.org/v2"}) == "example.org/v2"


def test_jobs_are_sorted_in_reading_order():
    ours, others = sort_jobs([
        ("PyTorchJob", "kubeflow.org/v1", [obj("digits", "tf", OURS), obj("theirs", "tf")]),
        ("MPIJob", "kubeflow.org/v2beta1", [obj("mpi", "tf", OURS)]),
    ])
    assert [j["ref"] for j in ours] == ["PyTorchJob tf/digits", "MPIJob tf/mpi"]
    assert ours[1] == dict(api_version="kubeflow.org/v2beta1", kind="MPIJob", namespace="tf", name="mpi", ref="MPIJob tf/mpi")
    assert [j["ref"] for j in others] == ["PyTorchJob tf/theirs"]


def test_claims_and_their_volumes():
    claims = [obj("data", "tf", OURS, spec={"volumeName": "pvc-1"}),
              obj("kept", "tf", OURS, spec={"volumeName": "pvc-2"}),
              obj("scratch", "tf", OURS, spec={"volumeName": "static-1"}),
              obj("pending", "tf", OURS, spec={}),
              obj("theirs", "other", spec={"volumeName": "pvc-3"})]
    volumes = [pv("pvc-1", "Delete", "tf"), pv("pvc-2", "Retain", "tf"), pv("pvc-3", "Delete", "other"),
               pv("static-1", "Retain", "tf", OURS), pv("static-elsewhere", "Retain", "nope", OURS)]
    got = sort_claims_and_volumes(claims, volumes, ["tf", "other"])
    assert [c["ref"] for c in got["claims"]] == ["PersistentVolumeClaim tf/data", "PersistentVolumeClaim tf/kept",
                                                 "PersistentVolumeClaim tf/scratch", "PersistentVolumeClaim tf/pending"]
    assert got["kept"] == ["PersistentVolumeClaim other/theirs"]
    assert got["dynamic_volumes"] == ["pvc-1"]  # not the volume of someone's claim
    assert got["static_volumes"] == ["static-1"]  # labelled ours, claimRef in our namespaces
    assert got["kept_why"] == ["PersistentVolume pvc-2 (reclaimPolicy Retain: its data stays; delete it by hand)"]


def test_storage_classes_need_the_label_and_the_name():
    got = sort_storage_classes([obj("trainfleet-fsx", labels=OURS), obj("standard"), obj("trainfleet-old", labels=OURS),
                                obj("trainfleet-efs")], ["trainfleet-fsx", "trainfleet-efs"])
    assert got["storage_classes"] == ["trainfleet-fsx"]
    assert got["kept"] == ["StorageClass standard", "StorageClass trainfleet-efs"]
    assert got["kept_why"] == ["StorageClass trainfleet-old (labelled trainfleet but not in teardown_storage_class_names)"]


@pytest.mark.parametrize("controller, expected", [
    (None, dict(exists=False, ours=False, marked=False)),
    (obj("training-operator", "kubeflow"), dict(exists=True, ours=False, marked=False)),
    (obj("training-operator", "kubeflow", metadata={"annotations": {"trainfleet.io/manifests-sha256": "x"}}),
     dict(exists=True, ours=True, marked=False)),
    (obj("training-operator", "kubeflow", OURS), dict(exists=True, ours=False, marked=False)),
    (obj("training-operator", "kubeflow", OPERATOR), dict(exists=True, ours=True, marked=True)),
], ids=["absent", "theirs", "applied-unlabelled", "managed-by-only", "marked"])
def test_operator_state(controller, expected):
    assert operator_state(controller) == expected


def test_crd_job_kind_uses_the_storage_version():
    spec = {"group": "kubeflow.org", "names": {"kind": "MPIJob", "plural": "mpijobs"},
            "versions": [{"name": "v1", "storage": False}, {"name": "v2beta1", "storage": True}]}
    crd = obj("mpijobs.kubeflow.org", spec=spec)
    assert crd_job_kind(crd) == ("kubeflow.org/v2beta1", "MPIJob", "mpijobs")
    with pytest.raises(OwnershipError) as info:
        crd_job_kind(obj("broken.example.org", spec={"names": {"kind": "X"}}))
    assert isinstance(info.value, TrainfleetError)


def test_operator_blockers_are_jobs_not_ours_in_our_namespaces():
    listed = [("PyTorchJob", [obj("digits", "tf", OURS), obj("ours-elsewhere", "elsewhere", OURS), obj("theirs", "tf")])]
    assert operator_blockers(listed, ["tf"]) == ["PyTorchJob elsewhere/ours-elsewhere", "PyTorchJob tf/theirs"]


OP = "Deployment kubeflow/training-operator"


@pytest.mark.parametrize("state, blockers, wanted, remove, kept, why", [
    (dict(exists=True, ours=True, marked=True), [], True, True, [], []),
    (dict(exists=True, ours=True, marked=True), ["PyTorchJob a/b", "MPIJob c/d"], True, False, [],
     [OP + " (jobs that are not ours would go with its CRDs: PyTorchJob a/b, MPIJob c/d)"]),
    (dict(exists=True, ours=True, marked=True), [], False, False, [], [OP + " (teardown_training_operator is false)"]),
    (dict(exists=True, ours=True, marked=False), [], True, False, [],
     [OP + " (installed by a trainfleet older than its labels: run the training_operator step once, then the teardown again)"]),
    (dict(exists=True, ours=False, marked=False), [], True, False, [OP + " (training operator)"], []),
    (dict(exists=False, ours=False, marked=False), [], True, False, [], []),
], ids=["ours", "blocked", "not-wanted", "unlabelled", "theirs", "absent"])
def test_decide_operator(state, blockers, wanted, remove, kept, why):
    got = decide_operator(state, blockers, wanted, "kubeflow", "training-operator")
    assert got == dict(remove=remove, kept=kept, kept_why=why)


def test_namespaces_by_label():
    marked, kept = sort_namespaces([obj("trainfleet", labels=OURS), obj("shared")])
    assert marked == ["trainfleet"] and kept == ["Namespace shared"]


def test_foreign_content_ignores_builtins_owned_objects_and_tokens():
    content = [
        ("tf", "ConfigMap", [obj("kube-root-ca.crt", "tf"), obj("their-config", "tf")]),
        ("tf", "ServiceAccount", [obj("default", "tf")]),
        ("tf", "Pod", [obj("p", "tf", metadata={"ownerReferences": [{"kind": "ReplicaSet"}]})]),
        ("tf", "Secret", [obj("tok", "tf", type="kubernetes.io/service-account-token"), obj("creds", "tf", type="Opaque")]),
        ("clean", "ConfigMap", [obj("kube-root-ca.crt", "clean")]),
    ]
    other_jobs = [dict(kind="PyTorchJob", namespace="tf", name="theirs"), dict(kind="PyTorchJob", namespace="x", name="y")]
    assert foreign_content(content, other_jobs, ["tf", "clean"]) == {
        "tf": ["ConfigMap/their-config", "Secret/creds", "PyTorchJob/theirs"]}


def test_an_object_without_a_name_is_an_error():
    with pytest.raises(OwnershipError):
        sort_jobs([("PyTorchJob", "kubeflow.org/v1", [{"metadata": {}}])])
