# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter contract_problems: the platform contract's checks (plugins/module_utils/contract.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.trainfleet.training.plugins.module_utils.contract import problems


def contract_problems(contract, platform_name, launchers):
    return problems(contract, platform_name, launchers)


class FilterModule(object):

    def filters(self):
        return {"contract_problems": contract_problems}
