# -*- coding: utf-8 -*-
"""Role trainjob: the train step's shape. One argument spec for the shared trainjob_* settings,
launcher roles that only check their own knobs and render (they include no other role) into one
fact, <role>_rendered, and defaults that follow the launcher."""

from __future__ import annotations

import os
import re

import pytest
import yaml

from tests.unit.roles.test_pytorchjob_template import SHARED, _resolve

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = os.path.join(ROOT, "roles")
LAUNCHERS = {"pytorchjob": "pytorchjob", "mpijob": "mpijob", "torchx": "torchx_job"}
HANDOVER_KEYS = {"kind", "manifest", "companions", "companion_wait_timeout", "companion_hint", "rank0_note", "facts"}


def _load(*parts):
    with open(os.path.join(ROLES, *parts)) as handle:
        return yaml.safe_load(handle)


def _tasks(role):
    folder = os.path.join(ROLES, role, "tasks")
    for name in sorted(os.listdir(folder)):
        for task in _load(role, "tasks", name) or []:
            yield name, task
            for key in ("block", "rescue", "always"):
                for inner in task.get(key, []):
                    yield name, inner


def test_every_shared_default_has_an_argument_spec():
    defaults = {k for k in _load("trainjob", "defaults", "main.yml") if not k.startswith("_")}
    spec = _load("trainjob", "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert defaults == set(spec)
    assert all(name.startswith("trainjob_") for name in defaults)


@pytest.mark.parametrize("launcher, role", sorted(LAUNCHERS.items()))
def test_launcher_roles_own_only_their_prefix(launcher, role):
    """A launcher's role defines no shared setting: every trainjob_* lives in roles/trainjob."""
    prefix = role + "_"
    defaults = [k for k in _load(role, "defaults", "main.yml") if not k.startswith("_")]
    specs = _load(role, "meta", "argument_specs.yml")["argument_specs"]
    assert all(name.startswith(prefix) for name in defaults), defaults
    assert set(specs) == {"main", "preflight"}
    assert set(specs["main"]["options"]) == set(specs["preflight"]["options"]) == set(defaults)
    assert launcher in _load("trainjob", "defaults", "main.yml")["_trainjob_launcher_roles"]


@pytest.mark.parametrize("role", sorted(LAUNCHERS.values()))
def test_launcher_roles_include_no_other_role_and_hand_over_one_fact(role):
    includes = [task for _name, task in _tasks(role)
                if "ansible.builtin.include_role" in task or "ansible.builtin.import_role" in task]
    assert includes == []
    fact = role + "_rendered"
    handovers = [task["ansible.builtin.set_fact"][fact] for _name, task in _tasks(role)
                 if fact in (task.get("ansible.builtin.set_fact") or {})]
    assert len(handovers) == 1
    assert set(handovers[0]) == HANDOVER_KEYS
    assert handovers[0]["kind"] in ("PyTorchJob", "MPIJob", "VolcanoJob")


def test_train_playbook_is_one_way():
    """playbooks/train.yml runs the trainjob role; the launcher's role is trainjob's to include."""
    with open(os.path.join(ROOT, "playbooks", "train.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    assert [r["role"] for r in play["roles"]] == ["trainfleet.training.trainjob"]
    included = [t.get("ansible.builtin.include_role", {}).get("name") for t in play["pre_tasks"]]
    assert not any(name and name.split(".")[-1] in LAUNCHERS.values() for name in included), included


@pytest.mark.parametrize("launcher, name, image, tail", [
    ("pytorchjob", "trainfleet-digits", "ref", 200),
    ("mpijob", "trainfleet-digits-mpi", "ref-mpi", 500),
    ("torchx", "trainfleet-digits-torchx", "ref", 200),
])
def test_defaults_follow_the_launcher(launcher, name, image, tail):
    variables = dict(SHARED, trainer_image_ref="ref", trainer_image_variant_refs={"mpi": "ref-mpi"})
    variables.update(_load("trainjob", "defaults", "main.yml"))
    variables["trainjob_launcher"] = launcher
    variables.pop("_trainjob_pod")  # the filter is exercised by the template tests
    variables.pop("_trainjob_evaluate_model")  # made of _trainjob_pod's output dir (test_pytorchjob_template)
    resolved = _resolve(variables)
    assert resolved["trainjob_name"] == name
    assert resolved["trainjob_image"] == image
    assert int(resolved["trainjob_log_tail_lines"]) == tail
    assert resolved["trainjob_manifest_dest"].endswith("/manifests/%s-%s.yaml" % (launcher, name))


@pytest.mark.parametrize("launcher, overrides, variant, image", [
    ("pytorchjob", {}, "", "ref"),
    ("pytorchjob", {"trainjob_gpus": 1}, "cuda", "ref-cuda"),
    ("pytorchjob", {"trainjob_node_kind": "gpu"}, "cuda", "ref-cuda"),
    ("torchx", {"trainjob_gpus": 8}, "cuda", "ref-cuda"),
    ("mpijob", {}, "mpi", "ref-mpi"),
    ("mpijob", {"trainjob_gpus": 2}, "cuda-mpi", "ref-cuda-mpi"),
    ("pytorchjob", {"trainjob_gpus": 0, "trainjob_image_variant": "cuda"}, "cuda", "ref-cuda"),
    ("pytorchjob", {"trainjob_gpus": 1, "trainjob_image": "mine:1"}, "cuda", "mine:1"),
    ("pytorchjob", {"trainjob_neuron_devices": 16}, "neuron", "ref-neuron"),
    ("torchx", {"trainjob_node_kind": "neuron"}, "neuron", "ref-neuron"),
    ("mpijob", {"trainjob_neuron_devices": 16}, "neuron-mpi", "ref-neuron-mpi"),
])
def test_the_image_variant_follows_the_job(launcher, overrides, variant, image):
    """A job that asks for GPUs runs the CUDA variant, one that asks for Neuron devices the neuron variant, an
    MPIJob the MPI variant, both both; chosen
    without a word from the user, and a given image or variant wins."""
    refs = {"mpi": "ref-mpi", "cuda": "ref-cuda", "cuda-mpi": "ref-cuda-mpi", "neuron": "ref-neuron", "neuron-mpi": "ref-neuron-mpi"}
    variables = dict(SHARED, trainer_image_ref="ref", trainer_image_variant_refs=refs)
    variables.update(_load("trainjob", "defaults", "main.yml"))
    variables["trainjob_launcher"] = launcher
    variables.update(overrides)
    variables.pop("_trainjob_pod")
    variables.pop("_trainjob_evaluate_model")
    resolved = _resolve(variables)
    assert resolved["trainjob_image_variant"] == variant
    assert resolved["trainjob_image"] == image


def test_train_playbook_builds_the_variant_the_job_needs():
    """playbooks/train.yml (through playbooks/tasks/trainer_image.yml, which evaluate.yml shares) asks the
    trainer_image step for trainjob_image_variant, the same source the image's default reads."""
    with open(os.path.join(ROOT, "playbooks", "train.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    assert {"ansible.builtin.import_tasks": "tasks/trainer_image.yml"}.items() <= next(
        t for t in play["pre_tasks"] if "tasks/trainer_image.yml" in str(t)).items()
    with open(os.path.join(ROOT, "playbooks", "tasks", "trainer_image.yml")) as handle:
        tasks = yaml.safe_load(handle)
    resolve = next(t for t in tasks if t.get("name") == "Resolve the trainer image")
    assert "trainjob_image_variant" in resolve["vars"]["trainer_image_variants"]
    assert "trainjob_image_variant" in play["vars"]["_train_image_known"]
    # each include's own condition, never a block's: a block's would reach the role's push tasks
    assert all("block" not in t and "not (_train_image_known | bool)" in t["when"] for t in tasks)
    with open(os.path.join(ROOT, "playbooks", "evaluate.yml")) as handle:
        evaluate = yaml.safe_load(handle)[0]
    assert evaluate["vars"]["trainjob_image_variant"] == ""  # the evaluation runs on the CPU image
    assert any("tasks/trainer_image.yml" in str(t) for t in evaluate["pre_tasks"])


def test_launchers_controllers_are_installed_once_per_run(tmp_path):
    """playbooks/tasks/launchers.yml (the launchers step, and the train step for mpijob / torchx)
    records what it installed in trainfleet_launchers_installed: a later include in the same run
    for the same cluster, contract and queues applies nothing again; other queues, or a teardown in
    between, apply again."""
    from tests.unit.roles.test_pytorchjob_template import _playbook  # pylint: disable=import-outside-toplevel

    tasks = os.path.join(ROOT, "playbooks", "tasks", "launchers.yml")
    # No launcher wanted: the included roles are skipped, so no cluster is needed; the bookkeeping
    # around them is what runs.
    cluster = dict(SHARED["trainfleet_cluster"])
    include = {"ansible.builtin.include_tasks": tasks}
    show = {"ansible.builtin.debug": {"msg": "RECORDED {{ trainfleet_launchers_installed | to_json }}"}}
    play = [{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars": {"trainfleet_cluster": cluster, "volcano_queues": [{"name": "team-a", "weight": 1}]},
        "tasks": [
            dict(include, name="first"), show,
            dict(include, name="second"), show,
            dict(include, name="other queues", vars={"volcano_queues": [{"name": "team-b", "weight": 1}]}), show,
            # What the teardown role records when it ran (its fact teardown_runs): due again.
            {"ansible.builtin.set_fact": {"teardown_runs": 1}},
            dict(include, name="after a teardown"), show,
        ],
    }]
    playbook = tmp_path / "launchers.yml"
    playbook.write_text(yaml.safe_dump(play))
    rc, out = _playbook([str(playbook)], tmp_path)
    assert rc == 0, out
    assert out.count("installed earlier in this run") == 1, out
    assert len(re.findall(r"TASK \[Record that this run installed them\][ *]*\nok:", out)) == 3, out
    recorded = [line for line in out.splitlines() if "RECORDED" in line]
    assert len(recorded) == 4 and recorded[0] == recorded[1] != recorded[2] != recorded[3], recorded
    assert "team-a" in recorded[0] and "team-b" in recorded[2] and 'kubeconfig-trainfleet' in recorded[0], recorded
