# -*- coding: utf-8 -*-
"""Role docker_engine: the runc wrapper changes kind node containers only.

The wrapper (roles/docker_engine/files/runc-capclamp.py) is installed the way the role installs
it: a copy, and beside it <wrapper>.json with the content tasks/capclamp.yml writes, naming a fake
runc (a script that records its arguments) and a fake Docker data root (containers/<id>/config.v2.json
with the labels and image Docker records). It is then run the way containerd's shim runs a runtime:
`<runtime> [global flags] create --bundle DIR ... ID` or `exec --process FILE ... ID`. Nothing here
needs Docker or root.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys

import jinja2
import pytest
import yaml

from ansible.plugins.filter.core import FilterModule as CoreFilters

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
WRAPPER = os.path.join(ROOT, "roles", "docker_engine", "files", "runc-capclamp.py")
CAPCLAMP_TASKS = os.path.join(ROOT, "roles", "docker_engine", "tasks", "capclamp.yml")
KIND_ID = "a" * 64
BUILD_ID = "b" * 64
OTHER_ID = "c" * 64
UNKNOWN_ID = "d" * 64
CAPABILITIES = [
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
    "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
]
# Every capability the kernel may know, plus one no kernel knows: a kind node never keeps that one.
REQUESTED = ["CAP_" + name for name in CAPABILITIES] + ["CAP_NOT_IN_ANY_BOUNDING_SET"]
# The hard RLIMIT_NOFILE the wrapper runs with (its children cannot go above it).
HARD_NOFILE = 4096 if resource.getrlimit(resource.RLIMIT_NOFILE)[1] in (resource.RLIM_INFINITY, -1) \
    else min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])


def bounding_set():
    with open("/proc/self/status") as status:
        mask = int([line for line in status if line.startswith("CapBnd:")][0].split()[1], 16)
    return ["CAP_" + name for bit, name in enumerate(CAPABILITIES) if mask & (1 << bit)]


def settings_content(**variables):
    """The wrapper's configuration as the role writes it: capclamp.yml's own content expression, rendered."""
    with open(CAPCLAMP_TASKS, encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    [content] = [task["ansible.builtin.copy"]["content"] for task in tasks
                 if task.get("ansible.builtin.copy", {}).get("dest") == "{{ docker_engine_capclamp_path }}.json"]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters.update(CoreFilters().filters())
    values = {"docker_engine_runc_path": "/usr/bin/runc", "_docker_engine_data_root": "/var/lib/docker",
              "docker_engine_capclamp_images": ["trainfleet/kind-node-base", "trainfleet/kind-node"]}
    values.update(variables)
    return env.from_string(content).render(**values)


def render(wrapper, **variables):
    """Install the wrapper at wrapper (a path under tmp_path) as the role does: a copy of
    files/runc-capclamp.py (mode 0755) and <wrapper>.json beside it (mode 0644). Returns wrapper."""
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(WRAPPER, str(wrapper))
    wrapper.chmod(0o755)
    config = settings_path(wrapper)
    config.write_text(settings_content(**variables))
    config.chmod(0o644)
    return wrapper


def settings_path(wrapper):
    return wrapper.with_name(wrapper.name + ".json")


def process_spec():
    caps = {kind: list(REQUESTED) for kind in ("bounding", "effective", "permitted", "inheritable", "ambient")}
    return {"args": ["/sbin/init"], "capabilities": caps,
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1048576, "soft": 1048576}]}


class Host(object):
    """A fake Docker data root, bundle directory and runc; run() invokes the installed wrapper."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.data_root = tmp_path / "docker"
        self.record = tmp_path / "runc-argv.json"
        self.runc = tmp_path / "bin" / "runc"
        self.runc.parent.mkdir()
        self.runc.write_text("#!%s -I\nimport json, sys\nwith open(%r, 'w') as out:\n    json.dump(sys.argv[1:], out)\n"
                             % (sys.executable, str(self.record)))
        self.runc.chmod(0o755)
        self.wrapper = render(tmp_path / "libexec" / "runc-capclamp",
                              docker_engine_runc_path=str(self.runc), _docker_engine_data_root=str(self.data_root))
        self.config = settings_path(self.wrapper)
        self.container(KIND_ID, labels={"io.x-k8s.kind.cluster": "trainfleet", "io.x-k8s.kind.role": "worker"},
                       image="trainfleet/kind-node:v1.32.2")
        self.container(BUILD_ID, labels={"trainfleet.versions": "x"}, image="trainfleet/kind-node-base:v1.32.2")
        self.container(OTHER_ID, labels={"project": "trainfleet"}, image="trainfleet/registry:2.8.2-abc")

    def container(self, container_id, labels, image):
        directory = self.data_root / "containers" / container_id
        directory.mkdir(parents=True)
        (directory / "config.v2.json").write_text(json.dumps(
            {"ID": container_id, "Config": {"Hostname": "x", "Labels": labels, "Image": image}, "Image": "sha256:" + "0" * 64}))

    def bundle(self, container_id, spec=None):
        bundle = self.tmp / "run" / container_id
        bundle.mkdir(parents=True)
        text = json.dumps({"ociVersion": "1.0.2", "process": spec or process_spec(), "root": {"path": "rootfs"}})
        (bundle / "config.json").write_text(text)
        return bundle

    def run(self, args, env=None, direct=True):
        """Run the wrapper with a hard RLIMIT_NOFILE of HARD_NOFILE, as the shim would."""
        if self.record.exists():
            self.record.unlink()
        runner = [str(self.wrapper)] if direct and os.path.exists("/usr/bin/python3") else [sys.executable, "-I", str(self.wrapper)]
        script = 'ulimit -Sn %d && ulimit -Hn %d && exec "$@"' % (HARD_NOFILE, HARD_NOFILE)
        done = subprocess.run(["bash", "-c", script, "wrapper"] + runner + args, capture_output=True, text=True,
                              env=env if env is not None else dict(os.environ), timeout=60, check=False, cwd=str(self.tmp))
        argv = json.loads(self.record.read_text()) if self.record.exists() else None
        return done, argv


@pytest.fixture
def host(tmp_path):
    return Host(tmp_path)


def shim_create(bundle, container_id):
    return ["--root", "/var/run/docker/runtime-runc/moby", "--log", "/run/log.json", "--log-format", "json",
            "create", "--bundle", str(bundle), "--pid-file", str(bundle / "init.pid"), container_id]


def shim_exec(process_file, container_id):
    return ["--root", "/var/run/docker/runtime-runc/moby", "exec", "--process", str(process_file), "--detach",
            "--pid-file", "/run/exec.pid", container_id]


def clamped_caps():
    return [c for c in REQUESTED if c in bounding_set()]


@pytest.mark.parametrize("container_id", [KIND_ID, BUILD_ID], ids=["kind-label", "node-image-build"])
def test_kind_node_create_is_clamped(host, container_id):
    bundle = host.bundle(container_id)
    args = shim_create(bundle, container_id)
    done, argv = host.run(args)
    assert done.returncode == 0, done.stderr
    assert argv == args  # runc gets the original arguments
    process = json.loads((bundle / "config.json").read_text())["process"]
    assert "CAP_NOT_IN_ANY_BOUNDING_SET" not in process["capabilities"]["bounding"]
    for kind, names in process["capabilities"].items():
        assert names == clamped_caps(), kind
    assert process["rlimits"] == [{"type": "RLIMIT_NOFILE", "hard": HARD_NOFILE, "soft": HARD_NOFILE}]
    assert not (bundle / "config.json.capclamp").exists()


@pytest.mark.parametrize("container_id", [OTHER_ID, UNKNOWN_ID, "not-a-docker-id"], ids=["labelled-other", "no-record", "not-an-id"])
def test_other_containers_pass_through_untouched(host, container_id):
    bundle = host.bundle(container_id)
    before = (bundle / "config.json").read_bytes()
    args = shim_create(bundle, container_id)
    done, argv = host.run(args)
    assert done.returncode == 0, done.stderr
    assert argv == args
    assert (bundle / "config.json").read_bytes() == before
    assert done.stderr == ""


def test_exec_into_a_kind_node_is_clamped_and_others_are_not(host):
    for container_id, clamped in ((KIND_ID, True), (OTHER_ID, False)):
        process_file = host.tmp / ("process-%s.json" % container_id[:4])
        process_file.write_text(json.dumps(process_spec()))
        before = process_file.read_bytes()
        done, argv = host.run(shim_exec(process_file, container_id))
        assert done.returncode == 0, done.stderr
        assert argv == shim_exec(process_file, container_id)
        if clamped:
            assert json.loads(process_file.read_text())["capabilities"]["effective"] == clamped_caps()
        else:
            assert process_file.read_bytes() == before


@pytest.mark.parametrize("args", [["state", KIND_ID], ["start", KIND_ID], ["delete", "--force", KIND_ID], ["--version"]])
def test_other_runc_commands_pass_through(host, args):
    done, argv = host.run(args)
    assert done.returncode == 0, done.stderr
    assert argv == args


def test_a_kind_node_that_cannot_be_clamped_does_not_start(host):
    """Fails closed: a broken spec of a kind node stops the start; runc is not run."""
    bundle = host.bundle(KIND_ID)
    (bundle / "config.json").write_text("{not json")
    done, argv = host.run(shim_create(bundle, KIND_ID))
    assert done.returncode == 1
    assert argv is None
    assert "runc-capclamp: not starting kind node %s" % KIND_ID in done.stderr


def test_a_spec_without_process_does_not_start_a_kind_node(host):
    bundle = host.bundle(KIND_ID)
    (bundle / "config.json").write_text(json.dumps({"ociVersion": "1.0.2"}))
    done, argv = host.run(shim_create(bundle, KIND_ID))
    assert done.returncode == 1 and argv is None
    assert "holds no process object" in done.stderr


def test_environment_cannot_change_runc_or_inject_code(host, tmp_path):
    """No TRAINFLEET_RUNC override; -I ignores PYTHONPATH, PYTHONSTARTUP-like variables and the
    script's own directory (a json.py next to it is not imported)."""
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "injected"
    for name in ("json.py", "sitecustomize.py", "os.py"):
        (evil / name).write_text("open(%r, 'w').write('injected')\n" % str(marker))
    (host.wrapper.parent / "json.py").write_text("open(%r, 'w').write('injected')\n" % str(marker))
    other_runc = tmp_path / "other-runc"
    other_runc.write_text("#!/bin/sh\ntouch %s\n" % str(marker))
    other_runc.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(evil), TRAINFLEET_RUNC=str(other_runc))
    bundle = host.bundle(KIND_ID)
    done, argv = host.run(shim_create(bundle, KIND_ID), env=env)
    assert done.returncode == 0, done.stderr
    assert argv == shim_create(bundle, KIND_ID)
    assert not marker.exists()


def test_missing_runc_is_reported(host):
    host.runc.unlink()
    done, argv = host.run(["state", KIND_ID])
    assert done.returncode == 127 and argv is None
    assert "runc-capclamp: cannot run %s" % host.runc in done.stderr


def test_shebang_runs_python_isolated(tmp_path):
    source = render(tmp_path / "runc-capclamp").read_text()
    assert source.startswith("#!/usr/bin/python3 -I\n")
    assert "os.environ" not in source and "getenv" not in source


def test_data_root_from_daemon_json_wins_over_the_default(tmp_path):
    config = settings_path(render(tmp_path / "srv" / "runc-capclamp", _docker_engine_data_root="/srv/docker"))
    assert json.loads(config.read_text())["DOCKER_DATA_ROOT"] == "/srv/docker"
    default = settings_path(render(tmp_path / "default" / "runc-capclamp"))
    assert json.loads(default.read_text()) == {"RUNC": "/usr/bin/runc", "DOCKER_DATA_ROOT": "/var/lib/docker",
                                               "KIND_NODE_IMAGES": ["trainfleet/kind-node-base", "trainfleet/kind-node"]}


@pytest.mark.parametrize("path", [
    "/usr/bin/runc",
    '/usr/bin/runc")\nimport os; os.system("id")  #',
    "/x\\\"; __import__('os').system('id'); \"",
], ids=["plain", "python-statement", "quotes"])
def test_hostile_values_stay_one_json_string(tmp_path, path):
    """The role writes the values as JSON data the wrapper only reads: each comes back verbatim,
    the wrapper's code is the file of the role whatever the values."""
    wrapper = render(tmp_path / "runc-capclamp", docker_engine_runc_path=path, _docker_engine_data_root=path,
                     docker_engine_capclamp_images=[path])
    assert json.loads(settings_path(wrapper).read_text()) == {"RUNC": path, "DOCKER_DATA_ROOT": path, "KIND_NODE_IMAGES": [path]}
    with open(WRAPPER, "rb") as source:
        assert wrapper.read_bytes() == source.read()


# Every runc call the wrapper may get: a kind node's create and exec, another container's, others.
EVERY_CALL = [
    pytest.param(lambda host: shim_create(host.bundle(KIND_ID), KIND_ID), id="create-kind-node"),
    pytest.param(lambda host: shim_create(host.bundle(OTHER_ID), OTHER_ID), id="create-other"),
    pytest.param(lambda host: shim_exec(host.tmp / "process.json", KIND_ID), id="exec-kind-node"),
    pytest.param(lambda host: ["state", KIND_ID], id="state"),
    pytest.param(lambda host: ["--version"], id="version"),
]


def assert_refused(host, args, reason):
    """The wrapper refused the call: exit 1, no runc, the reason on stderr, no spec changed."""
    (host.tmp / "process.json").write_text(json.dumps(process_spec()))
    specs = sorted(host.tmp.glob("run/*/config.json")) + [host.tmp / "process.json"]
    before = [spec.read_bytes() for spec in specs]
    done, argv = host.run(args)
    assert done.returncode == 1, done.stderr
    assert argv is None
    assert "runc-capclamp: not running runc: configuration %s: " % host.config in done.stderr
    assert reason in done.stderr
    assert [spec.read_bytes() for spec in specs] == before


@pytest.mark.parametrize("call", EVERY_CALL)
def test_a_missing_configuration_stops_every_call(host, call):
    """Fails closed: without <wrapper>.json nothing runs, not even runc for a container that is not a kind node."""
    host.config.unlink()
    assert_refused(host, call(host), "missing")


DROP = object()  # a key the configuration lacks
MALFORMED = {
    "images-a-string": ({"KIND_NODE_IMAGES": "trainfleet/kind-node"}, "KIND_NODE_IMAGES must be a list of strings"),
    "images-not-strings": ({"KIND_NODE_IMAGES": ["trainfleet/kind-node", 1]}, "KIND_NODE_IMAGES must be a list of strings"),
    "runc-relative": ({"RUNC": "bin/runc"}, "RUNC must be an absolute path"),
    "runc-a-list": ({"RUNC": ["/usr/bin/runc"]}, "RUNC must be an absolute path"),
    "runc-null": ({"RUNC": None}, "RUNC must be an absolute path"),
    "data-root-a-number": ({"DOCKER_DATA_ROOT": 5}, "DOCKER_DATA_ROOT must be an absolute path"),
    "data-root-empty": ({"DOCKER_DATA_ROOT": ""}, "DOCKER_DATA_ROOT must be an absolute path"),
    "key-missing": ({"RUNC": DROP}, "keys missing: RUNC"),
    "key-unknown": ({"TRAINFLEET_RUNC": "/tmp/x"}, "unexpected: TRAINFLEET_RUNC"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_configuration_stops_every_call(host, case):
    changes, reason = MALFORMED[case]
    config = json.loads(host.config.read_text())
    config.update(changes)
    host.config.write_text(json.dumps({key: value for key, value in config.items() if value is not DROP}))
    for call in EVERY_CALL:
        assert_refused(host, call.values[0](host), reason)


@pytest.mark.parametrize("text, reason", [
    ("{not json", "not JSON"), ("", "not JSON"), ("\xff", "not JSON"), ('["/usr/bin/runc"]', "not a JSON object"),
], ids=["broken", "empty", "not-utf-8", "a-list"])
def test_a_configuration_that_is_not_a_json_object_stops_every_call(host, text, reason):
    host.config.write_bytes(text.encode("latin-1"))
    for call in EVERY_CALL:
        assert_refused(host, call.values[0](host), reason)


def test_a_configuration_others_can_write_stops_every_call(host):
    """It names the program the wrapper (root, under dockerd) execs: writable by its owner only."""
    host.config.chmod(0o666)
    assert_refused(host, ["state", KIND_ID], "writable by nobody else")
    host.config.chmod(0o644)
    done, argv = host.run(["state", KIND_ID])
    assert done.returncode == 0 and argv == ["state", KIND_ID], done.stderr


def test_a_configuration_naming_the_wrapper_as_runc_stops_every_call(host):
    config = json.loads(host.config.read_text())
    config["RUNC"] = str(host.wrapper)
    host.config.write_text(json.dumps(config))
    assert_refused(host, ["state", KIND_ID], "RUNC is this wrapper itself")


def test_the_configuration_is_found_beside_the_wrapper_only(host):
    """<wrapper>.json, from the wrapper's own path: not the working directory's, not a variable's."""
    elsewhere = host.tmp / "elsewhere" / "runc-capclamp"
    elsewhere.parent.mkdir()
    shutil.copyfile(str(host.wrapper), str(elsewhere))
    elsewhere.chmod(0o755)
    shutil.copyfile(str(host.config), str(host.tmp / "runc-capclamp.json"))  # the wrapper runs in host.tmp
    host.wrapper, host.config = elsewhere, settings_path(elsewhere)
    assert_refused(host, ["state", KIND_ID], "missing")


# --------------------------------------------------------------------------- removal (teardown)

PLAYBOOK_TIMEOUT = 300


def _absent(tmp_path, daemon_json=None, users=(), wrapper_exists=True):
    """Run docker_engine's capclamp_absent.yml on a fake daemon.json, data root and pidfile."""
    etc = tmp_path / "etc-docker"
    etc.mkdir(exist_ok=True)
    daemon = etc / "daemon.json"
    wrapper = tmp_path / "libexec" / "runc-capclamp"
    wrapper.parent.mkdir(exist_ok=True)
    if wrapper_exists:
        wrapper.write_text("#!/usr/bin/python3 -I\n")
    if daemon_json is not None:
        daemon.write_text(json.dumps(daemon_json, indent=2) + "\n")
    data_root = tmp_path / "docker"
    for index, runtime in enumerate(users):
        directory = data_root / "containers" / (("%x" % (index + 10)) * 64)[:64]
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "hostconfig.json").write_text(json.dumps({"Runtime": runtime, "Privileged": False}, separators=(",", ":")))
    variables = {"docker_engine_daemon_json": str(daemon), "docker_engine_capclamp_path": str(wrapper),
                 "docker_engine_data_root": str(data_root), "docker_engine_pidfile": str(tmp_path / "no-dockerd.pid")}
    playbook = tmp_path / "absent.yml"
    playbook.write_text(json.dumps([{
        "name": "Remove the wrapper", "hosts": "localhost", "gather_facts": False, "connection": "local",
        "vars": variables,
        "tasks": [{"ansible.builtin.include_role": {
            "name": "trainfleet.training.docker_engine", "tasks_from": "capclamp_absent"}}]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    done = subprocess.run([playbook_bin if os.path.exists(playbook_bin) else "ansible-playbook", "-i", "localhost,",
                           "-e", json.dumps({"ansible_python_interpreter": sys.executable}), str(playbook)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=PLAYBOOK_TIMEOUT)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    result = json.loads(daemon.read_text()) if daemon.exists() else None
    return result, wrapper.exists(), out


def _ours(tmp_path):
    return {"path": str(tmp_path / "libexec" / "runc-capclamp")}


def test_teardown_removes_the_wrapper_and_keeps_other_settings(tmp_path):
    config = {"log-level": "warn", "default-runtime": "trainfleet-runc", "runtimes": {"trainfleet-runc": _ours(tmp_path)}}
    result, exists, out = _absent(tmp_path, config, users=["runc"])
    # runc again by name: dockerd's reload keeps a default-runtime the file no longer names
    assert result == {"log-level": "warn", "default-runtime": "runc"}
    assert not exists
    # again: nothing left to change
    result, exists, out = _absent(tmp_path, result, wrapper_exists=False)
    assert result == {"log-level": "warn", "default-runtime": "runc"} and not exists
    assert re.search(r"localhost\s*: ok=\d+\s+changed=0 ", out), out


def test_containers_created_with_the_wrapper_keep_it_and_are_named(tmp_path):
    config = {"default-runtime": "trainfleet-runc", "runtimes": {"trainfleet-runc": _ours(tmp_path)}}
    result, exists, out = _absent(tmp_path, config, users=["trainfleet-runc", "runc"])
    assert result == {"default-runtime": "runc", "runtimes": {"trainfleet-runc": _ours(tmp_path)}}  # no longer the default
    assert exists
    assert "1 container(s) were created with the runtime trainfleet-runc" in out
    assert ("a" * 12) in out


def test_the_configuration_goes_with_the_wrapper_after_dockerd_reloaded(tmp_path):
    """<wrapper>.json stays as long as the wrapper does; both go after dockerd was told to reload
    daemon.json (until then the wrapper is its default runtime), the wrapper first."""
    config = {"default-runtime": "trainfleet-runc", "runtimes": {"trainfleet-runc": _ours(tmp_path)}}
    settings = tmp_path / "libexec" / "runc-capclamp.json"
    settings.parent.mkdir()
    settings.write_text("{}")
    result, exists, _out = _absent(tmp_path, config, users=["trainfleet-runc"])
    assert exists and settings.exists()
    shutil.rmtree(str(tmp_path / "docker" / "containers"))
    result, exists, out = _absent(tmp_path, result, wrapper_exists=False)
    assert result == {"default-runtime": "runc"}
    assert not exists and not settings.exists()
    role = "[trainfleet.training.docker_engine : "
    reload = out.index("RUNNING HANDLER %sReload dockerd]" % role)
    assert reload < out.index("TASK %sRemove the runtime wrapper]" % role) \
        < out.index("TASK %sRemove the runtime wrapper's configuration]" % role)


def test_someone_elses_default_runtime_and_runtimes_are_left(tmp_path):
    config = {"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"},
                                                        "trainfleet-runc": _ours(tmp_path)}}
    result, exists, _out = _absent(tmp_path, config)
    assert result == {"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}
    assert not exists


def test_a_runtime_of_that_name_that_is_not_ours_is_left(tmp_path):
    config = {"runtimes": {"trainfleet-runc": {"path": "/opt/other/runtime"}}}
    result, _exists, _out = _absent(tmp_path, config)
    assert result == config


def test_no_daemon_json_is_fine(tmp_path):
    result, exists, _out = _absent(tmp_path, None)
    assert result is None and not exists
