# -*- coding: utf-8 -*-
"""module_utils/torchx_request.py: torchx's Volcano Job for dist.ddp, made ours.

The patch tests run on a canned job shaped like torchx 0.7.0's (what its CLI's --dryrun printed);
the render tests ask the installed torchx (requirements.txt pins it; without it they fail).
"""

from __future__ import annotations

import copy
import shlex
import sys

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils import torchx_request as tr

NAME = "trainfleet-digits-torchx"
UNIQUE = NAME + "-r0r62lk5b0rp7c"


def spec(**overrides):
    base = dict(
        name=NAME, namespace="trainfleet", queue="team-a", image="localhost:5001/trainfleet/trainer:test",
        image_pull_policy="IfNotPresent", image_pull_secrets=[], module="trainer.train",
        trainer_args=["--dataset=digits", "--epochs=5", "--output-dir=s3://trainfleet-local/training/" + NAME],
        launcher=["python3", "-m", "trainer.launch"], nnodes=2, nproc_per_node=1, rdzv_port=29500,
        max_retries=0, log_level="WARNING", service_account="", labels={}, annotations={}, env=[],
        s3_bucket="trainfleet-local", s3_prefix="training", output_dir="s3://trainfleet-local/training/" + NAME,
        aws_region="us-east-1", aws_endpoint_url="http://172.18.0.1:5000", aws_credentials_secret="trainfleet-aws",
        cpu_request="500m", cpu_limit="", memory_request="1Gi", memory_limit="2Gi", gpus=0, shm_size="256Mi",
        node_selector={}, tolerations=[], run_as_user=10001, run_as_group=10001)
    base.update(overrides)
    return base


def _task(replica, rank0_env):
    script = ("torchrun --rdzv_backend c10d --rdzv_endpoint ${%s:=localhost}:29500 --rdzv_id '%s' --nnodes 2 "
              "--nproc_per_node 1 --tee 3 --role '' -m trainer.train --dataset=digits --epochs=5" % (rank0_env, UNIQUE))
    env = [{"name": "TORCHX_TRACKING_EXPERIMENT_NAME", "value": "default-experiment"},
           {"name": "LOGLEVEL", "value": "WARNING"}]
    if replica == 0:
        env.append({"name": "TORCHX_RANK0_HOST", "value": "localhost"})
    return {
        "minAvailable": 1, "name": "train-%d" % replica, "replicas": 1,
        "template": {
            "metadata": {"annotations": {"sidecar.istio.io/inject": "false"},
                         "labels": {"app.kubernetes.io/instance": UNIQUE, "app.kubernetes.io/managed-by": "torchx.pytorch.org",
                                    "app.kubernetes.io/name": NAME, "torchx.pytorch.org/role-name": "train",
                                    "torchx.pytorch.org/replica-id": str(replica)}},
            "spec": {"containers": [{"command": ["bash", "-c", script], "env": env, "image": "x", "name": "train-%d" % replica,
                                     "ports": [{"containerPort": 29500, "name": "c10d"}],
                                     "resources": {"limits": {"cpu": "2000m", "memory": "1024M"},
                                                   "requests": {"cpu": "1900m", "memory": "0M"}},
                                     "securityContext": {}, "volumeMounts": [{"mountPath": "/dev/shm", "name": "dshm"}]}],
                     "nodeSelector": {}, "restartPolicy": "Never",
                     "volumes": [{"emptyDir": {"medium": "Memory"}, "name": "dshm"}]}}}


TORCHX_JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": UNIQUE},
    "spec": {"maxRetry": 0, "plugins": {"env": [], "svc": ["--publish-not-ready-addresses"]}, "queue": "team-a",
             "schedulerName": "volcano", "tasks": [_task(0, "TORCHX_RANK0_HOST"), _task(1, "VC_TRAIN_0_HOSTS")]},
}


def _patched(**overrides):
    return tr.patch_job(TORCHX_JOB, spec(**overrides), UNIQUE)


def _containers(job):
    return [task["template"]["spec"]["containers"][0] for task in job["spec"]["tasks"]]


def test_patch_names_labels_and_queue():
    job = _patched(labels={"team": "a"})
    assert job["metadata"] == {"name": NAME, "namespace": "trainfleet", "labels": {
        "app.kubernetes.io/name": "trainfleet-trainer", "app.kubernetes.io/part-of": "trainfleet",
        "app.kubernetes.io/component": "torchx", "app.kubernetes.io/managed-by": "trainfleet",
        "app.kubernetes.io/instance": NAME, "team": "a"}}
    assert job["spec"]["schedulerName"] == "volcano" and job["spec"]["queue"] == "team-a"
    assert job["spec"]["minAvailable"] == 2
    assert job["spec"]["plugins"] == {"env": [], "svc": ["--publish-not-ready-addresses"]}
    for task in job["spec"]["tasks"]:
        labels = task["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "trainfleet" and labels["app.kubernetes.io/instance"] == NAME
        assert labels["torchx.pytorch.org/role-name"] == "train"
    # the random suffix is gone everywhere, the rendezvous id included
    assert UNIQUE not in repr(job)
    assert "--rdzv_id '%s' " % NAME in _containers(job)[0]["command"][2]


def test_patch_does_not_modify_its_input():
    before = copy.deepcopy(TORCHX_JOB)
    _patched()
    assert TORCHX_JOB == before


def test_patch_makes_the_pods_restricted():
    job = _patched()
    for task in job["spec"]["tasks"]:
        pod = task["template"]["spec"]
        assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                                          "seccompProfile": {"type": "RuntimeDefault"}}
        assert pod["automountServiceAccountToken"] is False
        assert "serviceAccountName" not in pod and "nodeSelector" not in pod
        container = pod["containers"][0]
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False, "privileged": False, "capabilities": {"drop": ["ALL"]}}
        assert all("hostPath" not in volume for volume in pod["volumes"])
        assert pod["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "256Mi"}


def test_patch_mounts_the_script_configmap_read_only():
    """trainjob_script_dir: TorchX cannot say it, the patch adds volume `script` to every pod."""
    job = _patched(script_configmap="job-script", script_mount_path="/code")
    for task in job["spec"]["tasks"]:
        pod = task["template"]["spec"]
        assert pod["volumes"][-1] == {"name": "script", "configMap": {"name": "job-script", "defaultMode": 0o444}}
        assert pod["containers"][0]["volumeMounts"][-1] == {"name": "script", "mountPath": "/code", "readOnly": True}
    for task in _patched()["spec"]["tasks"]:
        pod = task["template"]["spec"]
        assert all(volume["name"] != "script" for volume in pod["volumes"])


def test_patch_mounts_the_claim_and_the_extra_volumes_in_every_pod():
    """trainjob_pvc_claim_name and trainjob_extra_volumes reach the TorchX pods as they reach a PyTorchJob's."""
    extra = [{"name": "cache", "emptyDir": {}}]
    mounts = [{"name": "cache", "mountPath": "/cache"}]
    job = _patched(pvc_claim_name="trainfleet-data", pvc_mount_path="/data", pvc_read_only=True,
                   extra_volumes=extra, extra_volume_mounts=mounts)
    for task in job["spec"]["tasks"]:
        pod = task["template"]["spec"]
        assert [v["name"] for v in pod["volumes"]] == ["dshm", "data", "cache"]
        assert pod["volumes"][1] == {"name": "data", "persistentVolumeClaim": {"claimName": "trainfleet-data", "readOnly": True}}
        assert pod["containers"][0]["volumeMounts"] == [{"mountPath": "/dev/shm", "name": "dshm"},
                                                        {"name": "data", "mountPath": "/data", "readOnly": True},
                                                        {"name": "cache", "mountPath": "/cache"}]
    # each pod its own copies: no YAML anchors, no shared dicts between the tasks
    first, second = [task["template"]["spec"]["volumes"][2] for task in job["spec"]["tasks"]]
    assert first == second and first is not second
    assert [v["name"] for v in _patched()["spec"]["tasks"][0]["template"]["spec"]["volumes"]] == ["dshm"]


def test_patch_credentials_come_from_the_secret_only():
    job = _patched()
    for container in _containers(job):
        env = {item["name"]: item for item in container["env"]}
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            assert env[key] == {"name": key, "valueFrom": {"secretKeyRef": {"name": "trainfleet-aws", "key": key}}}
        assert env["AWS_ENDPOINT_URL"]["value"] == "http://172.18.0.1:5000"
        assert env["TRAINFLEET_OUTPUT_DIR"]["value"] == "s3://trainfleet-local/training/" + NAME
        assert env["TORCHX_JOB_ID"]["value"] == "kubernetes://torchx/trainfleet:" + NAME
        assert env["LOGLEVEL"]["value"] == "WARNING"
    assert {item["name"]: item for item in _containers(job)[0]["env"]}["TORCHX_RANK0_HOST"]["value"] == "localhost"
    job = _patched(aws_credentials_secret="", aws_endpoint_url="")
    names = [item["name"] for item in _containers(job)[0]["env"]]
    assert "AWS_ACCESS_KEY_ID" not in names and "AWS_ENDPOINT_URL" not in names


def test_patch_user_env_wins_on_a_name_clash_and_is_not_duplicated():
    job = _patched(env=[{"name": "LOGLEVEL", "value": "INFO"}, {"name": "EXTRA", "value": "1"}])
    env = _containers(job)[0]["env"]
    assert [item["value"] for item in env if item["name"] == "LOGLEVEL"] == ["INFO"]
    assert {"name": "EXTRA", "value": "1"} in env


def test_patch_replaces_torchrun_by_the_launcher_keeping_its_arguments():
    job = _patched()
    first, other = [c["command"] for c in _containers(job)]
    assert first[:2] == ["bash", "-c"]
    words = shlex.split(first[2])
    assert words[:3] == ["python3", "-m", "trainer.launch"]
    assert words[3:] == ["--rdzv_backend", "c10d", "--rdzv_endpoint", "${TORCHX_RANK0_HOST:=localhost}:29500",
                         "--rdzv_id", NAME, "--nnodes", "2", "--nproc_per_node", "1", "--tee", "3", "--role", "",
                         "-m", "trainer.train", "--dataset=digits", "--epochs=5"]
    assert "${VC_TRAIN_0_HOSTS:=localhost}:29500" in other[2]
    assert tr.rdzv_endpoint(other[2]) == "${VC_TRAIN_0_HOSTS:=localhost}:29500"


def test_launcher_words_are_shell_quoted():
    script = tr.launcher_script("torchrun --nnodes 1 -m trainer.train", ["/opt/my launcher", "$(id)"])
    assert shlex.split(script)[:2] == ["/opt/my launcher", "$(id)"]
    assert script.startswith("'/opt/my launcher' '$(id)' ")


def test_an_unknown_torchx_command_is_refused():
    with pytest.raises(tr.TorchxRequestError, match="does not start with torchrun"):
        tr.launcher_script("python -m torch.distributed.run -m x", ["python3"])
    job = copy.deepcopy(TORCHX_JOB)
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"] = ["torchrun", "-m", "x"]
    with pytest.raises(tr.TorchxRequestError, match="unexpected torchx command"):
        tr.patch_job(job, spec(), UNIQUE)


def test_an_unexpected_kind_or_layout_is_refused():
    job = copy.deepcopy(TORCHX_JOB)
    job["apiVersion"] = "batch/v1"
    with pytest.raises(tr.TorchxRequestError, match="not a Volcano"):
        tr.patch_job(job, spec(), UNIQUE)
    with pytest.raises(tr.TorchxRequestError, match="2 tasks for 3 nodes"):
        tr.patch_job(TORCHX_JOB, spec(nnodes=3), UNIQUE)
    job = copy.deepcopy(TORCHX_JOB)
    job["spec"]["tasks"][1]["template"]["spec"]["volumes"].append({"name": "dev", "hostPath": {"path": "/dev"}})
    with pytest.raises(tr.TorchxRequestError, match="hostPath"):
        tr.patch_job(job, spec(), UNIQUE)


def test_placement_pull_secrets_service_account_and_resources():
    job = _patched(node_selector={"trainfleet.io/node-kind": "cpu"}, tolerations=[{"key": "k", "operator": "Exists"}],
                   image_pull_secrets=["regcred"], service_account="trainer", cpu_limit="2", gpus=1,
                   image_pull_policy="Always")
    pod = job["spec"]["tasks"][1]["template"]["spec"]
    assert pod["nodeSelector"] == {"trainfleet.io/node-kind": "cpu"}
    assert pod["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["serviceAccountName"] == "trainer"
    container = pod["containers"][0]
    assert container["image"] == "localhost:5001/trainfleet/trainer:test" and container["imagePullPolicy"] == "Always"
    assert container["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1},
                                      "limits": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": 1}}


def test_handles_and_names():
    assert tr.app_handle("trainfleet", NAME) == "kubernetes://torchx/trainfleet:" + NAME
    assert tr.rank0_pod_name(NAME, "trainer.train") == NAME + "-train-0-0"
    assert tr.role_name("trainer.train") == "train"


def test_missing_torchx_fails_clearly(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchx", None)
    with pytest.raises(tr.TorchxRequestError, match=r"torchx is not importable .*pip install -r requirements.txt \(torchx==0.7.0\)"):
        tr.load_torchx()


# --------------------------------------------------------------------------- with torchx installed


def test_render_with_the_installed_torchx():
    import torchx  # noqa: F401  (pinned in requirements.txt: a missing torchx fails, never skips)
    job, info = tr.render(spec(trainer_args=["--dataset=digits", "--output-dir=s3://b/p $(touch /tmp/x)"]))
    assert info["torchx_version"] == tr.TORCHX_TESTED_VERSION
    assert info["tasks"] == ["train-0", "train-1"] and info["role"] == "train"
    assert info["rank0_pod"] == NAME + "-train-0-0"
    assert info["app_handle"] == "kubernetes://torchx/trainfleet:" + NAME
    assert info["rdzv_endpoints"] == {"rank0": "${TORCHX_RANK0_HOST:=localhost}:29500",
                                      "others": "${VC_TRAIN_0_HOSTS:=localhost}:29500"}
    assert job["metadata"]["name"] == NAME and info["torchx_unique_id"] != NAME
    assert info["torchx_unique_id"] not in repr(job)
    script = _containers(job)[0]["command"][2]
    # torchx shell-quotes every trainer argument: a hostile one stays one word
    assert shlex.split(script)[-1] == "--output-dir=s3://b/p $(touch /tmp/x)"
    assert shlex.split(script)[:3] == ["python3", "-m", "trainer.launch"]
    assert job["spec"]["tasks"][0]["template"]["spec"]["securityContext"]["runAsUser"] == 10001


def test_render_is_deterministic_apart_from_torchx_random_suffix():
    import torchx  # noqa: F401  (pinned in requirements.txt: a missing torchx fails, never skips)
    first = tr.render(spec())[0]
    second = tr.render(spec())[0]
    assert first == second


def test_render_single_node_uses_a_local_rendezvous():
    import torchx  # noqa: F401  (pinned in requirements.txt: a missing torchx fails, never skips)
    job, info = tr.render(spec(nnodes=1, nproc_per_node=2))
    assert info["tasks"] == ["train-0"] and info["rdzv_endpoints"] == {"rank0": "localhost:0", "others": None}
    assert job["spec"]["minAvailable"] == 1
