# -*- coding: utf-8 -*-
"""Module torchx_job_request: renders with the installed torchx, never contacts a cluster."""

from __future__ import annotations

import sys

import pytest

from ansible_collections.trainfleet.training.plugins.modules import torchx_job_request as module

ARGS = {"name": "trainfleet-digits-torchx", "namespace": "trainfleet", "queue": "default",
        "image": "localhost:5001/trainfleet/trainer:test", "trainer_args": ["--dataset=digits", "--epochs=1"],
        "aws_credentials_secret": "trainfleet-aws", "aws_region": "us-east-1"}


def test_renders_the_job(run_module):
    import torchx  # noqa: F401  (pinned in requirements.txt: a missing torchx fails, never skips)
    failed, result = run_module(module, ARGS, check_mode=True)
    assert not failed, result
    assert result["changed"] is False
    job = result["job"]
    assert job["kind"] == "Job" and job["apiVersion"] == "batch.volcano.sh/v1alpha1"
    assert job["spec"]["queue"] == "default" and len(job["spec"]["tasks"]) == 2
    assert result["rank0_pod"] == "trainfleet-digits-torchx-train-0-0"
    assert result["app_handle"] == "kubernetes://torchx/trainfleet:trainfleet-digits-torchx"


@pytest.mark.parametrize("option, value, message", [
    ("nnodes", 0, "nnodes must be 1 or more"),
    ("nproc_per_node", 0, "nproc_per_node must be 1 or more"),
    ("rdzv_port", 70000, "rdzv_port must be 1..65535"),
    ("run_as_user", 0, "run_as_user must be a non-root uid"),
    ("launcher", [], "launcher must name a program"),
])
def test_refuses_bad_values(run_module, option, value, message):
    failed, result = run_module(module, dict(ARGS, **{option: value}))
    assert failed and message in result["msg"]


def test_fails_clearly_without_torchx(run_module, monkeypatch):
    monkeypatch.setitem(sys.modules, "torchx", None)
    failed, result = run_module(module, ARGS)
    assert failed
    assert "torchx is not importable" in result["msg"] and "torchx==0.7.0" in result["msg"]
