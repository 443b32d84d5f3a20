# -*- coding: utf-8 -*-
"""kind_images_source through the real roles, with a stand-in Docker CLI (no Docker here).

- roles/kind_images tasks/source.yml publishes the node image of the chosen source and
  kind_cluster's defaults and kind config follow it (node image, pod network);
- auto falls back to build within seconds when the registry does not answer (this machine);
- pull that cannot pull stops the run naming kind_images_source;
- the build branch's task sequence (and so the fingerprint fast path) is what it was, and every
  source has its own stamp (the resolved source is a fingerprint input).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VENV_BIN = os.path.dirname(sys.executable)
ROLE = os.path.join(ROOT, "roles", "kind_images")

PLAY = """
- name: Decide the node image source and render the kind config
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - {root}/roles/kind_cluster/defaults/main.yml
  vars:
    _kind_cluster_dir: {out}/cluster
    _kind_cluster_restrict_oom: false
  tasks:
    - name: Validate the kind_images inputs
      ansible.builtin.include_role:
        name: trainfleet.training.kind_images
        tasks_from: preflight
    - name: Decide
      ansible.builtin.include_role:
        name: trainfleet.training.kind_images
        tasks_from: source
    - name: Render the kind config the kind_cluster role would write
      ansible.builtin.template:
        src: {root}/roles/kind_cluster/templates/kind-config.yaml.j2
        dest: {out}/kind-config.yaml
        mode: "0644"
      check_mode: false
    - name: Write what was decided
      ansible.builtin.copy:
        content: "{{{{ {{'source': kind_images_source_resolved, 'node_image': kind_images_node_image_resolved,
                      'cluster_image': kind_cluster_node_image, 'cni': kind_cluster_cni}} | to_json }}}}"
        dest: {out}/decided.json
        mode: "0644"
      check_mode: false
"""


def stand_in_docker(bin_dir, body):
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "docker"
    script.write_text("#!/bin/sh\necho \"$@\" >> %s\n%s\n" % (bin_dir / "calls", body))
    script.chmod(0o755)


def run(tmp_path, docker_body, *extra, check=False):
    bin_dir = tmp_path / "bin"
    stand_in_docker(bin_dir, docker_body)
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(root=ROOT, out=tmp_path))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH="%s:%s" % (bin_dir, os.environ["PATH"]))
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", "localhost,", str(play),
            "-e", "ansible_python_interpreter=" + sys.executable,
            "-e", "trainfleet_cache_dir=" + str(tmp_path / "cache")] + list(extra) + (["--check"] if check else [])
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    seconds = time.monotonic() - started
    decided = tmp_path / "decided.json"
    calls = (bin_dir / "calls").read_text().splitlines() if (bin_dir / "calls").exists() else []
    return SimpleNamespace(proc=proc, out=proc.stdout, rc=proc.returncode, seconds=seconds, calls=calls,
                           decided=json.loads(decided.read_text()) if decided.exists() else None)


def kind_config(tmp_path):
    return yaml.safe_load((tmp_path / "kind-config.yaml").read_text())


# A registry that does not answer: lookups fail (this machine), nothing is local.
OFFLINE = 'case "$1" in image) exit 1 ;; manifest) echo "dial tcp: lookup registry: no such host" >&2; exit 1 ;; esac; exit 1'
# A registry that hangs (packets dropped); a child process, to show the whole process group is cut.
HANGING = 'case "$1" in image) exit 1 ;; manifest|pull) sleep 60; echo late ;; esac; exit 1'
# A registry that answers and serves: pulls succeed.
ONLINE = 'case "$1" in image) exit 1 ;; esac; exit 0'


def test_auto_without_a_registry_builds_and_kind_starts_the_built_image(tmp_path):
    res = run(tmp_path, OFFLINE)
    assert res.rc == 0, res.out[-3000:]
    assert res.decided == {"source": "build", "node_image": "trainfleet/kind-node:v1.32.2",
                           "cluster_image": "trainfleet/kind-node:v1.32.2", "cni": "trainfleet"}
    assert "kind_images_source is auto and the registry did not serve kindest/node@sha256:c48c" in res.out
    assert kind_config(tmp_path)["networking"]["disableDefaultCNI"] is True
    assert not [c for c in res.calls if c.startswith("pull")]


def test_auto_falls_back_within_seconds_when_the_registry_hangs(tmp_path):
    res = run(tmp_path, HANGING, "-e", "kind_images_source_probe_timeout=2")
    assert res.rc == 0, res.out[-3000:]
    assert res.decided["source"] == "build"
    assert "within 2s (timeout: docker manifest inspect did not finish within 2s)" in res.out
    # Two image lookups and one bounded probe; no pull. The whole play (ansible start-up included) is short.
    assert [c.split()[0] for c in res.calls] == ["image", "image", "manifest"]
    assert res.seconds < 60, res.seconds


def test_auto_with_a_registry_pulls_by_digest_and_kind_starts_the_preloaded_official_image(tmp_path):
    res = run(tmp_path, ONLINE)
    assert res.rc == 0, res.out[-3000:]
    assert res.decided == {"source": "pull", "node_image": "trainfleet/kind-node:v1.32.0-kindest",
                           "cluster_image": "trainfleet/kind-node:v1.32.0-kindest", "cni": "kindnet"}
    pulls = [c for c in res.calls if c.startswith("pull ")]
    assert pulls == ["pull kindest/node@sha256:c48c62eac5da28cdadcf560d1d8616cfa6783b58f0d94cf63ad1bf49600cb027",
                     "pull docker.io/library/alpine@sha256:451eee8bedcb2f029756dc3e9d73bab0e7943c1ac55cff3a4861c52a0fdd3e98"]
    assert kind_config(tmp_path)["networking"]["disableDefaultCNI"] is False


def test_check_mode_asks_the_registry_but_pulls_nothing(tmp_path):
    res = run(tmp_path, ONLINE, check=True)
    assert res.rc == 0, res.out[-3000:]
    assert res.decided["source"] == "pull" and "would pull kindest/node@sha256:" in res.out
    assert not [c for c in res.calls if c.startswith("pull")]


def test_explicit_build_asks_no_registry(tmp_path):
    res = run(tmp_path, ONLINE, "-e", "kind_images_source=build")
    assert res.rc == 0, res.out[-3000:]
    assert res.decided["source"] == "build" and res.calls == []


def test_explicit_pull_that_cannot_pull_stops_naming_the_setting(tmp_path):
    res = run(tmp_path, OFFLINE, "-e", "kind_images_source=pull")
    assert res.rc != 0 and res.decided is None
    assert "kind_images_source is pull, but pulling kindest/node@sha256:c48c" in res.out
    assert "set kind_images_source to build (or auto)" in res.out


@pytest.mark.parametrize("variable, value, expected", [
    ("kind_images_source", "fetch", 'kind_images_source must be build, pull or auto (got "fetch")'),
    ("kind_images_source_probe_timeout", 600, "kind_images_source_probe_timeout 1..60 seconds (got 600)"),
    ("kind_images_pull_node_image", "kindest/node:v1.32.0", "kind_images_pull_node_image a kind node image pinned by"),
])
def test_bad_settings_are_refused_before_any_docker_call(tmp_path, variable, value, expected):
    res = run(tmp_path, ONLINE, "-e", json.dumps({variable: value}))
    assert res.rc != 0 and res.decided is None and res.calls == []
    assert expected in res.out, res.out[-2000:]


# ---------------------------------------------------------------- the task sequence (static)
def _includes(path):
    with open(path) as handle:
        tasks = yaml.safe_load(handle)
    return [(task["ansible.builtin.include_tasks"]["file"], task.get("when")) for task in tasks]


def test_the_debian_bases_are_imported_before_the_wait_for_the_go_builds():
    """debootstrap starts with the Go builds; the bases (the trainer image's early build waits for
    its own) are imported before the Go builds are waited for."""
    with open(os.path.join(ROLE, "tasks", "binaries.yml")) as handle:
        tasks = yaml.safe_load(handle)
    names = [task["name"] for task in tasks]
    start = names.index("Start the missing Go builds and debootstrap in the background")
    assert tasks[start]["trainfleet.training.background_job"]["jobs"] == "{{ _kind_images_go_jobs + _kind_images_rootfs_job }}"
    bases = names.index("Build the Debian base images")
    assert tasks[bases]["ansible.builtin.include_tasks"]["file"] == "base.yml" and "when" not in tasks[bases]
    assert start < bases < names.index("Wait for the Go builds")


def test_build_branch_keeps_its_task_sequence_and_fast_path():
    steps = _includes(os.path.join(ROLE, "tasks", "main.yml"))
    files = [step[0] for step in steps]
    assert files == ["preflight.yml", "source.yml", "tools.yml", "fingerprint.yml", "binaries.yml",
                     "components.yml", "node.yml", "pull.yml", "stamp.yml"]
    when = dict(steps)
    for name in ("binaries.yml", "components.yml", "node.yml"):
        assert when[name] == "not _kind_images_up_to_date and _kind_images_source == 'build'", name
    assert when["pull.yml"] == "not _kind_images_up_to_date and _kind_images_source == 'pull'"
    assert when["stamp.yml"] == "not _kind_images_up_to_date and not ansible_check_mode"
    # The decision comes before the fingerprint, which names the chosen source's image.
    with open(os.path.join(ROLE, "vars", "main.yml")) as handle:
        role_vars = yaml.safe_load(handle)
    assert role_vars["_kind_images_inputs"]["source"] == "{{ _kind_images_source }}"
    assert role_vars["_kind_images_inputs"]["node_image"] == "{{ _kind_images_node_image }}"
    for name in ("fingerprint.yml", "stamp.yml"):
        with open(os.path.join(ROLE, "tasks", name)) as handle:
            text = handle.read()
        assert "{{ _kind_images_node_image }}" in text and "kind_images_node_image }}" not in text.replace(
            "_kind_images_node_image }}", ""), name


def test_pins_live_in_the_defaults_with_reasons():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        text = handle.read()
    defaults = yaml.safe_load(text)
    assert defaults["kind_images_source"] == "auto"
    assert defaults["kind_images_kind_version"] == "v0.26.0"
    assert defaults["kind_images_pull_node_image"] == (
        "kindest/node:v1.32.0@sha256:c48c62eac5da28cdadcf560d1d8616cfa6783b58f0d94cf63ad1bf49600cb027")
    for pin in ("kind_images_pull_node_image:", "kind_images_pull_init_image_digest:", "kind_images_source:"):
        before = text[:text.index(pin)].rstrip().splitlines()[-1]
        assert before.startswith("#"), "%s has no comment saying why" % pin
