# -*- coding: utf-8 -*-
"""Client setup from auth options (real kubeconfig parsing) and the service's error
translation (kubernetes API objects mocked)."""

from __future__ import annotations

import json
from unittest import mock

import pytest
import yaml
from kubernetes.client.rest import ApiException
from urllib3.exceptions import MaxRetryError

from ansible_collections.trainfleet.training.plugins.module_utils import k8s
from ansible_collections.trainfleet.training.plugins.module_utils.errors import (
    ApiAccessError,
    ApiUnreachableError,
    ClientConfigError,
    CrdMissingError,
    JobNotFoundError,
    LogReadError,
    WatchExpiredError,
)

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "kind-trainfleet",
    "clusters": [
        {"name": "kind-trainfleet", "cluster": {"server": "https://127.0.0.1:6443",
                                                "insecure-skip-tls-verify": False}},
        {"name": "other", "cluster": {"server": "https://10.0.0.1:6443"}},
    ],
    "users": [{"name": "admin", "user": {"token": "secret-token"}}],
    "contexts": [
        {"name": "kind-trainfleet", "context": {"cluster": "kind-trainfleet", "user": "admin"}},
        {"name": "other", "context": {"cluster": "other", "user": "admin"}},
    ],
}


def params(**kwargs):
    base = dict((key, None) for key in k8s.AUTH_ARG_SPEC)
    base.update(kwargs)
    return base


@pytest.fixture
def kubeconfig(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    return str(path)


@pytest.fixture
def no_default_config(monkeypatch, tmp_path):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_auth_arg_spec_is_a_copy():
    spec = k8s.auth_arg_spec()
    spec["kubeconfig"]["type"] = "str"
    assert k8s.AUTH_ARG_SPEC["kubeconfig"]["type"] == "path"
    assert k8s.AUTH_ARG_SPEC["api_key"]["no_log"] is True


def test_client_from_kubeconfig(kubeconfig):
    client = k8s.get_api_client(params(kubeconfig=kubeconfig))
    assert client.configuration.host == "https://127.0.0.1:6443"
    assert client.configuration.api_key["authorization"] == "Bearer secret-token"


def test_client_from_kubeconfig_context_and_overrides(kubeconfig, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    client = k8s.get_api_client(params(kubeconfig=kubeconfig, context="other", validate_certs=False,
                                       ca_cert=str(ca)))
    assert client.configuration.host == "https://10.0.0.1:6443"
    assert client.configuration.verify_ssl is False
    assert client.configuration.ssl_ca_cert == str(ca)


def test_client_from_kubeconfig_env(kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    assert k8s.get_api_client(params()).configuration.host == "https://127.0.0.1:6443"


def test_client_from_host_and_token(no_default_config):
    client = k8s.get_api_client(params(host="https://api.example.invalid", api_key="t0ken"))
    assert client.configuration.host == "https://api.example.invalid"
    assert client.configuration.api_key == {"authorization": "Bearer t0ken"}


def test_unknown_context(kubeconfig):
    with pytest.raises(ClientConfigError) as err:
        k8s.get_api_client(params(kubeconfig=kubeconfig, context="nope"))
    assert "context=nope" in err.value.msg


def test_host_and_kubeconfig_conflict(kubeconfig):
    with pytest.raises(ClientConfigError) as err:
        k8s.get_api_client(params(kubeconfig=kubeconfig, host="https://x"))
    assert "not both" in err.value.msg


def test_no_configuration_at_all(no_default_config):
    with pytest.raises(ClientConfigError) as err:
        k8s.get_api_client(params())
    assert err.value.msg.startswith("No Kubernetes configuration found")


def test_kubeconfig_without_clusters(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(ClientConfigError):
        k8s.get_api_client(params(kubeconfig=str(path)))


def test_require_kubernetes(monkeypatch):
    module = mock.Mock()
    monkeypatch.setattr(k8s, "HAS_K8S", False)
    k8s.require_kubernetes(module)
    assert "kubernetes" in module.fail_json.call_args[1]["msg"]


# ------------------------------------------------------------------ service


def api_error(status, message="boom", name=None):
    exc = ApiException(status=status, reason="Reason%s" % status)
    body = {"kind": "Status", "message": message}
    if name:
        body["details"] = {"name": name}
    exc.body = json.dumps(body)
    return exc


@pytest.fixture
def service(kubeconfig):
    svc = k8s.TrainJobService(k8s.get_api_client(params(kubeconfig=kubeconfig)))
    svc.core = mock.Mock()
    svc.custom = mock.Mock()
    svc._raw_get = mock.Mock(return_value={"resources": [{"name": "pytorchjobs"}]})  # pylint: disable=protected-access
    return svc


def test_get_job(service):
    service.custom.get_namespaced_custom_object.return_value = {"metadata": {"name": "mnist"}}
    assert service.get_job("training", "mnist") == {"metadata": {"name": "mnist"}}
    args = service.custom.get_namespaced_custom_object.call_args
    assert args[0] == ("kubeflow.org", "v1", "training", "pytorchjobs", "mnist")
    assert args[1]["_request_timeout"] == k8s.DEFAULT_REQUEST_TIMEOUT


def test_get_job_missing(service):
    service.custom.get_namespaced_custom_object.side_effect = api_error(404, 'pytorchjobs "x" not found', "x")
    with pytest.raises(JobNotFoundError) as err:
        service.get_job("training", "x")
    assert err.value.msg == "PyTorchJob training/x not found."


def test_get_job_crd_missing(service):
    service.custom.get_namespaced_custom_object.side_effect = api_error(404, "the server could not find")
    service._raw_get.side_effect = api_error(404)  # pylint: disable=protected-access
    with pytest.raises(CrdMissingError) as err:
        service.get_job("training", "x")
    assert "training operator" in err.value.msg


def test_group_served_without_pytorchjobs_is_crd_missing(service):
    service.custom.get_namespaced_custom_object.side_effect = api_error(404)
    service._raw_get.return_value = {"resources": [{"name": "tfjobs"}]}  # pylint: disable=protected-access
    with pytest.raises(CrdMissingError):
        service.get_job("training", "x")


def test_forbidden(service):
    service.custom.get_namespaced_custom_object.side_effect = api_error(
        403, 'pytorchjobs.kubeflow.org "x" is forbidden: User "dev" cannot get resource')
    with pytest.raises(ApiAccessError) as err:
        service.get_job("training", "x")
    assert err.value.msg.startswith("Not allowed to read PyTorchJob training/x (HTTP 403)")


def test_unreachable(service):
    service.custom.get_namespaced_custom_object.side_effect = MaxRetryError(None, "/apis", "refused")
    with pytest.raises(ApiUnreachableError) as err:
        service.get_job("training", "x")
    assert "https://127.0.0.1:6443" in err.value.msg


def test_server_error(service):
    service.custom.list_namespaced_custom_object.side_effect = api_error(500, "etcd down")
    with pytest.raises(ApiAccessError) as err:
        service.list_jobs("training")
    assert "etcd down" in err.value.msg


def test_list_jobs_sorted_and_crd_missing(service):
    service.custom.list_namespaced_custom_object.return_value = {
        "items": [{"metadata": {"name": "b"}}, {"metadata": {"name": "a"}}]}
    assert [j["metadata"]["name"] for j in service.list_jobs("training", "team=ml")] == ["a", "b"]
    assert service.custom.list_namespaced_custom_object.call_args[1]["label_selector"] == "team=ml"
    service.custom.list_namespaced_custom_object.side_effect = api_error(404)
    with pytest.raises(CrdMissingError):
        service.list_jobs("training")


def test_list_pods_and_events(service):
    service.core.list_namespaced_pod.return_value = mock.Mock(data=json.dumps({"items": [{"a": 1}]}).encode())
    assert service.list_pods("training", "mnist") == [{"a": 1}]
    assert service.core.list_namespaced_pod.call_args[1]["label_selector"] == "training.kubeflow.org/job-name=mnist"
    service.list_pods("training")
    assert service.core.list_namespaced_pod.call_args[1]["label_selector"] == "training.kubeflow.org/job-name"
    events = {"items": [{"involvedObject": {"name": "mnist"}}, {"involvedObject": {"name": "other"}},
                        {"involvedObject": {"name": "mnist-master-0"}}]}
    service.core.list_namespaced_event.return_value = mock.Mock(data=json.dumps(events).encode())
    assert len(service.list_events("training", ["mnist", "mnist-master-0"])) == 2
    assert len(service.list_events("training", ["mnist"])) == 1
    assert service.core.list_namespaced_event.call_args[1]["field_selector"] == "involvedObject.name=mnist"
    assert service.list_events("training", []) == []


def test_watch_job(service, monkeypatch):
    watcher = mock.Mock()
    watcher.stream.return_value = iter([
        {"type": "ADDED", "object": {"x": 1}, "raw_object": {"x": 1}},
        {"type": "MODIFIED", "object": {"x": 2}, "raw_object": {"x": 2}},
    ])
    monkeypatch.setattr(k8s.k8s_watch, "Watch", lambda: watcher)
    events = list(service.watch_job("training", "mnist", "42", 10))
    assert events == [("ADDED", {"x": 1}), ("MODIFIED", {"x": 2})]
    kwargs = watcher.stream.call_args[1]
    assert kwargs["field_selector"] == "metadata.name=mnist"
    assert kwargs["resource_version"] == "42"
    assert kwargs["timeout_seconds"] == 10
    assert kwargs["_request_timeout"] == (10, 40)
    watcher.stop.assert_called_once_with()


def test_watch_expired(service, monkeypatch):
    watcher = mock.Mock()
    watcher.stream.side_effect = api_error(410, "too old resource version")
    monkeypatch.setattr(k8s.k8s_watch, "Watch", lambda: watcher)
    with pytest.raises(WatchExpiredError):
        list(service.watch_job("training", "mnist", "1", 5))


def test_watch_pods(service, monkeypatch):
    watcher = mock.Mock()
    watcher.stream.return_value = iter([{"type": "ADDED", "object": {"p": 1}, "raw_object": {"p": 1}}])
    monkeypatch.setattr(k8s.k8s_watch, "Watch", lambda: watcher)
    watch = service.watch_pods("training", "mnist", 20)
    assert list(watch.events()) == [("ADDED", {"p": 1})]
    args, kwargs = watcher.stream.call_args
    assert args[1] == "training"
    assert kwargs["label_selector"] == "training.kubeflow.org/job-name=mnist"
    assert kwargs["timeout_seconds"] == 20
    assert kwargs["_request_timeout"] == (10, 50)
    # the function the watch calls is the pods' list, and the response is kept for cancel()
    response = mock.Mock()
    service.core.list_namespaced_pod.return_value = response
    assert args[0]("training", watch=True) is response
    watch.cancel()
    response.shutdown.assert_called_once_with()
    watcher.stop.assert_called_with()


@pytest.mark.parametrize("status,error", [(403, ApiAccessError), (410, WatchExpiredError)])
def test_watch_pods_errors(service, monkeypatch, status, error):
    watcher = mock.Mock()
    watcher.stream.side_effect = api_error(status, 'pods is forbidden: User "dev" cannot watch resource "pods"')
    monkeypatch.setattr(k8s.k8s_watch, "Watch", lambda: watcher)
    with pytest.raises(error) as err:
        list(service.watch_pods("training", "mnist", 5).events())
    if status == 403:
        assert err.value.msg.startswith("Not allowed to watch the pods of PyTorchJob training/mnist (HTTP 403)")


def test_watch_pods_error_after_cancel_is_silent(service, monkeypatch):
    watcher = mock.Mock()
    watcher.stream.side_effect = MaxRetryError(None, "/api/v1", "connection shut down")
    monkeypatch.setattr(k8s.k8s_watch, "Watch", lambda: watcher)
    watch = service.watch_pods("training", "mnist", 5)
    watch.cancel()
    assert list(watch.events()) == []


class FakeResponse(object):
    def __init__(self, data):
        self.data = data
        self.closed = self.released = False

    def stream(self, size, decode_content=True):  # pylint: disable=unused-argument
        for start in range(0, len(self.data), size):
            yield self.data[start:start + size]

    def close(self):
        self.closed = True

    def release_conn(self):
        self.released = True


def test_iter_log_streams_and_releases(service):
    response = FakeResponse(b"a" * 100)
    service.core.read_namespaced_pod_log.return_value = response
    chunks = list(service.iter_log("training", "mnist-master-0", chunk_size=30, container="pytorch",
                                   tail_lines=5, since_seconds=60, previous=True, limit_bytes=10))
    assert [len(c) for c in chunks] == [30, 30, 30, 10]
    assert response.closed and response.released
    kwargs = service.core.read_namespaced_pod_log.call_args[1]
    assert kwargs["_preload_content"] is False
    assert (kwargs["container"], kwargs["tail_lines"], kwargs["since_seconds"], kwargs["previous"],
            kwargs["limit_bytes"]) == ("pytorch", 5, 60, True, 10)
    assert "timestamps" not in kwargs
    service.core.read_namespaced_pod_log.return_value = FakeResponse(b"x\n")
    list(service.iter_log("training", "mnist-master-0", container="pytorch", timestamps=True))
    assert service.core.read_namespaced_pod_log.call_args[1]["timestamps"] is True


def test_log_of_waiting_container(service):
    service.core.read_namespaced_pod_log.side_effect = api_error(
        400, 'container "pytorch" in pod "mnist-worker-0" is waiting to start: trying and failing to pull image')
    with pytest.raises(LogReadError) as err:
        list(service.iter_log("training", "mnist-worker-0", container="pytorch"))
    assert "waiting to start" in err.value.msg


def test_log_of_a_pod_on_a_lost_node_is_that_pods_error(service):
    """The API server answers 500 when it cannot reach the node's kubelet: one pod's problem."""
    service.core.read_namespaced_pod_log.side_effect = api_error(
        500, 'Get "https://172.18.0.3:10250/containerLogs/training/mnist-worker-1/pytorch": '
             'dial tcp 172.18.0.3:10250: connect: no route to host')
    with pytest.raises(LogReadError) as err:
        list(service.iter_log("training", "mnist-worker-1", container="pytorch"))
    assert "no route to host" in err.value.msg
    assert err.value.details["status"] == 500


def test_log_read_refused_by_the_api_server_is_not_a_pod_error(service):
    service.core.read_namespaced_pod_log.side_effect = api_error(403, "forbidden")
    with pytest.raises(k8s.TrainfleetError) as err:
        list(service.iter_log("training", "mnist-worker-1", container="pytorch"))
    assert not isinstance(err.value, LogReadError)


def test_iter_lines():
    assert list(k8s.iter_lines([b"ab", b"c\nd", b"e\n\nf"])) == ["abc", "de", "", "f"]
    assert list(k8s.iter_lines([b"\xc3", b"\xa9t\xc3\xa9\n"])) == [u"\u00e9t\u00e9"]
    assert list(k8s.iter_lines([])) == []


def test_iter_lines_bounds_a_line_without_newline(monkeypatch):
    monkeypatch.setattr(k8s, "MAX_LINE_BYTES", 10)
    lines = list(k8s.iter_lines([b"x" * 8, b"x" * 8, b"x" * 8]))
    assert [len(line) for line in lines] == [16, 8]


class _FakeApiClient(object):
    """call_api answers from {path: body}; a path not there is an HTTP 404; `raise_for` maps a path to an exception."""

    def __init__(self, bodies, raise_for=None):
        self.bodies = bodies
        self.raise_for = raise_for or {}
        self.configuration = mock.Mock(host="https://api.example:6443")
        self.calls = []

    def call_api(self, path, method, query_params=None, **_kwargs):
        self.calls.append((method, path, tuple(query_params or ())))
        if path in self.raise_for:
            raise self.raise_for[path]
        if path not in self.bodies:
            raise ApiException(status=404, reason="Not Found")
        return self.bodies[path]


READER_BODIES = {
    "/api/v1": {"resources": [{"name": "namespaces", "kind": "Namespace", "namespaced": False},
                              {"name": "pods", "kind": "Pod", "namespaced": True},
                              {"name": "pods/log", "kind": "Pod", "namespaced": True}]},
    "/apis/kubeflow.org/v1": {"resources": [{"name": "pytorchjobs", "kind": "PyTorchJob", "namespaced": True}]},
    "/api/v1/namespaces/tf/pods": {"items": [{"metadata": {"name": "p"}}]},
    "/apis/kubeflow.org/v1/pytorchjobs": {"items": [{"metadata": {"name": "j", "namespace": "a"}}]},
    "/api/v1/namespaces/tf": {"metadata": {"name": "tf"}},
}


def test_resource_reader_paths_come_from_discovery_read_once():
    api = _FakeApiClient(READER_BODIES)
    reader = k8s.ResourceReader(api)
    assert reader.list("v1", "Pod", "tf", label_selector="a!=b") == [{"metadata": {"name": "p"}}]
    assert reader.list("kubeflow.org/v1", "PyTorchJob") == [{"metadata": {"name": "j", "namespace": "a"}}]
    assert reader.get("v1", "Namespace", "tf") == {"metadata": {"name": "tf"}}
    assert reader.get("v1", "Namespace", "gone") is None
    assert ("GET", "/api/v1/namespaces/tf/pods", (("labelSelector", "a!=b"),)) in api.calls
    assert [c[1] for c in api.calls].count("/api/v1") == 1


def test_resource_reader_a_kind_not_served_is_empty():
    api = _FakeApiClient(READER_BODIES)
    reader = k8s.ResourceReader(api)
    assert reader.list("kubeflow.org/v2beta1", "MPIJob", "tf") == []  # group/version not served
    assert reader.list("v1", "Widget", "tf") == []  # kind not in the group/version
    assert reader.get("kubeflow.org/v2beta1", "MPIJob", "x", "tf") is None


@pytest.mark.parametrize("exc, error, text", [
    (ApiException(status=403, reason="Forbidden"), ApiAccessError, "Not allowed to list Pods in tf (HTTP 403)"),
    (MaxRetryError(None, "/api/v1/namespaces/tf/pods", "refused"), ApiUnreachableError, "Cannot reach the Kubernetes API server"),
])
def test_resource_reader_translates_errors(exc, error, text):
    reader = k8s.ResourceReader(_FakeApiClient(READER_BODIES, {"/api/v1/namespaces/tf/pods": exc}))
    with pytest.raises(error) as info:
        reader.list("v1", "Pod", "tf")
    assert text in info.value.msg
