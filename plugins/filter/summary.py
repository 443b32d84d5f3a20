# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter trainjob_summary: the train step's summary lines of a finished job (module_utils/summary.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.module_utils.summary import summary_lines


def trainjob_summary(result, kind, log_tail_lines=200, rank0_note="", log=None):
    if not isinstance(result, dict):
        raise AnsibleFilterError("trainjob_summary: the input must be trainjob_result (a dict), got %r" % (result,))
    return summary_lines(dict(result), str(kind), log_tail_lines, rank0_note or "", log if isinstance(log, str) else None)


class FilterModule(object):

    def filters(self):
        return {"trainjob_summary": trainjob_summary}
