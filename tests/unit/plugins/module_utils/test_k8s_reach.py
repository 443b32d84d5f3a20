# -*- coding: utf-8 -*-
"""k8s_reach.probe: whether a cluster's API answers and accepts our credentials, always within a
bounded time (the teardown asks it before it touches a cluster that may be gone).

Fake API clients for each answer, then the real kubernetes client against a closed port and
against a listener that accepts and never answers.
"""

from __future__ import annotations

import json
import socket
import time

import pytest
from kubernetes.client.rest import ApiException
from urllib3.exceptions import MaxRetryError

from ansible_collections.trainfleet.training.plugins.module_utils import k8s, k8s_reach
from ansible_collections.trainfleet.training.plugins.module_utils.errors import ClientConfigError
from tests.support.net import silent_listener


class FakeConfiguration(object):
    host = "https://api.example:6443"


class FakeClient(object):
    """call_api answers per path: a dict, or an exception to raise, or a number of seconds to hang."""

    def __init__(self, answers):
        self.answers = answers
        self.configuration = FakeConfiguration()
        self.calls = []

    def call_api(self, path, method, **kwargs):
        self.calls.append((method, path, kwargs.get("_request_timeout")))
        answer = self.answers[path]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, (int, float)):
            time.sleep(answer)
            return {}
        return answer


def params(**kwargs):
    base = dict((key, None) for key in k8s.AUTH_ARG_SPEC)
    base.update(kwargs)
    return base


def probe_with(answers, timeout=3):
    fake = FakeClient(answers)
    return k8s_reach.probe(params(), timeout, client_factory=lambda p: fake), fake


def test_answers_and_accepts():
    result, fake = probe_with({"/version": {"gitVersion": "v1.32.2"}, "/api": {"versions": ["v1"]}})
    assert result == dict(reachable=True, authorized=True, server="https://api.example:6443", version="v1.32.2",
                          reason="the API server https://api.example:6443 (v1.32.2) answers")
    assert fake.calls == [("GET", "/version", (3, 3)), ("GET", "/api", (3, 3))]


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_are_reachable_but_not_authorized(status):
    result, _fake = probe_with({"/version": {"gitVersion": "v1.30.0"}, "/api": ApiException(status=status)})
    assert result["reachable"] and not result["authorized"] and result["version"] == "v1.30.0"
    assert "refused our credentials (HTTP %d)" % status in result["reason"]
    result, _fake = probe_with({"/version": ApiException(status=status)})
    assert result["reachable"] and not result["authorized"]


def test_server_errors_and_connection_errors_are_unreachable():
    result, _fake = probe_with({"/version": ApiException(status=503)})
    assert not result["reachable"] and "HTTP 503" in result["reason"]
    result, _fake = probe_with({"/version": MaxRetryError(None, "/version", "connection refused")})
    assert not result["reachable"] and "does not answer" in result["reason"]
    result, _fake = probe_with({"/version": {}, "/api": OSError("reset")})
    assert not result["reachable"] and "does not answer: reset" in result["reason"]


def test_missing_and_broken_kubeconfig(tmp_path):
    result = k8s_reach.probe(params(kubeconfig=str(tmp_path / "gone")), 3)
    assert not result["reachable"] and result["reason"] == "kubeconfig %s does not exist" % (tmp_path / "gone")

    def broken(_params):
        raise ClientConfigError("Invalid Kubernetes configuration: no context")

    result = k8s_reach.probe(params(), 3, client_factory=broken)
    assert not result["reachable"] and result["reason"] == "kubeconfig unusable: Invalid Kubernetes configuration: no context"


def test_a_hanging_call_is_cut_off(monkeypatch):
    monkeypatch.setattr(k8s_reach, "GRACE", 0.5)
    started = time.monotonic()
    result, _fake = probe_with({"/version": 30}, timeout=1)
    assert time.monotonic() - started < 5
    assert not result["reachable"] and result["reason"].startswith("the API server did not answer within")


def test_unexpected_error_in_the_factory_is_an_answer():
    def exploding(_params):
        raise RuntimeError("exec plugin crashed")

    result = k8s_reach.probe(params(), 2, client_factory=exploding)
    assert not result["reachable"] and "exec plugin crashed" in result["reason"]


def _kubeconfig(tmp_path, port):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:%d" % port, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def test_real_client_closed_port(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    result = k8s_reach.probe(params(kubeconfig=_kubeconfig(tmp_path, port)), 2)
    # bounded by the 2 s probe (with room for a loaded, slower machine), not by a client's own retries
    assert time.monotonic() - started < 15
    assert not result["reachable"] and result["server"] == "https://127.0.0.1:%d" % port
    assert "t0ken" not in json.dumps(result)


def test_real_client_silent_listener_is_bounded(tmp_path):
    """A server that accepts and never answers: one attempt (no urllib3 retries), cut at the timeout."""
    with silent_listener(backlog=8) as (port, held):
        started = time.monotonic()
        result = k8s_reach.probe(params(kubeconfig=_kubeconfig(tmp_path, port)), 1)
        elapsed = time.monotonic() - started
    assert not result["reachable"]
    assert elapsed < 1 + k8s_reach.GRACE + 1, elapsed
    assert len(held) <= 2, "urllib3 retried: %d connections" % len(held)
