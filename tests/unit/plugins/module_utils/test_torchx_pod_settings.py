# -*- coding: utf-8 -*-
"""module_utils/torchx_request.py with the pod settings of module_utils/pod_settings.py: the new optional
settings (node-lost tolerations, securityContext overrides, Neuron/EFA devices, affinity); without them
the job is the one test_torchx_request.py pins."""

from __future__ import annotations

import json

from ansible_collections.trainfleet.training.plugins.module_utils import pod_settings as ps
from ansible_collections.trainfleet.training.plugins.module_utils import torchx_request as tr

from test_torchx_request import TORCHX_JOB, UNIQUE, spec  # pylint: disable=import-error

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


def _pods(**overrides):
    job = tr.patch_job(TORCHX_JOB, spec(**overrides), UNIQUE)
    return [task["template"]["spec"] for task in job["spec"]["tasks"]]


def test_the_new_options_at_their_defaults_change_nothing():
    defaults = dict(node_lost_toleration_seconds=None, security_context={}, container_security_context={},
                    neuron_devices=0, efa_devices=0, affinity={})
    assert json.dumps(tr.patch_job(TORCHX_JOB, spec(**defaults), UNIQUE)) == json.dumps(tr.patch_job(TORCHX_JOB, spec(), UNIQUE))


def test_node_lost_tolerations_follow_the_users():
    user = {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
    for pod in _pods(node_lost_toleration_seconds=30, tolerations=[user]):
        assert pod["tolerations"] == [user, {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                                             "tolerationSeconds": 30}]
    pod = _pods(node_lost_toleration_seconds=60)[0]
    assert [t["key"] for t in pod["tolerations"]] == [NOT_READY, UNREACHABLE]


def test_security_context_overrides_merge_over_the_restricted_defaults():
    pod = _pods(security_context={"fsGroup": 10001}, container_security_context={"capabilities": {"add": ["SYS_ADMIN"]}})[0]
    assert json.dumps(pod["securityContext"]) == json.dumps(
        {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"},
         "fsGroup": 10001})
    assert json.dumps(pod["containers"][0]["securityContext"]) == json.dumps(
        {"allowPrivilegeEscalation": True, "privileged": False, "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}})
    context = _pods(container_security_context={"privileged": True})[0]["containers"][0]["securityContext"]
    assert context == {"allowPrivilegeEscalation": True, "privileged": True, "capabilities": {"drop": ["ALL"]}}


def test_devices_and_affinity():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    pod = _pods(neuron_devices=16, efa_devices=1, affinity=affinity)[0]
    assert pod["affinity"] == affinity
    assert json.dumps(pod["containers"][0]["resources"]) == json.dumps(
        {"requests": {"cpu": "500m", "memory": "1Gi", "aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 1},
         "limits": {"memory": "2Gi", "aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 1}})


def test_the_env_keeps_torchx_job_id_after_the_region():
    names = [item["name"] for item in _pods()[0]["containers"][0]["env"]]
    assert names[-10:] == ["TRAINFLEET_JOB_NAME", "TRAINFLEET_S3_BUCKET", "TRAINFLEET_S3_PREFIX", "TRAINFLEET_OUTPUT_DIR",
                           "AWS_REGION", "AWS_DEFAULT_REGION", "TORCHX_JOB_ID", "AWS_ENDPOINT_URL",
                           "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]


def test_the_seeds_trainium_layout():
    """Seed 002: dist.ddp -j 2x32 on two trn1.32xlarge, each pod with its node's 16 Neuron devices and 8 EFA
    interfaces, the trainer precompiling into the cache set on the claim (torchx renders it in-process)."""
    args = ps.trainer_args("dir:/fsx/wikicorpus", 1, 16, "auto", "/fsx/outputs/bertcompile", "", 0, "xla",
                           ("/fsx", "bert-large", True))
    job, info = tr.render(spec(nnodes=2, nproc_per_node=32, neuron_devices=16, efa_devices=8, trainer_args=args))
    assert info["tasks"] == ["train-0", "train-1"]
    for task in job["spec"]["tasks"]:
        container = task["template"]["spec"]["containers"][0]
        assert container["resources"]["requests"]["aws.amazon.com/neuron"] == 16
        assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == 8
        script = container["command"][2]
        assert "--nnodes 2 --nproc_per_node 32" in script
        assert script.endswith("-m trainer.train --dataset=dir:/fsx/wikicorpus --epochs=1 --batch-size=16 --backend=auto "
                               "--output-dir=/fsx/outputs/bertcompile --device=xla --compile-cache-dir=/fsx/compile-cache "
                               "--cache-set=bert-large --precompile"), script
