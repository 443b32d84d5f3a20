"""Shared helpers of the benchmarks: cluster access, scratch PyTorchJobs, timed child processes.

The benchmarks print figures and assert nothing. They run against the local kind cluster
(kubeconfig ${TRAINFLEET_CACHE:-~/.cache/trainfleet}/kubeconfig-trainfleet) in a scratch namespace
that they delete at the end, and reuse the trainer image the train step ran (already on the nodes).
"""

import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

from kubernetes import client, config, watch

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".collections"))  # the collection's own rules (module_utils/cache.py)
from ansible_collections.trainfleet.training.plugins.module_utils.cache import cache_dir  # noqa: E402  pylint: disable=wrong-import-position

CACHE = pathlib.Path(cache_dir())
KUBECONFIG = os.environ.get("TRAINFLEET_KUBECONFIG", str(CACHE / "kubeconfig-trainfleet"))
NAMESPACE = "trainfleet-bench"
GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
JOB_LABEL = "training.kubeflow.org/job-name"


def api():
    """(CoreV1Api, CustomObjectsApi) for the local cluster."""
    config.load_kube_config(config_file=KUBECONFIG)
    return client.CoreV1Api(), client.CustomObjectsApi()


def trainer_image(core, explicit=None):
    """The image the train step ran (read from its pods), unless one is given."""
    if explicit:
        return explicit
    pods = core.list_namespaced_pod("trainfleet", label_selector=f"{JOB_LABEL}=trainfleet-digits").items
    for pod in pods:
        for container in pod.spec.containers:
            if container.name == "pytorch":
                return container.image
    sys.exit("no trainfleet-digits pod in namespace trainfleet: run the train step first or pass --image")


def ensure_namespace(core):
    try:
        core.read_namespace(NAMESPACE)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))


def delete_namespace(core, timeout=180):
    try:
        core.delete_namespace(NAMESPACE)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            core.read_namespace(NAMESPACE)
        except client.ApiException as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(2)
    print(f"warning: namespace {NAMESPACE} still terminating after {timeout}s", file=sys.stderr)


def job_manifest(name, image, command, workers=0, restart_policy="Never"):
    """A PyTorchJob with 1 master (and optional workers) running `command` in the pytorch container."""
    def spec(replicas):
        return {
            "replicas": replicas,
            "restartPolicy": restart_policy,
            "template": {"spec": {"containers": [{
                "name": "pytorch",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": command,
                "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
            }]}},
        }
    replica_specs = {"Master": spec(1)}
    if workers:
        replica_specs["Worker"] = spec(workers)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "None"}, "pytorchReplicaSpecs": replica_specs},
    }


def create_job(custom, manifest):
    return custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, manifest)


def delete_job(custom, name):
    try:
        custom.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name,
                                               body=client.V1DeleteOptions(propagation_policy="Foreground"))
    except client.ApiException as exc:
        if exc.status != 404:
            raise


def terminal_condition(job):
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Succeeded", "Failed") and cond.get("status") == "True":
            return cond
    return None


def watch_until_terminal(custom, name, timeout):
    """Watch the job; return (monotonic time the terminal event arrived, wall time, condition)."""
    deadline = time.monotonic() + timeout
    job = custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
    cond = terminal_condition(job)
    if cond:
        return time.monotonic(), time.time(), cond
    version = job["metadata"]["resourceVersion"]
    while time.monotonic() < deadline:
        stream = watch.Watch()
        for event in stream.stream(custom.list_namespaced_custom_object, GROUP, VERSION, NAMESPACE, PLURAL,
                                   field_selector=f"metadata.name={name}", resource_version=version,
                                   timeout_seconds=max(1, int(deadline - time.monotonic()))):
            obj = event["object"]
            version = obj["metadata"]["resourceVersion"]
            cond = terminal_condition(obj)
            if cond:
                stream.stop()
                return time.monotonic(), time.time(), cond
    raise TimeoutError(f"{name} did not finish within {timeout}s")


def module_args_file(args):
    """A temporary JSON file in the form AnsibleModule reads when a module runs as a script."""
    handle, path = tempfile.mkstemp(prefix="bench-", suffix=".json")
    with os.fdopen(handle, "w") as out:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, out)
    return path


def module_command(module, args):
    """Run one of our modules as a script (what Ansible runs on the target, minus the wrapper)."""
    return [sys.executable, str(REPO / "plugins" / "modules" / f"{module}.py"), module_args_file(args)]


def module_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / ".collections") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def timed(argv, stdout=subprocess.DEVNULL, env=None, timeout=900):
    """Run argv; return (wall seconds, peak RSS in MiB of the process and its waited-for children, rc, output)."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, env=env)  # pylint: disable=consider-using-with
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    wall = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    rc = os.waitstatus_to_exitcode(status)
    # ru_maxrss is in KiB on Linux.
    return wall, usage.ru_maxrss / 1024.0, rc, err


def self_peak_children_mib():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
