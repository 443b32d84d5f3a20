# -*- coding: utf-8 -*-
"""The service through the real kubernetes client and urllib3 against a small local HTTP
stand-in for the API server: request paths and parameters, the watch stream, 404 handling
and log streaming with bounded memory. (The same code runs against kind in the integration
scenario; this catches client-usage mistakes that mocks of the client would hide.)"""

from __future__ import annotations

import json
import resource
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from ansible_collections.trainfleet.training.plugins.module_utils import k8s
from ansible_collections.trainfleet.training.plugins.module_utils import forensics
from ansible_collections.trainfleet.training.plugins.module_utils import jobkinds as kinds
from ansible_collections.trainfleet.training.plugins.module_utils import joblogs
from ansible_collections.trainfleet.training.plugins.module_utils.errors import (
    CrdMissingError,
    JobNotFoundError,
    LogReadError,
)
from ansible_collections.trainfleet.training.plugins.module_utils.waiter import OUTCOME_FAILED, JobWaiter

LOG_LINE = b"trainfleet-epoch: epoch=1 loss=0.123456 test_acc=0.98 samples_per_s=1234.5 padding-padding\n"


class Api(object):
    """State of the stand-in API server."""

    def __init__(self):
        self.crd = True
        self.jobs = {}
        self.watch_events = []
        self.pods = []
        self.pod_watch_events = []
        self.pod_watch_hold = 0  # seconds a pod watch stays open after its events
        self.pod_watch_release = threading.Event()
        self.log_bytes = 0
        self.requests = []


def make_handler(api):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # pylint: disable=arguments-differ
            pass

        def _json(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _not_found(self, name=None):
            body = {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
                    "message": "the server could not find the requested resource"}
            if name:
                body["message"] = 'pytorchjobs.kubeflow.org "%s" not found' % name
                body["details"] = {"name": name, "group": "kubeflow.org", "kind": "pytorchjobs"}
            self._json(404, body)

        def _pod_watch(self):
            # chunked, as the API server streams a watch: each event arrives on its own
            self.protocol_version = "HTTP/1.1"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for event in api.pod_watch_events:
                    data = json.dumps(event).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                api.pod_watch_release.wait(api.pod_watch_hold)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def do_GET(self):  # pylint: disable=invalid-name
            url = urlparse(self.path)
            query = dict((k, v[0]) for k, v in parse_qs(url.query).items())
            api.requests.append((url.path, query, self.headers.get("Authorization")))
            parts = url.path.strip("/").split("/")
            if url.path == "/apis/kubeflow.org/v1":
                if not api.crd:
                    return self._not_found()
                return self._json(200, {"kind": "APIResourceList", "groupVersion": "kubeflow.org/v1",
                                        "resources": [{"name": "pytorchjobs", "kind": "PyTorchJob"}]})
            if parts[:2] == ["apis", "kubeflow.org"]:
                if not api.crd:
                    return self._not_found()
                if query.get("watch") in ("true", "True"):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    for event in api.watch_events:
                        self.wfile.write(json.dumps(event).encode() + b"\n")
                        self.wfile.flush()
                    return None
                if len(parts) == 7:
                    job = api.jobs.get(parts[6])
                    return self._json(200, job) if job else self._not_found(parts[6])
                return self._json(200, {"kind": "PyTorchJobList", "items": list(api.jobs.values())})
            if parts[:2] == ["api", "v1"] and parts[-1] == "pods":
                if query.get("watch") in ("true", "True"):
                    return self._pod_watch()
                return self._json(200, {"kind": "PodList", "items": api.pods})
            if parts[:2] == ["api", "v1"] and parts[-1] == "events":
                return self._json(200, {"kind": "EventList", "items": []})
            if parts[:2] == ["api", "v1"] and parts[-1] == "log":
                if parts[5] == "waiting":
                    return self._json(400, {"kind": "Status", "code": 400, "reason": "BadRequest",
                                            "message": 'container "pytorch" in pod "waiting" is waiting to start'})
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                block = LOG_LINE * (65536 // len(LOG_LINE))
                sent = 0
                while sent < api.log_bytes:
                    piece = block[:api.log_bytes - sent]
                    self.wfile.write(piece)
                    sent += len(piece)
                return None
            return self._not_found()
    return Handler


@pytest.fixture
def api_server(tmp_path):
    api = Api()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(api))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "local",
        "clusters": [{"name": "local", "cluster": {"server": "http://127.0.0.1:%d" % server.server_address[1]}}],
        "users": [{"name": "u", "user": {"token": "test-token"}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "u"}}],
    }))
    params = dict((key, None) for key in k8s.AUTH_ARG_SPEC)
    params["kubeconfig"] = str(kubeconfig)
    service = k8s.TrainJobService(k8s.get_api_client(params), request_timeout=(5, 10))
    yield api, service
    server.shutdown()
    server.server_close()


def _job(name, conditions, rv="1"):
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "training", "resourceVersion": rv},
            "status": {"conditions": conditions}}


def test_get_list_and_errors(api_server):
    api, service = api_server
    api.jobs["mnist"] = _job("mnist", [{"type": "Created", "status": "True"}])
    assert service.get_job("training", "mnist")["metadata"]["name"] == "mnist"
    assert api.requests[-1][2] == "Bearer test-token"
    assert [j["metadata"]["name"] for j in service.list_jobs("training", "team=ml")] == ["mnist"]
    assert api.requests[-1][1]["labelSelector"] == "team=ml"
    with pytest.raises(JobNotFoundError):
        service.get_job("training", "nope")
    api.crd = False
    with pytest.raises(CrdMissingError):
        service.get_job("training", "mnist")
    with pytest.raises(CrdMissingError):
        service.list_jobs("training")


def test_watch_drives_the_waiter_to_failed(api_server):
    api, service = api_server
    created = [{"type": "Created", "status": "True", "lastTransitionTime": "2025-01-01T10:00:00Z"}]
    running = created + [{"type": "Running", "status": "True", "lastTransitionTime": "2025-01-01T10:00:05Z"}]
    failed = [created[0], {"type": "Running", "status": "False", "lastTransitionTime": "2025-01-01T10:00:05Z"},
              {"type": "Failed", "status": "True", "reason": "PyTorchJobFailed",
               "lastTransitionTime": "2025-01-01T10:01:00Z"}]
    api.jobs["mnist"] = _job("mnist", created, "10")
    api.watch_events = [{"type": "MODIFIED", "object": _job("mnist", running, "11")},
                        {"type": "MODIFIED", "object": _job("mnist", failed, "12")}]
    start = time.monotonic()
    result = JobWaiter(service, "training", "mnist", timeout=60, fatal_reasons=[]).wait()
    assert time.monotonic() - start < 5
    assert result.outcome == OUTCOME_FAILED
    assert [t["phase"] for t in result.transitions] == ["Created", "Running", "Failed"]
    watch = [r for r in api.requests if r[1].get("watch")][0]
    assert watch[1]["fieldSelector"] == "metadata.name=mnist"
    assert watch[1]["resourceVersion"] == "10"
    assert watch[1]["timeoutSeconds"] == "10"


def test_pods_and_log_errors(api_server):
    api, service = api_server
    api.pods = [{"metadata": {"name": "mnist-master-0"}}]
    assert service.list_pods("training", "mnist") == api.pods
    assert api.requests[-1][1]["labelSelector"] == "training.kubeflow.org/job-name=mnist"
    with pytest.raises(LogReadError) as err:
        list(service.iter_log("training", "waiting", container="pytorch"))
    assert "waiting to start" in err.value.msg


def test_log_stream_memory_is_bounded(api_server):
    api, service = api_server
    api.log_bytes = (65536 // len(LOG_LINE)) * len(LOG_LINE) * 1024  # ~64 MiB of whole lines
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tail = joblogs.TailBuffer(1024 * 1024)
    for chunk in service.iter_log("training", "mnist-master-0", container="pytorch", tail_lines=None):
        tail.feed(chunk)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024.0
    assert tail.total == api.log_bytes
    assert tail.truncated
    assert tail.text().endswith(LOG_LINE.decode())
    assert grown_mib < 40, "peak RSS grew by %.1f MiB for a ~64 MiB log" % grown_mib
    query = [r for r in api.requests if r[0].endswith("/log")][-1][1]
    assert query["container"] == "pytorch"


def _pod(name, exit_code=None):
    pod = {"metadata": {"name": name, "namespace": "training",
                        "labels": {kinds.KUBEFLOW_JOB_NAME: "mnist", kinds.KUBEFLOW_REPLICA_TYPE: "master",
                                   kinds.KUBEFLOW_REPLICA_INDEX: "0"}},
           "status": {"phase": "Running", "containerStatuses": [
               {"name": "pytorch", "restartCount": 0, "state": {"running": {}}}]}}
    if exit_code is not None:
        pod["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": exit_code, "reason": "Error"}}
    return pod


def test_pod_watch_streams_events_and_ends_with_its_round(api_server):
    api, service = api_server
    api.pod_watch_events = [{"type": "ADDED", "object": _pod("mnist-master-0")},
                            {"type": "MODIFIED", "object": _pod("mnist-master-0", exit_code=1)}]
    events = list(service.watch_pods("training", "mnist", 7).events())
    assert [(t, forensics.container_failure(p) is not None) for t, p in events] == [("ADDED", False), ("MODIFIED", True)]
    assert isinstance(events[0][1], dict)  # raw dicts, not kubernetes models
    query = [r for r in api.requests if r[0].endswith("/pods") and r[1].get("watch")][-1][1]
    assert query["labelSelector"] == "training.kubeflow.org/job-name=mnist"
    assert query["timeoutSeconds"] == "7"


def test_pod_watch_cancel_unblocks_a_waiting_reader(api_server):
    api, service = api_server
    api.pod_watch_events = [{"type": "ADDED", "object": _pod("mnist-master-0", exit_code=1)}]
    api.pod_watch_hold = 30  # the server keeps the round open, as a real one would
    watch = service.watch_pods("training", "mnist", 30)
    seen, finished = [], threading.Event()

    def read():
        for event in watch.events():
            seen.append(event)
        finished.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [event[0] for event in seen] == ["ADDED"]  # delivered while the round is still open
        assert not finished.is_set()
        start = time.monotonic()
        watch.cancel()
        assert finished.wait(5), "cancel() did not end the watch"
        assert time.monotonic() - start < 2
        reader.join(1)
        assert not reader.is_alive()
    finally:
        api.pod_watch_release.set()
    # cancelled before it started: no request at all
    watch = service.watch_pods("training", "mnist", 30)
    watch.cancel()
    before = len(api.requests)
    assert list(watch.events()) == []
    assert len(api.requests) == before
