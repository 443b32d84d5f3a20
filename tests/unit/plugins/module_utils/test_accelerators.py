# -*- coding: utf-8 -*-
"""module_utils/accelerators.py (filters accelerator_demand, accelerator_fit): the train step's
accelerator gate."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.filter.accelerators import FilterModule
from ansible_collections.trainfleet.training.plugins.module_utils import accelerators as acc

GPU = "nvidia.com/gpu"
FILTERS = FilterModule().filters()


def pod(gpus=0, efa=0, selector=None, tolerations=None, init_gpus=0):
    limits = {"cpu": "1"}
    if gpus:
        limits[GPU] = gpus
    if efa:
        limits["vpc.amazonaws.com/efa"] = str(efa)
    spec = {"containers": [{"name": "pytorch", "resources": {"requests": dict(limits), "limits": limits}}]}
    if init_gpus:
        spec["initContainers"] = [{"name": "init", "resources": {"limits": {GPU: init_gpus}}}]
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"template": {"spec": spec}}


def pytorchjob(master=None, worker=None, workers=1):
    specs = {}
    if master:
        specs["Master"] = dict(master, replicas=1)
    if worker:
        specs["Worker"] = dict(worker, replicas=workers)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "train-gpu"},
            "spec": {"pytorchReplicaSpecs": specs}}


def node(name, gpus=0, ready=True, cordoned=False, labels=None, taints=None):
    allocatable = {"cpu": "8", "memory": "32Gi"}
    if gpus is not None:
        allocatable[GPU] = str(gpus)
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"unschedulable": cordoned, "taints": taints or []},
            "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_cpu_job_is_not_checked():
    job = pytorchjob(master=pod(), worker=pod())
    assert FILTERS["accelerator_demand"](job) == []
    result = FILTERS["accelerator_fit"](job, [])
    assert result["ok"] and not result["checked"]


def test_every_gpu_pod_fits_first_fit():
    job = pytorchjob(master=pod(gpus=1), worker=pod(gpus=1), workers=2)
    result = acc.check(job, [node("a", gpus=2), node("b", gpus=1), node("cpu", gpus=None)])
    assert result["ok"] and result["checked"]
    assert result["placed"] == {"a": 2, "b": 1}
    assert "1 Master pod with nvidia.com/gpu: 1 each; 2 Worker pods with nvidia.com/gpu: 1 each" in result["message"]


def test_too_few_gpus_names_the_resource_the_ask_and_every_node():
    job = pytorchjob(master=pod(gpus=1), worker=pod(gpus=1))
    result = acc.check(job, [node("kind-worker", gpus=1), node("kind-worker2", gpus=0)])
    assert not result["ok"]
    message = result["message"]
    assert message.startswith("train-gpu asks for 1 Master pod with nvidia.com/gpu: 1 each; 1 Worker pod with "
                              "nvidia.com/gpu: 1 each (nvidia.com/gpu 2 in all)")
    assert "only 1 of its 2 pods fit" in message
    assert "kind-worker: nvidia.com/gpu 1; kind-worker2: nvidia.com/gpu 0" in message
    assert "trainjob_accelerator_check=false" in message


def test_one_pod_asking_more_than_any_node_has():
    job = pytorchjob(worker=pod(gpus=8))
    result = acc.check(job, [node("a", gpus=4), node("b", gpus=4)])
    assert not result["ok"] and "only 0 of its 1 pod fit" in result["message"]


@pytest.mark.parametrize("bad_node, reason", [
    (node("n", gpus=4, ready=False), "not Ready"),
    (node("n", gpus=4, cordoned=True), "cordoned"),
    (node("n", gpus=4, labels={"kind": "cpu"}), "no label trainfleet.io/node-kind=gpu"),
    (node("n", gpus=4, labels={"trainfleet.io/node-kind": "gpu"},
          taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
     "taint nvidia.com/gpu=present:NoSchedule not tolerated"),
])
def test_nodes_the_pods_cannot_use_are_left_out_and_say_why(bad_node, reason):
    job = pytorchjob(worker=pod(gpus=1, selector={"trainfleet.io/node-kind": "gpu"}))
    result = acc.check(job, [bad_node])
    assert not result["ok"]
    assert "n: nvidia.com/gpu 4 (%s)" % reason in result["message"]


@pytest.mark.parametrize("toleration", [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"},
    {"operator": "Exists"},
])
def test_tolerated_taints_and_soft_taints_do_not_block(toleration):
    job = pytorchjob(worker=pod(gpus=1, tolerations=[toleration]))
    tainted = node("n", gpus=1, taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                        {"key": "soft", "effect": "PreferNoSchedule"}])
    assert acc.check(job, [tainted])["ok"]


def test_a_toleration_for_another_effect_or_value_does_not_match():
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert not acc.tolerates([{"key": "k", "operator": "Exists", "effect": "NoExecute"}], taint)
    assert not acc.tolerates([{"key": "k", "value": "w"}], taint)
    assert not acc.tolerates([{"key": "other", "operator": "Exists"}], taint)


def test_pod_needs_sums_containers_and_counts_the_largest_init_container():
    spec = pod(gpus=1, efa=2, init_gpus=3)["template"]["spec"]
    spec["containers"].append({"name": "side", "resources": {"limits": {GPU: "1"}}})
    assert acc.pod_needs(spec) == {GPU: 3, "vpc.amazonaws.com/efa": 2}
    assert acc.pod_needs({"containers": [{"resources": {"limits": {GPU: "bogus"}}}]}) == {}


def test_several_resources_must_fit_on_the_same_node():
    job = pytorchjob(worker=pod(gpus=1, efa=1))
    gpu_only = node("gpu-only", gpus=1)
    efa_only = node("efa-only", gpus=0)
    efa_only["status"]["allocatable"]["vpc.amazonaws.com/efa"] = "1"
    result = acc.check(job, [gpu_only, efa_only])
    assert not result["ok"]
    assert "gpu-only: nvidia.com/gpu 1, vpc.amazonaws.com/efa 0; efa-only: nvidia.com/gpu 0, vpc.amazonaws.com/efa 1" \
        in result["message"]


def test_volcano_tasks_and_mpijob_workers_are_read():
    volcano = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "tx"},
               "spec": {"tasks": [{"name": "trainer", "replicas": 2, "template": pod(gpus=2)["template"]}]}}
    assert acc.demand(volcano) == [{"replica_type": "trainer", "replicas": 2, "needs": {GPU: 2}, "node_selector": {},
                                    "tolerations": []}]
    mpijob = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "m"},
              "spec": {"mpiReplicaSpecs": {"Launcher": dict(pod(), replicas=1), "Worker": dict(pod(gpus=1), replicas=3)}}}
    assert [(g["replica_type"], g["replicas"]) for g in acc.demand(mpijob)] == [("Worker", 3)]


def test_the_filters_refuse_what_is_not_a_job_or_a_node_list():
    with pytest.raises(AnsibleFilterError, match="accelerator_demand: expected the job's manifest"):
        FILTERS["accelerator_demand"]("PyTorchJob")
    with pytest.raises(AnsibleFilterError, match="accelerator_fit: expected a list of Node objects"):
        FILTERS["accelerator_fit"](pytorchjob(worker=pod(gpus=1)), {"items": []})
