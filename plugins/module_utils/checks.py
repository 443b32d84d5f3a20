# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the steps' input checks share (filter input_problems; trainjob_checks.py, launcher_checks.py).

A step's checks run in order on the values Ansible handed over (role defaults, inventory, -e) and
stop at the first problem, so each may rely on the types the ones before it established. A problem
names the variable and quotes the value as JSON. The helpers keep the Jinja semantics the checks had
in YAML where they matter: `| int` of a bad value is 0, `| bool` is Ansible's, a boolean is never a
number.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

DIGITS = re.compile(r"^[0-9]+\Z")
QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?)(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?\Z")
MOUNT_PATH = re.compile(r"^(/[A-Za-z0-9._-]+)+\Z")
DOT_OR_DOTDOT = re.compile(r"(^|/)\.\.?(/|\Z)")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
DNS_1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")
DNS_LABEL_63 = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
ENDPOINT = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?\Z")
REPOSITORY = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+\Z")
DOTDOT = re.compile(r"(^|/)\.\.(/|\Z)")
# A repository path without a registry host (trainfleet/registry), and a Debian package name.
REPOSITORY_PATH = re.compile(r"^[a-z0-9]+([._/-][a-z0-9]+)*\Z")
DEBIAN_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]*\Z")
# An IPv4 address, as a part of other patterns (a CIDR, an address alone).
OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
IPV4 = r"(%s\.){3}%s" % (OCTET, OCTET)


def q(value):
    """`value | to_json`."""
    return json.dumps(value)


def to_int(value):
    """`value | int`: int(), then int(float()), else 0 (Jinja's default)."""
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def text(value):
    """`value | string` (Jinja: True is "True", None is "None")."""
    return str(value)


def length(value):
    """`value | length`."""
    try:
        return len(value)
    except TypeError:
        return len(str(value))


def matches(pattern, value):
    """`value is match(pattern)` for a string; any other value does not match."""
    return isinstance(value, str) and pattern.match(value) is not None


def found(pattern, value):
    """`value is search(pattern)`, on the value as a string."""
    return pattern.search(value if isinstance(value, str) else str(value)) is not None


def optional(pattern, value):
    """"" or a string that matches."""
    return value == "" or matches(pattern, value)


def absolute(value):
    """`value is abs`, for a string; any other value is not."""
    return isinstance(value, str) and os.path.isabs(value)


def unique(values):
    """`values | unique`: each value once, in the order first seen."""
    out = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def is_list(value):
    """A list (not a string, not a mapping)."""
    return isinstance(value, (list, tuple))


def strings(value, control=CONTROL):
    """A list of strings without control characters."""
    return is_list(value) and all(isinstance(item, str) and not control.search(item) for item in value)


def whole(value, low, high):
    """A whole number low..high, not a boolean, given as a number or digits."""
    return not isinstance(value, bool) and DIGITS.match(text(value)) is not None and low <= to_int(value) <= high


def mapping(value):
    """The value if it is a dict, else {}."""
    return value if isinstance(value, dict) else {}


def quantity(value, optional=False):
    """A Kubernetes quantity (500m, 2, 1Gi); "" too when optional."""
    return (optional and text(value) == "") or QUANTITY.match(text(value)) is not None


def first(values, names, checks):
    """The first problem of `checks` (functions of `values` that return a problem or None), as a list."""
    missing = [name for name in names if name not in values]
    if missing:
        raise KeyError("the checks need %s" % ", ".join(missing))
    for check in checks:
        problem = check(values)
        if problem:
            return [problem]
    return []
