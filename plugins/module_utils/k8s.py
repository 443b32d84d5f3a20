# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes client setup and the training-job service (API calls only, no semantics).

Layers: get_api_client() (auth options -> ApiClient) -> TrainJobService (typed calls for one
kind of job, jobkinds, that return plain dicts and raise the collection's exceptions) ->
waiter.py / jobinfo.py / joblogs.py -> the modules.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import traceback

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.trainfleet.training.plugins.module_utils.errors import (
    ApiAccessError,
    ApiUnreachableError,
    ClientConfigError,
    CrdMissingError,
    JobNotFoundError,
    LogReadError,
    TrainfleetError,
    WatchExpiredError,
)
from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import PYTORCHJOB

K8S_IMP_ERR = None
try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes import watch as k8s_watch
    from kubernetes.client.rest import ApiException
    from kubernetes.config.config_exception import ConfigException
    HAS_K8S = True
except ImportError:
    K8S_IMP_ERR = traceback.format_exc()
    HAS_K8S = False

    class ApiException(Exception):  # type: ignore[no-redef]
        """Stand-in so except clauses work without the kubernetes package."""
        status = None
        body = None
        reason = None

    class ConfigException(Exception):  # type: ignore[no-redef]
        """Stand-in so except clauses work without the kubernetes package."""

try:
    from urllib3.exceptions import HTTPError as Urllib3HTTPError
except ImportError:
    class Urllib3HTTPError(Exception):  # type: ignore[no-redef]
        """Stand-in so except clauses work without urllib3."""


# Seconds for a connect / a single socket read of every API call: no call can hang.
DEFAULT_REQUEST_TIMEOUT = (10, 60)
LOG_CHUNK_SIZE = 64 * 1024
# The statuses of a pod log request that the API server answers when it cannot reach the pod's
# kubelet (its node is lost or partitioned).
LOG_KUBELET_STATUSES = (500, 502, 503, 504)
MAX_LINE_BYTES = 1024 * 1024

AUTH_ARG_SPEC = dict(
    kubeconfig=dict(type="path", fallback=(env_fallback, ["K8S_AUTH_KUBECONFIG"])),
    context=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_CONTEXT"])),
    host=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_HOST"])),
    api_key=dict(type="str", no_log=True, fallback=(env_fallback, ["K8S_AUTH_API_KEY"])),
    validate_certs=dict(type="bool", aliases=["verify_ssl"],
                        fallback=(env_fallback, ["K8S_AUTH_VERIFY_SSL"])),
    ca_cert=dict(type="path", aliases=["ssl_ca_cert"],
                 fallback=(env_fallback, ["K8S_AUTH_SSL_CA_CERT"])),
)


def auth_arg_spec():
    """A fresh copy of the shared Kubernetes auth options (modules extend it)."""
    return dict((key, dict(value)) for key, value in AUTH_ARG_SPEC.items())


def require_kubernetes(module):
    """fail_json with the standard message when the kubernetes package is missing."""
    if not HAS_K8S:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_IMP_ERR)


def get_api_client(params):
    """ApiClient from the auth options.

    host (+ api_key) wins; otherwise the kubeconfig file (option, $KUBECONFIG or
    ~/.kube/config) with an optional context; otherwise the in-cluster service account.
    validate_certs / ca_cert override what the kubeconfig says.
    """
    configuration = k8s_client.Configuration()
    kubeconfig = params.get("kubeconfig")
    context = params.get("context")
    host = params.get("host")
    try:
        if host:
            configuration.host = host
            if kubeconfig or context:
                raise ClientConfigError("Use either host (with api_key) or kubeconfig/context, not both.")
        else:
            path = kubeconfig or os.path.expanduser(
                os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
            if kubeconfig and not os.path.exists(kubeconfig):
                raise ClientConfigError("kubeconfig file %s does not exist." % kubeconfig)
            if os.path.exists(path):
                k8s_config.load_kube_config(config_file=path, context=context,
                                            client_configuration=configuration,
                                            persist_config=False)
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                k8s_config.load_incluster_config(client_configuration=configuration)
            else:
                raise ClientConfigError(
                    "No Kubernetes configuration found: set kubeconfig (or K8S_AUTH_KUBECONFIG, "
                    "KUBECONFIG), or host and api_key.")
    except ConfigException as exc:
        raise ClientConfigError("Invalid Kubernetes configuration (kubeconfig=%s, context=%s): %s"
                                % (kubeconfig or "default", context or "current", exc))
    except ClientConfigError:
        raise
    except Exception as exc:  # pylint: disable=broad-except
        # unreadable file, YAML syntax error, missing keys: all mean a bad kubeconfig
        raise ClientConfigError("Cannot load kubeconfig %s: %s" % (kubeconfig or "default", exc))
    if params.get("api_key"):
        configuration.api_key = {"authorization": "Bearer " + params["api_key"]}
    if params.get("validate_certs") is not None:
        configuration.verify_ssl = params["validate_certs"]
    if params.get("ca_cert"):
        configuration.ssl_ca_cert = params["ca_cert"]
    return k8s_client.ApiClient(configuration=configuration)


def _status_body(exc):
    try:
        return json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        return {}


def _api_message(exc):
    body = _status_body(exc)
    return body.get("message") or getattr(exc, "reason", None) or str(exc)


class TrainJobService(object):
    """The API calls the modules make about one kind of job (a jobkinds.JobKind). Every method
    returns plain dicts (the server's JSON) and raises errors.TrainfleetError subclasses, never
    kubernetes exceptions."""

    def __init__(self, api_client, kind=PYTORCHJOB, request_timeout=DEFAULT_REQUEST_TIMEOUT):
        self.api_client = api_client
        self.kind = kind
        self.core = k8s_client.CoreV1Api(api_client)
        self.custom = k8s_client.CustomObjectsApi(api_client)
        self.request_timeout = request_timeout
        self.host = getattr(api_client.configuration, "host", None)

    # ---------------------------------------------------------------- errors

    def _translate(self, exc, what):
        if isinstance(exc, TrainfleetError):
            return exc
        if isinstance(exc, ApiException):
            status = getattr(exc, "status", None)
            if status in (401, 403):
                return ApiAccessError("Not allowed to %s (HTTP %s): %s" % (what, status, _api_message(exc)),
                                      status=status)
            if status == 410:
                return WatchExpiredError("Watch expired while trying to %s" % what, status=status)
            return ApiAccessError("Failed to %s (HTTP %s): %s" % (what, status, _api_message(exc)),
                                  status=status)
        if isinstance(exc, (Urllib3HTTPError, IOError, OSError)):
            return ApiUnreachableError("Cannot reach the Kubernetes API server %s to %s: %s"
                                       % (self.host, what, exc))
        return TrainfleetError("Failed to %s: %s" % (what, exc))

    def _raw_get(self, path):
        data = self.api_client.call_api(
            path, "GET", header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"], response_type="object",
            _return_http_data_only=True, _preload_content=True,
            _request_timeout=self.request_timeout)
        return data

    def crd_served(self):
        """True when the API server serves the kind's resource (kubeflow.org/v1 pytorchjobs, ...)."""
        kind = self.kind
        try:
            data = self._raw_get("/apis/%s/%s" % (kind.group, kind.version))
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise self._translate(exc, "discover %s" % kind.api_version)
        except Exception as exc:  # pylint: disable=broad-except
            raise self._translate(exc, "discover %s" % kind.api_version)
        resources = (data or {}).get("resources") or []
        return any(r.get("name") == kind.plural for r in resources)

    def _crd_missing(self):
        kind = self.kind
        return CrdMissingError(
            "The %s CRD (%s, %s) is not installed on %s: install %s first." % (
                kind.label, kind.crd_name, kind.api_version, self.host, kind.installer))

    # ---------------------------------------------------------------- jobs

    def get_job(self, namespace, name):
        try:
            return self.custom.get_namespaced_custom_object(
                self.kind.group, self.kind.version, namespace, self.kind.plural, name,
                _request_timeout=self.request_timeout)
        except ApiException as exc:
            if exc.status == 404:
                if not self.crd_served():
                    raise self._crd_missing()
                raise JobNotFoundError("%s %s/%s not found." % (self.kind.label, namespace, name),
                                       namespace=namespace, name=name)
            raise self._translate(exc, "read %s %s/%s" % (self.kind.label, namespace, name))
        except Exception as exc:  # pylint: disable=broad-except
            raise self._translate(exc, "read %s %s/%s" % (self.kind.label, namespace, name))

    def list_jobs(self, namespace, label_selector=None):
        kwargs = {"_request_timeout": self.request_timeout}
        if label_selector:
            kwargs["label_selector"] = label_selector
        try:
            data = self.custom.list_namespaced_custom_object(
                self.kind.group, self.kind.version, namespace, self.kind.plural, **kwargs)
        except ApiException as exc:
            if exc.status == 404:
                raise self._crd_missing()
            raise self._translate(exc, "list %ss in %s" % (self.kind.label, namespace))
        except Exception as exc:  # pylint: disable=broad-except
            raise self._translate(exc, "list %ss in %s" % (self.kind.label, namespace))
        return sorted(data.get("items") or [], key=lambda j: j.get("metadata", {}).get("name", ""))

    def watch_job(self, namespace, name, resource_version, timeout_seconds):
        """Yield (event type, job dict) for one job for at most timeout_seconds."""
        watcher = k8s_watch.Watch()
        kwargs = {
            "field_selector": "metadata.name=%s" % name,
            "timeout_seconds": int(max(1, timeout_seconds)),
            # client-side bound too: a stalled connection cannot outlive the wait
            "_request_timeout": (self.request_timeout[0], int(max(1, timeout_seconds)) + 30),
        }
        if resource_version:
            kwargs["resource_version"] = resource_version
        try:
            for event in watcher.stream(self.custom.list_namespaced_custom_object,
                                        self.kind.group, self.kind.version, namespace, self.kind.plural,
                                        **kwargs):
                obj = event.get("raw_object") or event.get("object")
                yield event.get("type"), obj
        except ApiException as exc:
            if exc.status == 404:
                raise self._crd_missing()
            raise self._translate(exc, "watch %s %s/%s" % (self.kind.label, namespace, name))
        except TrainfleetError:
            raise
        except Exception as exc:  # pylint: disable=broad-except
            raise self._translate(exc, "watch %s %s/%s" % (self.kind.label, namespace, name))
        finally:
            watcher.stop()

    def watch_pods(self, namespace, job_name, timeout_seconds):
        """One round of a watch on a job's pods: a PodWatch (events(), cancel())."""
        return PodWatch(self, namespace, job_name, timeout_seconds)

    # ---------------------------------------------------------------- gang (Volcano PodGroup)

    def get_podgroup(self, namespace, name):
        """The Volcano PodGroup (scheduling.volcano.sh/v1beta1) named `name`, or None when there is
        none, Volcano is not installed (404) or the caller may not read PodGroups (401/403)."""
        try:
            return self.custom.get_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", namespace, "podgroups", name,
                _request_timeout=self.request_timeout)
        except ApiException as exc:
            if exc.status in (401, 403, 404):
                return None
            raise self._translate(exc, "read PodGroup %s/%s" % (namespace, name))
        except Exception as exc:  # pylint: disable=broad-except
            raise self._translate(exc, "read PodGroup %s/%s" % (namespace, name))

    # ---------------------------------------------------------------- pods, events

    def _list_json(self, func, what, *args, **kwargs):
        kwargs["_preload_content"] = False
        kwargs["_request_timeout"] = self.request_timeout
        try:
            resp = func(*args, **kwargs)
            data = json.loads(resp.data)
        except Exception as exc:  # pylint: disable=broad-except
            raise self._translate(exc, what)
        return data.get("items") or []

    def list_pods(self, namespace, job_name=None):
        """Pods of one job (job_name) or of every job of the kind in the namespace."""
        selector = self.kind.pod_selector(job_name)
        return self._list_json(self.core.list_namespaced_pod, "list pods in %s" % namespace,
                               namespace, label_selector=selector)

    def list_events(self, namespace, object_names):
        """Events about any of the named objects (job, pods), oldest first."""
        names = set(object_names)
        if not names:
            return []
        if len(names) == 1:
            selector = "involvedObject.name=%s" % next(iter(names))
            items = self._list_json(self.core.list_namespaced_event, "list events in %s" % namespace,
                                    namespace, field_selector=selector)
        else:
            items = self._list_json(self.core.list_namespaced_event, "list events in %s" % namespace,
                                    namespace)
        return [e for e in items if (e.get("involvedObject") or {}).get("name") in names]

    # ---------------------------------------------------------------- logs

    def open_log(self, namespace, pod, container=None, tail_lines=None, since_seconds=None,
                 previous=False, limit_bytes=None, timestamps=False):
        """The raw urllib3 response of a pod log (not preloaded: read it in chunks). With
        timestamps, the kubelet starts every line with the RFC 3339 time it was written."""
        kwargs = {"_preload_content": False, "_request_timeout": self.request_timeout,
                  "previous": bool(previous)}
        if timestamps:
            kwargs["timestamps"] = True
        if container:
            kwargs["container"] = container
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        if since_seconds is not None:
            kwargs["since_seconds"] = since_seconds
        if limit_bytes:
            kwargs["limit_bytes"] = limit_bytes
        what = "read the %slog of pod %s/%s%s" % (
            "previous " if previous else "", namespace, pod, " container %s" % container if container else "")
        try:
            return self.core.read_namespaced_pod_log(pod, namespace, **kwargs)
        except ApiException as exc:
            # 400/404: no such container run or pod. 5xx: the API server could not reach the
            # kubelet of the pod's node (a lost node: "dial tcp ...: no route to host"). Both are
            # about this one pod; the callers go on with the other pods.
            if exc.status in (400, 404) or exc.status in LOG_KUBELET_STATUSES:
                raise LogReadError("Cannot %s: %s" % (what, _api_message(exc)), pod=pod, status=exc.status)
            raise self._translate(exc, what)
        except Exception as exc:  # pylint: disable=broad-except
            raise self._translate(exc, what)

    def iter_log(self, namespace, pod, chunk_size=LOG_CHUNK_SIZE, **kwargs):
        """Yield a pod log in byte chunks; memory use is one chunk."""
        resp = self.open_log(namespace, pod, **kwargs)
        try:
            for chunk in resp.stream(chunk_size, decode_content=True):
                if chunk:
                    yield chunk
        except Exception as exc:  # pylint: disable=broad-except
            raise self._translate(exc, "stream the log of pod %s/%s" % (namespace, pod))
        finally:
            resp.close()
            resp.release_conn()


class ResourceReader(object):
    """Reads any kind of object by its apiVersion and kind (GET only): the resource's plural and
    scope come from the server's discovery, read once per group/version. Returns plain dicts and
    raises errors.TrainfleetError subclasses, never kubernetes exceptions. A kind the server does
    not serve lists as nothing and reads as None (what kubernetes.core.k8s_info answers)."""

    def __init__(self, api_client, request_timeout=DEFAULT_REQUEST_TIMEOUT):
        self.api_client = api_client
        self.request_timeout = request_timeout
        self.host = getattr(api_client.configuration, "host", None)
        self._discovered = {}

    def _translate(self, exc, what):
        return TrainJobService._translate(self, exc, what)  # same mapping as the job service

    def _get(self, path, what, query=None):
        """The JSON of a GET, or None on HTTP 404."""
        try:
            return self.api_client.call_api(
                path, "GET", query_params=list(query or []), header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"], response_type="object",
                _return_http_data_only=True, _preload_content=True,
                _request_timeout=self.request_timeout)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise self._translate(exc, what)
        except Exception as exc:  # pylint: disable=broad-except
            raise self._translate(exc, what)

    @staticmethod
    def _base(api_version):
        return "/api/v1" if api_version == "v1" else "/apis/" + api_version

    def resource(self, api_version, kind):
        """(plural, namespaced) of a kind, or None when the server does not serve it."""
        if api_version not in self._discovered:
            data = self._get(self._base(api_version), "discover %s" % api_version) or {}
            self._discovered[api_version] = dict(
                (r.get("kind"), (r.get("name"), bool(r.get("namespaced"))))
                for r in data.get("resources") or [] if "/" not in (r.get("name") or ""))
        return self._discovered[api_version].get(kind)

    def _path(self, api_version, kind, namespace, name=None):
        found = self.resource(api_version, kind)
        if found is None:
            return None
        plural, namespaced = found
        path = self._base(api_version)
        if namespaced and namespace:
            path += "/namespaces/" + namespace
        path += "/" + plural
        return path + "/" + name if name else path

    def list(self, api_version, kind, namespace=None, label_selector=None):
        """The objects of a kind (in one namespace, or all), optionally by label selector."""
        path = self._path(api_version, kind, namespace)
        if path is None:
            return []
        query = [("labelSelector", label_selector)] if label_selector else []
        data = self._get(path, "list %ss%s" % (kind, " in " + namespace if namespace else ""), query)
        return (data or {}).get("items") or []

    def get(self, api_version, kind, name, namespace=None):
        """One object, or None when it (or its kind) does not exist."""
        path = self._path(api_version, kind, namespace, name)
        if path is None:
            return None
        return self._get(path, "read %s %s%s" % (kind, namespace + "/" if namespace else "", name))


class _WatchCancelled(Exception):
    """Raised inside PodWatch when cancel() came before the request was sent."""


class PodWatch(object):
    """One round of a watch on a job's pods (the kind's job-name label) that another thread can
    end at once.

    events() yields (event type, pod dict): first ADDED for every existing pod, then every
    change, until the server ends the round (timeout_seconds), the connection fails (raised
    as the collection's errors) or cancel() is called (events() then just returns). cancel()
    stops the stream and shuts the connection's socket down for reading, so a reader blocked
    on it returns at once (urllib3 2.3 and later; with an older urllib3 the round ends at its
    timeout). Bounded either way: server-side timeout_seconds and a client-side read timeout.
    """

    def __init__(self, service, namespace, job_name, timeout_seconds):
        self.service = service
        self.namespace = namespace
        self.job_name = job_name
        self.timeout_seconds = int(max(1, timeout_seconds))
        self._lock = threading.Lock()
        self._resp = None
        self._cancelled = False
        self._watcher = k8s_watch.Watch()

    @property
    def cancelled(self):
        return self._cancelled

    def _list(self, *args, **kwargs):
        # Watch.stream calls this (no docstring: events carry the raw dicts, no models).
        with self._lock:
            if self._cancelled:
                raise _WatchCancelled()
        resp = self.service.core.list_namespaced_pod(*args, **kwargs)
        with self._lock:
            self._resp = resp
            cancelled = self._cancelled
        if cancelled:
            self._shutdown(resp)
        return resp

    @staticmethod
    def _shutdown(resp):
        try:
            shutdown = getattr(resp, "shutdown", None)
            if shutdown is not None:
                shutdown()
            else:
                # urllib3 1.x (torchx pins it) has no HTTPResponse.shutdown(), and close() does not
                # wake a reader blocked in recv() on another thread: shutting the socket down does.
                sock = _response_socket(resp)
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
                resp.close()
        except Exception:  # pylint: disable=broad-except
            # already closed or released: nothing is blocked on it any more
            pass

    def events(self):
        what = "watch the pods of %s %s/%s" % (self.service.kind.label, self.namespace, self.job_name)
        kwargs = {
            "label_selector": self.service.kind.pod_selector(self.job_name),
            "timeout_seconds": self.timeout_seconds,
            "_request_timeout": (self.service.request_timeout[0], self.timeout_seconds + 30),
        }
        try:
            for event in self._watcher.stream(self._list, self.namespace, **kwargs):
                if self._cancelled:
                    return
                obj = event.get("raw_object") or event.get("object")
                yield event.get("type"), obj
        except _WatchCancelled:
            return
        except Exception as exc:  # pylint: disable=broad-except
            if self._cancelled:
                return
            raise self.service._translate(exc, what)  # pylint: disable=protected-access
        finally:
            self._watcher.stop()
            with self._lock:
                self._resp = None

    def cancel(self):
        """End events() now, from any thread."""
        with self._lock:
            self._cancelled = True
            resp = self._resp
        self._watcher.stop()
        if resp is not None:
            self._shutdown(resp)


def _response_socket(resp):
    """The socket under a urllib3 1.x response (its connection's, or the one its body reads from), or None."""
    connection = getattr(resp, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        return sock
    raw = getattr(getattr(getattr(resp, "_fp", None), "fp", None), "raw", None)
    return getattr(raw, "_sock", None)


def iter_lines(chunks):
    """Split a stream of byte chunks into decoded text lines (bounded: one line at a time)."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        parts = pending.split(b"\n")
        pending = parts.pop()
        for part in parts:
            yield part.decode("utf-8", "replace")
        if len(pending) > MAX_LINE_BYTES:
            # a "line" this long is not a log line worth keeping whole
            yield pending.decode("utf-8", "replace")
            pending = b""
    if pending:
        yield pending.decode("utf-8", "replace")
