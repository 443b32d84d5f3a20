# -*- coding: utf-8 -*-
"""The filter input_problems and the roles' preflights cannot drift apart.

Each step's checks say which variables they read (called with none, they name them all, in order);
each role's one "Check the inputs" task hands over exactly those names (`_<role>_checked`) and calls
the filter for its own step, once. The filter's documentation lists every step.
"""

from __future__ import absolute_import, division, print_function

import glob
import os
import re

import pytest
import yaml

from ansible_collections.trainfleet.training.plugins.filter.checks import STEPS

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
CALL = re.compile(r"input_problems\('([a-z_]+)'")


def _tasks(tasks):
    for task in tasks or []:
        if isinstance(task, dict):
            yield task
            for key in ("block", "rescue", "always"):
                yield from _tasks(task.get(key))


def _handovers():
    """step -> [(file, the names the task hands over)] for every task that calls input_problems."""
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "**", "*.yml"), recursive=True)):
        with open(path) as handle:
            tasks = yaml.safe_load(handle)
        for task in _tasks(tasks):
            variables = task.get("vars", {})
            for value in variables.values():
                for step in CALL.findall(value if isinstance(value, str) else ""):
                    checked = [names for key, names in variables.items() if key.endswith("_checked")]
                    found.setdefault(step, []).append((os.path.relpath(path, ROOT), checked))
    return found


HANDOVERS = _handovers()


def _read(step):
    with pytest.raises(KeyError) as caught:
        STEPS[step]({}, {})
    return tuple(caught.value.args[0].split("the checks need ", 1)[1].split(", "))


@pytest.mark.parametrize("step", sorted(STEPS))
def test_each_step_is_called_once_with_every_name_its_checks_read(step):
    calls = HANDOVERS.get(step, [])
    assert len(calls) == 1, "input_problems('%s') is called by %s" % (step, [path for path, _names in calls])
    path, checked = calls[0]
    assert len(checked) == 1, "%s: one _<role>_checked list beside the call" % path
    assert tuple(checked[0]) == _read(step), path


def test_no_role_calls_a_step_that_does_not_exist():
    assert set(HANDOVERS) <= set(STEPS)


def test_the_filter_documents_every_step():
    with open(os.path.join(ROOT, "plugins", "filter", "input_problems.yml")) as handle:
        doc = yaml.safe_load(handle)["DOCUMENTATION"]
    assert sorted(doc["options"]["step"]["choices"]) == sorted(STEPS)
