# -*- coding: utf-8 -*-
"""Role trainer_image: the image variants (trainer_image_variants), without a Docker engine.

The preflight runs with ansible-playbook against localhost and a Docker socket that does not exist:
bad variants are refused by the variants' assert, naming the variable and quoting the value; good
ones pass it and stop only at the first Docker call. The variant refs and the push's "was it built"
flag are the role's own expressions, read from its task files and run on made-up build results.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "trainer_image")
TIMEOUT = 300
REPO = "localhost:5001/trainfleet/trainer"
# the one task of tasks/preflight.yml that checks the inputs (the filter input_problems)
VARIANTS_TASK = "Check the inputs"
MARK = "TRAINER_IMAGE_CASE "
REFS_MSG = "{{ {'case': %s, 'refs': trainer_image_variant_refs, 'is_mapping': trainer_image_variant_refs is mapping} | to_json }}"
PUSH_MSG = "{{ {'case': 'push-' ~ _trainer_image_variant, 'ref': _ref, 'built': _built | bool} | to_json }}"

# A Neuron training image's reference as a user pins it (a made-up registry and digest: only its form matters here).
NEURON_REPO = "registry.example/neuron/pytorch-training-neuronx"
NEURON_BASE = NEURON_REPO + ":2.26.0@sha256:" + "0123456789abcdef" * 4
# id -> (variables, refused by the variants' assert)
CASES = {
    "none": ({"trainer_image_variants": []}, False),
    "mpi": ({"trainer_image_variants": ["mpi"]}, False),
    "unknown": ({"trainer_image_variants": ["rocm"]}, True),
    "cuda": ({"trainer_image_variants": ["cuda"]}, False),
    "cuda_mpi": ({"trainer_image_variants": ["cuda-mpi", "mpi"]}, False),
    "long_tag_cuda_mpi": ({"trainer_image_variants": ["cuda-mpi"], "trainer_image_tag": "t" * 120}, True),
    "cudnn_newline": ({"trainer_image_variants": ["cuda"], "trainer_image_cudnn_version": "9.0.0.312\n"}, True),
    "cuda_base_traversal": ({"trainer_image_variants": ["cuda"], "trainer_image_cuda_base_repository": "trainfleet/../x"}, True),
    "newline": ({"trainer_image_variants": ["mpi\n"]}, True),
    # the neuron variants: AWS's Neuron training image, pinned by digest, or refused before anything is pulled
    "neuron_no_base": ({"trainer_image_variants": ["neuron"]}, True),
    "neuron_tag_only": ({"trainer_image_variants": ["neuron-mpi"], "trainer_image_neuron_base": NEURON_REPO + ":2.26.0"}, True),
    "neuron_newline": ({"trainer_image_variants": ["neuron"], "trainer_image_neuron_base": NEURON_BASE + "\n"}, True),
    "neuron_template": ({"trainer_image_variants": ["neuron"],
                        "trainer_image_neuron_base": "{% raw %}{{ lookup('pipe', 'id') }}{% endraw %}"}, True),
    "neuron": ({"trainer_image_variants": ["neuron", "neuron-mpi"], "trainer_image_neuron_base": NEURON_BASE}, False),
    "string": ({"trainer_image_variants": "mpi"}, True),
    "mapping": ({"trainer_image_variants": {"mpi": True}}, True),
    "twice": ({"trainer_image_variants": ["mpi", "mpi"]}, True),
    "number": ({"trainer_image_variants": [1]}, True),
    "long_tag": ({"trainer_image_variants": ["mpi"], "trainer_image_tag": "t" * 125}, True),
    "long_tag_no_variants": ({"trainer_image_variants": [], "trainer_image_tag": "t" * 125}, False),
}


def _playbook(tmp_path, plays, extra=None):
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), DOCKER_HOST="unix://%s" % (tmp_path / "no-docker.sock"))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    args = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", str(tmp_path / "play.yml")]
    if extra is not None:
        (tmp_path / "vars.json").write_text(json.dumps(extra))
        args += ["-e", "@%s" % (tmp_path / "vars.json")]
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=TIMEOUT)
    return proc.returncode, proc.stdout + proc.stderr


def _outcomes(out):
    found = {}
    for line in out.splitlines():
        match = re.search(re.escape(MARK) + r"(\{.*\})\"?$", line.strip().strip('"'))
        if match:
            value = json.loads(match.group(1).replace('\\"', '"').replace("\\\\", "\\"))
            found[value["case"]] = value
    return found


@pytest.fixture(scope="module")
def preflight(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("trainer-image")
    base = {"trainer_image_repository": REPO, "trainer_image_base_image": "trainfleet/debian-base:bookworm",
            "trainer_image_base_image_local": True, "trainer_image_registry_login": "none",
            "ansible_python_interpreter": sys.executable}
    plays = []
    for case_id, (variables, _refused) in CASES.items():
        plays.append({
            "name": case_id, "hosts": "localhost", "gather_facts": False, "connection": "local",
            "vars": dict(base, **variables),
            "tasks": [{"block": [
                {"ansible.builtin.include_role": {"name": "trainfleet.training.trainer_image", "tasks_from": "preflight"}},
                {"ansible.builtin.set_fact": {"_outcome": {"task": None, "msg": ""}}}],
                "rescue": [{"ansible.builtin.set_fact": {"_outcome": {
                    "task": "{{ ansible_failed_task.name }}", "msg": "{{ ansible_failed_result.msg | default('') }}"}}}],
                "always": [{"ansible.builtin.debug": {"msg": MARK + "{{ _outcome | combine({'case': %s}) | to_json }}" % json.dumps(case_id)}}],
            }]})
    _rc, out = _playbook(tmp_path, plays)
    outcomes = _outcomes(out)
    assert set(outcomes) == set(CASES), out[-4000:]
    return outcomes


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_variants_preflight(preflight, case_id):
    variables, refused = CASES[case_id]
    outcome = preflight[case_id]
    if refused:
        assert outcome["task"] == VARIANTS_TASK, outcome
        assert "trainer_image_variants" in outcome["msg"]
        assert json.dumps(variables["trainer_image_variants"]) in outcome["msg"], outcome["msg"]
        for name in ("trainer_image_cudnn_version", "trainer_image_cuda_base_repository", "trainer_image_neuron_base"):
            if name in variables:
                value = variables[name].replace("{% raw %}", "").replace("{% endraw %}", "")
                assert name in outcome["msg"] and json.dumps(value) in outcome["msg"], outcome["msg"]
        if case_id.startswith("neuron"):
            assert "trainer_image_neuron_base" in outcome["msg"] and "@sha256:" in outcome["msg"], outcome["msg"]
        if case_id.startswith("long_tag"):
            assert "trainer_image_tag" in outcome["msg"] and json.dumps(variables["trainer_image_tag"]) in outcome["msg"]
    else:
        # past the variants' assert: stops at the first Docker call (no engine here), or later
        assert outcome["task"] != VARIANTS_TASK, outcome


def _task(path, name):
    with open(os.path.join(ROLE, "tasks", path)) as handle:
        tasks = yaml.safe_load(handle)
    return next(task for task in tasks if task.get("name") == name)


def test_variant_refs_and_built_flags(tmp_path):
    """The role's own expressions: refs from trainer_image_ref, and each variant's push sees its own build result."""
    name_task = _task("build.yml", "Name the image variants")
    push_task = _task("main.yml", "Push the image variants like the image")
    built = push_task["vars"]["image_built"]
    ref = push_task["vars"]["image_ref"]
    results = []
    for variants in ([], ["mpi"]):
        builds = {"results": [{"_trainer_image_variant": v, "changed": True} for v in variants]}
        results.append({
            "name": "refs %s" % variants, "hosts": "localhost", "gather_facts": False, "connection": "local",
            "vars": {"trainer_image_variants": variants, "trainer_image_ref": REPO + ":0123456789ab",
                     "__trainer_image_variant_builds": builds, "ansible_python_interpreter": sys.executable},
            "tasks": [name_task,
                      {"ansible.builtin.debug": {"msg": MARK + REFS_MSG % json.dumps("refs-%d" % len(variants))}},
                      {"ansible.builtin.debug": {"msg": MARK + PUSH_MSG},
                       "vars": {"_ref": ref, "_built": built},
                       "loop": "{{ trainer_image_variants }}", "loop_control": {"loop_var": "_trainer_image_variant"}}]})
    rc, out = _playbook(tmp_path, results)
    assert rc == 0, out[-4000:]
    outcomes = _outcomes(out)
    assert outcomes["refs-0"]["refs"] == {} and outcomes["refs-0"]["is_mapping"]
    assert outcomes["refs-1"]["refs"] == {"mpi": REPO + ":0123456789ab-mpi"}
    assert outcomes["push-mpi"] == {"case": "push-mpi", "ref": REPO + ":0123456789ab-mpi", "built": True}


def test_variants_are_declared():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        assert yaml.safe_load(handle)["trainer_image_variants"] == []
    with open(os.path.join(ROLE, "meta", "argument_specs.yml")) as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]["trainer_image_variants"]
    assert spec["type"] == "list" and spec["elements"] == "str" and spec["default"] == []
    with open(os.path.join(ROLE, "vars", "main.yml")) as handle:
        build_args = yaml.safe_load(handle)["_trainer_image_variant_build_args"]
    base = "{{ _trainer_image_cuda_base_ref }}"
    neuron = {"TRAINER_TORCH": "neuron", "TRAINER_DEPS": "pip", "BASE_IMAGE": "{{ trainer_image_neuron_base }}"}
    assert build_args == {"mpi": {"TRAINER_MPI": "1"}, "cuda": {"TRAINER_TORCH": "cuda", "BASE_IMAGE": base},
                          "cuda-mpi": {"TRAINER_TORCH": "cuda", "TRAINER_MPI": "1", "BASE_IMAGE": base},
                          "neuron": neuron, "neuron-mpi": dict(neuron, TRAINER_MPI="1")}
    # the variants' arguments (the CUDA base's name: cuDNN release, trainer base id, revision) are in the content tag
    with open(os.path.join(ROLE, "tasks", "tag.yml")) as handle:
        assert "_trainer_image_variant_build_args" in handle.read()
