# -*- coding: utf-8 -*-
"""The other kinds of job: MPIJob (kubeflow.org/v2beta1) and Volcano's Job (batch.volcano.sh/v1alpha1,
what TorchX submits), shaped as their controllers write them."""

from __future__ import annotations

from ansible_collections.trainfleet.training.plugins.module_utils import jobinfo
from ansible_collections.trainfleet.training.plugins.module_utils import jobkinds as kinds
from ansible_collections.trainfleet.training.plugins.module_utils import jobstatus as status
from ansible_collections.trainfleet.training.plugins.module_utils import ranks as rk

MPIJOB = {
    "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
    "metadata": {"name": "mpi", "namespace": "t", "creationTimestamp": "2025-01-01T10:00:00Z"},
    "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
        "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "launcher", "command": ["mpirun", "-np", "2", "python3", "-m", "trainer.train", "--epochs", "4"]}]}}},
        "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "worker"}]}}}}},
    "status": {"startTime": "2025-01-01T10:00:01Z", "completionTime": "2025-01-01T10:00:41Z",
               "conditions": [
                   {"type": "Created", "status": "True", "lastTransitionTime": "2025-01-01T10:00:00Z"},
                   {"type": "Running", "status": "False", "lastTransitionTime": "2025-01-01T10:00:05Z"},
                   {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded",
                    "lastTransitionTime": "2025-01-01T10:00:41Z"}],
               "replicaStatuses": {"Launcher": {"succeeded": 1}, "Worker": {}}},
}


def _mpi_pod(name, role, index=None, owner=("MPIJob", "mpi")):
    labels = {kinds.KUBEFLOW_JOB_NAME: "mpi", kinds.KUBEFLOW_JOB_ROLE: role,
              "training.kubeflow.org/operator-name": "mpi-operator"}
    if index is not None:
        labels[kinds.KUBEFLOW_REPLICA_INDEX] = str(index)
    return {"metadata": {"name": name, "namespace": "t", "labels": labels,
                         "ownerReferences": [{"kind": owner[0], "name": owner[1], "controller": True}]},
            "spec": {"nodeName": "n", "containers": [{"name": role}]},
            "status": {"phase": "Succeeded", "containerStatuses": [
                {"name": role, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}}


VOLCANOJOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
    "metadata": {"name": "tx", "namespace": "t", "creationTimestamp": "2025-01-01T10:00:00Z"},
    "spec": {"schedulerName": "volcano", "minAvailable": 2, "tasks": [
        {"name": "trainer-0", "replicas": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "trainer-0", "command": ["bash", "-c", "torchrun -m trainer.train --epochs=3"]}]}}},
        {"name": "trainer-1", "replicas": 1, "template": {"spec": {"containers": [{"name": "trainer-1"}]}}}]},
    "status": {"state": {"phase": "Completed", "lastTransitionTime": "2025-01-01T10:01:00Z"},
               "conditions": [{"status": "Pending", "lastTransitionTime": "2025-01-01T10:00:00Z"},
                              {"status": "Running", "lastTransitionTime": "2025-01-01T10:00:20Z"},
                              {"status": "Completed", "lastTransitionTime": "2025-01-01T10:01:00Z"}],
               "succeeded": 2, "taskStatusCount": {"trainer-0": {"phase": {"Succeeded": 1}},
                                                   "trainer-1": {"phase": {"Succeeded": 1}}}},
}


def _volcano_pod(task, index=0):
    return {"metadata": {"name": "tx-%s-%d" % (task, index), "namespace": "t",
                         "labels": {kinds.VOLCANO_JOB_NAME: "tx", "volcano.sh/job-namespace": "t"},
                         "annotations": {kinds.VOLCANO_TASK: task},
                         "ownerReferences": [{"kind": "Job", "name": "tx", "controller": True}]},
            "spec": {"nodeName": "n", "containers": [{"name": task}]},
            "status": {"phase": "Succeeded", "containerStatuses": [
                {"name": task, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}}


def test_kinds_by_option_and_by_object():
    assert kinds.get_kind(None) is kinds.PYTORCHJOB and kinds.get_kind("MPIJob") is kinds.MPIJOB
    assert kinds.kind_of(MPIJOB) is kinds.MPIJOB and kinds.kind_of(VOLCANOJOB) is kinds.VOLCANOJOB
    assert kinds.kind_of({"kind": "Job", "apiVersion": "batch/v1"}) is kinds.PYTORCHJOB
    assert kinds.MPIJOB.api_version == "kubeflow.org/v2beta1" and kinds.VOLCANOJOB.crd_name == "jobs.batch.volcano.sh"
    assert kinds.KIND_CHOICES == ["MPIJob", "PyTorchJob", "VolcanoJob"]


def test_mpijob_summary_launcher_first_and_owned_by_its_batch_job():
    pods = [_mpi_pod("mpi-worker-1", "worker", 1), _mpi_pod("mpi-launcher-x7k2p", "launcher", owner=("Job", "mpi-launcher")),
            _mpi_pod("mpi-worker-0", "worker", 0), _mpi_pod("other", "worker", 0, owner=("PyTorchJob", "mpi"))]
    summary = jobinfo.job_summary(MPIJOB, pods)
    assert summary["kind"] == "MPIJob" and summary["phase"] == "Succeeded" and summary["duration_seconds"] == 40.0
    assert [p["name"] for p in summary["pods"]] == ["mpi-launcher-x7k2p", "mpi-worker-0", "mpi-worker-1"]
    assert summary["pods"][0]["replica_type"] == "launcher" and summary["pods"][1]["replica_index"] == 0
    assert summary["replica_statuses"]["Launcher"] == {"replicas": 1, "active": 0, "succeeded": 1, "failed": 0}
    assert kinds.MPIJOB.replica_pod_names(MPIJOB) == ["mpi-worker-0", "mpi-worker-1"]
    assert kinds.total_epochs(MPIJOB) == 4
    # nothing in the logs: the launcher, where mpirun prints every rank's output
    decision = rk.find_rank0(summary["pods"], {})
    assert decision["pod"]["name"] == "mpi-launcher-x7k2p" and decision["method"] == rk.METHOD_FALLBACK_FIRST
    assert kinds.MPIJOB.container_for(pods[1]) == "launcher"


def test_volcano_job_phase_tasks_and_pods():
    summary = jobinfo.job_summary(VOLCANOJOB, [_volcano_pod("trainer-1"), _volcano_pod("trainer-0")])
    assert summary["kind"] == "VolcanoJob" and summary["phase"] == "Succeeded" and summary["kind_phase"] == "Completed"
    assert summary["terminal"] and summary["start_time"] == "2025-01-01T10:00:20Z"
    assert summary["completion_time"] == "2025-01-01T10:01:00Z" and summary["duration_seconds"] == 40.0
    assert [p["name"] for p in summary["pods"]] == ["tx-trainer-0-0", "tx-trainer-1-0"]
    assert summary["pods"][0]["replica_type"] == "trainer-0" and summary["pods"][0]["replica_index"] == 0
    assert summary["replica_statuses"]["trainer-0"]["succeeded"] == 1
    assert [c["type"] for c in summary["conditions"]] == ["Pending", "Running", "Succeeded"]
    assert kinds.VOLCANOJOB.replica_pod_names(VOLCANOJOB) == ["tx-trainer-0-0", "tx-trainer-1-0"]
    assert kinds.VOLCANOJOB.pod_selector("tx") == "volcano.sh/job-name=tx"
    assert kinds.total_epochs(VOLCANOJOB) is None  # a shell command line: not parsed
    decision = rk.find_rank0(summary["pods"], {})
    assert decision["pod"]["name"] == "tx-trainer-0-0" and decision["method"] == rk.METHOD_FALLBACK_FIRST


def test_volcano_phases_map_onto_the_common_ones():
    def phase(value, reason=None):
        job = dict(VOLCANOJOB, status={"state": {"phase": value, "reason": reason, "message": "m"}})
        return kinds.job_phase(job), kinds.job_failure(job)
    assert phase("Pending") == ("Pending", None) and phase("Running") == ("Running", None)
    assert phase("Restarting") == ("Restarting", None) and phase("Completing") == ("Running", None)
    assert phase("Failed", "PodFailed") == ("Failed", {"reason": "PodFailed", "message": "m"})
    assert phase("Aborted") == ("Failed", {"reason": "Aborted", "message": "m"})
    assert phase("Terminated")[0] == "Failed" and phase("SomethingNew")[0] == "Running"
    assert kinds.job_phase(dict(VOLCANOJOB, status={})) == "Pending"


def test_pod_identity_of_each_kind():
    assert status.pod_identity(_volcano_pod("trainer-1", 0))["replica_type"] == "trainer-1"
    assert kinds.kind_of_pod(_volcano_pod("trainer-1")) is kinds.VOLCANOJOB
    assert status.pod_identity(_mpi_pod("mpi-worker-1", "worker", 1))["job_role"] == "worker"
    assert kinds.pod_belongs_to_job(_volcano_pod("trainer-0"), "tx") and not kinds.pod_belongs_to_job(_volcano_pod("t"), "x")
