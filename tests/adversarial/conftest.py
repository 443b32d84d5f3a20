# -*- coding: utf-8 -*-
"""The hostile world the adversarial suite runs the steps in.

- a private moto server (tests/support/moto.py) as the only AWS endpoint, its request log read
  to count API calls;
- an "unreachable" cluster: a kubeconfig whose server is a local TCP listener that counts every
  connection and closes it (any cluster API call shows up as a connection);
- a temporary HOME holding the trainfleet cache (TRAINFLEET_CACHE) and Ansible's own temp files:
  everything else written under it is a file written outside the cache;
- the environment stripped of AWS_*, ANSIBLE_*, KUBECONFIG and TRAINFLEET_* of the caller, with
  fake credentials that must never be printed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import boto3
import pytest

from tests.support.moto import MotoStartError, moto_server

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
REGIONS = ("us-east-1", "us-west-2")
PLAYBOOK_TIMEOUT = 180
# Fake credentials: the endpoint accepts anything; none of these may ever appear in any output.
FAKE_SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAADVERSARIALFAKE7",
    "AWS_SECRET_ACCESS_KEY": "adversarialFakeSecret/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_SESSION_TOKEN": "adversarialFakeSessionToken0123456789abcdefFAKE",
}
FAKE_KUBE_TOKEN = "adversarialFakeKubeToken0123456789abcdef"
# Each test process writes its figures here; the controlling process adds them up at the end.
REPORTS = ROOT / "out" / "test-reports"
FIGURES_PARTS = REPORTS / "adversarial-figures.parts"
FIGURE_COUNTS = ("refused", "created", "leaked", "api_calls")
REQUEST_RE = re.compile(r'"(GET|POST|PUT|DELETE|HEAD|PATCH) [^"]*" \d{3}')


class ConnectionCounter(object):
    """A TCP listener on 127.0.0.1 that accepts, counts and closes every connection."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _addr = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.count += 1
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


class World(object):
    """Where every step runs; run() is one ansible-playbook invocation."""

    def __init__(self, base, endpoint, moto_log, cluster):
        self.base = base
        self.home = base / "home"
        self.cache = self.home / "cache"
        self.endpoint = endpoint
        self.moto_log = moto_log
        self.cluster = cluster
        self.kubeconfig = base / "kubeconfig-unreachable"
        self.home.mkdir(parents=True)
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "unreachable",
            "clusters": [{"name": "unreachable", "cluster": {
                "server": "https://127.0.0.1:%d" % cluster.port, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "unreachable", "user": {"token": FAKE_KUBE_TOKEN}}],
            "contexts": [{"name": "unreachable", "context": {"cluster": "unreachable", "user": "unreachable"}}],
        }))
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("AWS_", "ANSIBLE_", "KUBECONFIG", "TRAINFLEET_"))}
        self.env.update(FAKE_SECRETS)
        self.env.update(
            PATH=str(VENV_BIN) + os.pathsep + self.env.get("PATH", ""),
            HOME=str(self.home),
            ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
            ANSIBLE_HOME=str(self.home / ".ansible"),
            ANSIBLE_LOCAL_TEMP=str(self.home / ".ansible" / "tmp"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_CALLBACK_RESULT_FORMAT="json",
            ANSIBLE_RETRY_FILES_ENABLED="0",
            TRAINFLEET_CACHE=str(self.cache),
            KUBECONFIG=str(self.kubeconfig),
        )

    def common_vars(self, inventory):
        extra = {"trainfleet_kubeconfig": str(self.kubeconfig)}
        if inventory == "aws":
            extra["trainfleet_aws_endpoint_url"] = self.endpoint
            # Only the Go module proxy is reachable here, not the operator release's git repository.
            extra["platform_aws_operator_manifests"] = "go_module"
        return extra

    def api_calls(self):
        """Requests the moto server has logged so far."""
        return len(REQUEST_RE.findall(self.moto_log.read_text(errors="replace")))

    def files_outside_cache(self):
        found = []
        for path in self.home.rglob("*"):
            rel = path.relative_to(self.home)
            if rel.parts[0] in ("cache", ".ansible") or path.is_dir():
                continue
            found.append(str(rel))
        skipped = ("home", "kubeconfig-unreachable", "moto", "vars")
        found.extend(str(p) for p in self.base.iterdir() if p.name not in skipped)
        return sorted(found)

    def aws_resources(self):
        """Everything a step could have created on the endpoint (names), empty when nothing."""
        kw = dict(endpoint_url=self.endpoint, aws_access_key_id="testing", aws_secret_access_key="testing")
        iam = boto3.client("iam", region_name="us-east-1", **kw)
        found = ["role:" + r["RoleName"] for r in iam.list_roles()["Roles"]]
        found += ["policy:" + p["PolicyName"] for p in iam.list_policies(Scope="Local")["Policies"]]
        found += ["bucket:" + b["Name"] for b in boto3.client("s3", region_name="us-east-1", **kw).list_buckets()["Buckets"]]
        for region in REGIONS:
            found += ["ecr:" + r["repositoryName"] for r in
                      boto3.client("ecr", region_name=region, **kw).describe_repositories()["repositories"]]
            found += ["eks:" + c for c in boto3.client("eks", region_name=region, **kw).list_clusters()["clusters"]]
        return found

    def reset(self):
        """Forget what a case left (a case that was not refused must not fail the next ones)."""
        urllib.request.urlopen(urllib.request.Request(self.endpoint + "/moto-api/reset", method="POST"),
                               timeout=30).close()
        shutil.rmtree(str(self.home), ignore_errors=True)
        self.home.mkdir()
        for path in self.base.iterdir():
            if path.name not in ("home", "kubeconfig-unreachable", "moto", "vars"):
                if path.is_dir():
                    shutil.rmtree(str(path), ignore_errors=True)
                else:
                    path.unlink()

    def reset_if_dirty(self):
        """reset() only when the last case left something (a reset reloads moto's managed policies)."""
        if self.aws_resources() or self.files_outside_cache() or self.cache.exists():
            self.reset()

    def run(self, playbook, inventory, extra, args=(), timeout=PLAYBOOK_TIMEOUT, name="run"):
        """ansible-playbook -i inventories/<inventory> <playbook> -e @vars.json [args]."""
        vars_dir = self.base / "vars"
        vars_dir.mkdir(exist_ok=True)
        vars_file = vars_dir / ("%s.json" % name)
        merged = self.common_vars(inventory)
        merged.update(extra)
        vars_file.write_text(json.dumps(merged))
        argv = [str(VENV_BIN / "ansible-playbook"), "-i", "inventories/" + inventory, playbook,
                "-e", "@" + str(vars_file)] + list(args)
        started = time.monotonic()
        try:
            proc = subprocess.run(argv, cwd=str(ROOT), env=self.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=timeout, check=False)
            out, rc = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            rc = None
        return dict(rc=rc, out=out, seconds=time.monotonic() - started)


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("adversarial")
    (base / "moto").mkdir()
    log_path = base / "moto" / "moto-server.log"
    cluster = ConnectionCounter()
    try:
        with moto_server(log_path, env={"MOTO_IAM_LOAD_MANAGED_POLICIES": "true"}) as url:
            yield World(base, url, log_path, cluster)
    except MotoStartError as exc:
        pytest.fail(str(exc))
    finally:
        cluster.close()


# Files whose tests share a module fixture that runs playbooks (test_no_secret_in_output.py: three
# -vvv runs, about two minutes): pytest-xdist must hand all of a file's tests to one process, in one
# go, or each process (and each return to the file) runs the fixture again. Every other test goes
# out one by one.
WHOLE_FILES = ("test_no_secret_in_output.py",)


def pytest_xdist_make_scheduler(config, log):
    """With -n: LoadScope scheduling whose scope is the file for WHOLE_FILES, the test otherwise."""
    from xdist.scheduler import LoadScopeScheduling  # pylint: disable=import-outside-toplevel

    class WholeFilesScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            return path if path.endswith(WHOLE_FILES) else nodeid

    return WholeFilesScheduling(config, log)


def _controller(session):
    return not hasattr(session.config, "workerinput")


def pytest_sessionstart(session):
    if _controller(session):
        shutil.rmtree(str(FIGURES_PARTS), ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):  # pylint: disable=unused-argument
    """The suite's figures: the parts of every test process added up (cases is the whole list)."""
    if not _controller(session) or not FIGURES_PARTS.is_dir():
        return
    parts = [json.loads(p.read_text()) for p in sorted(FIGURES_PARTS.glob("*.json"))]
    shutil.rmtree(str(FIGURES_PARTS), ignore_errors=True)
    if not parts:
        return
    figures = {"cases": parts[0]["cases"]}
    figures.update((key, sum(part[key] for part in parts)) for key in FIGURE_COUNTS)
    (REPORTS / "adversarial-figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    print("\nadversarial figures: %s" % json.dumps(figures))
