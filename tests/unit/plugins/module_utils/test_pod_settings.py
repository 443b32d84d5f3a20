# -*- coding: utf-8 -*-
"""module_utils/pod_settings.py: the pod settings the pytorchjob/mpijob templates and torchx_request share.

Every expected value below was derived by reading the Jinja it replaces (roles/pytorchjob/defaults/main.yml:
_pytorchjob_output_dir, _pytorchjob_trainer_args, _pytorchjob_trainer_env, _pytorchjob_pod_security_context,
_pytorchjob_container_security_context; roles/pytorchjob/templates/pytorchjob.yaml.j2: tolerations,
resources, volumes). Lists and dicts are compared with their order (json.dumps), since the templates'
output order is part of the contract.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils import pod_settings as ps
from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


def ordered(value):
    """Equality that also checks the order of keys and list items."""
    return json.dumps(value)


def node_lost(key, seconds):
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


# --------------------------------------------------------------------------- tolerations


@pytest.mark.parametrize("tolerations, seconds, expected", [
    pytest.param([], 30, [node_lost(NOT_READY, 30), node_lost(UNREACHABLE, 30)], id="none-given"),
    pytest.param(None, "45", [node_lost(NOT_READY, 45), node_lost(UNREACHABLE, 45)], id="none-and-seconds-as-text"),
    pytest.param([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], 60,
                 [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                  node_lost(NOT_READY, 60), node_lost(UNREACHABLE, 60)], id="user-first"),
    pytest.param([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}], 30,
                 [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5},
                  node_lost(NOT_READY, 30)], id="user-noexecute-wins"),
    pytest.param([{"key": NOT_READY, "effect": "NoExecute"}, {"key": UNREACHABLE, "effect": "NoExecute"}], 30,
                 [{"key": NOT_READY, "effect": "NoExecute"}, {"key": UNREACHABLE, "effect": "NoExecute"}],
                 id="user-gives-both"),
    pytest.param([{"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"}], 30,
                 [{"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"},
                  node_lost(NOT_READY, 30), node_lost(UNREACHABLE, 30)], id="other-effect-does-not-count"),
    pytest.param([{"key": NOT_READY, "operator": "Exists"}], 30,
                 [{"key": NOT_READY, "operator": "Exists"}, node_lost(NOT_READY, 30), node_lost(UNREACHABLE, 30)],
                 id="no-effect-does-not-count"),
    pytest.param([{"operator": "Exists", "effect": "NoExecute"}], 30,
                 [{"operator": "Exists", "effect": "NoExecute"}, node_lost(NOT_READY, 30), node_lost(UNREACHABLE, 30)],
                 id="keyless-noexecute-does-not-count"),
])
def test_node_lost_tolerations(tolerations, seconds, expected):
    assert ordered(ps.node_lost_tolerations(tolerations, seconds)) == ordered(expected)


def test_node_lost_tolerations_do_not_alias_the_input():
    given = [{"key": "k", "operator": "Exists"}]
    result = ps.node_lost_tolerations(given, 30)
    result[0]["key"] = "changed"
    assert given == [{"key": "k", "operator": "Exists"}] and len(result) == 3


# --------------------------------------------------------------------------- resources


@pytest.mark.parametrize("kwargs, expected", [
    pytest.param(dict(cpu_request="500m", memory_request="1Gi"),
                 {"requests": {"cpu": "500m", "memory": "1Gi"}}, id="limits-omitted-when-empty"),
    pytest.param(dict(cpu_request="500m", memory_request="1Gi", cpu_limit="", memory_limit="2Gi"),
                 {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}, id="memory-limit-only"),
    pytest.param(dict(cpu_request=2, memory_request="4Gi", cpu_limit=4, memory_limit="8Gi"),
                 {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}},
                 id="quantities-are-strings"),
    pytest.param(dict(cpu_request="1", memory_request="1Gi", cpu_limit=None, memory_limit=None),
                 {"requests": {"cpu": "1", "memory": "1Gi"}}, id="none-limits-are-empty"),
    pytest.param(dict(cpu_request="8", memory_request="32Gi", memory_limit="", gpus="4", efa_devices=2),
                 {"requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 4, "vpc.amazonaws.com/efa": 2},
                  "limits": {"nvidia.com/gpu": 4, "vpc.amazonaws.com/efa": 2}}, id="extended-as-ints-request-eq-limit"),
    pytest.param(dict(cpu_request="8", memory_request="32Gi", cpu_limit="16", memory_limit="64Gi",
                      gpus=1, neuron_devices=16, efa_devices=1),
                 {"requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 1, "aws.amazon.com/neuron": 16,
                               "vpc.amazonaws.com/efa": 1},
                  "limits": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": 1, "aws.amazon.com/neuron": 16,
                             "vpc.amazonaws.com/efa": 1}}, id="all-devices-in-order"),
    pytest.param(dict(cpu_request="1", memory_request="1Gi", memory_limit="", gpus=0, neuron_devices="0", efa_devices=None),
                 {"requests": {"cpu": "1", "memory": "1Gi"}}, id="zero-devices-omitted"),
])
def test_resources(kwargs, expected):
    result = ps.resources(**kwargs)
    assert ordered(result) == ordered(expected)
    for section in result.values():
        for name, value in section.items():
            assert isinstance(value, int) if "/" in name else isinstance(value, str)


def test_resources_refuse_a_non_integer_device_count():
    with pytest.raises(ps.PodSettingsError, match="gpus must be an integer"):
        ps.resources("1", "1Gi", gpus="two")


# --------------------------------------------------------------------------- volumes


EXTRA_VOLUME = {"name": "cache", "emptyDir": {}}
EXTRA_MOUNT = {"name": "cache", "mountPath": "/cache"}


@pytest.mark.parametrize("args, volumes, mounts", [
    pytest.param(("", "/data", False, "", [], []), [], [], id="none"),
    pytest.param(("fsx-claim", "/data", False, "", [], []),
                 [{"name": "data", "persistentVolumeClaim": {"claimName": "fsx-claim", "readOnly": False}}],
                 [{"name": "data", "mountPath": "/data", "readOnly": False}], id="claim"),
    pytest.param(("fsx-claim", "/mnt/fsx", "yes", "", [], []),
                 [{"name": "data", "persistentVolumeClaim": {"claimName": "fsx-claim", "readOnly": True}}],
                 [{"name": "data", "mountPath": "/mnt/fsx", "readOnly": True}], id="claim-read-only-via-bool-filter"),
    pytest.param(("", "/data", False, "2Gi", [], []),
                 [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}],
                 [{"name": "dshm", "mountPath": "/dev/shm"}], id="shm"),
    pytest.param(("c", "/data", "false", "1Gi", [EXTRA_VOLUME], [EXTRA_MOUNT]),
                 [{"name": "data", "persistentVolumeClaim": {"claimName": "c", "readOnly": False}},
                  {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}, EXTRA_VOLUME],
                 [{"name": "data", "mountPath": "/data", "readOnly": False},
                  {"name": "dshm", "mountPath": "/dev/shm"}, EXTRA_MOUNT], id="all-in-order"),
    pytest.param(("c", "/data", False, "1Gi", [EXTRA_VOLUME], [EXTRA_MOUNT], "job-script", "/code"),
                 [{"name": "data", "persistentVolumeClaim": {"claimName": "c", "readOnly": False}},
                  {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
                  {"name": "script", "configMap": {"name": "job-script", "defaultMode": 0o444}}, EXTRA_VOLUME],
                 [{"name": "data", "mountPath": "/data", "readOnly": False},
                  {"name": "dshm", "mountPath": "/dev/shm"},
                  {"name": "script", "mountPath": "/code", "readOnly": True}, EXTRA_MOUNT], id="script-configmap"),
    pytest.param(("", "/data", False, "", [], [], "", "/code"), [], [], id="no-script-configmap"),
])
def test_volumes(args, volumes, mounts):
    result = ps.volumes(*args)
    assert isinstance(result, tuple) and len(result) == 2
    assert ordered(result[0]) == ordered(volumes) and ordered(result[1]) == ordered(mounts)


@pytest.mark.parametrize("value, expected", [
    (True, True), (False, False), ("yes", True), ("On", True), ("TRUE", True), ("1", True), (1, True),
    ("no", False), ("off", False), ("0", False), (0, False), (None, False), ("maybe", False), (1.0, True),
])
def test_to_bool_is_ansibles_bool_filter(value, expected):
    assert ps.to_bool(value) is expected


# --------------------------------------------------------------------------- securityContexts

POD_DEFAULT = {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}}


@pytest.mark.parametrize("user, group, overrides, expected", [
    pytest.param(10001, 10001, {}, POD_DEFAULT, id="defaults"),
    pytest.param("10001", "10002", None, dict(POD_DEFAULT, runAsGroup=10002), id="ids-as-ints"),
    pytest.param(0, 0, {}, {"runAsNonRoot": False, "runAsUser": 0, "runAsGroup": 0,
                            "seccompProfile": {"type": "RuntimeDefault"}}, id="root-is-not-non-root"),
    pytest.param(10001, 10001, {"fsGroup": 10001}, dict(POD_DEFAULT, fsGroup=10001), id="new-key-appended"),
    pytest.param(10001, 10001, {"seccompProfile": {"localhostProfile": "p.json"}},
                 dict(POD_DEFAULT, seccompProfile={"type": "RuntimeDefault", "localhostProfile": "p.json"}),
                 id="recursive-merge"),
    pytest.param(10001, 10001, {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}, "runAsUser": 2000},
                 {"runAsNonRoot": True, "runAsUser": 2000, "runAsGroup": 10001,
                  "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}, id="override-keeps-key-order"),
    pytest.param(10001, 10001, {"seccompProfile": None}, dict(POD_DEFAULT, seccompProfile=None), id="non-dict-replaces"),
    pytest.param(10001, 10001, {"supplementalGroups": [1, 2]}, dict(POD_DEFAULT, supplementalGroups=[1, 2]),
                 id="lists-as-given"),
])
def test_pod_security_context(user, group, overrides, expected):
    assert ordered(ps.pod_security_context(user, group, overrides)) == ordered(expected)


CONTAINER_DEFAULT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@pytest.mark.parametrize("overrides, expected", [
    pytest.param({}, CONTAINER_DEFAULT, id="defaults"),
    pytest.param(None, CONTAINER_DEFAULT, id="none"),
    pytest.param({"readOnlyRootFilesystem": True}, dict(CONTAINER_DEFAULT, readOnlyRootFilesystem=True), id="new-key"),
    pytest.param({"privileged": True},
                 {"allowPrivilegeEscalation": True, "capabilities": {"drop": ["ALL"]}, "privileged": True},
                 id="privileged-implies-escalation"),
    pytest.param({"privileged": "yes"},
                 {"allowPrivilegeEscalation": True, "capabilities": {"drop": ["ALL"]}, "privileged": "yes"},
                 id="privileged-through-bool-filter"),
    pytest.param({"privileged": False}, dict(CONTAINER_DEFAULT, privileged=False), id="not-privileged"),
    pytest.param({"capabilities": {"add": ["SYS_ADMIN"]}},
                 {"allowPrivilegeEscalation": True, "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}},
                 id="sys-admin-implies-escalation-and-merges"),
    pytest.param({"capabilities": {"add": ["cap_sys_admin"]}},
                 {"allowPrivilegeEscalation": True, "capabilities": {"drop": ["ALL"], "add": ["cap_sys_admin"]}},
                 id="cap-prefix-any-case"),
    pytest.param({"capabilities": {"add": ["NET_BIND_SERVICE"]}},
                 {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}},
                 id="other-capability"),
    pytest.param({"capabilities": {"add": ["SYS_ADMIN_X"]}},
                 {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN_X"]}},
                 id="exact-name-only"),
    pytest.param({"capabilities": {"drop": ["NET_RAW"]}},
                 {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["NET_RAW"]}}, id="lists-replaced"),
    pytest.param({"capabilities": None}, {"allowPrivilegeEscalation": False, "capabilities": None},
                 id="null-capabilities"),
    pytest.param({"privileged": True, "allowPrivilegeEscalation": False},
                 {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "privileged": True},
                 id="explicit-escalation-key-wins"),
])
def test_container_security_context(overrides, expected):
    assert ordered(ps.container_security_context(overrides)) == ordered(expected)


@pytest.mark.parametrize("base, override, expected", [
    ({"a": 1}, {}, {"a": 1}),
    ({}, {"b": 2}, {"b": 2}),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, {"b": 2, "a": 1}),  # merge_hash returns y when x == y
    ({"a": {"x": 1, "y": [1]}, "b": 1}, {"a": {"y": [2], "z": 3}, "c": 4}, {"a": {"x": 1, "y": [2], "z": 3}, "b": 1, "c": 4}),
    ({"a": {"x": 1}}, {"a": 5}, {"a": 5}),
    ({"a": 5}, {"a": {"x": 1}}, {"a": {"x": 1}}),
])
def test_combine_is_ansibles_recursive_combine(base, override, expected):
    assert ordered(ps.combine(base, override)) == ordered(expected)


def test_combine_does_not_modify_its_inputs():
    base, override = {"a": {"x": 1}}, {"a": {"y": 2}}
    result = ps.combine(base, override)
    result["a"]["z"] = 3
    assert base == {"a": {"x": 1}} and override == {"a": {"y": 2}}


@pytest.mark.parametrize("call", [
    lambda: ps.pod_security_context(10001, 10001, ["fsGroup"]),
    lambda: ps.container_security_context("privileged"),
])
def test_security_context_overrides_must_be_dicts(call):
    with pytest.raises(ps.PodSettingsError, match="must be a dict"):
        call()


# --------------------------------------------------------------------------- output dir, args, env


@pytest.mark.parametrize("args, expected", [
    pytest.param(("", "trainfleet-data", "training", "job"), "s3://trainfleet-data/training/job", id="prefix"),
    pytest.param(("", "trainfleet-data", "", "job"), "s3://trainfleet-data/job", id="no-prefix"),
    pytest.param(("", "trainfleet-data", "/team/a/", "job"), "s3://trainfleet-data/team/a/job", id="edge-slashes"),
    pytest.param(("", "trainfleet-data", "///", "job"), "s3://trainfleet-data/job", id="slashes-only"),
    pytest.param(("", "b", None, "job"), "s3://b/job", id="none-prefix"),
    pytest.param(("/data/outputs/job", "", "training", "job"), "/data/outputs/job", id="explicit-wins"),
    pytest.param(("s3://other/x", "b", "p", "job"), "s3://other/x", id="explicit-s3"),
])
def test_output_dir(args, expected):
    assert ps.output_dir(*args) == expected


def test_output_dir_needs_a_bucket_without_an_explicit_dir():
    with pytest.raises(ps.PodSettingsError, match="s3_bucket is required"):
        ps.output_dir("", "", "training", "job")


@pytest.mark.parametrize("args, expected", [
    pytest.param(("digits", 5, 64, "auto", "s3://b/p/j"),
                 ["--dataset=digits", "--epochs=5", "--batch-size=64", "--backend=auto", "--output-dir=s3://b/p/j"],
                 id="no-snapshot"),
    pytest.param(("digits", "10", 32, "nccl", "/out", "/data/snapshots"),
                 ["--dataset=digits", "--epochs=10", "--batch-size=32", "--backend=nccl", "--output-dir=/out",
                  "--snapshot-dir=/data/snapshots"], id="snapshot"),
    pytest.param(("digits", 1, 8, "gloo", "/out", None),
                 ["--dataset=digits", "--epochs=1", "--batch-size=8", "--backend=gloo", "--output-dir=/out"],
                 id="none-snapshot"),
    pytest.param(("digits", 1, 8, "auto", "/out", "", 2),
                 ["--dataset=digits", "--epochs=1", "--batch-size=8", "--backend=auto", "--output-dir=/out", "--device=cuda"],
                 id="gpus-ask-for-cuda"),
    pytest.param(("digits", 1, 8, "auto", "/out", "", "0"),
                 ["--dataset=digits", "--epochs=1", "--batch-size=8", "--backend=auto", "--output-dir=/out"],
                 id="no-gpus-no-device"),
    pytest.param(("digits", 1, 8, "auto", "/out", "", 2, "cpu"),
                 ["--dataset=digits", "--epochs=1", "--batch-size=8", "--backend=auto", "--output-dir=/out", "--device=cpu"],
                 id="a-named-device-wins-over-gpus"),
    pytest.param(("corpus", 3, 16, "auto", "/data/out", "", 0, "xla", ("/data/", "bert-large", False)),
                 ["--dataset=corpus", "--epochs=3", "--batch-size=16", "--backend=auto", "--output-dir=/data/out", "--device=xla",
                  "--compile-cache-dir=/data/compile-cache", "--cache-set=bert-large"],
                 id="xla-with-a-cache-set"),
    pytest.param(("corpus", 3, 16, "auto", "/data/out", "", 0, "xla", ("/fsx", "bert-large", True)),
                 ["--dataset=corpus", "--epochs=3", "--batch-size=16", "--backend=auto", "--output-dir=/data/out", "--device=xla",
                  "--compile-cache-dir=/fsx/compile-cache", "--cache-set=bert-large", "--precompile"],
                 id="precompile"),
    pytest.param(("digits", 1, 8, "auto", "/out", "", 0, "auto", None, 16),
                 ["--dataset=digits", "--epochs=1", "--batch-size=8", "--backend=auto", "--output-dir=/out", "--device=xla"],
                 id="neuron-devices-ask-for-xla"),
    pytest.param(("digits", 1, 8, "auto", "/out", "", 0, "cpu", None, 16),
                 ["--dataset=digits", "--epochs=1", "--batch-size=8", "--backend=auto", "--output-dir=/out", "--device=cpu"],
                 id="a-named-device-wins-over-neuron-devices"),
    pytest.param(("digits", 1, 8, "auto", "/out", "", 0, "auto", ("/data", "", True)),
                 ["--dataset=digits", "--epochs=1", "--batch-size=8", "--backend=auto", "--output-dir=/out"],
                 id="no-cache-set-no-cache-args"),
])
def test_trainer_args(args, expected):
    assert ps.trainer_args(*args) == expected


BASE_ENV = [
    {"name": "TRAINFLEET_JOB_NAME", "value": "job"},
    {"name": "TRAINFLEET_S3_BUCKET", "value": "b"},
    {"name": "TRAINFLEET_S3_PREFIX", "value": "/p/"},
    {"name": "TRAINFLEET_OUTPUT_DIR", "value": "s3://b/p/job"},
    {"name": "AWS_REGION", "value": "eu-west-1"},
    {"name": "AWS_DEFAULT_REGION", "value": "eu-west-1"},
]
CREDENTIALS = [
    {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "aws-creds", "key": "AWS_ACCESS_KEY_ID"}}},
    {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "aws-creds", "key": "AWS_SECRET_ACCESS_KEY"}}},
]


@pytest.mark.parametrize("endpoint, secret, env, expected", [
    pytest.param("", "", [], BASE_ENV, id="plain"),
    pytest.param("http://172.18.0.1:5000", "", None, BASE_ENV + [{"name": "AWS_ENDPOINT_URL", "value": "http://172.18.0.1:5000"}],
                 id="endpoint"),
    pytest.param("", "aws-creds", [], BASE_ENV + CREDENTIALS, id="credentials-via-secret"),
    pytest.param("http://e", "aws-creds", [{"name": "NCCL_DEBUG", "value": "INFO"}],
                 BASE_ENV + [{"name": "AWS_ENDPOINT_URL", "value": "http://e"}] + CREDENTIALS
                 + [{"name": "NCCL_DEBUG", "value": "INFO"}], id="all-in-order-user-last"),
])
def test_trainer_env(endpoint, secret, env, expected):
    result = ps.trainer_env("job", "b", "/p/", "s3://b/p/job", "eu-west-1", endpoint, secret, env)
    assert ordered(result) == ordered(expected)


def test_trainer_env_credentials_come_from_the_secret_only():
    result = ps.trainer_env("job", "b", "p", "s3://b/p/job", "r", "", "aws-creds", [])
    for item in result:
        if item["name"].startswith("AWS_") and "KEY" in item["name"]:
            assert set(item) == {"name", "valueFrom"}
            assert item["valueFrom"] == {"secretKeyRef": {"name": "aws-creds", "key": item["name"]}}
    assert "aws-creds" not in [item.get("value") for item in result]


# --------------------------------------------------------------------------- pod_settings: parity with the Jinja

REQUIRED = {"name": "trainfleet-digits", "cpu_request": "500m", "memory_request": "1Gi", "run_as_user": 10001,
            "run_as_group": 10001, "s3_bucket": "trainfleet-data", "aws_region": "us-east-1"}

PARITY = {
    # the role's defaults (aws platform, Pod Identity, no claim, no shm)
    "defaults": (dict(REQUIRED), {
        "tolerations": [node_lost(NOT_READY, 30), node_lost(UNREACHABLE, 30)],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        "volumes": [],
        "volume_mounts": [],
        "pod_security_context": POD_DEFAULT,
        "container_security_context": CONTAINER_DEFAULT,
        "image_pull_secrets": [],
        "output_dir": "s3://trainfleet-data/training/trainfleet-digits",
        "trainer_args": ["--dataset=digits", "--epochs=5", "--batch-size=64", "--backend=auto",
                         "--output-dir=s3://trainfleet-data/training/trainfleet-digits"],
        "trainer_env": [
            {"name": "TRAINFLEET_JOB_NAME", "value": "trainfleet-digits"},
            {"name": "TRAINFLEET_S3_BUCKET", "value": "trainfleet-data"},
            {"name": "TRAINFLEET_S3_PREFIX", "value": "training"},
            {"name": "TRAINFLEET_OUTPUT_DIR", "value": "s3://trainfleet-data/training/trainfleet-digits"},
            {"name": "AWS_REGION", "value": "us-east-1"},
            {"name": "AWS_DEFAULT_REGION", "value": "us-east-1"}],
    }),
    # a GPU job on EKS: devices, FSx claim read-only, shm, pull secret, a static-credentials local-style S3
    "gpu": (dict(REQUIRED, name="llm", cpu_request=8, memory_request="60Gi", cpu_limit="16", memory_limit="",
                 gpus="4", efa_devices=2, shm_size="8Gi", pvc_claim_name="fsx", pvc_mount_path="/fsx",
                 pvc_read_only="yes", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                 node_lost_toleration_seconds="60", image_pull_secrets=["regcred"], s3_prefix="/team/a/",
                 aws_endpoint_url="http://172.18.0.1:5000", aws_credentials_secret="aws-creds",
                 env=[{"name": "NCCL_DEBUG", "value": "INFO"}], trainer_epochs=10, trainer_batch_size=256,
                 trainer_backend="nccl", trainer_snapshot_dir="/fsx/snapshots/llm",
                 security_context={"fsGroup": 10001}), {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                        node_lost(NOT_READY, 60), node_lost(UNREACHABLE, 60)],
        "resources": {"requests": {"cpu": "8", "memory": "60Gi", "nvidia.com/gpu": 4, "vpc.amazonaws.com/efa": 2},
                      "limits": {"cpu": "16", "nvidia.com/gpu": 4, "vpc.amazonaws.com/efa": 2}},
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "fsx", "readOnly": True}},
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}],
        "volume_mounts": [{"name": "data", "mountPath": "/fsx", "readOnly": True},
                          {"name": "dshm", "mountPath": "/dev/shm"}],
        "pod_security_context": dict(POD_DEFAULT, fsGroup=10001),
        "container_security_context": CONTAINER_DEFAULT,
        "image_pull_secrets": [{"name": "regcred"}],
        "output_dir": "s3://trainfleet-data/team/a/llm",
        "trainer_args": ["--dataset=digits", "--epochs=10", "--batch-size=256", "--backend=nccl",
                         "--output-dir=s3://trainfleet-data/team/a/llm", "--snapshot-dir=/fsx/snapshots/llm", "--device=cuda"],
        "trainer_env": [
            {"name": "TRAINFLEET_JOB_NAME", "value": "llm"},
            {"name": "TRAINFLEET_S3_BUCKET", "value": "trainfleet-data"},
            {"name": "TRAINFLEET_S3_PREFIX", "value": "/team/a/"},
            {"name": "TRAINFLEET_OUTPUT_DIR", "value": "s3://trainfleet-data/team/a/llm"},
            {"name": "AWS_REGION", "value": "us-east-1"},
            {"name": "AWS_DEFAULT_REGION", "value": "us-east-1"},
            {"name": "AWS_ENDPOINT_URL", "value": "http://172.18.0.1:5000"}] + [
            {"name": key, "valueFrom": {"secretKeyRef": {"name": "aws-creds", "key": key}}}
            for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")] + [
            {"name": "NCCL_DEBUG", "value": "INFO"}],
    }),
    # no object store: outputs on the claim, no bucket; the user's not-ready toleration wins; SYS_ADMIN
    "claim-only": (dict(REQUIRED, s3_bucket="", trainer_output_dir="/data/outputs/trainfleet-digits",
                        pvc_claim_name="local-data", extra_volumes=[EXTRA_VOLUME], extra_volume_mounts=[EXTRA_MOUNT],
                        tolerations=[{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                                      "tolerationSeconds": 600}],
                        container_security_context={"capabilities": {"add": ["cap_sys_admin"]},
                                                    "readOnlyRootFilesystem": True}), {
        "tolerations": [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600},
                        node_lost(UNREACHABLE, 30)],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "local-data", "readOnly": False}},
                    EXTRA_VOLUME],
        "volume_mounts": [{"name": "data", "mountPath": "/data", "readOnly": False}, EXTRA_MOUNT],
        "pod_security_context": POD_DEFAULT,
        "container_security_context": {"allowPrivilegeEscalation": True,
                                       "capabilities": {"drop": ["ALL"], "add": ["cap_sys_admin"]},
                                       "readOnlyRootFilesystem": True},
        "image_pull_secrets": [],
        "output_dir": "/data/outputs/trainfleet-digits",
        "trainer_args": ["--dataset=digits", "--epochs=5", "--batch-size=64", "--backend=auto",
                         "--output-dir=/data/outputs/trainfleet-digits"],
        "trainer_env": [
            {"name": "TRAINFLEET_JOB_NAME", "value": "trainfleet-digits"},
            {"name": "TRAINFLEET_S3_BUCKET", "value": ""},
            {"name": "TRAINFLEET_S3_PREFIX", "value": "training"},
            {"name": "TRAINFLEET_OUTPUT_DIR", "value": "/data/outputs/trainfleet-digits"},
            {"name": "AWS_REGION", "value": "us-east-1"},
            {"name": "AWS_DEFAULT_REGION", "value": "us-east-1"}],
    }),
    # a Neuron job running as root with opt-ins (the preflight's business), privileged, no limits
    "neuron-privileged": (dict(REQUIRED, run_as_user=0, run_as_group="0", memory_limit="", neuron_devices=16,
                               container_security_context={"privileged": True},
                               security_context={"seccompProfile": {"type": "Unconfined"}}, s3_prefix=""), {
        "tolerations": [node_lost(NOT_READY, 30), node_lost(UNREACHABLE, 30)],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "aws.amazon.com/neuron": 16},
                      "limits": {"aws.amazon.com/neuron": 16}},
        "volumes": [],
        "volume_mounts": [],
        "pod_security_context": {"runAsNonRoot": False, "runAsUser": 0, "runAsGroup": 0,
                                 "seccompProfile": {"type": "Unconfined"}},
        "container_security_context": {"allowPrivilegeEscalation": True, "capabilities": {"drop": ["ALL"]},
                                       "privileged": True},
        "image_pull_secrets": [],
        "output_dir": "s3://trainfleet-data/trainfleet-digits",
        # Neuron devices ask for torch-neuronx's XLA device (since the neuron image variant)
        "trainer_args": ["--dataset=digits", "--epochs=5", "--batch-size=64", "--backend=auto",
                         "--output-dir=s3://trainfleet-data/trainfleet-digits", "--device=xla"],
        "trainer_env": [
            {"name": "TRAINFLEET_JOB_NAME", "value": "trainfleet-digits"},
            {"name": "TRAINFLEET_S3_BUCKET", "value": "trainfleet-data"},
            {"name": "TRAINFLEET_S3_PREFIX", "value": ""},
            {"name": "TRAINFLEET_OUTPUT_DIR", "value": "s3://trainfleet-data/trainfleet-digits"},
            {"name": "AWS_REGION", "value": "us-east-1"},
            {"name": "AWS_DEFAULT_REGION", "value": "us-east-1"}],
    }),
}


@pytest.mark.parametrize("settings, expected", list(PARITY.values()), ids=list(PARITY))
def test_pod_settings_matches_the_jinja(settings, expected):
    result = ps.pod_settings(settings)
    assert list(result) == list(ps.OUTPUT_KEYS)
    for key in ps.OUTPUT_KEYS:
        assert ordered(result[key]) == ordered(expected[key]), key


def test_pod_settings_does_not_alias_or_modify_its_input():
    settings = dict(REQUIRED, tolerations=[{"key": "k"}], env=[{"name": "A", "value": "1"}],
                    extra_volumes=[{"name": "v", "emptyDir": {}}], security_context={"seccompProfile": {"x": 1}})
    before = json.dumps(settings)
    result = ps.pod_settings(settings)
    result["tolerations"][0]["key"] = "changed"
    result["trainer_env"][-1]["value"] = "changed"
    result["volumes"][0]["emptyDir"]["x"] = 1
    result["pod_security_context"]["seccompProfile"]["y"] = 2
    assert json.dumps(settings) == before


def test_pod_settings_accepts_every_documented_key():
    settings = dict(ps.DEFAULTS, **REQUIRED)
    assert ps.pod_settings(settings) == ps.pod_settings(dict(REQUIRED))


@pytest.mark.parametrize("missing", ["name", "cpu_request", "memory_request", "run_as_user", "run_as_group", "aws_region"])
def test_pod_settings_names_a_missing_required_key(missing):
    settings = dict(REQUIRED)
    del settings[missing]
    with pytest.raises(ps.PodSettingsError, match="missing required job setting: %s" % missing) as info:
        ps.pod_settings(settings)
    assert info.value.details == {"keys": [missing]}
    assert isinstance(info.value, TrainfleetError)


@pytest.mark.parametrize("settings", [
    pytest.param({k: v for k, v in REQUIRED.items() if k != "s3_bucket"}, id="missing"),
    pytest.param(dict(REQUIRED, s3_bucket=""), id="empty"),
])
def test_pod_settings_needs_a_bucket_without_an_output_dir(settings):
    with pytest.raises(ps.PodSettingsError, match=r"s3_bucket \(s3_bucket is required when trainer_output_dir is empty\)"):
        ps.pod_settings(settings)
    assert ps.pod_settings(dict(settings, trainer_output_dir="/data/out"))["output_dir"] == "/data/out"


def test_pod_settings_lists_every_missing_key():
    with pytest.raises(ps.PodSettingsError, match="missing required job settings: name, cpu_request, memory_request, "
                                                  "run_as_user, run_as_group, aws_region, s3_bucket"):
        ps.pod_settings({})


@pytest.mark.parametrize("settings, message", [
    pytest.param(dict(REQUIRED, pytorchjob_gpus=1), "unknown job settings pytorchjob_gpus", id="prefixed-key"),
    pytest.param(dict(REQUIRED, gpu=1), "unknown job settings gpu", id="typo"),
    pytest.param(["name"], "must be a dict, got list", id="not-a-dict"),
    pytest.param(dict(REQUIRED, tolerations={"key": "k"}), "tolerations must be a list", id="tolerations-type"),
    pytest.param(dict(REQUIRED, run_as_user="nobody"), "run_as_user must be an integer", id="uid-type"),
    pytest.param(dict(REQUIRED, node_lost_toleration_seconds=None), "node_lost_toleration_seconds must be an integer",
                 id="seconds-none"),
])
def test_pod_settings_refuses_bad_settings(settings, message):
    with pytest.raises(ps.PodSettingsError, match=message):
        ps.pod_settings(settings)


# --------------------------------------------------------------------------- a controller's pod patch
# Expected: what roles/volcano/templates/kustomization.yaml.j2 and roles/mpi_operator/templates/
# kustomization.yaml.j2 wrote by hand for a controller's Deployment before they called controller_patch.

CONTROLLER_CONTAINER = "/spec/template/spec/containers/0/"
TCP_PROBE = {"tcpSocket": {"port": 8443}, "periodSeconds": 5}


def controller_ops(image, resources, probe, seconds, run_as=65532):
    return [
        {"op": "replace", "path": CONTROLLER_CONTAINER + "image", "value": image},
        {"op": "add", "path": CONTROLLER_CONTAINER + "imagePullPolicy", "value": "IfNotPresent"},
        {"op": "add", "path": CONTROLLER_CONTAINER + "resources", "value": resources},
        {"op": "add", "path": CONTROLLER_CONTAINER + "readinessProbe", "value": probe},
        {"op": "add", "path": CONTROLLER_CONTAINER + "securityContext",
         "value": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True}},
        {"op": "add", "path": "/spec/template/spec/securityContext",
         "value": {"runAsNonRoot": True, "runAsUser": run_as, "runAsGroup": run_as, "seccompProfile": {"type": "RuntimeDefault"}}},
        {"op": "add", "path": "/spec/template/spec/tolerations",
         "value": [node_lost(NOT_READY, seconds), node_lost(UNREACHABLE, seconds)]},
    ]


@pytest.mark.parametrize("image, resources, probe, seconds, expected_seconds", [
    pytest.param("trainfleet/vc-scheduler:v1.10.0-r1", {"requests": {"cpu": "100m", "memory": "128Mi"}},
                 {"tcpSocket": {"port": 11251}, "periodSeconds": 5}, 30, 30, id="volcano-scheduler"),
    pytest.param("trainfleet/mpi-operator:v0.6.0-r1",
                 {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                 {"httpGet": {"path": "/healthz", "port": "healthz"}, "periodSeconds": 10}, "45", 45,
                 id="mpi-operator-seconds-as-text"),
    pytest.param("team\n---\napiVersion: v1\nkind: Secret", {}, TCP_PROBE, 0, 0, id="hostile-image-as-given"),
])
def test_controller_patch(image, resources, probe, seconds, expected_seconds):
    assert ordered(ps.controller_patch(image, resources, probe, seconds)) == ordered(
        controller_ops(image, resources, probe, expected_seconds))


def test_controller_patch_runs_as_the_given_id():
    ops = {op["path"]: op["value"] for op in ps.controller_patch("img", {}, TCP_PROBE, 30, run_as="1000")}
    assert ops["/spec/template/spec/securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "seccompProfile": {"type": "RuntimeDefault"}}


def test_controller_patch_does_not_share_its_inputs():
    resources, probe = {"requests": {"cpu": "1"}}, {"tcpSocket": {"port": 1}}
    ops = ps.controller_patch("img", resources, probe, 30)
    ops[2]["value"]["requests"]["cpu"] = "2"
    ops[3]["value"]["tcpSocket"]["port"] = 2
    assert resources == {"requests": {"cpu": "1"}} and probe == {"tcpSocket": {"port": 1}}
    assert ps.controller_patch("img", resources, probe, 30) == ps.controller_patch("img", resources, probe, 30)


@pytest.mark.parametrize("seconds, run_as, message", [
    pytest.param(None, 65532, "node_lost_toleration_seconds must be an integer", id="seconds-none"),
    pytest.param("soon", 65532, "node_lost_toleration_seconds must be an integer", id="seconds-text"),
    pytest.param(30, "nobody", "run_as_user must be an integer", id="run-as-name"),
])
def test_controller_patch_refuses_bad_numbers(seconds, run_as, message):
    with pytest.raises(ps.PodSettingsError, match=message):
        ps.controller_patch("img", {}, TCP_PROBE, seconds, run_as)


def test_controller_pod_patch_filter():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.trainfleet.training.plugins.filter.pod import FilterModule

    controller_pod_patch = FilterModule().filters()["controller_pod_patch"]
    assert ordered(controller_pod_patch("img", resources={}, readiness_probe=TCP_PROBE, node_lost_toleration_seconds=30)) == ordered(
        controller_ops("img", {}, TCP_PROBE, 30))
    with pytest.raises(AnsibleFilterError, match="^controller_pod_patch: node_lost_toleration_seconds must be an integer"):
        controller_pod_patch("img", {}, TCP_PROBE, "soon")
