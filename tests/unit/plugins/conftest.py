# -*- coding: utf-8 -*-
"""Fixtures shared by the module and waiter tests: YAML loaders, a fake TrainJobService
(the API layer the modules talk to) and a fake monotonic clock."""

from __future__ import annotations

import copy
import json
import os

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.trainfleet.training.plugins.module_utils.errors import (
    CrdMissingError,
    JobNotFoundError,
    LogReadError,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "pytorchjob")


def _load(kind, name):
    with open(os.path.join(FIXTURES, kind, name + ".yaml")) as handle:
        return yaml.safe_load(handle)


def _log(name):
    with open(os.path.join(FIXTURES, "logs", name + ".log"), "rb") as handle:
        return handle.read()


@pytest.fixture
def load():
    return _load


@pytest.fixture
def load_log():
    return _log


class FakeClock(object):
    """Monotonic clock the fake watch advances, so waits take no real time."""

    def __init__(self):
        self.value = 1000.0
        self.sleeps = []

    def __call__(self):
        return self.value

    def advance(self, seconds):
        self.value += seconds

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.value += seconds


class FakeService(object):
    """In-memory stand-in for module_utils.k8s.TrainJobService.

    jobs: {name: job dict}; pods: list of pod dicts; logs: {(pod, previous): bytes};
    watch_rounds: list of rounds, each a list of (event type, job dict) or an exception to
    raise; every round advances the clock by its timeout when it yields nothing.
    """

    def __init__(self, jobs=None, pods=None, logs=None, events=None, watch_rounds=None,
                 clock=None, crd=True, pod_rounds=None, podgroups=None, podgroup_rounds=None):
        self.jobs = dict(jobs or {})
        # podgroups: {name: PodGroup dict}; podgroup_rounds: a list of such dicts, one per read
        self.podgroups = dict(podgroups or {})
        self.podgroup_rounds = list(podgroup_rounds or [])
        self.pods = list(pods or [])
        self.pod_rounds = list(pod_rounds or [])
        self.logs = dict(logs or {})
        self.events = list(events or [])
        self.watch_rounds = list(watch_rounds or [])
        self.clock = clock
        self.crd = crd
        self.calls = []

    def get_job(self, namespace, name):
        self.calls.append(("get_job", namespace, name))
        if not self.crd:
            raise CrdMissingError("The PyTorchJob CRD (pytorchjobs.kubeflow.org, kubeflow.org/v1) is not installed")
        if name not in self.jobs:
            raise JobNotFoundError("PyTorchJob %s/%s not found." % (namespace, name))
        return copy.deepcopy(self.jobs[name])

    def list_jobs(self, namespace, label_selector=None):
        self.calls.append(("list_jobs", namespace, label_selector))
        if not self.crd:
            raise CrdMissingError("The PyTorchJob CRD is not installed")
        return [copy.deepcopy(self.jobs[name]) for name in sorted(self.jobs)]

    def list_pods(self, namespace, job_name=None):
        self.calls.append(("list_pods", namespace, job_name))
        if self.pod_rounds:
            self.pods = self.pod_rounds.pop(0)
        return [copy.deepcopy(p) for p in self.pods]

    def get_podgroup(self, namespace, name):
        """Like TrainJobService.get_podgroup: None when there is none (or PodGroups cannot be read)."""
        self.calls.append(("get_podgroup", namespace, name))
        if self.podgroup_rounds:
            self.podgroups = self.podgroup_rounds.pop(0)
        found = self.podgroups.get(name)
        return copy.deepcopy(found) if found else None

    def list_events(self, namespace, object_names):
        self.calls.append(("list_events", namespace, tuple(object_names)))
        return [e for e in self.events if e["involvedObject"]["name"] in object_names]

    chunk_size = 7  # small chunks: lines and UTF-8 split across chunk boundaries

    def iter_log(self, namespace, pod, chunk_size=None, container=None, tail_lines=None,
                 since_seconds=None, previous=False, limit_bytes=None, timestamps=False):
        call = ("iter_log", pod, container, tail_lines, since_seconds, previous, limit_bytes)
        self.calls.append(call + (True,) if timestamps else call)
        key = (pod, previous)
        if key not in self.logs:
            raise LogReadError("Cannot read the log of pod %s/%s: container is waiting to start" % (namespace, pod))
        data = self.logs[key]
        if timestamps:
            # what the kubelet does: the time the line was written, then a space (here: line i at second i)
            data = b"".join(b"2025-01-01T10:00:%02d.%09dZ " % (i % 60, i) + line
                            for i, line in enumerate(data.splitlines(True)))
        if tail_lines is not None:
            data = b"".join(data.splitlines(True)[-tail_lines:]) if tail_lines else b""
        if limit_bytes:
            data = data[:limit_bytes]

        size = chunk_size or self.chunk_size

        def chunks():
            for start in range(0, len(data), size):
                yield data[start:start + size]
        return chunks()

    def watch_job(self, namespace, name, resource_version, timeout_seconds):
        self.calls.append(("watch_job", namespace, name, resource_version, timeout_seconds))
        if not self.watch_rounds:
            if self.clock:
                self.clock.advance(timeout_seconds)
            return
        round_ = self.watch_rounds.pop(0)
        if isinstance(round_, Exception):
            raise round_
        for event in round_:
            if self.clock:
                self.clock.advance(1)
            yield event
        if not round_ and self.clock:
            self.clock.advance(timeout_seconds)


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def fake_service():
    return FakeService


class AnsibleExitJson(Exception):
    pass


class AnsibleFailJson(Exception):
    pass


def _exit_json(self, **kwargs):  # pylint: disable=unused-argument
    kwargs.setdefault("changed", False)
    raise AnsibleExitJson(kwargs)


def _fail_json(self, msg=None, **kwargs):  # pylint: disable=unused-argument
    kwargs["failed"] = True
    kwargs["msg"] = msg
    raise AnsibleFailJson(kwargs)


@pytest.fixture
def run_module(monkeypatch):
    """run_module(module, args, service, check_mode=False) -> (failed, result dict).

    The module's get_api_client/TrainJobService are replaced so it talks to `service`."""
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)

    def runner(module, args, service=None, check_mode=False):
        if service is not None:
            monkeypatch.setattr(module, "get_api_client", lambda params: object())
            monkeypatch.setattr(module, "TrainJobService", lambda api_client, kind=None: service)
        args = dict(args)
        if check_mode:
            args["_ansible_check_mode"] = True
        with patch_module_args(args):
            try:
                module.main()
            except AnsibleExitJson as exc:
                return False, json.loads(json.dumps(exc.args[0]))
            except AnsibleFailJson as exc:
                return True, json.loads(json.dumps(exc.args[0], default=str))
        raise AssertionError("module returned without exit_json/fail_json")
    return runner
