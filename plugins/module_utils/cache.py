# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where trainfleet's build cache is, and what the cluster step left in it: one place for the rule
the inventories, the role defaults and the printed commands follow (lookups
trainfleet.training.cache_dir and trainfleet.training.built_kubectl)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

CACHE_ENV = "TRAINFLEET_CACHE"


def cache_dir(environ=None):
    """$TRAINFLEET_CACHE when set and not empty, else ~/.cache/trainfleet (HOME from the same environment)."""
    environ = os.environ if environ is None else environ
    explicit = environ.get(CACHE_ENV, "")
    if explicit:
        return explicit
    return os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache", "trainfleet")


def _version_key(path):
    """kubernetes/<version>/bin/kubectl ordered by the numbers of its version (v1.9 before v1.31)."""
    version = path.split(os.sep)[-3]
    return [int(n) for n in re.findall(r"\d+", version)], version


def built_kubectl(cache, fallback="kubectl"):
    """The kubectl the cluster step built (<cache>/kubernetes/<version>/bin/kubectl, executable; the newest
    version when there are several), else `fallback` (the one on the PATH)."""
    found = [p for p in glob.glob(os.path.join(glob.escape(cache), "kubernetes", "*", "bin", "kubectl"))
             if os.path.isfile(p) and os.access(p, os.X_OK)]
    return max(found, key=_version_key) if found else fallback
