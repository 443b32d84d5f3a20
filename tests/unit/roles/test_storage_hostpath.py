# -*- coding: utf-8 -*-
"""Role storage: the hostPath directory is never the nodes' root or a system directory.

One ansible-playbook run (check mode, localhost, no cluster) with one play per value: each play
runs the role's preflight tasks inside block/rescue and prints the outcome.
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
PLAYBOOK_TIMEOUT = 300

REFUSED = [
    "/", "/etc", "/etc/trainfleet", "/usr/local/data", "/lib64/x", "/root/data", "/proc", "/sys/fs",
    "/kind", "/kind/manifests", "/var", "/var/lib", "/var/local", "/opt", "/home", "/mnt", "/media", "/srv", "/tmp",
    "/var/lib/kubelet", "/var/lib/kubelet/pods", "/var/lib/containerd", "/var/lib/etcd", "/var/lib/docker/volumes",
    "/var/lib/cni", "/var/log", "/var/log/pods", "/var/run", "/var/lock", "/opt/cni/bin", "/run/containerd",
]
ACCEPTED = [
    "/var/local/trainfleet-data", "/data", "/srv/trainfleet", "/mnt/datasets", "/opt/trainfleet",
    "/var/lib/trainfleet", "/home/trainer/data", "/tmp/trainfleet", "/library",
]


def _case_id(path):
    return "p" + re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("storage-hostpath")
    plays = []
    for path in REFUSED + ACCEPTED:
        plays.append({
            "name": "case %s" % _case_id(path),
            "hosts": "localhost",
            "gather_facts": False,
            "connection": "local",
            # The parts of the platform contract (roles/platform) the storage role reads.
            "vars": {"trainfleet_cluster": {"kubeconfig": str(tmp_path / "no-kubeconfig"), "context": "",
                                            "storage": {"backends": ["hostpath"], "class_name": ""}},
                     "trainfleet_name": "trainfleet",
                     "trainfleet_cache_dir": str(tmp_path / "cache"), "storage_hostpath_path": path},
            "tasks": [{
                "block": [
                    {"ansible.builtin.include_role": {"name": "trainfleet.training.storage", "tasks_from": "preflight.yml"}},
                    {"ansible.builtin.set_fact": {"_outcome": "PASSED"}},
                ],
                "rescue": [{"ansible.builtin.set_fact": {"_outcome": "{{ ansible_failed_result.msg }}"}}],
            }, {
                "ansible.builtin.debug": {"msg": "CASE %s: {{ _outcome }}" % _case_id(path)},
            }],
        })
    playbook = tmp_path / "hostpath.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    env["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + env.get("PATH", "")
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    cmd = [playbook_bin if os.path.exists(playbook_bin) else "ansible-playbook", "-i", "localhost,",
           "-e", json.dumps({"ansible_python_interpreter": sys.executable}), str(playbook), "--check"]
    # bounded per case too (~2 s each on a quiet machine, ten times that on a loaded one)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                          timeout=PLAYBOOK_TIMEOUT + 20 * len(plays))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    found = {}
    for match in re.finditer(r'"msg": "CASE ([a-z0-9-]+): (.*)"\n', out):
        found[match.group(1)] = json.loads('"%s"' % match.group(2))
    assert len(found) == len(REFUSED + ACCEPTED), out
    return found


@pytest.mark.parametrize("path", REFUSED)
def test_system_directories_are_refused_naming_the_variable_and_quoting_the_value(outcomes, path):
    message = outcomes[_case_id(path)]
    assert message != "PASSED", path
    assert "storage_hostpath_path %s" % json.dumps(path) in message, message


@pytest.mark.parametrize("path", ACCEPTED)
def test_directories_of_their_own_are_accepted(outcomes, path):
    assert outcomes[_case_id(path)] == "PASSED"
