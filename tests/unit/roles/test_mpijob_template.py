# -*- coding: utf-8 -*-
"""Role mpijob: the MPIJob template (kubeflow.org/v2beta1, mpi-operator v0.6.0) and its preflight.

The template is rendered like tests/unit/roles/test_pytorchjob_template.py renders the
PyTorchJob's (Jinja2 configured like Ansible's engine), from the trainjob role's defaults (the
shared trainjob_* settings, trainjob_launcher=mpijob) and the mpijob role's. The preflight cases
run the train step's role (trainjob) with ansible-playbook in check mode on localhost (no cluster).
"""

from __future__ import annotations

import json
import os

import jinja2
import pytest
import yaml

from tests.unit.roles.test_pytorchjob_template import (
    FIXTURES, IMAGE, RESTRICTED_CONTAINER, RESTRICTED_POD, ROOT, SHARED, TRAINER_RESULT, _filters, _job, _playbook, _pod,
    _resolve, contract, inventory_vars, restricted_violations)

TRAINJOB_ROLE = os.path.join(ROOT, "roles", "trainjob")
ROLE = os.path.join(ROOT, "roles", "mpijob")
TEMPLATE = os.path.join(ROLE, "templates", "mpijob.yaml.j2")
MPI_IMAGE = IMAGE + "-mpi"
HANDOVER_TASK = "Hand the job to the train step"


def render_text(variables, template=TEMPLATE):
    """Jinja2 configured like Ansible's template engine (as test_pytorchjob_template does)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.dirname(template)), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, keep_trailing_newline=True)
    env.filters.update(_filters())
    return env.get_template(os.path.basename(template)).render(**variables)


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def handover():
    """What roles/mpijob/tasks/render.yml hands the trainjob role (mpijob_rendered), manifest aside."""
    tasks = _load(os.path.join(ROLE, "tasks", "render.yml"))
    found = [t for t in tasks if t.get("name") == HANDOVER_TASK]
    assert len(found) == 1
    result = dict(found[0]["ansible.builtin.set_fact"]["mpijob_rendered"])
    assert result.pop("manifest") == "{{ _mpijob_manifest }}"
    return result


def launcher_defaults():
    """The trainjob role's defaults for trainjob_launcher=mpijob, then the mpijob role's."""
    variables = dict(SHARED, trainjob_launcher="mpijob")
    variables.update(_load(os.path.join(TRAINJOB_ROLE, "defaults", "main.yml")))
    variables["trainjob_launcher"] = "mpijob"
    variables.update(_load(os.path.join(ROLE, "defaults", "main.yml")))
    return variables


def role_vars(**overrides):
    variables = launcher_defaults()
    variables["trainjob_image"] = MPI_IMAGE
    variables.update(overrides)
    return _resolve(variables)


def render(**overrides):
    variables = role_vars(**overrides)
    text = render_text(variables, template=TEMPLATE)
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    assert len(docs) == 1, text
    job = docs[0]
    check_mpijob_shape(job)
    return job, text


def check_mpijob_shape(job):
    """The structure mpi-operator v0.6.0's CRD schema (v2beta1) requires."""
    assert job["apiVersion"] == "kubeflow.org/v2beta1"
    assert job["kind"] == "MPIJob"
    spec = job["spec"]
    assert isinstance(spec["slotsPerWorker"], int) and spec["slotsPerWorker"] >= 1
    assert spec["mpiImplementation"] == "OpenMPI"
    assert spec["runPolicy"]["cleanPodPolicy"] in ("None", "Running")
    assert isinstance(spec["runPolicy"]["backoffLimit"], int)
    assert "ttlSecondsAfterFinished" not in spec["runPolicy"]  # the finished job stays: "keep" and the launcher's log
    specs = spec["mpiReplicaSpecs"]
    assert set(specs) == {"Launcher", "Worker"}
    assert specs["Launcher"]["replicas"] == 1
    for rtype, rspec in specs.items():
        assert rspec["restartPolicy"] in ("Always", "OnFailure", "Never", "ExitCode")
        pod = rspec["template"]["spec"]
        (ctr,) = pod["containers"]
        assert ctr["image"]
        assert all(isinstance(a, str) for a in ctr["command"])
        names = [e["name"] for e in ctr.get("env", [])]
        assert len(names) == len(set(names)), names
        for entry in ctr.get("env", []):
            assert set(entry) in ({"name", "value"}, {"name", "valueFrom"}), entry
            if "value" in entry:
                assert isinstance(entry["value"], str), entry
        volume_names = {v["name"] for v in pod.get("volumes", [])}
        for mount in ctr.get("volumeMounts", []):
            assert mount["name"] in volume_names, mount


def pod(job, rtype):
    return job["spec"]["mpiReplicaSpecs"][rtype]["template"]["spec"]


def ctr(job, rtype):
    return pod(job, rtype)["containers"][0]


def forwarded(command):
    """The names mpirun forwards with -x NAME."""
    return [command[i + 1] for i, arg in enumerate(command) if arg == "-x"]


def trainer_part(command):
    index = command.index("python3")
    return command[index:]


# --------------------------------------------------------------------------- template


def test_default_mpijob_launcher_and_workers():
    job, _text = render()
    assert job["metadata"]["name"] == "trainfleet-digits-mpi"
    assert job["metadata"]["namespace"] == "trainfleet"
    spec = job["spec"]
    assert spec["slotsPerWorker"] == 1
    assert spec["sshAuthMountPath"] == "/home/trainer/.ssh"
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 1, "activeDeadlineSeconds": 7200}
    assert spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    launcher = ctr(job, "Launcher")
    command = launcher["command"]
    assert command[:5] == ["mpirun", "-np", "2", "--hostfile", "/etc/mpi/hostfile"]
    assert command[5:8] == ["--mca", "plm_rsh_args", "-p 2222"]
    assert "MASTER_ADDR" in forwarded(command) and "MASTER_PORT" in forwarded(command)
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in launcher["env"]}
    assert env["MASTER_ADDR"] == "trainfleet-digits-mpi-worker-0.trainfleet-digits-mpi.trainfleet.svc"
    assert env["MASTER_PORT"] == "29500"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["TRAINFLEET_JOB_NAME"] == "trainfleet-digits-mpi"
    # every variable of the launcher reaches the ranks (sshd sessions do not inherit the container's)
    assert sorted(forwarded(command)) == sorted(env)
    assert trainer_part(command) == [
        "python3", "-m", "trainer.train", "--dataset=digits", "--epochs=5", "--batch-size=64", "--backend=auto",
        "--output-dir=s3://trainfleet-data/training/trainfleet-digits-mpi"]
    worker = ctr(job, "Worker")
    assert worker["command"] == ["/usr/sbin/sshd", "-De", "-f", "/etc/ssh/trainfleet/sshd_config"]
    assert "env" not in worker
    assert worker["ports"] == [{"name": "ssh", "containerPort": 2222, "protocol": "TCP"}]
    assert worker["readinessProbe"]["tcpSocket"]["port"] == 2222
    assert launcher["image"] == worker["image"] == MPI_IMAGE


def test_np_is_workers_times_slots_and_master_addr_follows_name_and_namespace():
    job, _text = render(mpijob_workers=3, mpijob_slots_per_worker=4, trainjob_name="mpi-run", trainjob_namespace="team-a",
                        mpijob_master_port=23456, mpijob_ssh_port=2022)
    command = ctr(job, "Launcher")["command"]
    assert command[1:3] == ["-np", "12"]
    assert command[7] == "-p 2022"
    env = {e["name"]: e.get("value") for e in ctr(job, "Launcher")["env"]}
    assert env["MASTER_ADDR"] == "mpi-run-worker-0.mpi-run.team-a.svc"
    assert env["MASTER_PORT"] == "23456"
    assert job["spec"]["slotsPerWorker"] == 4
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 3
    assert ctr(job, "Worker")["ports"][0]["containerPort"] == 2022


def test_trainer_args_and_env_are_the_pytorchjobs():
    """The same builder (_trainjob_pod.trainer_args/trainer_env of the trainjob role) with the MPIJob's name and epochs."""
    job, _text = render(
        trainjob_trainer_epochs=7, trainjob_trainer_snapshot_dir="s3://bucket-x/snap", trainjob_trainer_extra_args=["--timeout-s=300"],
        trainjob_trainer_backend="gloo", trainjob_aws_endpoint_url="http://172.18.0.1:5050",
        trainjob_aws_credentials_secret="trainfleet-aws-local",
        trainjob_env=[{"name": "TRAINFLEET_DATA_CACHE", "value": "/data/cache"},
                      {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
        mpijob_mpirun_extra_args=["--bind-to", "none"])
    command = ctr(job, "Launcher")["command"]
    assert trainer_part(command) == [
        "python3", "-m", "trainer.train", "--dataset=digits", "--epochs=7", "--batch-size=64", "--backend=gloo",
        "--output-dir=s3://trainfleet-data/training/trainfleet-digits-mpi", "--snapshot-dir=s3://bucket-x/snap",
        "--timeout-s=300"]
    names = forwarded(command)
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "TRAINFLEET_DATA_CACHE", "HF_TOKEN",
                 "TRAINFLEET_OUTPUT_DIR", "AWS_REGION", "PYTHONUNBUFFERED"):
        assert name in names, name
    env = {e["name"]: e for e in ctr(job, "Launcher")["env"]}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "trainfleet-aws-local", "key": "AWS_SECRET_ACCESS_KEY"}
    assert "--bind-to" in command[:command.index("-x")]


def test_pods_are_restricted_and_share_the_pytorchjob_placement_and_resources():
    job, _text = render(
        trainjob_node_selector={"trainfleet.io/nodegroup": "cpu"},
        trainjob_tolerations=[{"key": "dedicated", "operator": "Equal", "value": "train", "effect": "NoSchedule"}],
        trainjob_cpu_request="1500m", trainjob_memory_request="4Gi", trainjob_memory_limit="5Gi",
        trainjob_pvc_claim_name="shared", trainjob_pvc_mount_path="/shared", trainjob_shm_size="2Gi",
        trainjob_service_account="trainfleet-trainer", trainjob_security_context={"fsGroup": 10001})
    for rtype in ("Launcher", "Worker"):
        spec = pod(job, rtype)
        assert restricted_violations(spec) == [], rtype
        assert spec["securityContext"] == dict(RESTRICTED_POD, fsGroup=10001)
        assert spec["containers"][0]["securityContext"] == RESTRICTED_CONTAINER
        assert spec["automountServiceAccountToken"] is False
        assert spec["nodeSelector"] == {"trainfleet.io/nodegroup": "cpu"}
        assert spec["tolerations"][0]["key"] == "dedicated"
        assert {t["key"] for t in spec["tolerations"][1:]} == {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
        assert spec["serviceAccountName"] == "trainfleet-trainer"
    worker = ctr(job, "Worker")
    assert worker["resources"] == {"requests": {"cpu": "1500m", "memory": "4Gi"}, "limits": {"memory": "5Gi"}}
    assert {m["mountPath"] for m in worker["volumeMounts"]} == {"/shared", "/dev/shm"}
    launcher = ctr(job, "Launcher")
    assert launcher["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
    assert "volumeMounts" not in launcher and "volumes" not in pod(job, "Launcher")


@pytest.mark.parametrize("variable", ["trainjob_name", "trainjob_namespace", "trainjob_image", "mpijob_sshd_command",
                                      "mpijob_mpirun_extra_args"])
def test_jinja_in_a_value_stays_literal(variable):
    """A value holding "{{ ... }}" is data: rendered once, quoted by to_json, never evaluated."""
    hostile = "{{ lookup('pipe', 'id') }}"
    variables = role_vars()
    variables[variable] = [hostile] if variable.endswith(("_command", "_args")) else hostile
    if variable == "trainjob_name":
        variables["trainjob_name"] = hostile
    text = render_text(variables, template=TEMPLATE)
    job = yaml.safe_load(text)
    assert "uid=" not in text
    if variable == "trainjob_name":
        assert job["metadata"]["name"] == hostile
    elif variable == "trainjob_namespace":
        assert job["metadata"]["namespace"] == hostile
    elif variable == "trainjob_image":
        assert ctr(job, "Worker")["image"] == hostile
    elif variable == "mpijob_sshd_command":
        assert ctr(job, "Worker")["command"] == [hostile]
    else:
        assert hostile in ctr(job, "Launcher")["command"]


def test_yaml_injection_stays_one_document():
    inject = "x\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: injected}"
    variables = role_vars()
    variables["trainjob_image"] = inject
    variables["mpijob_sshd_command"] = [inject]
    text = render_text(variables, template=TEMPLATE)
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    assert len(docs) == 1 and docs[0]["kind"] == "MPIJob"
    assert ctr(docs[0], "Worker")["command"] == [inject]


@pytest.mark.parametrize("platform", ["local", "aws"])
def test_inventory_examples_render(platform):
    overrides = inventory_vars(platform)
    overrides.pop("trainer_image_ref")
    overrides["trainer_image_variant_refs"] = {"mpi": MPI_IMAGE}
    if platform == "local":
        overrides["trainfleet_cluster"] = contract(
            kind="s3_compatible", bucket="trainfleet-local", endpoint_url="http://127.0.0.1:5050",
            pod_endpoint_url="http://172.18.0.1:5050", credentials="secret", credentials_secret="trainfleet-aws-local")
    else:
        overrides["trainfleet_cluster"] = contract(bucket="trainfleet-123456789012-us-west-2", region="us-west-2")
    assert overrides["trainjob_launcher"] == "pytorchjob"
    overrides["trainjob_launcher"] = "mpijob"
    variables = launcher_defaults()
    variables.update(overrides)
    variables = _resolve(variables)
    job = yaml.safe_load(render_text(variables, template=TEMPLATE))
    check_mpijob_shape(job)
    assert ctr(job, "Worker")["image"] == MPI_IMAGE
    bucket = "trainfleet-local" if platform == "local" else "trainfleet-123456789012-us-west-2"
    run = "s3://%s/training/trainfleet-digits-mpi" % bucket
    command = ctr(job, "Launcher")["command"]
    assert "--output-dir=" + run in command and "--snapshot-dir=" + run + "/snapshots" in command
    assert "--epochs=%s" % overrides["trainjob_trainer_epochs"] in command


def test_every_variable_has_a_default_and_an_argument_spec():
    defaults = set(_load(os.path.join(ROLE, "defaults", "main.yml")))
    spec = _load(os.path.join(ROLE, "meta", "argument_specs.yml"))["argument_specs"]["main"]["options"]
    assert defaults == set(spec)
    assert all(name.startswith("mpijob_") for name in defaults)


# --------------------------------------------------------------------------- preflight (ansible-playbook)

BAD_INPUTS = {
    "name": ({"trainjob_name": "Bad_Name"}, "trainjob_name", '"Bad_Name"'),
    "name-too-long": ({"trainjob_name": "a" * 41}, "trainjob_name", json.dumps("a" * 41)),
    "namespace": ({"trainjob_namespace": "kube system"}, "trainjob_namespace", '"kube system"'),
    "image-empty": ({"trainjob_image": ""}, "trainjob_image", '""'),
    "workers-zero": ({"mpijob_workers": 0}, "mpijob_workers", "0"),
    "slots-too-many": ({"mpijob_slots_per_worker": 65}, "mpijob_slots_per_worker", "65"),
    "ssh-port-privileged": ({"mpijob_ssh_port": 22}, "mpijob_ssh_port", "22"),
    "sshd-command-empty": ({"mpijob_sshd_command": []}, "mpijob_sshd_command", "[]"),
    "mpirun-np-override": ({"mpijob_mpirun_extra_args": ["-np", "64"]}, "mpijob_mpirun_extra_args", '"-np"'),
    "epochs-zero": ({"trainjob_trainer_epochs": 0}, "trainjob_trainer_epochs", "0"),
    "launcher-memory": ({"mpijob_launcher_memory_limit": "lots"}, "mpijob_launcher_memory_limit", '"lots"'),
    "clean-pod-policy-all": ({"mpijob_clean_pod_policy": "All"}, "mpijob_clean_pod_policy", "All"),
    "log-dest-escape": ({"trainjob_log_dest": "/tmp/../etc/x.log"}, "trainjob_log_dest", '"/tmp/../etc/x.log"'),
    "env-from": ({"trainjob_env_from": [{"secretRef": {"name": "x"}}]}, "trainjob_env_from", '"secretRef"'),
    # the shared settings are checked by the trainjob role's preflight
    "shared-root": ({"trainjob_run_as_user": 0}, "trainjob_allow_root", "0"),
    "shared-memory": ({"trainjob_memory_request": "lots"}, "trainjob_memory_request", '"lots"'),
}


# A loop's failure says "One or more items failed": take the failed items' messages.
FAILURE_MSG = ("{{ (ansible_failed_result.results | selectattr('failed', 'defined') | selectattr('failed')"
               " | map(attribute='msg') | join(' ')) if ansible_failed_result.results is defined"
               " else ansible_failed_result.msg }}")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """One ansible-playbook run in check mode, one play per case: the role inside block/rescue."""
    tmp_path = tmp_path_factory.mktemp("mpijob-preflight")
    shared = dict(SHARED, trainfleet_cache_dir=str(tmp_path / "cache"), trainjob_image=MPI_IMAGE)
    cases = {case_id: case_vars for case_id, (case_vars, _variable, _quote) in BAD_INPUTS.items()}
    cases["good"] = {}
    plays = []
    for case_id, case_vars in cases.items():
        plays.append({
            "name": "case %s" % case_id, "hosts": "localhost", "gather_facts": False, "connection": "local",
            "vars": shared,
            "tasks": [{
                "block": [
                    {"ansible.builtin.include_role": {"name": "trainfleet.training.trainjob"}, "vars": dict(case_vars, trainjob_launcher="mpijob")},
                    {"ansible.builtin.set_fact": {"_outcome": "PASSED"}},
                ],
                "rescue": [{"ansible.builtin.set_fact": {"_outcome": FAILURE_MSG}}],
            }, {"ansible.builtin.debug": {"msg": "CASE %s: {{ _outcome }}" % case_id}}],
        })
        if case_id == "good":  # check mode writes no manifest: keep what the role rendered
            plays[-1]["tasks"].append({"ansible.builtin.copy": {
                "content": "{{ _mpijob_manifest | to_json }}", "dest": str(tmp_path / "good.json"), "mode": "0600"},
                "check_mode": False})
    playbook = tmp_path / "cases.yml"
    playbook.write_text(yaml.safe_dump(plays))
    rc, out = _playbook([str(playbook), "--check"], tmp_path, cases=len(cases))
    assert rc == 0, out[-4000:]
    result = {}
    for case_id in cases:
        marker = '"msg": "CASE %s: ' % case_id
        start = out.index(marker) + len(marker)
        result[case_id] = json.loads('"' + out[start:out.index('\n', start)].rstrip().rstrip('"') + '"')
    return result, tmp_path


@pytest.mark.parametrize("case_id", sorted(BAD_INPUTS))
def test_bad_input_is_refused_naming_the_variable(outcomes, case_id):
    result, _tmp = outcomes
    _vars, variable, quote = BAD_INPUTS[case_id]
    msg = result[case_id]
    assert msg != "PASSED", case_id
    assert variable in msg, msg
    assert quote in msg, msg


def test_good_input_renders_in_check_mode(outcomes):
    result, tmp_path = outcomes
    assert result["good"] == "PASSED"
    manifest = json.loads((tmp_path / "good.json").read_text())
    check_mpijob_shape(manifest)
    assert ctr(manifest, "Launcher")["command"][:3] == ["mpirun", "-np", "2"]


def test_train_launcher_is_checked_in_a_preflight_file():
    tasks = _load(os.path.join(TRAINJOB_ROLE, "tasks", "preflight_launcher.yml"))
    assert tasks[0]["name"] == "Check trainjob_launcher"
    playbook = _load(os.path.join(ROOT, "playbooks", "train.yml"))[0]
    first = playbook["pre_tasks"][0]
    assert first["ansible.builtin.include_role"] == {"name": "trainfleet.training.trainjob", "tasks_from": "preflight_launcher.yml"}


# --------------------------------------------------------------------------- the shared report, for an MPIJob


def _mpi_report(tmp_path, status, rank0):
    """roles/trainjob/tasks/report.yml with what the mpijob role's render hands over (kind, note)."""
    result_file = tmp_path / "outcome.json"
    rendered = dict(handover(), manifest={})
    extra = {
        "_trainjob_decision": "no job named trainfleet-digits-mpi existed, submitted it",
        "trainjob_name": "trainfleet-digits-mpi", "trainjob_namespace": "trainfleet",
        "trainjob_rendered": rendered, "trainjob_launcher": "mpijob",
        "__trainjob_status": status, "__trainjob_rank0": rank0, "result_file": str(result_file),
    }
    extra_file = tmp_path / "extra.json"
    extra_file.write_text(json.dumps(extra))
    rc, out = _playbook([os.path.join(FIXTURES, "report.yml"), "-e", "@%s" % extra_file], tmp_path)
    assert rc == 0, out
    return json.loads(result_file.read_text()), out


def _mpi_job(phase, failure=None):
    job = _job(phase, failure=failure)
    job["name"] = "trainfleet-digits-mpi"
    job["pods"] = [_pod("trainfleet-digits-mpi-launcher-x7k2p", "launcher", 0, container="launcher"),
                   _pod("trainfleet-digits-mpi-worker-0", "worker", 0, container="worker")]
    return job


def test_mpijob_report_is_the_pytorchjob_summary_with_the_launcher_as_rank0(tmp_path):
    status = {"changed": False, "exists": True, "job": _mpi_job("Succeeded")}
    rank0 = {"changed": False, "pod": "trainfleet-digits-mpi-launcher-x7k2p", "rank": 0, "method": "trainer-log",
             "log": "...", "truncated": False, "trainer_result": TRAINER_RESULT}
    outcome, out = _mpi_report(tmp_path, status, rank0)
    assert outcome["failure"] is None, out
    assert outcome["result"]["phase"] == "Succeeded"
    assert outcome["result"]["rank0_pod"] == "trainfleet-digits-mpi-launcher-x7k2p"
    assert "MPIJob trainfleet/trainfleet-digits-mpi: Succeeded" in out
    assert ("rank 0: pod trainfleet-digits-mpi-launcher-x7k2p (decided by trainer-log; the launcher's log, "
            "where mpirun prints every rank's output)") in out
    assert "PyTorchJob" not in out


def test_mpijob_failure_names_the_mpijob_variables(tmp_path):
    failure = {"reason": "BackoffLimitExceeded", "message": "launcher failed", "pod": "trainfleet-digits-mpi-launcher-x7k2p",
               "container": "launcher", "container_reason": "Error", "exit_code": 1, "log_tail": ["boom"], "events": []}
    status = {"changed": False, "exists": True, "job": _mpi_job("Failed", failure=failure), "failed": True}
    outcome, out = _mpi_report(tmp_path, status, {"skipped": True, "changed": False})
    assert outcome["result"]["phase"] == "Failed"
    assert outcome["failure"].startswith("MPIJob trainfleet/trainfleet-digits-mpi Failed: BackoffLimitExceeded")
    assert "-e trainjob_rerun=true" in outcome["failure"]
