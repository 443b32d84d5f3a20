# -*- coding: utf-8 -*-
"""The trainer image's early build (trainer_image entry point prebuild) with the real Docker engine.

One playbook: the early build starts while its base image does not exist yet (as in a cold cluster
step), the play then imports the base, and the role's main entry point waits for the early build
and builds. Both builds must share the build cache: the image the role tags must be the very image
the early build made (same id), every step of the role's build must come from the cache, and the
early build's log must show its wait for the base. A second run starts nothing: the image of this
content is there. Nothing is pushed; the images are removed afterwards.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK_TIMEOUT = 300
MARK = "PREBUILD_RESULT "
RESULT_MSG = "{{ {'ref': trainer_image_ref, 'id': image_id.stdout, 'build': __trainer_image_build.stdout | default('')} | to_json }}"
DOCKERFILE = """ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG PREBUILD_ARG=0
COPY a.txt /a.txt
ENV PREBUILD_ARG=${PREBUILD_ARG}
COPY --chown=0:0 . /opt/context/
LABEL org.trainfleet.test=prebuild
"""


def _docker(*args, check=True):
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120, check=check)


def _run(play_path, env):
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(play_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=PLAYBOOK_TIMEOUT, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def _result(out):
    for line in out.splitlines():
        match = re.search(re.escape(MARK) + r"(\{.*\})\"?$", line.strip().strip('"'))
        if match:
            return json.loads(match.group(1).replace('\\"', '"').replace("\\\\", "\\"))
    raise AssertionError("no %s line in:\n%s" % (MARK, out[-4000:]))


@pytest.fixture()
def names():
    tag = uuid.uuid4().hex[:10]
    base = "trainfleet-integration/prebuild-base:%s" % tag
    repository = "localhost:5999/trainfleet-integration/prebuild-%s" % tag
    yield base, repository
    refs = _docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", repository, check=False).stdout.split()
    _docker("image", "rm", "-f", *refs, base, check=False)


def test_prebuild_shares_the_build_cache(tmp_path, names):
    base, repository = names
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(DOCKERFILE)
    (context / "a.txt").write_text("a\n")
    (context / "b.txt").write_text("b\n")
    archive = tmp_path / "empty.tar"
    with tarfile.open(archive, "w"):
        pass
    cache = tmp_path / "cache"
    log = cache / "logs" / "trainer-image-prebuild.log"
    role_vars = {
        "trainer_image_context": str(context), "trainer_image_base_image": base, "trainer_image_base_image_local": True,
        "trainer_image_repository": repository, "trainer_image_registry_login": "none", "trainer_image_push": False,
        "trainer_image_build_args": {"PREBUILD_ARG": "7"}, "trainer_image_build_timeout": 240,
        "trainfleet_cache_dir": str(cache), "ansible_python_interpreter": sys.executable,
    }
    # The argument spec's defaults name the contract and the region (never used: every value is set above).
    role_vars["trainfleet_aws_region"] = "us-east-1"
    role_vars["trainfleet_cluster"] = {"registry": {
        "trainer_base_image": base, "base_image_local": True, "trainer_repository": repository, "login": "none"}}
    prebuild = {"ansible.builtin.include_role": {"name": "trainfleet.training.trainer_image", "tasks_from": "prebuild.yml"}}
    first = {
        "name": "cold", "hosts": "localhost", "gather_facts": False, "connection": "local", "vars": role_vars,
        "tasks": [
            prebuild,
            # The cluster step imports the base a few minutes in; here a few seconds.
            {"ansible.builtin.pause": {"seconds": 6}},
            {"ansible.builtin.command": {"argv": ["docker", "import", str(archive), base]}},
            {"ansible.builtin.include_role": {"name": "trainfleet.training.trainer_image"}},
            {"ansible.builtin.command": {"argv": ["docker", "image", "inspect", "--format", "{{ '{{' }}.Id{{ '}}' }}",
                                                  "{{ trainer_image_ref }}"]},
             "register": "image_id"},
            {"ansible.builtin.debug": {"msg": MARK + RESULT_MSG}},
        ]}
    second = dict(first, name="warm", tasks=[dict(prebuild, register="again"),
                                             {"ansible.builtin.debug": {"msg": MARK + "{{ {'skipped': true} | to_json }}"}}])
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")

    (tmp_path / "cold.yml").write_text(yaml.safe_dump([first]))
    rc, out = _run(tmp_path / "cold.yml", env)
    assert rc == 0, out[-6000:]
    result = _result(out)
    prebuild_log = log.read_text()
    # Its first wait line: the seconds it shows depend on how fast the engine answered the first look.
    assert re.search(r"^waiting for the base image %s \(\d+s\)$" % re.escape(base), prebuild_log, re.M), prebuild_log
    built = re.findall(r"^Successfully built ([0-9a-f]{12})$", prebuild_log, re.M)
    assert built, prebuild_log
    assert re.search(r"^trainfleet-job: rc=0 seconds=\d+$", prebuild_log, re.M), prebuild_log
    # The role's image is the early build's image, every step of its build from the cache.
    assert result["id"].startswith("sha256:" + built[-1]), (result, prebuild_log)
    steps = re.split(r"^Step \d+/\d+ : ", result["build"], flags=re.M)[1:]
    assert len(steps) == 7 and steps[1].startswith("FROM"), result["build"]
    assert all("Using cache" in step for step in steps[2:]), result["build"]
    assert result["ref"].startswith(repository + ":"), result

    mtime = log.stat().st_mtime_ns
    (tmp_path / "warm.yml").write_text(yaml.safe_dump([second]))
    rc, out = _run(tmp_path / "warm.yml", env)
    assert rc == 0, out[-6000:]
    assert re.search(r"Start the build in the background \(it waits for its base\)\] \**\n\s*skipping:", out), out[-3000:]
    assert log.stat().st_mtime_ns == mtime, "a second early build started though the image is there"
