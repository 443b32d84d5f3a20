# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter data_name: a deployment's default data bucket and claim name (module_utils/names.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.trainfleet.training.plugins.module_utils.names import data_name


class FilterModule(object):

    def filters(self):
        return {"data_name": data_name}
