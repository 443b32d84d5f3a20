# -*- coding: utf-8 -*-
"""ecr_login_info: the ECR password never leaves the module.

The boto3 client and docker are mocked: the result holds no password, the module's no_log values
hold it (so any message is masked), docker login gets it on stdin only, and check mode logs in to
nothing.
"""

from __future__ import annotations

import base64
import json

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.trainfleet.training.plugins.modules import ecr_login_info as module

PASSWORD = "eyJwYXlsb2FkIjoiZmFrZS1lY3ItdG9rZW4tZm9yLXRlc3RzIn0="


class FakeEcr(object):
    def get_authorization_token(self, **_kwargs):
        token = base64.b64encode(("AWS:" + PASSWORD).encode()).decode()
        return {"authorizationData": [{"authorizationToken": token,
                                       "proxyEndpoint": "https://123456789012.dkr.ecr.us-west-2.amazonaws.com",
                                       "expiresAt": "2026-11-23T00:00:00+00:00"}]}

    def describe_images(self, **_kwargs):
        return {"imageDetails": []}


def run(monkeypatch, args, rc=0):
    calls = []

    def client(self, *_a, **_kw):  # pylint: disable=unused-argument
        return FakeEcr()

    def run_command(self, argv, data=None, **_kw):  # pylint: disable=unused-argument
        calls.append((argv, data, self))
        return rc, "", "login refused for " + (data or "")

    monkeypatch.setattr(module.AnsibleAWSModule, "client", client)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False: "/usr/bin/docker")
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    with patch_module_args(dict({"region": "us-west-2"}, **args)):
        with pytest.raises(SystemExit):
            module.main()
    return calls


def output(capsys):
    return json.loads(capsys.readouterr().out)


def test_result_holds_no_password(monkeypatch, capsys):
    calls = run(monkeypatch, {"repository_name": "trainfleet/trainer", "image_tag": "abc"})
    out = capsys.readouterr().out
    assert PASSWORD not in out
    result = json.loads(out)
    assert "password" not in result and result["logged_in"] is False and calls == []
    assert result["registry"] == "123456789012.dkr.ecr.us-west-2.amazonaws.com" and result["username"] == "AWS"


def test_docker_login_reads_the_password_from_stdin(monkeypatch, capsys):
    calls = run(monkeypatch, {"docker_login": True, "docker_config": "/tmp/dockercfg"})
    result = output(capsys)
    assert result["logged_in"] is True
    (argv, data, mod), = calls
    assert argv == ["/usr/bin/docker", "--config", "/tmp/dockercfg", "login", "--username", "AWS",
                    "--password-stdin", "123456789012.dkr.ecr.us-west-2.amazonaws.com"]
    assert data == PASSWORD and PASSWORD not in " ".join(argv)
    assert PASSWORD in mod.no_log_values


def test_failed_login_message_is_masked(monkeypatch, capsys):
    run(monkeypatch, {"docker_login": True}, rc=1)
    out = capsys.readouterr().out
    result = json.loads(out)
    assert result["failed"] and "docker login" in result["msg"]
    assert PASSWORD not in out


def test_check_mode_logs_in_to_nothing(monkeypatch, capsys):
    calls = run(monkeypatch, {"docker_login": True, "_ansible_check_mode": True})
    assert calls == [] and output(capsys)["logged_in"] is False
