# -*- coding: utf-8 -*-
"""The dataset step's claim copy, create -> wait -> report, against an in-memory API and moto.

No cluster runs here, so the Job does not run: the in-memory API (tests/integration/fake_kube_api.py,
extended below to create objects and serve a pod log) plays the Job controller. When the role
creates the copy Job, the API adds its pod in the state the case asks for:

- succeeded: the run creates the namespace, service account, ConfigMap and Job (the rendered,
  restricted manifest), waits, reports the copy's last log line; a second run with the same data
  finds the Job Succeeded and changes nothing (no write request);
- cannot pull its image: the wait ends at once (not at the timeout) and the failure names the
  waiting reason;
- the copy failed: the failure says Failed, the exit code and the pod's last log line.

The live proof on a cluster is molecule's (the lead's); this one runs in the integration suite.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from tests.integration import fake_kube_api as fk
from trainer.datasets import export

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
BUCKET = "trainfleet-123456789012-us-west-2"
RECAP_RE = re.compile(r"^localhost\s+:\s+ok=\d+\s+changed=(?P<changed>\d+)\s+unreachable=\d+\s+failed=(?P<failed>\d+)", re.M)
LAST_LINE = "12:00:01 dataset-copy: done: dataset wine on /shared/datasets/wine: 3 files, 3 copied (9 bytes), 0 unchanged, 0 removed, 0s"
FAIL_LINE = "12:00:01 dataset-copy: FAILED: cannot write /shared/datasets/wine as uid 10001: [Errno 13] Permission denied"


class CopyApi(fk.FakeKubeApi):
    """The in-memory API, plus create (POST) and a pod log; a created Job gets a pod per `outcome`."""

    def __init__(self):
        super().__init__()
        self.outcome = "succeeded"
        self.created = []
        base = self.server.RequestHandlerClass
        api = self

        class Handler(base):
            def do_POST(self):  # pylint: disable=invalid-name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with api.store.lock:
                    api.store.requests.append(("POST", self.path, ""))
                    obj = api.create(body, self.path)
                return self._send(201, obj)

            def do_GET(self):  # pylint: disable=invalid-name
                if self.path.split("?")[0].endswith("/log"):
                    text = (FAIL_LINE if api.outcome == "failed" else LAST_LINE) + "\n"
                    data = text.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return None
                if self.path.split("?")[0].rstrip("/") == "/api/v1":
                    # discovery with the pods/log subresource (kubernetes.core.k8s_log looks for it)
                    listing = fk._resource_list("", "v1")  # pylint: disable=protected-access
                    listing["resources"].append({"name": "pods/log", "singularName": "", "namespaced": True,
                                                 "kind": "Pod", "verbs": ["get"]})
                    return self._send(200, listing)
                return base.do_GET(self)

        self.server.RequestHandlerClass = Handler

    def create(self, body, path):
        kind = body["kind"]
        meta = body.get("metadata", {})
        namespace = meta.get("namespace") or (path.split("/namespaces/")[1].split("/")[0] if "/namespaces/" in path else None)
        fields = {k: v for k, v in body.items() if k not in ("kind", "apiVersion", "metadata")}
        obj = self.store.add(kind, meta["name"], namespace, labels=meta.get("labels"),
                             metadata={k: v for k, v in meta.items() if k not in ("name", "namespace", "labels")}, **fields)
        self.created.append((kind, meta["name"]))
        if kind == "Job":
            self.run_job(obj)
        return obj

    def run_job(self, job):
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        container = {"name": "copy", "image": job["spec"]["template"]["spec"]["containers"][0]["image"]}
        if self.outcome == "succeeded":
            pod_status = {"phase": "Succeeded", "containerStatuses": [dict(container, state={"terminated": {"exitCode": 0, "reason": "Completed"}})]}
            job["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
        elif self.outcome == "pull":
            pod_status = {"phase": "Pending", "containerStatuses": [dict(container, state={"waiting": {
                "reason": "ImagePullBackOff", "message": 'Back-off pulling image "%s"' % container["image"]}})]}
            job["status"] = {"active": 1}
        else:
            pod_status = {"phase": "Failed", "containerStatuses": [dict(container, state={"terminated": {"exitCode": 1, "reason": "Error"}})]}
            job["status"] = {"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
        self.store.add("Pod", name + "-x7k2p", namespace, labels={"job-name": name}, status=pod_status,
                       spec=job["spec"]["template"]["spec"])


@pytest.fixture(scope="module")
def world(moto_endpoint, tmp_path_factory):
    base = tmp_path_factory.mktemp("dataset-claim")
    source = base / "wine"
    export("wine", str(source), "csv", 2)
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=BUCKET)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ANSIBLE_", "KUBECONFIG", "TRAINFLEET_"))}
    env.update(PATH=str(VENV_BIN) + os.pathsep + env.get("PATH", ""), ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_NOCOLOR="1", AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               TRAINFLEET_CACHE=str(base / "cache"))
    return dict(base=base, source=source, endpoint=moto_endpoint, env=env)


def run(world, api, name):
    extra = {"trainfleet_aws_endpoint_url": world["endpoint"], "platform_aws_operator_manifests": "go_module",
             "dataset_source": str(world["source"]), "dataset_targets": ["s3", "claim"],
             "dataset_image": "registry.example/trainfleet/trainer:test", "dataset_claim_timeout": 60,
             "trainfleet_kubeconfig": str(api.kubeconfig(world["base"] / ("kubeconfig-" + name)))}
    vars_file = world["base"] / ("vars-%s.json" % name)
    vars_file.write_text(json.dumps(extra))
    started = time.monotonic()
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "inventories/aws", "playbooks/dataset.yml",
                           "-e", "@" + str(vars_file)], cwd=str(ROOT), env=world["env"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300, check=False)
    recap = RECAP_RE.search(proc.stdout)
    return dict(rc=proc.returncode, out=proc.stdout, seconds=time.monotonic() - started,
                changed=int(recap.group("changed")) if recap else None)


def writes(api):
    return [r for r in api.store.requests if r[0] in ("POST", "PUT", "PATCH", "DELETE")]


def test_copy_created_waited_reported_then_left_alone(world):
    with CopyApi() as api:
        first = run(world, api, "ok")
        assert first["rc"] == 0, first["out"][-5000:]
        kinds = [k for k, _n in api.created]
        assert kinds == ["Namespace", "ServiceAccount", "ConfigMap", "Job"], api.created
        job = api.store.objects[("Job", "trainfleet", api.created[-1][1])]
        assert re.match(r"^dataset-wine-[0-9a-f]{10}$", job["metadata"]["name"])
        pod = job["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is False
        assert pod["serviceAccountName"] == "trainfleet-trainer"
        assert {"name": "data", "persistentVolumeClaim": {"claimName": "trainfleet-data"}} in pod["volumes"]
        config = api.store.objects[("ConfigMap", "trainfleet", job["metadata"]["name"])]
        assert [f["path"] for f in json.loads(config["data"]["manifest.json"])] == ["dataset.json", "part-000.csv", "part-001.csv"]
        assert "no copy of this content yet, creating the copy Job" in first["out"]
        assert LAST_LINE in first["out"]
        assert "trainjob_trainer_dataset=dir:/shared/datasets/wine" in first["out"]
        before = len(writes(api))
        second = run(world, api, "ok-again")
        assert second["rc"] == 0, second["out"][-5000:]
        assert "this content was already copied (the Job Succeeded), nothing to do" in second["out"]
        assert second["changed"] == 0, second["out"][-5000:]
        assert len(writes(api)) == before


def test_a_pod_that_cannot_pull_fails_at_once_saying_why(world):
    with CopyApi() as api:
        api.outcome = "pull"
        result = run(world, api, "pull")
        assert result["rc"] != 0
        assert "did not succeed (not started: ImagePullBackOff, Back-off pulling image" in result["out"], result["out"][-4000:]
        # The wait ended on the reason, not at dataset_claim_timeout (60 s, read every 5 s: 12 reads
        # or more): counted in reads of the pods, not in seconds, which a busy machine stretches.
        pod_reads = [r for r in api.store.requests if r[0] == "GET" and r[1].endswith("/pods")]
        assert 1 <= len(pod_reads) <= 3, pod_reads


def test_a_failed_copy_says_why_with_the_last_log_line(world):
    with CopyApi() as api:
        api.outcome = "failed"
        result = run(world, api, "failed")
        assert result["rc"] != 0
        out = result["out"]
        assert "did not succeed (Failed: BackoffLimitExceeded, Error, exit code 1)" in out, out[-4000:]
        assert "Permission denied" in out and "as uid 10001" in out
