# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The names trainfleet gives what it makes for a deployment when no variable names it: one place
for each rule (filter trainfleet.training.data_name in role defaults, the platforms' contracts and
the inventories)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DATA_SUFFIX = "-data"


def data_name(name):
    """The name of a deployment's data: its S3 bucket (s3 step, the aws and existing contracts, the
    iam policy's scope, the teardown's list) and its shared claim (storage step, dataset step, the
    train step's mount), both `<name>-data`. `name` is trainfleet_name (iam: iam_name_prefix)."""
    return "%s%s" % (name, DATA_SUFFIX)
