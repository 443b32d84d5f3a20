# -*- coding: utf-8 -*-
"""A small in-memory Kubernetes API for running the teardown's workloads part without a cluster.

Serves what kubernetes.core's dynamic client and trainfleet's k8s_reachable_info ask for:
/version, discovery (/api, /api/v1, /apis, /apis/<group>/<version>), list (all namespaces or
one, with labelSelector: k=v, k==v, k!=v, k, !k), get, and delete. Deletes have the side effects
the teardown relies on: deleting a claim deletes its dynamically provisioned volume (what the CSI
driver does for reclaimPolicy Delete), deleting a namespace deletes what it holds, deleting a CRD
deletes its custom resources. Every request is logged (method, path) so a test can prove that a
check-mode run deleted nothing.

Plain HTTP on 127.0.0.1; no authentication (any token is accepted), or every request refused
with 401 when `refuse=True`.
"""

from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

# (group, version, plural, kind, namespaced)
RESOURCES = [
    ("", "v1", "namespaces", "Namespace", False),
    ("", "v1", "pods", "Pod", True),
    ("", "v1", "services", "Service", True),
    ("", "v1", "configmaps", "ConfigMap", True),
    ("", "v1", "secrets", "Secret", True),
    ("", "v1", "serviceaccounts", "ServiceAccount", True),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    ("", "v1", "persistentvolumes", "PersistentVolume", False),
    ("", "v1", "resourcequotas", "ResourceQuota", True),
    ("", "v1", "limitranges", "LimitRange", True),
    ("apps", "v1", "deployments", "Deployment", True),
    ("apps", "v1", "statefulsets", "StatefulSet", True),
    ("apps", "v1", "daemonsets", "DaemonSet", True),
    ("batch", "v1", "jobs", "Job", True),
    ("batch", "v1", "cronjobs", "CronJob", True),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
    ("networking.k8s.io", "v1", "ingresses", "Ingress", True),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass", False),
    ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False),
    ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False),
    ("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True),
]
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def api_version(group, version):
    return "%s/%s" % (group, version) if group else version


def by_kind(kind):
    for res in RESOURCES:
        if res[3] == kind:
            return res
    raise KeyError(kind)


def selector_matches(selector, labels):
    """Kubernetes label selector semantics for k=v, k==v, k!=v (also true when k is absent), k, !k."""
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "==" in term or "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


class Store(object):
    """Objects by (kind, namespace, name); each a dict as the API returns it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.objects = {}
        self.requests = []
        self.version = 1

    def add(self, kind, name, namespace=None, labels=None, **fields):
        group, version, _plural, _kind, namespaced = by_kind(kind)
        meta = {"name": name, "uid": "uid-%s-%s-%s" % (kind, namespace, name), "resourceVersion": str(self.version)}
        self.version += 1
        if namespaced:
            meta["namespace"] = namespace or "default"
        if labels:
            meta["labels"] = dict(labels)
        meta.update(fields.pop("metadata", {}))
        obj = {"apiVersion": api_version(group, version), "kind": kind, "metadata": meta}
        obj.update(fields)
        self.objects[(kind, meta.get("namespace", ""), name)] = obj
        return obj

    def names(self, kind, namespace=None):
        return sorted(n for (k, ns, n) in self.objects if k == kind and (namespace is None or ns == namespace))

    def deletes(self):
        """Paths of the DELETE requests that deleted (not the server-side dry runs)."""
        return [r[1] for r in self.requests if r[0] == "DELETE" and "dryRun" not in r[2]]

    def delete(self, kind, namespace, name):
        """Remove one object with the side effects the real cluster has; returns it (or None)."""
        obj = self.objects.pop((kind, namespace, name), None)
        if obj is None:
            return None
        if kind == "PersistentVolumeClaim":
            volume = obj.get("spec", {}).get("volumeName")
            pv = self.objects.get(("PersistentVolume", "", volume))
            if pv and pv["spec"].get("csi") and pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete":
                self.objects.pop(("PersistentVolume", "", volume))
        elif kind == "Namespace":
            for key in [k for k in self.objects if k[1] == name]:
                self.objects.pop(key)
        elif kind == "CustomResourceDefinition":
            cr_kind = obj["spec"]["names"]["kind"]
            for key in [k for k in self.objects if k[0] == cr_kind]:
                self.objects.pop(key)
        return obj


def _resource_list(group, version):
    resources = [{"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind, "verbs": VERBS}
                 for (g, v, plural, kind, namespaced) in RESOURCES if g == group and v == version]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version(group, version),
            "resources": resources}


def _groups():
    groups = []
    for group in sorted(set(r[0] for r in RESOURCES if r[0])):
        gv = {"groupVersion": group + "/v1", "version": "v1"}
        groups.append({"name": group, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def make_handler(store, refuse):

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # pylint: disable=arguments-differ
            return

        def _send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self, path):
            """(kind, namespace, name) of a resource path, or None."""
            parts = [p for p in path.split("/") if p]
            if parts[:2] == ["api", "v1"]:
                group, version, rest = "", "v1", parts[2:]
            elif parts and parts[0] == "apis" and len(parts) >= 3:
                group, version, rest = parts[1], parts[2], parts[3:]
            else:
                return None
            namespace = None
            if len(rest) >= 3 and rest[0] == "namespaces":
                namespace, rest = rest[1], rest[2:]
            if not rest or len(rest) > 2:
                return None
            for (g, v, plural, kind, _namespaced) in RESOURCES:
                if g == group and v == version and plural == rest[0]:
                    return kind, namespace, (rest[1] if len(rest) == 2 else None)
            return None

        def _handle(self, method):
            url = urlparse(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            with store.lock:
                store.requests.append((method, url.path, url.query))
            if refuse:
                return self._send(401, _status(401, "Unauthorized", "Unauthorized"))
            if method == "GET" and url.path == "/version":
                return self._send(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.2-fake"})
            if method == "GET" and url.path == "/api":
                return self._send(200, {"kind": "APIVersions", "versions": ["v1"]})
            if method == "GET" and url.path == "/apis":
                return self._send(200, _groups())
            parts = [p for p in url.path.split("/") if p]
            if method == "GET" and (parts == ["api", "v1"] or (len(parts) == 3 and parts[0] == "apis")):
                group, version = ("", "v1") if parts[0] == "api" else (parts[1], parts[2])
                return self._send(200, _resource_list(group, version))
            route = self._route(url.path)
            if route is None:
                return self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
            kind, namespace, name = route
            _group, _version, _plural, _kind, namespaced = by_kind(kind)
            scope = namespace if namespaced else ""
            with store.lock:
                if method == "GET" and name is None:
                    selector = parse_qs(url.query).get("labelSelector", [""])[0]
                    items = []
                    for (k, ns, _n), obj in sorted(store.objects.items()):
                        if k != kind or (namespace is not None and ns != namespace):
                            continue
                        if not selector_matches(selector, obj["metadata"].get("labels") or {}):
                            continue
                        item = copy.deepcopy(obj)
                        item.pop("kind")
                        item.pop("apiVersion")
                        items.append(item)
                    return self._send(200, {"kind": kind + "List", "apiVersion": api_version(_group, _version),
                                            "metadata": {"resourceVersion": str(store.version)}, "items": items})
                if name is None:
                    return self._send(405, _status(405, "MethodNotAllowed", "not supported"))
                if method == "GET":
                    obj = store.objects.get((kind, scope, name))
                    if obj is None:
                        return self._send(404, _status(404, "NotFound", '%s "%s" not found' % (kind, name)))
                    return self._send(200, obj)
                if method == "DELETE":
                    if parse_qs(url.query).get("dryRun"):
                        # server-side dry run (kubernetes.core in check mode): validated, nothing deleted
                        obj = store.objects.get((kind, scope, name))
                    else:
                        obj = store.delete(kind, scope, name)
                    if obj is None:
                        return self._send(404, _status(404, "NotFound", '%s "%s" not found' % (kind, name)))
                    return self._send(200, obj)
            return self._send(405, _status(405, "MethodNotAllowed", "%s is not supported here" % method))

        def do_GET(self):  # pylint: disable=invalid-name
            self._handle("GET")

        def do_DELETE(self):  # pylint: disable=invalid-name
            self._handle("DELETE")

        def do_POST(self):  # pylint: disable=invalid-name
            self._handle("POST")

        def do_PATCH(self):  # pylint: disable=invalid-name
            self._handle("PATCH")

        def do_PUT(self):  # pylint: disable=invalid-name
            self._handle("PUT")

    return Handler


class FakeKubeApi(object):
    """Start with `with FakeKubeApi() as api:`; api.url, api.store, api.kubeconfig(path)."""

    def __init__(self, refuse=False):
        self.store = Store()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self.store, refuse))
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def kubeconfig(self, path, context="fake"):
        return write_kubeconfig(path, self.url, context)


def write_kubeconfig(path, url, context="fake"):
    """A kubeconfig (a pathlib.Path) for server url with a fake token; returns the path."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "fake", "user": {"token": "fake-token"}}],
        "contexts": [{"name": context, "context": {"cluster": "fake", "user": "fake"}}],
    }))
    return path
