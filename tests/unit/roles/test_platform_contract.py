# -*- coding: utf-8 -*-
"""The platform layer's contract (roles/platform): what each inventory publishes as trainfleet_cluster.

Each case runs the role's `contract` step with ansible-playbook against an inventory (no cluster,
no AWS endpoint is contacted: the contract is computed from variables) and reads the published
fact back. Also: the AKS example of docs/examples/existing renders into a valid contract and job,
bad platform inputs are refused naming the variable, and no platform-neutral role or playbook
tests trainfleet_platform.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TIMEOUT = 300

PLAY = """
- hosts: trainfleet
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: trainfleet.training.platform
      vars:
        platform_step: contract
    - ansible.builtin.copy:
        content: "{{ trainfleet_cluster | to_json }}"
        dest: "{{ contract_out }}"
        mode: "0600"
"""


def publish(tmp_path, inventory, *extra):
    """Run the contract step on an inventory; return (returncode, contract or None, output)."""
    play = tmp_path / "contract.yml"
    play.write_text(PLAY)
    out = tmp_path / "contract.json"
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), TRAINFLEET_CACHE=str(tmp_path / "cache"),
               DOCKER_HOST="unix://%s" % (tmp_path / "no-docker.sock"))
    argv = ["ansible-playbook", "-i", os.path.join(ROOT, "inventories", inventory), str(play),
            "-e", "contract_out=%s" % out]
    for item in extra:
        argv += ["-e", item]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    contract = json.loads(out.read_text()) if out.exists() else None
    return proc.returncode, contract, proc.stdout + proc.stderr


def test_local_contract(tmp_path):
    rc, contract, output = publish(tmp_path, "local")
    assert rc == 0, output[-3000:]
    assert contract["platform"] == "local" and contract["created_by_trainfleet"] is True
    assert contract["kubeconfig"] == str(tmp_path / "cache" / "kubeconfig-trainfleet")
    assert contract["registry"]["trainer_repository"] == "localhost:5001/trainfleet/trainer"
    assert contract["registry"]["pull"] == "mirror" and contract["registry"]["base_image_local"] is True
    store = contract["object_store"]
    assert store["kind"] == "s3_compatible" and store["bucket"] == "trainfleet-local"
    assert store["endpoint_url"] == "http://127.0.0.1:5050"
    # no Docker engine reachable: the kind network's gateway is unknown, so is the pods' endpoint
    assert store["pod_endpoint_url"] == ""
    assert store["credentials"] == "secret" and store["credentials_secret"] == "trainfleet-aws-local"
    assert contract["storage"]["backends"] == ["hostpath"]
    assert contract["operator"] == {"install": True, "image": "", "init_image": "", "manifests": "go_module"}
    assert contract["aws"]["account"] is True


def test_local_contract_reads_the_init_image_the_cluster_step_built(tmp_path):
    ref = tmp_path / "cache" / "pytorch-init" / "image-ref"
    ref.parent.mkdir(parents=True)
    ref.write_text("trainfleet/pytorch-init:1.35.0-2-r4\n")
    rc, contract, output = publish(tmp_path, "local")
    assert rc == 0, output[-3000:]
    assert contract["operator"]["init_image"] == "trainfleet/pytorch-init:1.35.0-2-r4"


def test_aws_contract(tmp_path):
    rc, contract, output = publish(tmp_path, "aws")
    assert rc == 0, output[-3000:]
    assert contract["platform"] == "aws" and contract["created_by_trainfleet"] is True
    # the ECR URI is known once the registry step ran (it publishes the contract again)
    assert contract["registry"]["trainer_repository"] == "" and contract["registry"]["login"] == "ecr"
    assert contract["registry"]["base_image_local"] is False
    assert contract["object_store"]["kind"] == "s3" and contract["object_store"]["credentials"] == "pod_identity"
    assert contract["object_store"]["pod_endpoint_url"] == ""
    assert contract["storage"]["backends"] == ["fsx", "efs"]
    assert contract["nodes"]["gpu"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert contract["operator"]["manifests"] == "release"

    uri = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainfleet/trainer"
    rc, contract, output = publish(tmp_path, "aws", "ecr_repository_uri=" + uri)
    assert rc == 0, output[-3000:]
    assert contract["registry"]["trainer_repository"] == uri
    assert contract["registry"]["prefix"] == "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainfleet"


def test_existing_contract(tmp_path):
    rc, contract, output = publish(tmp_path, "existing")
    assert rc == 0, output[-3000:]
    assert contract["platform"] == "existing" and contract["created_by_trainfleet"] is False
    assert contract["registry"]["trainer_repository"] == "registry.example.com/trainfleet/trainer"
    assert contract["object_store"] == {"kind": "none", "bucket": "", "region": "us-east-1", "endpoint_url": "",
                                        "pod_endpoint_url": "", "credentials": "none", "credentials_secret": ""}
    assert contract["storage"] == {"backends": ["class"], "class_name": ""}
    assert contract["aws"]["account"] is False
    assert contract["operator"]["manifests"] == "release"


def test_aks_example_renders_a_gpu_contract(tmp_path):
    rc, contract, output = publish(tmp_path, "existing", "@" + os.path.join(ROOT, "docs", "examples", "existing", "aks.yml"))
    assert rc == 0, output[-3000:]
    assert contract["registry"]["trainer_repository"] == "trainfleetacr.azurecr.io/trainfleet/trainer"
    assert contract["registry"]["pull"] == "node" and contract["registry"]["pull_secret"] == ""
    assert contract["storage"]["class_name"] == "azurefile-csi"
    assert contract["nodes"]["gpu"] == {
        "node_selector": {"kubernetes.azure.com/agentpool": "gpupool"},
        "tolerations": [{"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]}


def test_aks_example_renders_a_gpu_job():
    """The AKS example's job lands on the GPU pool, tolerating its taint, with one GPU per pod."""
    from tests.unit.roles.test_pytorchjob_template import contract, pod_spec, render
    import yaml
    with open(os.path.join(ROOT, "docs", "examples", "existing", "aks.yml")) as handle:
        aks = yaml.safe_load(handle)
    cluster = contract(kind="s3")
    cluster["nodes"] = aks["platform_existing_nodes"]
    variables = {k: v for k, v in aks.items() if k.startswith(("trainjob_", "pytorchjob_"))}
    job, _text = render(trainfleet_cluster=cluster, trainjob_image="trainfleetacr.azurecr.io/trainfleet/trainer:t", **variables)
    spec = pod_spec(job, "Worker")
    assert spec["nodeSelector"] == {"kubernetes.azure.com/agentpool": "gpupool"}
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1


@pytest.mark.parametrize("inventory, variable, value", [
    ("local", "trainfleet_platform", "gke"),
    ("existing", "platform_existing_registry_prefix", "Registry.example.com/x"),
    ("existing", "platform_existing_registry_prefix", "registry.example.com/x\n"),
    ("existing", "platform_existing_kubeconfig", "relative/kubeconfig"),
    ("existing", "platform_existing_object_store", "ftp"),
    ("existing", "platform_existing_registry_pull", "magic"),
    ("existing", "platform_existing_storage_class", "Not_A_Name"),
])
def test_bad_platform_input_is_refused(tmp_path, inventory, variable, value):
    vars_file = tmp_path / "bad.json"
    vars_file.write_text(json.dumps({variable: value}))
    rc, contract, output = publish(tmp_path, inventory, "@%s" % vars_file)
    assert rc != 0 and contract is None
    assert variable in output or variable.replace("platform_existing_", "") in output, output[-2000:]


NEUTRAL = ["iam", "s3", "device_plugins", "training_operator", "storage", "trainer_image", "dataset", "trainjob", "pytorchjob",
           "mpijob", "torchx_job", "tensorboard", "teardown", "mpi_operator", "volcano"]


@pytest.mark.parametrize("role", NEUTRAL)
def test_no_platform_branch_in_neutral_roles(role):
    """The platform-neutral roles read the contract, never trainfleet_platform."""
    hits = []
    for base, _dirs, files in os.walk(os.path.join(ROOT, "roles", role)):
        for name in files:
            path = os.path.join(base, name)
            with open(path, errors="replace") as handle:
                for number, line in enumerate(handle, 1):
                    if re.search(r"trainfleet_platform|_platform\s*==|platform\s*==\s*'(local|aws|existing)'", line):
                        hits.append("%s:%d: %s" % (os.path.relpath(path, ROOT), number, line.strip()))
    assert not hits, "\n".join(hits)


def test_no_platform_branch_in_playbooks():
    hits = []
    for name in sorted(os.listdir(os.path.join(ROOT, "playbooks"))) + ["../site.yml"]:
        path = os.path.join(ROOT, "playbooks", name)
        if name.endswith(".yml"):
            with open(path) as handle:
                hits += ["%s: %s" % (name, line.strip()) for line in handle if "trainfleet_platform" in line]
    assert not hits, "\n".join(hits)


def test_local_etcd_image_is_the_one_kind_images_builds():
    """The local contract's etcd image (an etcd rendezvous) is the etcd the cluster step builds into every node."""
    with open(os.path.join(ROOT, "roles", "kind_images", "defaults", "main.yml")) as handle:
        kind_images = yaml.safe_load(handle)
    with open(os.path.join(ROOT, "roles", "platform", "defaults", "main.yml")) as handle:
        platform = yaml.safe_load(handle)
    tag = kind_images["kind_images_etcd_image_tag"]
    assert platform["platform_local_etcd_image"].endswith(":{{ kind_images_etcd_image_tag | default('%s') }}" % tag)
