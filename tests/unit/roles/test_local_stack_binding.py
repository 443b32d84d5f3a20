# -*- coding: utf-8 -*-
"""The local stack listens on loopback and the kind gateway only.

- roles/local_aws/files/moto_server_multi.py: one moto state served on several addresses (here
  127.0.0.1 and 127.0.0.2 stand for loopback and the kind gateway), nothing else listening on the
  port, a bind failure stops the start, SIGTERM stops it, PYTHONPATH cannot replace moto (-I);
- the local_aws role starts and stops it for real (start-stop-daemon, pidfile) on a free port with
  local_aws_pod_listen off (no Docker here);
- the local_aws and local_registry preflights refuse 0.0.0.0 and other non-loopback addresses
  without their opt-ins, naming the variable and quoting the value.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import boto3
import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LAUNCHER = os.path.join(ROOT, "roles", "local_aws", "files", "moto_server_multi.py")
PYTHON = sys.executable
START_TIMEOUT = 60
PLAYBOOK_TIMEOUT = 300


def _launcher_module():
    spec = importlib.util.spec_from_file_location("moto_server_multi", LAUNCHER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _listeners(port):
    """IPv4 addresses with a socket LISTENing on port (from /proc/net/tcp)."""
    found = set()
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            address, local_port = fields[1].split(":")
            if int(local_port, 16) == port and fields[3] == "0A":
                found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


def _s3(host, port):
    return boto3.client("s3", endpoint_url="http://%s:%d" % (host, port), region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def launched(tmp_path):
    """Start the launcher on 127.0.0.1 and 127.0.0.2; yield (process, port); always stop it."""
    port = _free_port()
    log = open(tmp_path / "moto.log", "wb")  # pylint: disable=consider-using-with
    proc = subprocess.Popen(  # pylint: disable=consider-using-with
        [PYTHON, "-I", LAUNCHER, "--host", "127.0.0.1", "--host=127.0.0.2", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, cwd=str(tmp_path))
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not all(_answers("http://%s:%d/moto-api/" % (h, port)) for h in ("127.0.0.1", "127.0.0.2")):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "moto.log").read_text()
            time.sleep(0.3)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=15)
        log.close()


def test_one_state_on_every_address_and_nothing_else_listens(launched):
    proc, port = launched
    assert _listeners(port) == {"127.0.0.1", "127.0.0.2"}
    _s3("127.0.0.1", port).create_bucket(Bucket="made-on-loopback")
    assert [b["Name"] for b in _s3("127.0.0.2", port).list_buckets()["Buckets"]] == ["made-on-loopback"]
    _s3("127.0.0.2", port).put_object(Bucket="made-on-loopback", Key="from-the-pods", Body=b"x")
    assert _s3("127.0.0.1", port).get_object(Bucket="made-on-loopback", Key="from-the-pods")["Body"].read() == b"x"
    # SIGTERM (what start-stop-daemon --stop sends) stops every listener
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert _listeners(port) == set()


def test_a_bind_failure_stops_the_start_and_leaves_no_listener(tmp_path):
    port = _free_port()
    done = subprocess.run([PYTHON, "-I", LAUNCHER, "--host", "127.0.0.1", "--host", "192.0.2.1", "--port", str(port)],
                          capture_output=True, text=True, timeout=START_TIMEOUT, check=False, cwd=str(tmp_path))
    assert done.returncode == 1
    assert "moto_server: cannot listen on 192.0.2.1:%d" % port in done.stderr
    assert _listeners(port) == set()


def test_isolated_mode_ignores_pythonpath(tmp_path):
    """-I: a `moto` package on PYTHONPATH (or next to the launcher) is not imported."""
    fake = tmp_path / "fake" / "moto"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise SystemExit('hijacked by PYTHONPATH')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "fake"))
    done = subprocess.run([PYTHON, "-I", "-c", "import moto.moto_server.werkzeug_app; print(moto.__file__)"],
                          capture_output=True, text=True, env=env, timeout=60, check=False, cwd=str(tmp_path / "fake"))
    assert done.returncode == 0, done.stderr
    assert "hijacked" not in done.stdout + done.stderr and str(tmp_path) not in done.stdout


@pytest.mark.parametrize("argv, message", [
    (["--host", "0.0.0.0", "--host", "127.0.0.1", "--port", "5050"], "0.0.0.0 already covers every address"),
    (["--host", "127.0.0.1", "--port", "0"], "--port must be 1..65535"),
    (["--port", "5050"], "--host"),
])
def test_arguments_are_checked(capsys, argv, message):
    module = _launcher_module()
    with pytest.raises(SystemExit) as stopped:
        module.parse_args(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_repeated_hosts_are_listened_on_once():
    assert _launcher_module().parse_args(["-H", "127.0.0.1", "--host", "127.0.0.1", "-p", "1"]).host == ["127.0.0.1"]


# --------------------------------------------------------------------------- the roles (ansible-playbook)


def _playbook(tmp_path, plays, check=False):
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(plays, sort_keys=False))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    cmd = [playbook_bin if os.path.exists(playbook_bin) else "ansible-playbook", "-i", "localhost,",
           "-e", json.dumps({"ansible_python_interpreter": sys.executable}), str(path)] + (["--check"] if check else [])
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=PLAYBOOK_TIMEOUT)
    return proc.returncode, proc.stdout + proc.stderr


def _play(name, role_vars, tasks_from):
    return {"name": name, "hosts": "localhost", "gather_facts": False, "connection": "local",
            "vars": role_vars,
            "tasks": [{"ansible.builtin.include_role": {"name": "trainfleet.training." + name, "tasks_from": tasks_from}}]}


def test_local_aws_role_starts_and_stops_the_launcher(tmp_path):
    port = _free_port()
    role_vars = {"trainfleet_cache_dir": str(tmp_path / "cache"), "local_aws_port": port,
                 "local_aws_pod_listen": False, "local_aws_wait_timeout": 60}
    rc, out = _playbook(tmp_path, [_play("local_aws", role_vars, "preflight.yml"), _play("local_aws", role_vars, "present.yml")])
    try:
        assert rc == 0, out
        assert _answers("http://127.0.0.1:%d/moto-api/" % port)
        assert _listeners(port) == {"127.0.0.1"}
        run = tmp_path / "cache" / "run"
        settings = json.loads((run / "moto-server.settings.json").read_text())
        assert settings["hosts"] == ["127.0.0.1"] and settings["port"] == str(port)
        pid = int((run / "moto-server.pid").read_text())
        cmdline = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")
        assert cmdline[1:3] == [b"-I", str(run / "moto_server").encode()] and b"python" in cmdline[0]
        # molecule/default's destroy proof looks for it this way
        assert re.search(r"moto_server .*--port %d" % port, b" ".join(cmdline).decode())
        # a second run changes nothing and leaves the same process
        rc, out = _playbook(tmp_path, [_play("local_aws", role_vars, "present.yml")])
        assert rc == 0, out
        assert re.search(r"localhost\s*: ok=\d+\s+changed=0 ", out), out
        assert int((run / "moto-server.pid").read_text()) == pid
    finally:
        rc, out = _playbook(tmp_path, [_play("local_aws", dict(role_vars, local_aws_state="absent"), "absent.yml")])
    assert rc == 0, out
    assert _listeners(port) == set()
    assert not (tmp_path / "cache" / "run" / "moto-server.pid").exists()


CASES = [
    ("local_aws", {"local_aws_host": "0.0.0.0"}, "local_aws_host", "on every interface"),
    ("local_aws", {"local_aws_host": "192.168.1.10"}, "local_aws_host", "beyond this machine"),
    ("local_aws", {"local_aws_host": "0.0.0.0", "local_aws_allow_non_loopback": True}, None, None),
    ("local_aws", {"local_aws_host": "127.0.0.2"}, None, None),
    ("local_registry", {"local_registry_bind_address": "0.0.0.0"}, "local_registry_bind_address", "on every interface"),
    ("local_registry", {"local_registry_bind_address": "10.1.2.3"}, "local_registry_bind_address", "beyond this machine"),
    ("local_registry", {"local_registry_bind_address": "0.0.0.0", "local_registry_allow_non_loopback": True}, None, None),
    ("local_registry", {"local_registry_bind_address": "999.1.1.1"}, "local_registry_bind_address", "IPv4 address"),
]


@pytest.fixture(scope="module")
def preflight_outcomes(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("local-stack-preflight")
    plays = []
    for index, (role, case_vars, _variable, _text) in enumerate(CASES):
        role_vars = dict(case_vars, trainfleet_cache_dir=str(tmp_path / "cache"), trainfleet_name="trainfleet")
        plays.append({
            "name": "case %d" % index, "hosts": "localhost", "gather_facts": False, "connection": "local",
            "vars": role_vars,
            "tasks": [{
                "block": [
                    {"ansible.builtin.include_role": {"name": "trainfleet.training." + role, "tasks_from": "preflight.yml"}},
                    {"ansible.builtin.set_fact": {"_outcome": "PASSED"}},
                ],
                "rescue": [{"ansible.builtin.set_fact": {"_outcome": "{{ ansible_failed_result.msg }}"}}],
            }, {"ansible.builtin.debug": {"msg": "CASE %d: {{ _outcome }}" % index}}],
        })
    rc, out = _playbook(tmp_path, plays, check=True)
    assert rc == 0, out
    found = dict((int(m.group(1)), json.loads('"%s"' % m.group(2))) for m in re.finditer(r'"msg": "CASE (\d+): (.*)"\n', out))
    assert sorted(found) == list(range(len(CASES))), out
    return found


@pytest.mark.parametrize("index", range(len(CASES)), ids=["%s-%s" % (c[0], "-".join("%s" % v for v in c[1].values())) for c in CASES])
def test_non_loopback_addresses_need_their_opt_in(preflight_outcomes, index):
    _role, case_vars, variable, text = CASES[index]
    message = preflight_outcomes[index]
    if variable is None:
        assert message == "PASSED"
        return
    assert "%s %s" % (variable, json.dumps(case_vars[variable])) in message or json.dumps(case_vars[variable]) in message, message
    assert variable in message and text in message, message
