# -*- coding: utf-8 -*-
"""molecule/default's launcher_figures filter (launchers.yml and gang.yml write
out/test-reports/launcher-figures.json with it): each run's figures from its own trainjob_result."""

from __future__ import annotations

import importlib.util
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _filter():
    path = os.path.join(ROOT, "molecule", "default", "filter_plugins", "launcher_figures.py")
    spec = importlib.util.spec_from_file_location("launcher_figures", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()["launcher_figures"]


def test_each_run_keeps_its_own_fields_and_a_missing_one_is_null():
    mpi = {"phase": "Succeeded", "duration_seconds": 10, "final_accuracy": 0.96, "final_loss": 0.1,
           "rank0_pod": "launchers-mpi-launcher-x", "rank0_method": "trainer-log", "restarts": 0, "trainer": {"world_size": 2}}
    torchx = {"phase": "Succeeded", "duration_seconds": 9, "final_accuracy": 0.97, "rank0_pod": "launchers-torchx-train-0-0"}
    figures = _filter()({"mpijob": mpi, "torchx": torchx, "gone": None})
    assert figures["mpijob"] == {"phase": "Succeeded", "duration_seconds": 10, "final_accuracy": 0.96, "final_loss": 0.1,
                                 "rank0_pod": "launchers-mpi-launcher-x", "rank0_method": "trainer-log", "restarts": 0}
    assert figures["torchx"]["rank0_pod"] == "launchers-torchx-train-0-0"
    assert figures["torchx"]["final_loss"] is None and figures["torchx"]["restarts"] is None
    assert set(figures["gone"].values()) == {None}
