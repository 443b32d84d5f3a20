# -*- coding: utf-8 -*-
"""module_utils/image_source.py and the kind_image_source module: build, pull or auto.

No Docker here: the decision runs against stand-ins (reachable, unreachable, timeout, pull
succeeded or failed, images already present), and the real command runner against small
scripts standing in for the Docker CLI, to measure that auto falls back within seconds when the
registry does not answer.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
for _path in (ROOT, os.path.join(ROOT, ".collections")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from ansible_collections.trainfleet.training.plugins.module_utils import image_source as S  # noqa: E402

NODE = "kindest/node:v1.32.0@sha256:c48c62eac5da28cdadcf560d1d8616cfa6783b58f0d94cf63ad1bf49600cb027"
INIT = "library/alpine@sha256:451eee8bedcb2f029756dc3e9d73bab0e7943c1ac55cff3a4861c52a0fdd3e98"


class FakeDocker(object):
    """present: refs already local; probe: (status, detail); pull_fails: refs whose pull fails."""

    def __init__(self, present=(), probe=("ok", "served"), pull_fails=()):
        self.local = set(present)
        self.probe_answer = probe
        self.pull_fails = set(pull_fails)
        self.calls = []

    def present(self, ref):
        self.calls.append(("present", ref))
        return ref in self.local

    def probe(self, ref, timeout):
        self.calls.append(("probe", ref, timeout))
        return self.probe_answer

    def pull(self, ref, timeout):
        self.calls.append(("pull", ref, timeout))
        if ref in self.pull_fails:
            return False, "denied: requested access to the resource is denied"
        self.local.add(ref)
        return True, "pulled"


# ---------------------------------------------------------------- the decision
def test_explicit_build_touches_no_docker():
    docker = FakeDocker()
    res = S.decide("build", [NODE, INIT], docker)
    assert res["source"] == "build" and res["changed"] is False and docker.calls == []
    assert res["reason"].startswith("kind_images_source is build")


def test_auto_pulls_when_the_registry_answers():
    docker = FakeDocker()
    res = S.decide("auto", [NODE, INIT], docker, probe_timeout=3)
    assert res["source"] == "pull" and res["changed"] is True and res["pulled"] == [NODE, INIT]
    assert ("probe", NODE, 3) in docker.calls
    assert [c[0] for c in docker.calls] == ["present", "present", "probe", "pull", "pull"]


@pytest.mark.parametrize("answer", [
    ("unreachable", "dial tcp: lookup registry: no such host"),
    ("unreachable", "connect: connection refused"),
    ("timeout", "docker manifest inspect did not finish within 5s"),
])
def test_auto_builds_when_the_registry_does_not_answer(answer):
    docker = FakeDocker(probe=answer)
    res = S.decide("auto", [NODE, INIT], docker)
    assert res["source"] == "build" and res["changed"] is False and res["pulled"] == []
    assert not [c for c in docker.calls if c[0] == "pull"]
    assert res["probe"]["status"] == answer[0]
    assert res["reason"].startswith("kind_images_source is auto and the registry did not serve kindest/node@sha256:c48c")
    assert answer[1] in res["reason"]


def test_auto_builds_when_the_pull_fails_after_a_good_answer():
    res = S.decide("auto", [NODE, INIT], FakeDocker(pull_fails=[INIT]))
    assert res["source"] == "build" and res["pulled"] == [NODE]
    assert "pulling library/alpine@sha256:451e" in res["reason"] and "building everything here" in res["reason"]


@pytest.mark.parametrize("source", ["pull", "auto"])
def test_images_already_local_need_no_registry(source):
    docker = FakeDocker(present=[NODE, INIT], probe=("timeout", "no network"))
    res = S.decide(source, [NODE, INIT], docker)
    assert res["source"] == "pull" and res["changed"] is False and res["probe"] is None
    assert [c[0] for c in docker.calls] == ["present", "present"]


def test_explicit_pull_pulls_without_probing():
    docker = FakeDocker(present=[NODE], probe=("timeout", "not asked"))
    res = S.decide("pull", [NODE, INIT], docker)
    assert res["source"] == "pull" and res["pulled"] == [INIT] and res["missing"] == [INIT]
    assert not [c for c in docker.calls if c[0] == "probe"]


def test_explicit_pull_failing_is_an_error_naming_the_setting():
    with pytest.raises(S.SourceError) as err:
        S.decide("pull", [NODE, INIT], FakeDocker(pull_fails=[NODE]))
    msg = str(err.value)
    assert msg.startswith("kind_images_source is pull, but pulling kindest/node@sha256:c48c")
    assert "requested access to the resource is denied" in msg
    assert "set kind_images_source to build (or auto)" in msg


def test_check_mode_pulls_nothing():
    docker = FakeDocker()
    res = S.decide("auto", [NODE, INIT], docker, check_mode=True)
    assert res["source"] == "pull" and res["changed"] is True and res["pulled"] == []
    assert res["reason"].startswith("kind_images_source is auto: would pull kindest/node@sha256:")
    assert not [c for c in docker.calls if c[0] == "pull"]
    assert S.decide("auto", [NODE], FakeDocker(probe=("unreachable", "x")), check_mode=True)["source"] == "build"


@pytest.mark.parametrize("source, images, expected", [
    ("fetch", [NODE], "kind_images_source must be one of build, pull, auto, got 'fetch'"),
    ("pull", [], "kind_images_source is pull, but no image to pull is pinned"),
])
def test_bad_settings_are_refused(source, images, expected):
    with pytest.raises(S.SourceError) as err:
        S.decide(source, images, FakeDocker())
    assert str(err.value) == expected


@pytest.mark.parametrize("ref, expected", [
    (NODE, "kindest/node@sha256:c48c62eac5da28cdadcf560d1d8616cfa6783b58f0d94cf63ad1bf49600cb027"),
    ("localhost:5001/x/y:1.0@sha256:ab", "localhost:5001/x/y@sha256:ab"),
    ("localhost:5001/x/y@sha256:ab", "localhost:5001/x/y@sha256:ab"),
    ("alpine:3.10", "alpine:3.10"),
])
def test_digest_ref(ref, expected):
    assert S.digest_ref(ref) == expected


# ---------------------------------------------------------------- the Docker CLI calls, with stand-in CLIs
def fake_cli(tmp_path, body):
    """A script standing in for the Docker CLI; it logs its arguments."""
    script = tmp_path / "docker"
    script.write_text("#!/bin/sh\necho \"$@\" >> %s\n%s\n" % (tmp_path / "calls", body))
    script.chmod(0o755)
    return str(script)


def alive(pid):
    """True while the process exists and is not a zombie waiting to be reaped."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def calls(tmp_path):
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def test_unreachable_registry_falls_back_within_seconds(tmp_path):
    """This machine's case: no registry answers. A CLI that hangs (packets dropped) is cut at the probe timeout."""
    pid_file = tmp_path / "child.pid"
    cli = S.DockerCli(fake_cli(tmp_path, 'case "$1" in image) exit 1 ;; manifest) sleep 30 & echo $! > %s; wait ;; esac'
                               % pid_file))
    started = time.monotonic()
    res = S.decide("auto", [NODE], cli, probe_timeout=2)
    seconds = time.monotonic() - started
    assert res["source"] == "build" and res["probe"]["status"] == "timeout"
    # cut at the 2 s probe, not after the CLI's 30 s: the bound leaves room for a loaded, slower machine
    assert seconds < 15, seconds
    # The CLI's whole process group is gone (nothing keeps waiting on the registry).
    time.sleep(0.2)
    assert not alive(int(pid_file.read_text()))
    assert calls(tmp_path) == ["image inspect --format {{.Id}} " + S.digest_ref(NODE),
                               "manifest inspect " + S.digest_ref(NODE)]


def test_refused_registry_falls_back_at_once(tmp_path):
    cli = S.DockerCli(fake_cli(tmp_path, 'case "$1" in manifest) echo "dial tcp: lookup registry: no such host" >&2 ;; esac; exit 1'))
    started = time.monotonic()
    res = S.decide("auto", [NODE], cli, probe_timeout=5)
    assert time.monotonic() - started < 3
    assert res["source"] == "build" and res["probe"]["status"] == "unreachable"
    assert "no such host" in res["reason"]


def test_reachable_registry_pulls_by_digest(tmp_path):
    cli = S.DockerCli(fake_cli(tmp_path, 'case "$1" in image) exit 1 ;; esac; exit 0'))
    res = S.decide("auto", [NODE, INIT], cli)
    assert res["source"] == "pull" and res["pulled"] == [NODE, INIT]
    assert calls(tmp_path)[-2:] == ["pull " + S.digest_ref(NODE), "pull " + INIT]


def test_missing_docker_cli_means_build_for_auto_and_an_error_for_pull(tmp_path):
    cli = S.DockerCli(str(tmp_path / "no-docker-here"))
    res = S.decide("auto", [NODE], cli)
    assert res["source"] == "build" and "no-docker-here" in res["reason"]
    with pytest.raises(S.SourceError, match="kind_images_source is pull, but pulling kindest/node@sha256"):
        S.decide("pull", [NODE], cli)


# ---------------------------------------------------------------- the module
def run_module(args, capsys):
    from ansible.module_utils.testing import patch_module_args
    from ansible_collections.trainfleet.training.plugins.modules import kind_image_source

    with patch_module_args(args):
        with pytest.raises(SystemExit):
            kind_image_source.main()
    return json.loads(capsys.readouterr().out)


def test_module_auto_without_registry_says_build(tmp_path, capsys):
    docker = fake_cli(tmp_path, 'echo "Get https://registry/v2/: dial tcp: i/o timeout" >&2; exit 1')
    res = run_module(dict(source="auto", images=[NODE], docker=docker, probe_timeout=2), capsys)
    assert res["source"] == "build" and res["changed"] is False and "failed" not in res
    assert res["reason"].startswith("kind_images_source is auto and the registry did not serve")


def test_module_explicit_pull_failure_names_the_setting(tmp_path, capsys):
    docker = fake_cli(tmp_path, 'echo "pull access denied" >&2; exit 1')
    res = run_module(dict(source="pull", images=[NODE], docker=docker), capsys)
    assert res["failed"] is True
    assert res["msg"].startswith("kind_images_source is pull, but pulling kindest/node@sha256:")
    assert "pull access denied" in res["msg"]


def test_module_check_mode_does_not_pull(tmp_path, capsys):
    docker = fake_cli(tmp_path, 'case "$1" in image) exit 1 ;; pull) exit 99 ;; esac; exit 0')
    res = run_module(dict(source="auto", images=[NODE], docker=docker, _ansible_check_mode=True), capsys)
    assert res["source"] == "pull" and res["changed"] is True and res["pulled"] == []
    assert not [c for c in calls(tmp_path) if c.startswith("pull")]


def test_module_bounds_its_timeouts(capsys):
    res = run_module(dict(source="auto", images=[NODE], probe_timeout=600), capsys)
    assert res["failed"] is True and "probe_timeout must be 1..60 seconds" in res["msg"]
