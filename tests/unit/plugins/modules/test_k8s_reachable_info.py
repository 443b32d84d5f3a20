# -*- coding: utf-8 -*-
"""k8s_reachable_info: never fails for an unreachable cluster (that is its answer), refuses a bad timeout."""

from __future__ import annotations

import json

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.trainfleet.training.plugins.modules import k8s_reachable_info as module


def run(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def test_missing_kubeconfig_is_an_answer(capsys, tmp_path):
    result = run(capsys, {"kubeconfig": str(tmp_path / "kubeconfig-gone"), "timeout": 2})
    assert "failed" not in result and result["changed"] is False
    assert result["reachable"] is False and result["authorized"] is False
    assert result["reason"] == "kubeconfig %s does not exist" % (tmp_path / "kubeconfig-gone")


@pytest.mark.parametrize("timeout", [0, 301])
def test_timeout_out_of_range_is_refused(capsys, tmp_path, timeout):
    result = run(capsys, {"kubeconfig": str(tmp_path / "k"), "timeout": timeout})
    assert result["failed"] and "timeout must be 1..300 seconds" in result["msg"]
