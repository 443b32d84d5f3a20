# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Can the Kubernetes API of a kubeconfig be used right now? Answered within a bounded time.

A teardown runs against clusters that may already be gone: a stale kubeconfig names an
endpoint that no longer resolves, or an address that drops every packet (a TCP connect then
hangs for minutes, and urllib3 retries it). probe() answers in at most timeout + GRACE
seconds whatever happens: the client is built (an exec credential plugin may run) and asked in
a daemon thread, every request has a connect and read timeout and is not retried.

Two requests: GET /version (any API server answers it, also to anonymous clients) tells
whether the API answers; GET /api (only for authenticated clients) whether our credentials
are accepted.
"""

from __future__ import annotations

import os
import threading

from ansible_collections.trainfleet.training.plugins.module_utils.errors import ClientConfigError
from ansible_collections.trainfleet.training.plugins.module_utils.k8s import ApiException, get_api_client

try:
    from kubernetes import client as k8s_client
except ImportError:
    k8s_client = None

# Seconds allowed beyond the request timeout for building the client (exec plugins) and DNS.
GRACE = 5


def result(reachable, reason, server=None, authorized=False, version=None):
    return dict(reachable=reachable, authorized=authorized, server=server or "", version=version or "",
                reason=reason)


def default_client(params):
    """get_api_client() with urllib3's retries switched off (one attempt per request)."""
    api_client = get_api_client(params)
    configuration = api_client.configuration
    configuration.retries = False
    return k8s_client.ApiClient(configuration=configuration)


def _get(api_client, path, timeout):
    return api_client.call_api(
        path, "GET", header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
        response_type="object", _return_http_data_only=True, _preload_content=True,
        _request_timeout=(timeout, timeout))


def _ask(params, timeout, client_factory):
    kubeconfig = params.get("kubeconfig")
    if kubeconfig and not os.path.exists(kubeconfig):
        return result(False, "kubeconfig %s does not exist" % kubeconfig)
    try:
        api_client = client_factory(params)
    except ClientConfigError as exc:
        return result(False, "kubeconfig unusable: %s" % exc.msg)
    server = getattr(api_client.configuration, "host", "") or ""
    try:
        version = (_get(api_client, "/version", timeout) or {}).get("gitVersion", "")
    except ApiException as exc:
        if exc.status in (401, 403):
            return result(True, "the API server %s answered /version with HTTP %s: credentials refused"
                          % (server, exc.status), server)
        return result(False, "the API server %s answered /version with HTTP %s" % (server, exc.status), server)
    except Exception as exc:  # pylint: disable=broad-except
        # connection refused, DNS, TLS, timeouts: urllib3 and socket errors of many kinds
        return result(False, "the API server %s does not answer: %s" % (server, exc), server)
    try:
        _get(api_client, "/api", timeout)
    except ApiException as exc:
        if exc.status in (401, 403):
            return result(True, "the API server %s refused our credentials (HTTP %s)" % (server, exc.status),
                          server, version=version)
        return result(False, "the API server %s answered /api with HTTP %s" % (server, exc.status), server,
                      version=version)
    except Exception as exc:  # pylint: disable=broad-except
        return result(False, "the API server %s does not answer: %s" % (server, exc), server, version=version)
    return result(True, "the API server %s (%s) answers" % (server, version), server, True, version)


def probe(params, timeout, client_factory=None):
    """dict(reachable, authorized, server, version, reason), within timeout + GRACE seconds.

    reachable: the API server answered (an HTTP 401/403 is an answer); authorized: it accepted
    our credentials. A kubeconfig that does not exist or cannot be loaded is unreachable.
    """
    factory = client_factory or default_client
    box = {}

    def run():
        try:
            box["result"] = _ask(params, timeout, factory)
        except Exception as exc:  # pylint: disable=broad-except
            box["result"] = result(False, "cannot ask the API server: %s" % exc)

    worker = threading.Thread(target=run, name="k8s-reach-probe")
    worker.daemon = True
    worker.start()
    worker.join(timeout + GRACE)
    if "result" not in box:
        return result(False, "the API server did not answer within %d seconds" % (timeout + GRACE))
    return box["result"]
