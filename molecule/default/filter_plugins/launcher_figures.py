# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launchers' figures (launchers.yml, gang.yml), as a filter of the scenario: of each run's
trainjob_result, the fields out/test-reports/launcher-figures.json keeps (a missing one is null)."""

from __future__ import annotations

FIELDS = ("phase", "duration_seconds", "final_accuracy", "final_loss", "rank0_pod", "rank0_method", "restarts")


def launcher_figures(results):
    """{name: trainjob_result} -> {name: {field: value or None}} for FIELDS."""
    return {name: {field: (result or {}).get(field) for field in FIELDS} for name, result in results.items()}


class FilterModule(object):
    def filters(self):
        return {"launcher_figures": launcher_figures}
