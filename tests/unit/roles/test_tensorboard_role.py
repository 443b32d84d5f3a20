# -*- coding: utf-8 -*-
"""Role tensorboard (the tensorboard step): manifests, preflight, check mode, image and pins.

The role runs with ansible-playbook against localhost, no cluster and no Docker engine (a given
tensorboard_image skips the build): one run holds every render and bad-input case, each its own
play with the role inside block/rescue; the rendered manifests are read back from the files the
role writes for review. Check mode against a kubeconfig that does not exist and against an API
that never answers renders, validates and says why nothing is applied; a real run there fails
naming the reason, with nothing created.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
import yaml

from tests.support.net import silent_listener

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "tensorboard")
TIMEOUT = 300
IMAGE = "localhost:5001/trainfleet/trainer:tensorboard-2.21.0-0123456789ab"
NODES = {kind: {"node_selector": {}, "tolerations": []} for kind in ("cpu", "gpu", "neuron")}


def contract(kubeconfig, **object_store):
    store = {"kind": "s3_compatible", "bucket": "trainfleet-local", "region": "us-east-1",
             "endpoint_url": "http://127.0.0.1:5050", "pod_endpoint_url": "http://172.18.0.1:5050",
             "credentials": "secret", "credentials_secret": "trainfleet-aws-local"}
    store.update(object_store)
    return {
        "platform": "local", "created_by_trainfleet": True, "kubeconfig": kubeconfig, "context": "",
        "registry": {"prefix": "localhost:5001/trainfleet", "trainer_repository": "localhost:5001/trainfleet/trainer",
                     "login": "none", "pull": "mirror", "pull_secret": "", "base_image": "trainfleet/debian-base:bookworm",
                     "base_image_local": True},
        "object_store": store,
        "storage": {"backends": ["hostpath"], "class_name": ""},
        "nodes": NODES,
        "rendezvous": {"etcd_image": "example.test/etcd:3.5.16-0"},
        "launchers": {"mpi_operator": False, "volcano": False, "images": "release"},
        "operator": {"install": True, "image": "", "init_image": "", "manifests": "go_module"},
        "aws": {"account": True, "region": "us-east-1", "endpoint_url": "http://127.0.0.1:5050"},
    }


def shared(tmp_path, **object_store):
    return {"trainfleet_name": "trainfleet", "trainfleet_cache_dir": str(tmp_path / "cache"),
            "trainfleet_cluster": contract(str(tmp_path / "no-kubeconfig"), **object_store),
            "tensorboard_image": IMAGE, "ansible_python_interpreter": sys.executable}


def playbook(args, tmp_path, timeout=TIMEOUT):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), DOCKER_HOST="unix://%s" % (tmp_path / "no-docker.sock"))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env = {k: v for k, v in env.items() if not k.startswith(("AWS_", "K8S_AUTH_")) and k != "KUBECONFIG"}
    started = time.monotonic()
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,"] + args,
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - started


def run_role(tmp_path, extra, check):
    play = [{"name": "tensorboard", "hosts": "localhost", "gather_facts": False, "connection": "local",
             "roles": [{"role": "trainfleet.training.tensorboard"}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    variables = shared(tmp_path)
    variables.update(extra)
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    args = [str(tmp_path / "play.yml"), "-e", "@%s" % (tmp_path / "vars.json")] + (["--check"] if check else [])
    return playbook(args, tmp_path)


# Cases that render: id -> (variables, object store of the contract).
RENDER = {
    "default-s3-every-run": ({}, {}),
    "one-run": ({"tensorboard_run": "trainfleet-digits"}, {}),
    "aws-pod-identity": ({"tensorboard_service_account": "trainfleet-trainer", "tensorboard_s3_endpoint_url": "",
                          "tensorboard_aws_credentials_secret": "", "tensorboard_aws_region": "us-west-2"},
                         {"kind": "s3", "bucket": "trainfleet-data", "credentials_secret": ""}),
    "claim-no-object-store": ({"tensorboard_pvc_claim_name": "trainfleet-data"}, {"kind": "none", "bucket": ""}),
    "internal-lb": ({"tensorboard_internal_load_balancer": True,
                     "tensorboard_load_balancer_source_ranges": ["10.42.0.0/16", "192.168.10.0/24"]}, {}),
    "explicit-logdir-and-labels": ({"tensorboard_logdir": "s3://other-bucket/experiments/2026", "tensorboard_labels": {"team": "ml"},
                                    "tensorboard_extra_args": ["--samples_per_plugin=scalars=1000"]}, {}),
}
INJECT = "x\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: injected}"
# Refused in preflight: id -> (variables, the variable the message names, the quoted value).
BAD = {
    "name-not-dns": ({"tensorboard_name": "Tensor_Board"}, "tensorboard_name", '"Tensor_Board"'),
    "namespace-injection": ({"tensorboard_namespace": INJECT}, "tensorboard_namespace", json.dumps(INJECT)),
    "namespace-kube-system": ({"tensorboard_namespace": "kube-system"}, "tensorboard_namespace", '"kube-system"'),
    "labels-replace-selector": ({"tensorboard_labels": {"app.kubernetes.io/name": "x"}}, "tensorboard_labels", '"x"'),
    "run-traversal": ({"tensorboard_run": "../other"}, "tensorboard_run", '"../other"'),
    "prefix-traversal": ({"tensorboard_s3_prefix": "training/../secrets"}, "tensorboard_s3_prefix", '"training/../secrets"'),
    "logdir-whole-bucket": ({"tensorboard_logdir": "s3://trainfleet-local"}, "tensorboard_logdir", '"s3://trainfleet-local"'),
    "logdir-newline": ({"tensorboard_logdir": "s3://b-1/x\n--host=0.0.0.0"}, "tensorboard_logdir", '"s3://b-1/x\\n--host=0.0.0.0"'),
    "logdir-outside-claim": ({"tensorboard_logdir": "/etc", "tensorboard_pvc_claim_name": "data"}, "tensorboard_logdir", '"/etc"'),
    "claim-missing-without-store": ({"tensorboard_logdir": "/data/outputs"}, "tensorboard_pvc_claim_name", '""'),
    "endpoint-not-url": ({"tensorboard_s3_endpoint_url": "moto:5050"}, "tensorboard_s3_endpoint_url", '"moto:5050"'),
    "region-bad": ({"tensorboard_aws_region": "mars-1"}, "tensorboard_aws_region", '"mars-1"'),
    "image-newline": ({"tensorboard_image": IMAGE + "\nx"}, "tensorboard_image", json.dumps(IMAGE + "\nx")),
    "version-range": ({"tensorboard_version": ">=2.0"}, "tensorboard_version", '">=2.0"'),
    "memory-not-quantity": ({"tensorboard_memory_limit": "lots"}, "tensorboard_memory_limit", '"lots"'),
    "cpu-limit-empty": ({"tensorboard_cpu_limit": ""}, "tensorboard_cpu_limit", '""'),
    "port-privileged": ({"tensorboard_port": 80}, "tensorboard_port", "80"),
    "root-user": ({"tensorboard_run_as_user": 0}, "tensorboard_run_as_user", "0"),
    "extra-args-bind-all": ({"tensorboard_extra_args": ["--bind_all"]}, "tensorboard_extra_args", '"--bind_all"'),
    "extra-args-logdir": ({"tensorboard_extra_args": ["--logdir=/etc"]}, "tensorboard_extra_args", '"--logdir=/etc"'),
    "lb-without-cidrs": ({"tensorboard_internal_load_balancer": True}, "tensorboard_load_balancer_source_ranges", "[]"),
    "lb-open-to-all": ({"tensorboard_internal_load_balancer": True, "tensorboard_load_balancer_source_ranges": ["0.0.0.0/0"]},
                       "tensorboard_load_balancer_source_ranges", '"0.0.0.0/0"'),
    "lb-cidr-not-cidr": ({"tensorboard_internal_load_balancer": True, "tensorboard_load_balancer_source_ranges": ["10.0.0.0"]},
                         "tensorboard_load_balancer_source_ranges", '"10.0.0.0"'),
    "lb-without-internal-annotations": ({"tensorboard_internal_load_balancer": True,
                                         "tensorboard_load_balancer_source_ranges": ["10.0.0.0/8"],
                                         "tensorboard_load_balancer_annotations": {}},
                                        "tensorboard_load_balancer_annotations", "{}"),
    "manifest-dest-escape": ({"tensorboard_manifest_dest": "/tmp/../etc/tb.yaml"}, "tensorboard_manifest_dest", '"/tmp/../etc/tb.yaml"'),
    "wait-timeout-huge": ({"tensorboard_wait_timeout": 10 ** 9}, "tensorboard_wait_timeout", "1000000000"),
}


def role_case_outcomes(tmp_path, role, cases):
    """One ansible-playbook run for every case (id -> variables), each its own play with `role` inside
    block/rescue: {id: "PASSED", or the message of the task that failed}."""
    plays = []
    for case_id, variables in cases.items():
        plays.append({
            "name": "case %s" % case_id, "hosts": "localhost", "gather_facts": False, "connection": "local",
            "vars": variables,
            "tasks": [{
                "block": [{"ansible.builtin.include_role": {"name": "trainfleet.training." + role}},
                          {"ansible.builtin.set_fact": {"_outcome": "PASSED"}}],
                "rescue": [{"ansible.builtin.set_fact": {"_outcome": "{{ ansible_failed_result.msg }}"}}],
            }, {"ansible.builtin.debug": {"msg": "CASE %s: {{ _outcome }}" % case_id}}],
        })
    (tmp_path / "cases.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    # bounded per case too (~2 s each on a quiet machine, ten times that on a loaded one)
    rc, out, _seconds = playbook([str(tmp_path / "cases.yml")], tmp_path, timeout=TIMEOUT + 20 * len(plays))
    assert rc == 0, out[-5000:]
    found = {}
    for match in re.finditer(r'"msg": "CASE ([a-z0-9-]+): (.*)"\n', out):
        found[match.group(1)] = json.loads('"%s"' % match.group(2))
    assert set(found) == set(cases), out[-5000:]
    return found


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """One ansible-playbook run (not check mode): every case's outcome and rendered manifests."""
    tmp_path = tmp_path_factory.mktemp("tensorboard-role")
    cases = {}
    for case_id, (case_vars, store) in list(RENDER.items()) + [(k, (v[0], {})) for k, v in BAD.items()]:
        variables = shared(tmp_path, **store)
        variables["tensorboard_manifest_dest"] = str(tmp_path / "manifests" / ("%s.yaml" % case_id))
        variables.update(case_vars)
        cases[case_id] = variables
    return role_case_outcomes(tmp_path, "tensorboard", cases), tmp_path


def manifests(outcomes_fixture, case_id):
    found, tmp_path = outcomes_fixture
    # no cluster: the run renders, writes the manifests for review, then stops naming the reason
    assert "cannot reach the cluster" in found[case_id] and "Nothing was created" in found[case_id], found[case_id]
    docs = [d for d in yaml.safe_load_all((tmp_path / "manifests" / ("%s.yaml" % case_id)).read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def pod_of(docs, name="trainfleet-tensorboard"):
    return docs[("Deployment", name)]["spec"]["template"]["spec"]


def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_default_reads_every_run_of_the_prefix_from_the_local_s3(outcomes):
    docs = manifests(outcomes, "default-s3-every-run")
    assert sorted(docs) == [("Deployment", "trainfleet-tensorboard"), ("Service", "trainfleet-tensorboard")]
    pod = pod_of(docs)
    container = pod["containers"][0]
    assert container["image"] == IMAGE
    assert container["args"] == ["--logdir=s3://trainfleet-local/training", "--host=0.0.0.0", "--port=6006",
                                 "--load_fast=false", "--reload_interval=30"]
    env = env_of(container)
    assert env["S3_ENDPOINT"] == "http://172.18.0.1:5050"  # the variable tensorboard's S3 support reads
    assert env["AWS_REGION"] == "us-east-1"
    assert env["AWS_ACCESS_KEY_ID"] == {"secretKeyRef": {"name": "trainfleet-aws-local", "key": "AWS_ACCESS_KEY_ID"}}
    assert env["AWS_SECRET_ACCESS_KEY"] == {"secretKeyRef": {"name": "trainfleet-aws-local", "key": "AWS_SECRET_ACCESS_KEY"}}
    # restricted, like the training pods, plus a read-only root file system
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    service = docs[("Service", "trainfleet-tensorboard")]
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["ports"][0]["port"] == 6006
    assert service["spec"]["selector"] == docs[("Deployment", "trainfleet-tensorboard")]["spec"]["selector"]["matchLabels"]
    for doc in docs.values():  # the teardown's mark, and the training namespace
        assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trainfleet"
        assert doc["metadata"]["namespace"] == "trainfleet"


def test_one_run(outcomes):
    container = pod_of(manifests(outcomes, "one-run"))["containers"][0]
    assert container["args"][0] == "--logdir=s3://trainfleet-local/training/trainfleet-digits"


def test_aws_uses_the_service_account_and_no_endpoint_or_secret(outcomes):
    pod = pod_of(manifests(outcomes, "aws-pod-identity"))
    env = env_of(pod["containers"][0])
    assert pod["serviceAccountName"] == "trainfleet-trainer"
    assert pod["containers"][0]["args"][0] == "--logdir=s3://trainfleet-data/training"
    assert set(env) == {"AWS_REGION", "AWS_DEFAULT_REGION"} and env["AWS_REGION"] == "us-west-2"


def test_without_an_object_store_it_reads_the_claim_read_only(outcomes):
    pod = pod_of(manifests(outcomes, "claim-no-object-store"))
    container = pod["containers"][0]
    assert container["args"][0] == "--logdir=/data/outputs"
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "trainfleet-data", "readOnly": True}} in pod["volumes"]
    assert {"name": "data", "mountPath": "/data", "readOnly": True} in container["volumeMounts"]
    assert "S3_ENDPOINT" not in env_of(container) and "AWS_ACCESS_KEY_ID" not in env_of(container)


def test_internal_load_balancer_is_restricted_to_the_cidrs(outcomes):
    docs = manifests(outcomes, "internal-lb")
    lb = docs[("Service", "trainfleet-tensorboard-internal")]
    assert lb["spec"]["type"] == "LoadBalancer"
    assert lb["spec"]["loadBalancerSourceRanges"] == ["10.42.0.0/16", "192.168.10.0/24"]
    assert lb["metadata"]["annotations"] == {"service.beta.kubernetes.io/aws-load-balancer-internal": "true",
                                             "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"}
    assert docs[("Service", "trainfleet-tensorboard")]["spec"]["type"] == "ClusterIP"


def test_explicit_logdir_labels_and_extra_args(outcomes):
    docs = manifests(outcomes, "explicit-logdir-and-labels")
    container = pod_of(docs)["containers"][0]
    assert container["args"][0] == "--logdir=s3://other-bucket/experiments/2026"
    assert container["args"][-1] == "--samples_per_plugin=scalars=1000"
    assert all(doc["metadata"]["labels"]["team"] == "ml" for doc in docs.values())


@pytest.mark.parametrize("case_id", sorted(BAD))
def test_bad_input_is_refused_naming_the_variable_and_quoting_the_value(outcomes, case_id):
    found, tmp_path = outcomes
    _case_vars, variable, quote = BAD[case_id]
    message = found[case_id]
    assert message != "PASSED" and "cannot reach the cluster" not in message, message
    assert variable in message, message
    assert quote in message or ("got: " in message), message
    assert not (tmp_path / "manifests" / ("%s.yaml" % case_id)).exists()  # refused before anything was rendered


def test_check_mode_without_a_kubeconfig_renders_validates_and_prints_the_command(tmp_path):
    rc, out, _seconds = run_role(tmp_path, {}, check=True)
    assert rc == 0, out[-4000:]
    assert "kubeconfig %s does not exist" % (tmp_path / "no-kubeconfig") in out
    assert "was rendered and validated only" in out
    assert ("open it: kubectl --kubeconfig %s -n trainfleet port-forward service/trainfleet-tensorboard 6006:6006"
            % (tmp_path / "no-kubeconfig")) in out
    assert not (tmp_path / "cache" / "manifests").exists()  # check mode writes nothing


def _silent_kubeconfig(path, port):
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "silent",
        "clusters": [{"name": "silent", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
        "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "not-a-secret"}}]}))
    return str(path)


@pytest.mark.parametrize("check", [True, False], ids=["check", "run"])
def test_an_api_that_never_answers(tmp_path, check):
    with silent_listener() as (port, _held):
        kubeconfig = _silent_kubeconfig(tmp_path / "kubeconfig-silent", port)
        rc, out, seconds = run_role(tmp_path, {"tensorboard_kubeconfig": kubeconfig, "tensorboard_context": "silent",
                                               "tensorboard_api_timeout": 2}, check=check)
    assert seconds < 120, seconds
    if check:
        assert rc == 0, out[-4000:]
        assert "was rendered and validated only" in out
        assert "--context silent -n trainfleet port-forward service/trainfleet-tensorboard 6006:6006" in out
    else:
        assert rc != 0
        assert "The tensorboard step cannot reach the cluster" in out and "Nothing was created" in out
    assert "Apply the Deployment" not in out or "skipping" in out.split("Apply the Deployment", 1)[1][:200]


# --------------------------------------------------------------------------- image and pins


def _defaults():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        return yaml.safe_load(handle)


def _requirement(name):
    with open(os.path.join(ROOT, "requirements.txt")) as handle:
        for line in handle:
            if line.startswith(name + "=="):
                return line.strip().split("==", 1)[1]
    raise AssertionError("%s is not pinned in requirements.txt" % name)


def test_the_image_installs_the_versions_the_tests_use():
    """requirements.txt is where Python versions are pinned; the image's pins must be the same."""
    defaults = _defaults()
    assert defaults["tensorboard_version"] == _requirement("tensorboard")
    assert defaults["tensorboard_boto3_version"] == _requirement("boto3")
    import tensorboard  # the venv's, pinned by requirements.txt: the event files are tested against it
    assert tensorboard.__version__ == defaults["tensorboard_version"]


def test_dockerfile_takes_the_build_arguments_the_role_passes():
    with open(os.path.join(ROLE, "files", "image", "Dockerfile")) as handle:
        dockerfile = handle.read()
    with open(os.path.join(ROLE, "tasks", "image.yml")) as handle:
        image = yaml.safe_load(handle)
    build = [t for t in image if t.get("ansible.builtin.include_role", {}).get("tasks_from") == "build"][0]
    passed = set(build["vars"]["image_build_args"])
    declared = set(re.findall(r"^ARG ([A-Z0-9_]+)", dockerfile, re.M))
    assert passed <= declared, passed - declared
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", dockerfile, re.M)
    assert '"tensorboard==${TENSORBOARD_VERSION}" "boto3==${BOTO3_VERSION}"' in dockerfile
    assert "--only-binary=:all:" in dockerfile
    assert re.search(r"^USER \$\{TENSORBOARD_UID\}:\$\{TENSORBOARD_GID\}$", dockerfile, re.M)
    defaults = _defaults()
    assert "ARG TENSORBOARD_UID=%d" % defaults["tensorboard_run_as_user"] in dockerfile
    assert "ARG TENSORBOARD_GID=%d" % defaults["tensorboard_run_as_group"] in dockerfile


def test_site_runs_the_step_only_when_enabled():
    with open(os.path.join(ROOT, "site.yml")) as handle:
        site = yaml.safe_load(handle)
    entry = [p for p in site if p.get("ansible.builtin.import_playbook") == "playbooks/tensorboard.yml"][0]
    assert entry["tags"] == ["tensorboard"]
    assert entry["when"] == "tensorboard_enabled | default(false) | bool"
    with open(os.path.join(ROOT, "playbooks", "tensorboard.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    assert play["pre_tasks"][0]["ansible.builtin.import_tasks"] == "tasks/contract.yml"
