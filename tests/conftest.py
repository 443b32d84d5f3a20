# -*- coding: utf-8 -*-
"""Fixtures shared by the suites under tests/ that run playbooks against AWS APIs."""

from __future__ import annotations

import pytest

from tests.support.moto import MotoStartError, moto_server


@pytest.fixture(scope="module")
def moto_endpoint(tmp_path_factory):
    """A moto server of our own on a free loopback port, with the AWS managed IAM policies."""
    log_path = tmp_path_factory.mktemp("moto") / "moto-server.log"
    try:
        with moto_server(log_path, env={"MOTO_IAM_LOAD_MANAGED_POLICIES": "true"}) as url:
            yield url
    except MotoStartError as exc:
        pytest.fail(str(exc))
