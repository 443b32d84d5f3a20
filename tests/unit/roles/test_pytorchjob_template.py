# -*- coding: utf-8 -*-
"""Role pytorchjob: the PyTorchJob template and the preflight checks.

The template is rendered with Jinja2 configured like Ansible's template engine (trim_blocks, the
ansible.builtin core filters) from the role's defaults plus per-case overrides, then checked
for the PyTorchJob shape the training operator v1.9 accepts. The preflight tests run the role
with ansible-playbook in check mode against localhost (no cluster needed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import jinja2
import jinja2.nativetypes
import pytest
import yaml

from ansible.plugins.filter.core import FilterModule as CoreFilters

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "pytorchjob")
TRAINJOB = os.path.join(ROOT, "roles", "trainjob")
TEMPLATE = os.path.join(ROLE, "templates", "pytorchjob.yaml.j2")
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "pytorchjob_role")
PLAYBOOK_TIMEOUT = 300
# A run that batches many cases (one play each) is bounded per case too: its ~2 s a case on a quiet
# machine, times ten, for a loaded 2-core machine of the slower kind.
CASE_TIMEOUT = 20

NODES = {kind: {"node_selector": {}, "tolerations": []} for kind in ("cpu", "gpu", "neuron")}


def contract(**object_store):
    """A platform contract (roles/platform, argument spec `contract`) with the parts the role reads."""
    store = {"kind": "s3", "bucket": "trainfleet-data", "region": "us-east-1", "endpoint_url": "",
             "pod_endpoint_url": "", "credentials": "pod_identity", "credentials_secret": ""}
    store.update(object_store)
    return {
        "platform": "aws", "created_by_trainfleet": True,
        "kubeconfig": "/tmp/trainfleet-test-cache/kubeconfig-trainfleet", "context": "",
        "registry": {"prefix": "localhost:5001/trainfleet", "trainer_repository": "localhost:5001/trainfleet/trainer",
                     "login": "none", "pull": "mirror", "pull_secret": "", "base_image": "trainfleet/debian-base:bookworm",
                     "base_image_local": True},
        "object_store": store,
        "storage": {"backends": ["hostpath"], "class_name": ""},
        "nodes": NODES,
        "rendezvous": {"etcd_image": "example.test/etcd:3.5.16-0"},
        "launchers": {"mpi_operator": False, "volcano": False, "images": "release"},
        "operator": {"install": True, "image": "", "init_image": "", "manifests": "go_module"},
        "aws": {"account": True, "region": "us-east-1", "endpoint_url": ""},
    }


SHARED = {
    "trainfleet_name": "trainfleet",
    "trainfleet_cache_dir": "/tmp/trainfleet-test-cache",
    "trainfleet_aws_region": "us-east-1",
    "trainfleet_tags": {"project": "trainfleet"},
    "trainfleet_cluster": contract(),
}
IMAGE = "localhost:5001/trainfleet/trainer:test"
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


# --------------------------------------------------------------------------- rendering


# The Ansible filters the templates and the defaults use; everything else is Jinja2's own.
ANSIBLE_FILTERS = ("combine", "regex_replace", "to_json", "bool")


def _filters():
    """Ansible's core filters the templates use, and ours (the pods' settings, computed in Python)."""
    from ansible_collections.trainfleet.training.plugins.filter.pod import trainjob_pod  # pylint: disable=import-outside-toplevel
    from ansible_collections.trainfleet.training.plugins.module_utils.names import data_name  # pylint: disable=import-outside-toplevel

    core = CoreFilters().filters()
    filters = {name: core[name] for name in ANSIBLE_FILTERS}
    filters["trainfleet.training.trainjob_pod"] = trainjob_pod
    # the inventories name the shared claim with it (storage_pvc_name)
    filters["trainfleet.training.data_name"] = data_name
    return filters


def _lookup(kind, *args, **_kwargs):
    if kind == "ansible.builtin.env":
        return os.environ.get(args[0], "")
    if kind == "trainfleet.training.cache_dir":
        from ansible_collections.trainfleet.training.plugins.module_utils.cache import cache_dir  # pylint: disable=import-outside-toplevel
        return cache_dir()
    raise AssertionError("unexpected lookup %s in the role defaults" % kind)


def _holds_template(value):
    if isinstance(value, str):
        return "{{" in value
    if isinstance(value, dict):
        return any(_holds_template(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_template(v) for v in value)
    return False


def _resolve(variables):
    """Resolve templated defaults ("{{ ... }}") the way Ansible does lazily: repeat until stable."""
    env = jinja2.nativetypes.NativeEnvironment(undefined=jinja2.StrictUndefined)
    env.filters.update(_filters())
    env.globals["lookup"] = _lookup
    resolved = dict(variables)
    for _attempt in range(6):
        changed = False
        for key, value in list(resolved.items()):
            if isinstance(value, str) and "{{" in value:
                try:
                    new = env.from_string(value).render(**resolved)
                except jinja2.UndefinedError:
                    continue
                # A list or dict built from a variable not resolved yet would keep that variable's
                # "{{ ... }}" inside it for good: wait for the next round (Ansible resolves lazily).
                if not isinstance(new, str) and _holds_template(new):
                    continue
                if new != value:
                    resolved[key] = new
                    changed = True
        if not changed:
            break
    left = [k for k, v in resolved.items() if isinstance(v, str) and "{{" in v]
    assert not left, "unresolved variables: %s" % left
    return resolved


def role_vars(**overrides):
    """The trainjob role's defaults (the shared trainjob_* settings), then the pytorchjob role's."""
    variables = dict(SHARED)
    for role in (TRAINJOB, ROLE):
        with open(os.path.join(role, "defaults", "main.yml")) as handle:
            variables.update(yaml.safe_load(handle))
    variables["trainjob_image"] = IMAGE
    variables.update(overrides)
    return _resolve(variables)


def render_text(variables, template=TEMPLATE):
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.dirname(template)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(_filters())
    return env.get_template(os.path.basename(template)).render(**variables)


def render(**overrides):
    variables = role_vars(**overrides)
    text = render_text(variables)
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    assert len(docs) == 1, text
    job = docs[0]
    check_pytorchjob_shape(job)
    return job, text


# The static layout (1 Master + 1 Worker, backoffLimit 2) the role had by default before it took the
# inventories' elastic job: the cases written for it pass it explicitly.
STATIC = {"pytorchjob_elastic": False, "pytorchjob_master_replicas": 1, "pytorchjob_worker_replicas": 1,
          "pytorchjob_backoff_limit": 2}


def render_static(**overrides):
    return render(**dict(STATIC, **overrides))


def check_pytorchjob_shape(job):
    """The structure the operator's CRD schema and validating webhook (v1.9) require."""
    assert job["apiVersion"] == "kubeflow.org/v1"
    assert job["kind"] == "PyTorchJob"
    assert DNS_1035.match(job["metadata"]["name"])
    assert job["metadata"]["namespace"]
    spec = job["spec"]
    assert isinstance(spec["nprocPerNode"], str)
    specs = spec["pytorchReplicaSpecs"]
    assert specs and set(specs) <= {"Master", "Worker"}
    if "Master" in specs:
        assert specs["Master"]["replicas"] == 1
    assert spec["runPolicy"]["cleanPodPolicy"] in ("None", "Running", "All")
    assert isinstance(spec["runPolicy"]["backoffLimit"], int)
    for rtype, rspec in specs.items():
        assert isinstance(rspec["replicas"], int) and rspec["replicas"] >= 1, rtype
        assert rspec["restartPolicy"] in ("Always", "OnFailure", "Never", "ExitCode")
        pod = rspec["template"]["spec"]
        containers = pod["containers"]
        assert containers[0]["name"] == "pytorch"
        assert containers[0]["image"]
        ports = {p["name"]: p["containerPort"] for p in containers[0]["ports"]}
        assert "pytorchjob-port" in ports
        assert all(isinstance(a, str) for a in containers[0]["command"] + containers[0].get("args", []))
        names = [e["name"] for e in containers[0]["env"]]
        assert len(names) == len(set(names)), "duplicate env names %s" % names
        for entry in containers[0]["env"]:
            assert set(entry) in ({"name", "value"}, {"name", "valueFrom"}), entry
            if "value" in entry:
                assert isinstance(entry["value"], str), entry
        volume_names = {v["name"] for v in pod.get("volumes", [])}
        for mount in containers[0].get("volumeMounts", []):
            assert mount["name"] in volume_names, mount
    if "elasticPolicy" in spec:
        assert "Master" not in specs
        policy = spec["elasticPolicy"]
        assert "nProcPerNode" not in policy  # deprecated in v1.9, forbidden with spec.nprocPerNode
        assert policy["minReplicas"] <= specs["Worker"]["replicas"] <= policy["maxReplicas"]


# The restricted defaults: what every pod and pytorch container gets without opt-ins.
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                  "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def container(job, rtype):
    return job["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]


def pod_spec(job, rtype):
    return job["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]


def env_of(job, rtype):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(job, rtype)["env"]}


# --------------------------------------------------------------------------- template cases


def test_the_role_default_is_the_elastic_job_the_inventories_run():
    """No inventory sets the layout: the role's default is the job that survives a lost pod or node."""
    job, _text = render()
    spec = job["spec"]
    assert list(spec["pytorchReplicaSpecs"]) == ["Worker"]
    assert spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert spec["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"
    assert (spec["elasticPolicy"]["minReplicas"], spec["elasticPolicy"]["maxReplicas"]) == (1, 2)
    assert spec["elasticPolicy"]["maxRestarts"] == 3
    assert spec["runPolicy"]["backoffLimit"] == 6
    for platform in ("local", "aws"):
        with open(os.path.join(ROOT, "inventories", platform, "group_vars", "all", "train.yml")) as handle:
            inventory = yaml.safe_load(handle)
        assert not {"pytorchjob_master_replicas", "pytorchjob_worker_replicas", "pytorchjob_elastic",
                    "pytorchjob_backoff_limit", "pytorchjob_restart_policy"} & set(inventory), platform


def test_static_master_worker_cpu_job():
    job, text = render_static(
        trainjob_name="digits-static",
        trainjob_namespace="training",
        pytorchjob_worker_replicas=2,
        trainjob_trainer_backend="gloo",
        trainjob_aws_endpoint_url="http://172.18.0.1:5050",
        trainjob_aws_credentials_secret="aws-local",
        trainjob_aws_credentials_create=True,
        trainjob_aws_access_key_id="AKIDLOCALTEST",
        trainjob_aws_secret_access_key="s3cr3t-never-rendered",
        trainjob_s3_bucket="trainfleet-local",
        trainjob_s3_prefix="/runs/",
        pytorchjob_active_deadline_seconds=600,
        pytorchjob_ttl_seconds_after_finished=0,
    )
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["replicas"] == 1
    assert specs["Worker"]["replicas"] == 2
    assert "elasticPolicy" not in job["spec"]
    assert job["spec"]["nprocPerNode"] == "1"
    assert job["spec"]["runPolicy"] == {"backoffLimit": 2, "cleanPodPolicy": "None", "activeDeadlineSeconds": 600}
    for rtype in ("Master", "Worker"):
        c = container(job, rtype)
        assert c["image"] == IMAGE
        assert c["command"] == ["torchrun"]
        # torchrun takes nnodes/node rank/master addr+port from the operator's PET_* variables
        assert c["args"] == [
            "--nproc_per_node=1", "-m", "trainer.train",
            "--dataset=digits", "--epochs=5", "--batch-size=64", "--backend=gloo",
            "--output-dir=s3://trainfleet-local/runs/digits-static",
        ]
        assert not any(a.startswith(("--nnodes", "--node", "--master", "--rdzv")) for a in c["args"])
        assert c["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]
        env = env_of(job, rtype)
        assert env["AWS_ENDPOINT_URL"] == "http://172.18.0.1:5050"
        assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "us-east-1"
        assert env["TRAINFLEET_S3_BUCKET"] == "trainfleet-local"
        assert env["AWS_ACCESS_KEY_ID"] == {"secretKeyRef": {"name": "aws-local", "key": "AWS_ACCESS_KEY_ID"}}
        assert env["AWS_SECRET_ACCESS_KEY"] == {"secretKeyRef": {"name": "aws-local", "key": "AWS_SECRET_ACCESS_KEY"}}
        assert c["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}
        assert "volumes" not in pod_spec(job, rtype)
        assert "serviceAccountName" not in pod_spec(job, rtype)
        assert specs[rtype]["restartPolicy"] == "OnFailure"
        labels = specs[rtype]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == "digits-static"
    # credentials never appear in the manifest, only the Secret's name
    assert "s3cr3t-never-rendered" not in text and "AKIDLOCALTEST" not in text


def test_elastic_c10d_job():
    job, _manifest = render(
        trainjob_name="digits-elastic",
        pytorchjob_elastic=True,
        pytorchjob_master_replicas=0,
        pytorchjob_worker_replicas=2,
        pytorchjob_elastic_min_replicas=1,
        pytorchjob_elastic_max_replicas=3,
        pytorchjob_elastic_max_restarts=5,
        pytorchjob_elastic_rdzv_conf={"join_timeout": 900, "last_call_timeout": "30"},
        pytorchjob_nproc_per_node=2,
        pytorchjob_restart_policy="Never",
    )
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert list(specs) == ["Worker"]
    assert specs["Worker"]["replicas"] == 2
    assert job["spec"]["elasticPolicy"] == {
        "rdzvBackend": "c10d",
        "rdzvId": "digits-elastic",
        "minReplicas": 1,
        "maxReplicas": 3,
        "maxRestarts": 5,
        "rdzvConf": [{"key": "join_timeout", "value": "900"}, {"key": "last_call_timeout", "value": "30"}],
    }
    assert job["spec"]["nprocPerNode"] == "2"
    args = container(job, "Worker")["args"]
    # nproc is explicit (without a Master the operator does not inject PET_NPROC_PER_NODE);
    # the rendezvous (PET_RDZV_*), nnodes (min:max) and max restarts come from the operator.
    assert args[:3] == ["--nproc_per_node=2", "-m", "trainer.train"]
    assert not any(a.startswith(("--nnodes", "--rdzv", "--max", "--node")) for a in args)


def test_elastic_max_replicas_defaults_to_worker_count():
    job, _manifest = render(pytorchjob_elastic=True, pytorchjob_master_replicas=0, pytorchjob_worker_replicas=4)
    assert job["spec"]["elasticPolicy"]["maxReplicas"] == 4
    assert job["spec"]["elasticPolicy"]["minReplicas"] == 1
    assert "rdzvConf" not in job["spec"]["elasticPolicy"]


def test_gpu_job_with_resources_tolerations_and_node_selector():
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    job, _manifest = render_static(
        trainjob_gpus=4,
        pytorchjob_nproc_per_node=4,
        trainjob_trainer_backend="nccl",
        trainjob_cpu_request="8",
        trainjob_cpu_limit="16",
        trainjob_memory_request="64Gi",
        trainjob_memory_limit="96Gi",
        trainjob_node_selector={"node.kubernetes.io/instance-type": "g5.12xlarge"},
        trainjob_tolerations=tolerations,
        trainjob_shm_size="8Gi",
        trainjob_service_account="trainfleet-trainer",
        trainjob_image_pull_secrets=["regcred"],
    )
    for rtype in ("Master", "Worker"):
        c = container(job, rtype)
        assert c["resources"] == {
            "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 4},
            "limits": {"cpu": "16", "memory": "96Gi", "nvidia.com/gpu": 4},
        }
        pod = pod_spec(job, rtype)
        assert pod["tolerations"] == tolerations + NODE_LOST_TOLERATIONS
        assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "g5.12xlarge"}
        assert pod["serviceAccountName"] == "trainfleet-trainer"
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["volumes"]
        assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
        assert "--backend=nccl" in c["args"] and c["args"][0] == "--nproc_per_node=4"
    assert job["spec"]["nprocPerNode"] == "4"


NODE_LOST_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
]


def test_pods_leave_a_lost_node_after_pytorchjob_node_lost_toleration_seconds():
    job, _manifest = render_static()
    for rtype in ("Master", "Worker"):
        assert pod_spec(job, rtype)["tolerations"] == NODE_LOST_TOLERATIONS  # default 30 s, not the cluster's 300
    job, manifest = render_static(trainjob_node_lost_toleration_seconds="45")
    assert [t["tolerationSeconds"] for t in pod_spec(job, "Worker")["tolerations"]] == [45, 45]
    assert '"tolerationSeconds": 45' in manifest  # an int, through to_json


def test_lost_pod_risks_of_the_rendered_jobs():
    """What the role's warning says about what it renders (pytorchjob_resilience_info runs on the manifest)."""
    from ansible_collections.trainfleet.training.plugins.module_utils import resilience as pj  # pylint: disable=import-outside-toplevel

    static, _manifest = render_static()
    assert [r["code"] for r in pj.lost_pod_risks(static)] == [pj.RISK_STATIC_RENDEZVOUS, pj.RISK_NO_SNAPSHOTS]
    elastic, _manifest = render_static(pytorchjob_elastic=True, pytorchjob_master_replicas=0, pytorchjob_worker_replicas=2,
                                       pytorchjob_backoff_limit=4, trainjob_trainer_snapshot_dir="s3://trainfleet-local/snap")
    assert pj.lost_pod_risks(elastic) == []


def test_user_tolerations_merge_with_the_node_lost_ones_and_win_for_the_same_key():
    mine = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]
    job, _manifest = render_static(trainjob_tolerations=mine, trainjob_node_lost_toleration_seconds=10)
    assert pod_spec(job, "Master")["tolerations"] == mine + [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}]


def test_xla_precompile_job_names_the_cache_set_on_the_claim():
    """trainjob_trainer_device xla with a compile cache set: the trainer's --device, its cache on the claim, --precompile."""
    job, _manifest = render_static(trainjob_name="bertcompile", trainjob_pvc_claim_name="fsx-claim", trainjob_pvc_mount_path="/fsx",
                                   trainjob_trainer_device="xla", trainjob_compile_cache_set="bert-large", trainjob_precompile=True)
    for rtype in ("Master", "Worker"):
        args = container(job, rtype)["args"]
        assert [a for a in args if a.startswith(("--device", "--compile-cache-dir", "--cache-set", "--precompile"))] == [
            "--device=xla", "--compile-cache-dir=/fsx/compile-cache", "--cache-set=bert-large", "--precompile"]


def test_trainium_efa_job_with_fsx_claim_and_shm():
    job, _manifest = render_static(
        trainjob_name="bert-trn1",
        pytorchjob_worker_replicas=1,
        pytorchjob_nproc_per_node=32,
        trainjob_neuron_devices=16,
        trainjob_efa_devices=8,
        trainjob_cpu_request="120",
        trainjob_memory_request="480Gi",
        trainjob_memory_limit="",
        trainjob_node_selector={"node.kubernetes.io/instance-type": "trn1.32xlarge"},
        trainjob_tolerations=[{"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"}],
        trainjob_pvc_claim_name="fsx-claim",
        trainjob_pvc_mount_path="/fsx",
        trainjob_shm_size="64Gi",
        trainjob_trainer_snapshot_dir="/fsx/snapshots/bert-trn1",
        trainjob_security_context={"fsGroup": 10001},
        trainjob_service_account="trainfleet-trainer",
        trainjob_env=[{"name": "FI_PROVIDER", "value": "efa"}, {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"}],
    )
    for rtype in ("Master", "Worker"):
        c = container(job, rtype)
        assert c["resources"]["requests"] == {
            "cpu": "120", "memory": "480Gi", "aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 8}
        assert c["resources"]["limits"] == {"aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 8}
        pod = pod_spec(job, rtype)
        assert pod["volumes"] == [
            {"name": "data", "persistentVolumeClaim": {"claimName": "fsx-claim", "readOnly": False}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
        ]
        assert c["volumeMounts"] == [
            {"name": "data", "mountPath": "/fsx", "readOnly": False},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ]
        assert "--snapshot-dir=/fsx/snapshots/bert-trn1" in c["args"]
        # Neuron devices: torch-neuronx's XLA device (the neuron image variant), no compile cache unless one is named
        assert [arg for arg in c["args"] if arg.startswith(("--device", "--compile-cache-dir", "--cache-set", "--precompile"))] == [
            "--device=xla"]
        assert pod["securityContext"] == dict(RESTRICTED_POD, fsGroup=10001)
        env = env_of(job, rtype)
        assert env["FI_PROVIDER"] == "efa"
        # no static credentials on AWS: Pod Identity through the service account
        assert "AWS_ACCESS_KEY_ID" not in env and "AWS_ENDPOINT_URL" not in env
    assert job["spec"]["nprocPerNode"] == "32"


def test_plain_torchrun_launcher():
    job, _manifest = render_static(pytorchjob_launcher=["torchrun"])
    assert container(job, "Master")["command"] == ["torchrun"]
    assert container(job, "Master")["args"][:3] == ["--nproc_per_node=1", "-m", "trainer.train"]


def test_custom_command_and_args_are_used_verbatim():
    job, _manifest = render_static(
        pytorchjob_command=["python", "-m", "torch.distributed.run"],
        pytorchjob_args=["--nproc_per_node=1", "my_script.py", "--lr", "0.1"],
    )
    c = container(job, "Master")
    assert c["command"] == ["python", "-m", "torch.distributed.run"]
    assert c["args"] == ["--nproc_per_node=1", "my_script.py", "--lr", "0.1"]


def test_extra_torchrun_and_trainer_args_and_output_dir():
    job, _manifest = render(
        pytorchjob_torchrun_extra_args=["--log_dir=/tmp/torchrun", "--tee=3"],
        trainjob_trainer_extra_args=["--model=cnn", "--seed=7"],
        trainjob_trainer_output_dir="/data/out",
    )
    args = container(job, "Worker")["args"]
    assert args[:5] == ["--nproc_per_node=1", "--log_dir=/tmp/torchrun", "--tee=3", "-m", "trainer.train"]
    assert args[-3:] == ["--output-dir=/data/out", "--model=cnn", "--seed=7"]
    assert env_of(job, "Worker")["TRAINFLEET_OUTPUT_DIR"] == "/data/out"


def test_torchrun_logs_its_rendezvous_unless_told_otherwise():
    """LOGLEVEL=INFO: torchrun's agent logs each rendezvous, which decides rank 0 for any script."""
    job, _manifest = render()
    env = container(job, "Worker")["env"]
    assert env[0] == {"name": "LOGLEVEL", "value": "INFO"} and [e["name"] for e in env].count("LOGLEVEL") == 1
    job, _manifest = render(trainjob_env=[{"name": "LOGLEVEL", "value": "DEBUG"}])
    assert [e for e in container(job, "Worker")["env"] if e["name"] == "LOGLEVEL"] == [{"name": "LOGLEVEL", "value": "DEBUG"}]
    job, _manifest = render(pytorchjob_torchrun_log_level="")
    assert "LOGLEVEL" not in env_of(job, "Worker")


def test_elastic_pods_publish_the_store_address_every_round_unless_told_otherwise():
    """A replacement pod must find the survivors' store address in their later rendezvous round."""
    job, _manifest = render(pytorchjob_elastic=True, pytorchjob_master_replicas=0, pytorchjob_worker_replicas=2)
    env = container(job, "Worker")["env"]
    assert [e for e in env if e["name"] == "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == [
        {"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "1"}]
    job, _manifest = render(pytorchjob_elastic=True, pytorchjob_master_replicas=0, pytorchjob_worker_replicas=2,
                            trainjob_env=[{"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "0"}])
    assert [e["value"] for e in container(job, "Worker")["env"]
            if e["name"] == "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == ["0"]
    job, _manifest = render_static()  # static rendezvous: one round, nothing to publish again
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in env_of(job, "Master")


def test_run_policy_and_labels():
    job, text = render(
        pytorchjob_backoff_limit=0,
        pytorchjob_active_deadline_seconds=0,
        pytorchjob_ttl_seconds_after_finished=3600,
        pytorchjob_clean_pod_policy="All",
        pytorchjob_restart_policy="ExitCode",
        trainjob_labels={"team": "ml"},
        trainjob_annotations={"note": "a: b # not a comment"},
        trainjob_pod_annotations={"sidecar.istio.io/inject": "false"},
    )
    assert job["spec"]["runPolicy"] == {"backoffLimit": 0, "cleanPodPolicy": "All", "ttlSecondsAfterFinished": 3600}
    assert job["metadata"]["labels"]["team"] == "ml"
    assert job["metadata"]["annotations"] == {"note": "a: b # not a comment"}
    tmpl = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    assert tmpl["metadata"]["labels"]["team"] == "ml"
    assert tmpl["metadata"]["annotations"] == {
        "kubectl.kubernetes.io/default-container": "pytorch", "sidecar.istio.io/inject": "false"}
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"


def test_default_scheduler_has_no_gang_fields():
    job, _text = render_static(pytorchjob_worker_replicas=2)
    assert "schedulingPolicy" not in job["spec"]["runPolicy"]
    for rtype in ("Master", "Worker"):
        assert "schedulerName" not in pod_spec(job, rtype)


def test_volcano_gang_of_all_replicas_by_default():
    """Gang scheduling: schedulerName volcano on every replica, runPolicy.schedulingPolicy {minAvailable, queue}."""
    job, _text = render_static(pytorchjob_worker_replicas=2, pytorchjob_scheduler_name="volcano", pytorchjob_queue="team-a")
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 3, "queue": "team-a"}
    for rtype in ("Master", "Worker"):
        assert pod_spec(job, rtype)["schedulerName"] == "volcano"


def test_volcano_gang_min_available_and_default_queue():
    job, _text = render(pytorchjob_worker_replicas=3, pytorchjob_scheduler_name="volcano", pytorchjob_min_available=2)
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 2}


def test_volcano_gang_of_an_elastic_job():
    job, _text = render(pytorchjob_elastic=True, pytorchjob_master_replicas=0, pytorchjob_worker_replicas=4,
                        pytorchjob_elastic_min_replicas=2, pytorchjob_scheduler_name="volcano")
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 4}
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Worker"]
    assert pod_spec(job, "Worker")["schedulerName"] == "volcano"


def test_hostile_queue_stays_one_value():
    evil = "team-a\n    minAvailable: 1\n---\napiVersion: v1\nkind: Secret"
    job, _text = render(pytorchjob_scheduler_name="volcano", pytorchjob_queue=evil)
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 2, "queue": evil}


def test_master_only_job_has_no_worker_spec():
    job, _manifest = render_static(pytorchjob_worker_replicas=0)
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Master"]


# --------------------------------------------------------------------------- pod security

INIT_TEMPLATE = os.path.join(ROOT, "roles", "training_operator", "files", "initContainer.yaml.gotmpl")
DOCKERFILE = os.path.join(ROOT, "trainer", "Dockerfile")


def operator_init_containers(job_name):
    """The init container the operator (v1.9) injects into static jobs' workers, from our template."""
    text = open(INIT_TEMPLATE).read()
    text = text.replace("{{.InitContainerImage}}", "trainfleet/pytorch-init:test")
    text = text.replace("{{.MasterAddr}}", job_name + "-master-0").replace("{{.MaxTries}}", "100")
    return yaml.safe_load(text)


def restricted_violations(pod):
    """What the Kubernetes "restricted" Pod Security Standard (v1.32) refuses in a pod spec."""
    found = []
    pod_ctx = pod.get("securityContext") or {}
    containers = pod.get("containers", []) + pod.get("initContainers", [])
    for volume in pod.get("volumes", []):
        allowed = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
        if not set(volume) - {"name"} <= allowed:
            found.append("volume %s" % volume["name"])
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            found.append(field)
    if (pod_ctx.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        if any((c.get("securityContext") or {}).get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost")
               for c in containers):
            found.append("seccompProfile")
    if pod_ctx.get("runAsUser") == 0:
        found.append("pod runAsUser 0")
    for c in containers:
        ctx = c.get("securityContext") or {}
        name = c["name"]
        if ctx.get("privileged"):
            found.append("%s privileged" % name)
        if ctx.get("allowPrivilegeEscalation") is not False:
            found.append("%s allowPrivilegeEscalation" % name)
        caps = ctx.get("capabilities") or {}
        if "ALL" not in caps.get("drop", []):
            found.append("%s capabilities.drop" % name)
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append("%s capabilities.add" % name)
        if ctx.get("runAsUser") == 0:
            found.append("%s runAsUser 0" % name)
        if ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")) is not True:
            found.append("%s runAsNonRoot" % name)
        if ctx.get("procMount", "Default") != "Default":
            found.append("%s procMount" % name)
    return found


def with_operator_init_container(job):
    """The job's pod specs as the operator creates them (init-pytorch on a static job's workers)."""
    pods = {}
    specs = job["spec"]["pytorchReplicaSpecs"]
    for rtype, rspec in specs.items():
        pod = dict(rspec["template"]["spec"])
        if rtype == "Worker" and "Master" in specs:
            pod["initContainers"] = operator_init_containers(job["metadata"]["name"])
        pods[rtype] = pod
    return pods


@pytest.mark.parametrize("overrides", [
    {},
    {"pytorchjob_elastic": True, "pytorchjob_master_replicas": 0, "pytorchjob_worker_replicas": 2},
    {"trainjob_shm_size": "1Gi", "trainjob_pvc_claim_name": "data-claim", "trainjob_security_context": {"fsGroup": 10001}},
], ids=["static", "elastic", "pvc-shm-fsgroup"])
def test_pods_meet_the_restricted_pod_security_standard_by_default(overrides):
    job, _manifest = render(**overrides)
    pods = with_operator_init_container(job)
    for rtype, pod in pods.items():
        assert restricted_violations(pod) == [], rtype
        assert pod["automountServiceAccountToken"] is False
        assert container(job, rtype)["securityContext"] == RESTRICTED_CONTAINER
        expected = dict(RESTRICTED_POD, **overrides.get("trainjob_security_context", {}))
        assert pod["securityContext"] == expected
    if "Master" in pods:
        # the operator's init container runs as the pod's numeric user, dropping every capability
        init = pods["Worker"]["initContainers"][0]
        assert init["name"] == "init-pytorch"
        assert init["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_script_dir_is_mounted_read_only_in_every_pod(tmp_path):
    """trainjob_script_dir: the ConfigMap <job>-script as volume `script`, read-only, files 0444."""
    job, _manifest = render(trainjob_script_dir=str(tmp_path), trainjob_script_mount_path="/code",
                            pytorchjob_args=["--nproc_per_node=1", "/code/train.py"])
    name = job["metadata"]["name"]
    for rtype in job["spec"]["pytorchReplicaSpecs"]:
        pod = pod_spec(job, rtype)
        assert {"name": "script", "configMap": {"name": name + "-script", "defaultMode": 0o444}} in pod["volumes"]
        assert {"name": "script", "mountPath": "/code", "readOnly": True} in container(job, rtype)["volumeMounts"]
        assert restricted_violations(pod) == []
    without, _manifest = render()
    assert all(v["name"] != "script" for rtype in without["spec"]["pytorchReplicaSpecs"]
               for v in pod_spec(without, rtype).get("volumes", []))


def test_restricted_checker_sees_what_the_opt_ins_allow():
    """The checker above is not vacuous: the opt-in settings are violations."""
    job, _manifest = render_static(
        trainjob_run_as_user=0, trainjob_allow_root=True, trainjob_allow_privileged=True,
        trainjob_allow_privilege_escalation=True, trainjob_allow_host_path=True,
        trainjob_container_security_context={"privileged": True},
        trainjob_extra_volumes=[{"name": "host", "hostPath": {"path": "/var/log"}}])
    found = restricted_violations(pod_spec(job, "Master"))
    assert set(found) >= {"volume host", "pod runAsUser 0", "pytorch privileged", "pytorch allowPrivilegeEscalation",
                          "pytorch runAsNonRoot"}, found


def test_user_security_contexts_merge_over_the_restricted_defaults():
    job, _manifest = render(
        trainjob_security_context={"fsGroup": 10001, "seccompProfile": {"type": "Localhost", "localhostProfile": "t.json"}},
        trainjob_container_security_context={"readOnlyRootFilesystem": True, "capabilities": {"add": ["NET_BIND_SERVICE"]}})
    assert pod_spec(job, "Worker")["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001,
        "seccompProfile": {"type": "Localhost", "localhostProfile": "t.json"}}
    assert container(job, "Worker")["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}


@pytest.mark.parametrize("context", [{"privileged": True}, {"capabilities": {"add": ["CAP_SYS_ADMIN"]}}])
def test_privileged_opt_in_renders_what_kubernetes_accepts(context):
    """Kubernetes rejects privileged or CAP_SYS_ADMIN with allowPrivilegeEscalation false: the
    default follows (the preflight then asks for trainjob_allow_privilege_escalation too)."""
    job, _manifest = render_static(trainjob_container_security_context=context)
    assert container(job, "Master")["securityContext"]["allowPrivilegeEscalation"] is True


def test_root_and_token_opt_ins_render():
    job, _manifest = render_static(trainjob_run_as_user=0, trainjob_run_as_group=0, trainjob_allow_root=True,
                                   trainjob_automount_service_account_token=True)
    pod = pod_spec(job, "Master")
    assert pod["securityContext"]["runAsUser"] == 0 and pod["securityContext"]["runAsNonRoot"] is False
    assert pod["automountServiceAccountToken"] is True


def _dockerfile_user():
    """The trainer image's USER with the Dockerfile's ARG defaults substituted."""
    args = {}
    user = None
    for line in open(DOCKERFILE):
        match = re.match(r"^ARG (\w+)=(\S+)\s*$", line)
        if match:
            args[match.group(1)] = match.group(2)
        match = re.match(r"^USER (\S+)\s*$", line)
        if match:
            user = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], match.group(1))
    return user


def test_trainer_image_user_is_numeric_and_is_the_pods_user():
    """runAsNonRoot can only be verified for a numeric USER; the role's defaults match the image."""
    user = _dockerfile_user()
    assert re.match(r"^[0-9]+:[0-9]+$", user), user
    assert user == "10001:10001"
    defaults = role_vars()
    assert user == "%s:%s" % (defaults["trainjob_run_as_user"], defaults["trainjob_run_as_group"])
    text = open(DOCKERFILE).read()
    assert "COPY --chown=root:root . /opt/trainfleet/trainer/" in text
    assert "chmod -R a+rX,go-w /opt/trainfleet" in text  # readable by the trainer's user, whatever the context's modes


def inventory_vars(platform):
    """The variables of inventories/<platform>/group_vars/all, train.yml last (it reads the others),
    with the trainer image the trainer_image step would publish."""
    group_vars = os.path.join(ROOT, "inventories", platform, "group_vars", "all")
    overrides = {}
    for name in sorted(os.listdir(group_vars)):
        if name.endswith(".yml") and name != "train.yml":
            with open(os.path.join(group_vars, name)) as handle:
                overrides.update(yaml.safe_load(handle) or {})
    with open(os.path.join(group_vars, "train.yml")) as handle:
        overrides.update(yaml.safe_load(handle))
    overrides["trainer_image_ref"] = IMAGE
    return overrides


@pytest.mark.parametrize("platform", ["local", "aws"])
def test_inventory_examples_render(platform):
    """The inventories' train.yml examples produce valid jobs (with the rest of the inventory's vars)."""
    overrides = inventory_vars(platform)
    if platform == "local":
        overrides["trainfleet_cluster"] = contract(
            kind="s3_compatible", bucket="trainfleet-local", endpoint_url="http://127.0.0.1:5050",
            pod_endpoint_url="http://172.18.0.1:5050", credentials="secret", credentials_secret="trainfleet-aws-local")
    else:
        aws = contract(bucket="trainfleet-123456789012-us-west-2", region="us-west-2")
        aws["nodes"] = dict(NODES, cpu={"node_selector": {"trainfleet.io/nodegroup": "cpu"}, "tolerations": []})
        overrides["trainfleet_cluster"] = aws
    job, text = render(**overrides)
    for rtype, pod in with_operator_init_container(job).items():
        assert restricted_violations(pod) == [], (platform, rtype)
    env = env_of(job, "Worker")
    bucket = "trainfleet-local" if platform == "local" else "trainfleet-123456789012-us-west-2"
    run = "s3://%s/training/trainfleet-digits" % bucket
    args = container(job, "Worker")["args"]
    assert args[-3:] == ["--output-dir=" + run, "--snapshot-dir=" + run + "/snapshots", "--timeout-s=300"]
    if platform == "local":
        assert env["AWS_ENDPOINT_URL"] == "http://172.18.0.1:5050"
        assert env["AWS_SECRET_ACCESS_KEY"] == {
            "secretKeyRef": {"name": "trainfleet-aws-local", "key": "AWS_SECRET_ACCESS_KEY"}}
        assert "testing" not in text
    else:
        assert "AWS_ENDPOINT_URL" not in env and "AWS_SECRET_ACCESS_KEY" not in env
        assert pod_spec(job, "Worker")["serviceAccountName"] == "trainfleet-trainer"
        # the storage step's claim (inventories/aws/group_vars/all/storage.yml), on the cpu group
        assert pod_spec(job, "Worker")["volumes"][0]["persistentVolumeClaim"]["claimName"] == "trainfleet-data"
        assert pod_spec(job, "Worker")["nodeSelector"] == {"trainfleet.io/nodegroup": "cpu"}
        assert pod_spec(job, "Worker")["securityContext"] == dict(RESTRICTED_POD, fsGroup=10001)


@pytest.mark.parametrize("platform", ["local", "aws"])
def test_inventory_defaults_survive_a_lost_pod_or_node(platform):
    """The job the train step submits by default is elastic (c10d, Workers only) with slack,
    restarts, snapshots, OnFailure and a backoff limit above its pods; pytorchjob_resilience_info
    finds no risk in it. Without an object store the snapshots go to the claim."""
    from ansible_collections.trainfleet.training.plugins.module_utils import resilience as pj  # pylint: disable=import-outside-toplevel

    overrides = inventory_vars(platform)
    job, _text = render(**overrides)
    spec = job["spec"]
    assert list(spec["pytorchReplicaSpecs"]) == ["Worker"]
    assert spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert spec["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"
    assert spec["elasticPolicy"]["rdzvBackend"] == "c10d"
    assert (spec["elasticPolicy"]["minReplicas"], spec["elasticPolicy"]["maxReplicas"]) == (1, 2)
    assert spec["elasticPolicy"]["maxRestarts"] >= 1
    assert spec["runPolicy"]["backoffLimit"] >= 2 * 2
    assert [t["tolerationSeconds"] for t in pod_spec(job, "Worker")["tolerations"]] == [30, 30]
    assert pj.lost_pod_risks(job) == []
    # a platform without an object store: the outputs and the snapshots go to the claim
    overrides["trainfleet_cluster"] = contract(kind="none", bucket="")
    overrides.update(trainjob_pvc_claim_name="shared", trainjob_pvc_mount_path="/shared")
    job, _text = render(**overrides)
    assert container(job, "Worker")["args"][-3:-1] == [
        "--output-dir=/shared/outputs/trainfleet-digits", "--snapshot-dir=/shared/snapshots/trainfleet-digits"]
    assert pj.lost_pod_risks(job) == []


# --------------------------------------------------------------------------- preflight (ansible-playbook)


def _env(tmp_path):
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    env["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + env.get("PATH", "")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_LOCAL_TEMP"] = str(tmp_path / "ansible-tmp")
    return env


def _playbook(args, tmp_path, cases=0):
    """rc and output of ansible-playbook; bounded by PLAYBOOK_TIMEOUT plus CASE_TIMEOUT per batched case."""
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook_bin):
        playbook_bin = "ansible-playbook"
    cmd = [playbook_bin, "-i", "localhost,", "-e", json.dumps({"ansible_python_interpreter": sys.executable})] + args
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, check=False,
                          timeout=PLAYBOOK_TIMEOUT + CASE_TIMEOUT * cases)
    return proc.returncode, proc.stdout + proc.stderr


def _run_role(tmp_path, extra_vars, check=True):
    variables = dict(SHARED)
    variables["trainfleet_cache_dir"] = str(tmp_path / "cache")
    variables["trainjob_image"] = IMAGE
    variables.update(extra_vars)
    args = [os.path.join(FIXTURES, "role.yml"), "-e", json.dumps(variables)]
    if check:
        args.append("--check")
    return _playbook(args, tmp_path)


# A directory of flat files (the MPI variant's ssh configuration) for the trainjob_script_dir cases.
SCRIPT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "trainer", "mpi")
BAD_INPUTS = {
    "name-not-dns-label": ({"trainjob_name": "Bad_Name"}, "trainjob_name"),
    "name-too-long": ({"trainjob_name": "a" * 49}, "trainjob_name"),
    "image-empty": ({"trainjob_image": ""}, "trainjob_image"),
    "image-variant-unknown": ({"trainjob_image_variant": "rocm"}, "trainjob_image_variant"),  # the argument spec's choices
    "image-variant-mpi-for-pytorchjob": ({"trainjob_image_variant": "cuda-mpi"}, 'trainjob_launcher="pytorchjob"'),
    "static-without-master": ({"pytorchjob_elastic": False}, "pytorchjob_master_replicas"),
    "two-masters": ({"pytorchjob_master_replicas": 2}, "pytorchjob_master_replicas"),
    "elastic-with-master": ({"pytorchjob_master_replicas": 1}, "pytorchjob_master_replicas"),
    "elastic-max-below-workers": ({"pytorchjob_elastic": True, "pytorchjob_master_replicas": 0,
                                   "pytorchjob_worker_replicas": 3, "pytorchjob_elastic_max_replicas": 2},
                                  "pytorchjob_elastic_max_replicas"),
    "nproc-zero": ({"pytorchjob_nproc_per_node": 0}, "pytorchjob_nproc_per_node"),
    "memory-not-quantity": ({"trainjob_memory_request": "lots"}, "trainjob_memory_request"),
    "gpus-negative": ({"trainjob_gpus": -1}, "trainjob_gpus"),
    "inline-credentials": ({"trainjob_env": [{"name": "AWS_SECRET_ACCESS_KEY", "value": "inline"}]},
                           "trainjob_aws_credentials_secret"),
    "create-secret-without-keys": ({"trainjob_aws_credentials_secret": "aws", "trainjob_aws_credentials_create": True},
                                   "trainjob_aws_access_key_id"),
    "restart-policy": ({"pytorchjob_restart_policy": "Sometimes"}, "pytorchjob_restart_policy"),
    "clean-pod-policy": ({"pytorchjob_clean_pod_policy": "Some"}, "pytorchjob_clean_pod_policy"),
    "endpoint-not-url": ({"trainjob_aws_endpoint_url": "moto:5050"}, "trainjob_aws_endpoint_url"),
    "bucket-invalid": ({"trainjob_s3_bucket": "Not_A_Bucket"}, "trainjob_s3_bucket"),
    "pvc-mount-relative": ({"trainjob_pvc_claim_name": "fsx", "trainjob_pvc_mount_path": "fsx"},
                           "trainjob_pvc_mount_path"),
    "wait-timeout-zero": ({"trainjob_wait_timeout": 0}, "trainjob_wait_timeout"),
    "progress-timeout-too-small": ({"trainjob_progress_timeout": 5}, "trainjob_progress_timeout 0 (off) or 10..604800 (got 5)"),
    # your own code: refused before anything is created, naming the variable
    "script-dir-missing": ({"trainjob_script_dir": "/nonexistent/trainfleet-code"},
                           'trainjob_script_dir "/nonexistent/trainfleet-code": cannot be read'),
    "script-dir-with-subdirectories": ({"trainjob_script_dir": "/etc"}, 'trainjob_script_dir "/etc": '),
    "script-mount-relative": ({"trainjob_script_dir": SCRIPT_DIR, "trainjob_script_mount_path": "code"},
                              "trainjob_script_mount_path"),
    "script-mount-system": ({"trainjob_script_dir": SCRIPT_DIR, "trainjob_script_mount_path": "/etc/code"},
                            "trainjob_script_mount_path"),
    "script-volume-name-taken": ({"trainjob_extra_volumes": [{"name": "script", "emptyDir": {}}]}, "trainjob_extra_volumes"),
    "replicas-not-int": ({"pytorchjob_worker_replicas": "many"}, "pytorchjob_worker_replicas"),
    "node-lost-seconds-zero": ({"trainjob_node_lost_toleration_seconds": 0}, "trainjob_node_lost_toleration_seconds"),
    "node-lost-seconds-too-long": ({"trainjob_node_lost_toleration_seconds": 3601}, "trainjob_node_lost_toleration_seconds"),
    "node-lost-seconds-not-int": ({"trainjob_node_lost_toleration_seconds": "soon"}, "trainjob_node_lost_toleration_seconds"),
    # pod security: each widening needs its own opt-in, named in the message
    "root-run-as-user": ({"trainjob_run_as_user": 0}, "trainjob_allow_root"),
    "root-pod-run-as-user": ({"trainjob_security_context": {"runAsUser": 0}}, "trainjob_allow_root"),
    "root-pod-run-as-non-root-false": ({"trainjob_security_context": {"runAsNonRoot": False}}, "trainjob_allow_root"),
    "root-container-run-as-user": ({"trainjob_container_security_context": {"runAsUser": 0}}, "trainjob_allow_root"),
    "run-as-user-negative": ({"trainjob_run_as_user": -1}, "trainjob_run_as_user"),
    "privileged": ({"trainjob_container_security_context": {"privileged": True}}, "trainjob_allow_privileged"),
    "capabilities-add": ({"trainjob_container_security_context": {"capabilities": {"add": ["NET_ADMIN"]}}},
                         "trainjob_allow_privileged"),
    "seccomp-unconfined": ({"trainjob_security_context": {"seccompProfile": {"type": "Unconfined"}}},
                           "trainjob_allow_privileged"),
    "proc-mount-unmasked": ({"trainjob_container_security_context": {"procMount": "Unmasked"}}, "trainjob_allow_privileged"),
    "privilege-escalation": ({"trainjob_container_security_context": {"allowPrivilegeEscalation": True}},
                             "trainjob_allow_privilege_escalation"),
    "privileged-implies-escalation": ({"trainjob_container_security_context": {"privileged": True},
                                       "trainjob_allow_privileged": True}, "trainjob_allow_privilege_escalation"),
    "host-path-root": ({"trainjob_extra_volumes": [{"name": "host", "hostPath": {"path": "/"}}]}, "trainjob_allow_host_path"),
    "namespace-kube-system": ({"trainjob_namespace": "kube-system"}, "trainjob_allow_system_namespace"),
    "namespace-kube-node-lease": ({"trainjob_namespace": "kube-node-lease"}, "trainjob_allow_system_namespace"),
    # gang scheduling
    "scheduler-unknown": ({"pytorchjob_scheduler_name": "kube-batch"}, "pytorchjob_scheduler_name"),
    "queue-not-dns-label": ({"pytorchjob_scheduler_name": "volcano", "pytorchjob_queue": "Team_A"}, "pytorchjob_queue"),
    "queue-without-volcano": ({"pytorchjob_queue": "team-a"}, "pytorchjob_queue"),
    "min-available-zero": ({"pytorchjob_scheduler_name": "volcano", "pytorchjob_min_available": 0}, "pytorchjob_min_available"),
    "min-available-above-replicas": ({"pytorchjob_scheduler_name": "volcano", "pytorchjob_worker_replicas": 2,
                                      "pytorchjob_min_available": 3}, "pytorchjob_min_available"),
}
# The same settings with their opt-ins pass the preflight (check mode renders the job).
OPT_IN_INPUTS = {
    "allow-root": {"trainjob_run_as_user": 0, "trainjob_security_context": {"runAsNonRoot": False},
                   "trainjob_allow_root": True},
    "allow-privileged": {"trainjob_container_security_context": {"privileged": True}, "trainjob_allow_privileged": True,
                         "trainjob_allow_privilege_escalation": True},
    "allow-host-path": {"trainjob_extra_volumes": [{"name": "host", "hostPath": {"path": "/var/log"}}],
                        "trainjob_allow_host_path": True},
    "allow-system-namespace": {"trainjob_namespace": "kube-system", "trainjob_allow_system_namespace": True},
    "net-bind-service-needs-no-opt-in": {"trainjob_container_security_context": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}},
    "namespace-default-is-not-a-system-namespace": {"trainjob_namespace": "default"},
    "script-dir": {"trainjob_script_dir": SCRIPT_DIR, "pytorchjob_args": ["--nproc_per_node=1", "/opt/script/install.sh"]},
    "volcano-gang": {"pytorchjob_scheduler_name": "volcano", "pytorchjob_queue": "team-a", "pytorchjob_worker_replicas": 3,
                     "pytorchjob_min_available": 3},
}


@pytest.fixture(scope="module")
def bad_input_outcomes(tmp_path_factory):
    """One ansible-playbook run, one play per bad input: the role inside block/rescue; each play
    prints CASE <id>: <the failure message> (or PASSED)."""
    tmp_path = tmp_path_factory.mktemp("pytorchjob-preflight")
    shared = dict(SHARED, trainfleet_cache_dir=str(tmp_path / "cache"), trainjob_image=IMAGE)
    plays = []
    cases = dict((case_id, case_vars) for case_id, (case_vars, _message) in BAD_INPUTS.items())
    cases.update(OPT_IN_INPUTS)
    for case_id, case_vars in cases.items():
        plays.append({
            "name": "case %s" % case_id,
            "hosts": "localhost",
            "gather_facts": False,
            "connection": "local",
            "vars": shared,
            "tasks": [{
                "block": [
                    {"ansible.builtin.include_role": {"name": "trainfleet.training.trainjob"}, "vars": case_vars},
                    {"ansible.builtin.set_fact": {"_outcome": "PASSED"}},
                ],
                "rescue": [{"ansible.builtin.set_fact": {"_outcome": "{{ ansible_failed_result.msg }}"}}],
            }, {
                "ansible.builtin.debug": {"msg": "CASE %s: {{ _outcome }}" % case_id},
            }],
        })
    playbook = tmp_path / "bad_inputs.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    rc, out = _playbook([str(playbook), "--check"], tmp_path, cases=len(cases))
    assert rc == 0, out
    outcomes = {}
    for match in re.finditer(r'"msg": "CASE ([a-z0-9-]+): (.*)"\n', out):
        outcomes[match.group(1)] = json.loads('"%s"' % match.group(2))  # the debug output is JSON-escaped
    assert set(outcomes) == set(cases), out
    return outcomes, tmp_path


def test_preflight_quotes_the_bad_node_lost_toleration_seconds(bad_input_outcomes):
    outcomes, _tmp_path = bad_input_outcomes
    assert "got 3601" in outcomes["node-lost-seconds-too-long"]
    assert "got 0" in outcomes["node-lost-seconds-zero"]
    assert "'soon'" in outcomes["node-lost-seconds-not-int"]  # the argument spec's own check quotes it


@pytest.mark.parametrize("case_id", sorted(OPT_IN_INPUTS))
def test_preflight_accepts_each_widening_with_its_opt_in(bad_input_outcomes, case_id):
    outcomes, _tmp_path = bad_input_outcomes
    assert outcomes[case_id] == "PASSED", outcomes[case_id]


def test_preflight_quotes_the_refused_security_settings(bad_input_outcomes):
    outcomes, _tmp_path = bad_input_outcomes
    assert 'trainjob_security_context {"runAsUser": 0}' in outcomes["root-pod-run-as-user"]
    assert 'trainjob_run_as_user 0' in outcomes["root-run-as-user"]
    assert '{"privileged": true}' in outcomes["privileged"]
    assert '"NET_ADMIN"' in outcomes["capabilities-add"]
    assert '[{"path": "/"}]' in outcomes["host-path-root"]
    assert '"kube-system"' in outcomes["namespace-kube-system"]


def test_preflight_quotes_the_refused_gang_settings(bad_input_outcomes):
    outcomes, _tmp_path = bad_input_outcomes
    assert '"Team_A"' in outcomes["queue-not-dns-label"]
    assert "got 3" in outcomes["min-available-above-replicas"] and "2 replicas" in outcomes["min-available-above-replicas"]
    assert "kube-batch" in outcomes["scheduler-unknown"]


@pytest.mark.parametrize("case_id", sorted(BAD_INPUTS))
def test_preflight_rejects_bad_input(bad_input_outcomes, case_id):
    outcomes, tmp_path = bad_input_outcomes
    message = outcomes[case_id]
    assert message != "PASSED", case_id
    assert BAD_INPUTS[case_id][1] in message, message
    # nothing was rendered or written
    assert not (tmp_path / "cache" / "manifests").exists()


def test_check_mode_renders_without_cluster_and_writes_nothing(tmp_path):
    rc, out = _run_role(tmp_path, {"pytorchjob_elastic": True, "pytorchjob_master_replicas": 0,
                                   "pytorchjob_worker_replicas": 2})
    assert rc == 0, out
    assert "torchrun --nproc_per_node=1 -m trainer.train" in out
    assert "elastic c10d rendezvous" in out
    assert "rendered and validated only" in out
    assert not (tmp_path / "cache" / "manifests").exists()


def test_missing_kubeconfig_fails_outside_check_mode(tmp_path):
    rc, out = _run_role(tmp_path, {}, check=False)
    assert rc != 0, out
    assert "trainjob_kubeconfig=" in out and "does not exist" in out
    assert not (tmp_path / "cache" / "manifests").exists()


# --------------------------------------------------------------------------- report (canned module results)

TRAINER_RESULT = {
    "final_accuracy": 0.9611, "final_loss": 0.1234, "epochs": 5,
    "model_uri": "s3://trainfleet-local/training/trainfleet-digits/model.pt",
    "metrics_uri": "s3://trainfleet-local/training/trainfleet-digits/metrics.jsonl",
    "plot_uri": "s3://trainfleet-local/training/trainfleet-digits/plot.png",
    "world_size": 2, "duration_s": 31.5,
}


def _pod(name, rtype, index, phase="Succeeded", restarts=0, reason="Completed", exit_code=0, container="pytorch"):
    return {"name": name, "replica_type": rtype, "replica_index": index, "phase": phase, "restarts": restarts,
            "reason": reason, "exit_code": exit_code, "container": container, "node": "trainfleet-worker",
            "containers": [{"name": container, "state": "terminated"}]}


def _job(phase, failure=None, restarts=0, pods=None):
    return {
        "name": "trainfleet-digits", "namespace": "trainfleet", "phase": phase,
        "terminal": phase in ("Succeeded", "Failed"), "conditions": [],
        "replica_statuses": {"Master": {"replicas": 1, "active": 0, "succeeded": 1, "failed": 0}},
        "start_time": "2026-01-01T00:00:00Z", "completion_time": "2026-01-01T00:00:42Z",
        "duration_seconds": 42.0, "elapsed_seconds": 42.0, "restarts": restarts,
        "pods": pods if pods is not None else [
            _pod("trainfleet-digits-master-0", "master", 0),
            _pod("trainfleet-digits-worker-0", "worker", 0),
        ],
        "failure": failure,
    }


def _summary(out):
    """The lines of the summary task's msg (a list, printed as JSON strings by the callback)."""
    start = out.index("TASK [trainfleet.training.trainjob : Summary of the finished run]")
    block = out[start:out.index("\nTASK [", start + 1) if "\nTASK [" in out[start + 1:] else len(out)]
    return [json.loads(m.group(1)) for m in re.finditer(r'^\s+("(?:[^"\\]|\\.)*"),?$', block, re.M)]


def _report(tmp_path, status, rank0=None):
    result_file = tmp_path / "outcome.json"
    extra = {
        "_trainjob_decision": "no job named trainfleet-digits existed, submitted it",
        "trainjob_name": "trainfleet-digits",
        "trainjob_namespace": "trainfleet",
        "__trainjob_status": status,
        "__trainjob_rank0": rank0 if rank0 is not None else {"skipped": True, "changed": False},
        "result_file": str(result_file),
    }
    extra_file = tmp_path / "extra.json"
    extra_file.write_text(json.dumps(extra))
    rc, out = _playbook([os.path.join(FIXTURES, "report.yml"), "-e", "@%s" % extra_file], tmp_path)
    assert rc == 0, out
    return json.loads(result_file.read_text()), out


def test_report_success_uses_the_logs_module_result(tmp_path):
    status = {"changed": False, "exists": True, "job": _job("Succeeded", restarts=1), "waited_seconds": 40.0}
    rank0 = {"changed": False, "pod": "trainfleet-digits-worker-0", "rank": 0, "method": "trainer-log",
             "log": "...", "truncated": False, "trainer_result": TRAINER_RESULT}
    outcome, out = _report(tmp_path, status, rank0)
    assert outcome["failure"] is None, out
    result = outcome["result"]
    assert result["phase"] == "Succeeded"
    assert result["duration_seconds"] == 42.0
    assert result["restarts"] == 1
    assert result["final_accuracy"] == 0.9611 and result["final_loss"] == 0.1234
    assert result["model_uri"] == TRAINER_RESULT["model_uri"]
    assert result["rank0_pod"] == "trainfleet-digits-worker-0" and result["rank0_method"] == "trainer-log"
    assert "containers" not in result["pods"][0]
    assert "model: s3://trainfleet-local/training/trainfleet-digits/model.pt" in out
    assert "rank 0: pod trainfleet-digits-worker-0 (decided by trainer-log)" in out


def test_report_prints_restarts_by_replica_their_reasons_and_the_resume(tmp_path):
    job = _job("Succeeded", restarts=3)
    job["restarts_by_replica"] = {"Master": {"restarts": 2, "failed": 0, "pods": {"trainfleet-digits-master-0": 2}},
                                  "Worker": {"restarts": 1, "failed": 1, "pods": {"trainfleet-digits-worker-0": 1}}}
    job["restart_reasons"] = [
        {"pod": "trainfleet-digits-worker-0", "replica_type": "worker", "replica_index": 0, "node": "trainfleet-worker",
         "container": "pytorch", "init": False, "restarts": 1, "run": "previous", "reason": "Error", "exit_code": 137,
         "signal": 9, "signal_name": "SIGKILL", "message": None, "started_at": "2026-01-01T00:00:01Z",
         "finished_at": "2026-01-01T00:00:20Z"},
        {"pod": "trainfleet-digits-master-0", "replica_type": "master", "replica_index": 0, "node": "trainfleet-worker2",
         "container": "pytorch", "init": False, "restarts": 2, "run": "previous", "reason": "Error", "exit_code": 1,
         "signal": None, "signal_name": None, "message": "RuntimeError: Connection reset by peer\nmore",
         "started_at": "2026-01-01T00:00:02Z", "finished_at": "2026-01-01T00:00:21Z"},
    ]
    status = {"changed": False, "exists": True, "job": job}
    rank0 = {"changed": False, "pod": "trainfleet-digits-master-0", "method": "trainer-log", "log": "...",
             "trainer_result": dict(TRAINER_RESULT, resumed_from_epoch=3, restarts=0)}
    outcome, out = _report(tmp_path, status, rank0)
    assert outcome["failure"] is None, out
    result = outcome["result"]
    assert result["restarts_by_replica"]["Master"]["restarts"] == 2 and len(result["restart_reasons"]) == 2
    assert result["resumed_from_epoch"] == 3 and result["trainer_restarts"] == 0
    lines = _summary(out)
    assert "resumed from snapshot epoch 3, torchrun restarts on rank 0's node 0" in lines
    # one record per line (the restart records once ran together on one line)
    assert "restarts by replica: Master 2, Worker 1 (1 failed)" in lines
    assert ("restart: pod trainfleet-digits-worker-0 (worker-0) on node trainfleet-worker, container pytorch: Error, exit code 137 "
            "(SIGKILL), ended 2026-01-01T00:00:20Z (previous run; 1 restart(s))") in lines
    assert ("restart: pod trainfleet-digits-master-0 (master-0) on node trainfleet-worker2, container pytorch: Error, exit code 1, "
            "ended 2026-01-01T00:00:21Z (previous run; 2 restart(s)): RuntimeError: Connection reset by peer more") in lines


def test_report_without_restart_data_still_summarises(tmp_path):
    """A job dict from before restarts_by_replica/restart_reasons, a result line without resume fields."""
    status = {"changed": False, "exists": True, "job": _job("Succeeded")}
    rank0 = {"changed": False, "pod": "trainfleet-digits-master-0", "method": "trainer-log", "log": "...",
             "trainer_result": TRAINER_RESULT}
    outcome, out = _report(tmp_path, status, rank0)
    assert outcome["failure"] is None, out
    assert outcome["result"]["resumed_from_epoch"] is None and outcome["result"]["restart_reasons"] == []
    lines = _summary(out)
    assert not [line for line in lines if "resumed from" in line or "restart:" in line or "?" in line], lines
    assert "result: final accuracy 0.9611, final loss 0.1234, epochs 5, world size 2" in lines


def test_report_without_a_parsed_result_says_so_and_does_not_parse_the_log(tmp_path):
    """The report uses what trainjob_logs parsed (trainer_result); it no longer reads the log itself."""
    status = {"changed": False, "exists": True, "job": _job("Succeeded")}
    log = "[rank0]: trainfleet-result: " + json.dumps(TRAINER_RESULT)
    rank0 = {"changed": False, "pod": "trainfleet-digits-master-0", "method": "fallback-master-0", "log": log,
             "trainer_result": None}
    outcome, out = _report(tmp_path, status, rank0)
    assert outcome["failure"] is None, out
    assert outcome["result"]["final_accuracy"] is None and outcome["result"]["trainer"] == {}
    lines = _summary(out)
    # the log was not truncated: the script simply prints no result line (a user's own script)
    own = [line for line in lines if not line.startswith("  ")]  # the summary's own lines, not the log's
    assert not [line for line in own if "WARNING" in line or "accuracy" in line or "model:" in line or "?" in line], own
    assert any(line.startswith("result: rank 0 printed no trainfleet-result line") for line in lines), lines
    assert "rank 0's last 1 line(s):" in lines
    assert any(line.startswith("rank 0: pod trainfleet-digits-master-0, a guess (fallback-master-0)") for line in lines), lines


def test_report_warns_when_the_result_line_may_have_been_cut_off(tmp_path):
    status = {"changed": False, "exists": True, "job": _job("Succeeded")}
    rank0 = {"changed": False, "pod": "trainfleet-digits-master-0", "method": "trainer-log", "log": "epoch 9\n",
             "truncated": True, "trainer_result": None}
    outcome, out = _report(tmp_path, status, rank0)
    assert outcome["failure"] is None, out
    assert ("WARNING: no trainfleet-result line in the last 200 lines of rank 0's log (raise trainjob_log_tail_lines "
            "if the script prints one)") in _summary(out)


def test_report_prints_the_startup_timeline(tmp_path):
    job = _job("Succeeded")
    job["timeline"] = {"steps": [], "rank0_pod": "trainfleet-digits-worker-1", "errors": [], "lines": [
        "         submitted            2026-01-01T00:00:00Z",
        "+42.0s   images pulled        2026-01-01T00:00:42Z (pull 41.3s on trainfleet-worker)",
        "+5.0s    first epoch done     2026-01-01T00:00:47Z"]}
    rank0 = {"changed": False, "pod": "trainfleet-digits-worker-1", "method": "trainer-log", "log": "...",
             "trainer_result": TRAINER_RESULT}
    outcome, out = _report(tmp_path, {"changed": False, "exists": True, "job": job}, rank0)
    assert outcome["failure"] is None, out
    assert outcome["result"]["timeline"]["rank0_pod"] == "trainfleet-digits-worker-1"
    assert "start-up timeline (time since the step before, step, when):" in out
    assert "+42.0s   images pulled        2026-01-01T00:00:42Z (pull 41.3s on trainfleet-worker)" in out


def test_report_failed_job_names_reason_pod_log_and_events(tmp_path):
    failure = {
        "reason": "PyTorchJobFailed", "message": "PyTorchJob trainfleet-digits is failed because 1 Master replica(s) failed.",
        "pod": "trainfleet-digits-master-0", "container": "pytorch", "container_reason": "Error", "exit_code": 2,
        "log_tail": ["Traceback (most recent call last):", "trainer.config.ConfigError: argument --epochs: expected a positive integer, got 0"],
        "events": [{"time": "2026-01-01T00:00:10Z", "type": "Warning", "reason": "BackOff",
                    "object": "Pod/trainfleet-digits-master-0", "message": "Back-off restarting failed container", "count": 3}],
    }
    status = {"failed": True, "changed": False, "msg": "PyTorchJob trainfleet/trainfleet-digits Failed: ...", "exists": True,
              "job": _job("Failed", failure=failure, restarts=2,
                          pods=[_pod("trainfleet-digits-master-0", "master", 0, phase="Failed", restarts=2, reason="Error", exit_code=2)])}
    outcome, out = _report(tmp_path, status)
    assert outcome["result"]["phase"] == "Failed"
    message = outcome["failure"]
    assert "PyTorchJobFailed" in message and "trainfleet-digits-master-0" in message and "exit code 2" in message
    assert "trainjob_rerun=true" in message
    assert "Timed out" not in message
    # the summary printed the failing container's log tail and the events
    assert "argument --epochs: expected a positive integer, got 0" in out
    assert "Warning BackOff Pod/trainfleet-digits-master-0 Back-off restarting failed container" in out


def test_report_pod_that_cannot_start_is_a_failure(tmp_path):
    failure = {"reason": None, "message": "Back-off pulling image", "pod": "trainfleet-digits-worker-0",
               "container": "pytorch", "container_reason": "ImagePullBackOff", "exit_code": None,
               "log_tail": [], "events": []}
    status = {"failed": True, "changed": False, "msg": "PyTorchJob trainfleet/trainfleet-digits cannot start: ...",
              "exists": True, "job": _job("Created", failure=failure)}
    outcome, out = _report(tmp_path, status)
    assert outcome["result"]["phase"] == "Failed"
    assert outcome["result"]["job_phase"] == "Created"
    assert "ImagePullBackOff" in outcome["failure"], out


def test_report_timeout_says_the_job_did_not_finish(tmp_path):
    status = {"failed": True, "changed": False, "exists": True,
              "msg": "Timed out after 5s waiting for PyTorchJob trainfleet/trainfleet-digits to reach terminal: phase is Running",
              "job": _job("Running")}
    outcome, out = _report(tmp_path, status)
    assert outcome["result"]["phase"] == "Running"
    assert "did not finish (phase Running)" in outcome["failure"], out


def render_trainjob_template(template, **overrides):
    """The one document roles/trainjob/templates/<template> renders."""
    text = render_text(role_vars(**overrides), os.path.join(TRAINJOB, "templates", template))
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    assert len(docs) == 1, text
    return docs[0]


def render_prepull(**overrides):
    return render_trainjob_template("prepull.yaml.j2", **overrides)


def test_prepull_daemonset_runs_the_jobs_image_where_the_jobs_pods_may_run():
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    ds = render_prepull(trainjob_name="digits", trainjob_node_selector={"trainfleet.io/node": "gpu"},
                        trainjob_tolerations=tolerations, trainjob_image_pull_secrets=["regcred"])
    assert ds["kind"] == "DaemonSet" and ds["metadata"]["name"] == "digits-prepull"
    assert ds["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trainfleet"
    spec = ds["spec"]["template"]["spec"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert spec["nodeSelector"] == {"trainfleet.io/node": "gpu"} and spec["tolerations"] == tolerations
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    (box,) = spec["containers"]
    assert box["image"] == IMAGE and box["command"] == ["sleep", "infinity"]
    # restricted like the job's pods: non-root, no token, nothing added
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["automountServiceAccountToken"] is False
    assert box["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert box["securityContext"]["allowPrivilegeEscalation"] is False


def test_prepull_template_quotes_every_value():
    evil = 'x"\n  hostNetwork: true\n- \'y\': {z}'
    ds = render_prepull(trainjob_image=evil, trainjob_namespace=evil)
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == evil
    assert ds["metadata"]["namespace"] == evil
    assert "hostNetwork" not in ds["spec"]["template"]["spec"]


def render_evaluate(**overrides):
    return render_trainjob_template("evaluate.yaml.j2", **overrides)


def test_evaluate_job_reads_the_runs_model_with_the_training_pods_settings():
    job = render_evaluate(trainjob_name="digits", trainjob_pvc_claim_name="shared", trainjob_script_dir="/src",
                          trainjob_aws_credentials_secret="s3-credentials",
                          trainjob_image_pull_secrets=["regcred"], trainjob_service_account="trainer")
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job" and job["metadata"]["name"] == "digits-evaluate"
    assert job["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trainfleet"
    assert job["metadata"]["labels"]["app.kubernetes.io/component"] == "evaluate"
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 900
    spec = job["spec"]["template"]["spec"]
    (box,) = spec["containers"]
    model = job["metadata"]["annotations"]["trainfleet.io/model"]
    assert model.startswith("s3://") and model.endswith("/digits/model.pt")
    assert box["command"] == ["python3", "-m", "trainer.evaluate", model] and box["image"] == IMAGE
    env = {e["name"]: e for e in box["env"]}
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"]["key"] == "AWS_ACCESS_KEY_ID"
    assert "value" not in env["AWS_SECRET_ACCESS_KEY"]
    # the claim (a dir: dataset) but not the code's ConfigMap, which may be gone after the run
    assert [v["name"] for v in spec["volumes"]] == ["data"] and [m["name"] for m in box["volumeMounts"]] == ["data"]
    assert spec["restartPolicy"] == "Never" and spec["serviceAccountName"] == "trainer"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["automountServiceAccountToken"] is False
    assert box["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert set(box["resources"]["requests"]) == {"cpu", "memory"} and "nvidia.com/gpu" not in json.dumps(box["resources"])


def test_evaluate_job_reads_a_claim_output_dir_and_quotes_every_value():
    job = render_evaluate(trainjob_trainer_output_dir="/data/outputs/run1/")
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "/data/outputs/run1/model.pt"
    evil = 'x"\n  hostNetwork: true\n- \'y\': {z}'
    job = render_evaluate(trainjob_image=evil, trainjob_namespace=evil)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == evil and job["metadata"]["namespace"] == evil
    assert "hostNetwork" not in job["spec"]["template"]["spec"]
