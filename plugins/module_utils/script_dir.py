# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Your own training code from a local directory, shipped into the job as a ConfigMap.

``script_configmap(path, name, namespace, labels)`` reads the regular files at the top of
``path`` on the machine that runs Ansible and returns the ConfigMap that carries them: UTF-8 files
under ``data``, others (base64) under ``binaryData``. The pods mount it read-only (pod_settings.py,
volume ``script``). It refuses, naming trainjob_script_dir and quoting the value:
- a path that is not a directory (the path itself may be a symbolic link to one: you named it), or
  that holds a subdirectory (other than ``__pycache__`` and dot entries, which are left out) or a
  symbolic link (it could point anywhere on this machine; files are opened with O_NOFOLLOW);
- a file name that is not a ConfigMap key (letters, digits, ``-``, ``_``, ``.``);
- no file at all, or more than LIMIT_BYTES in all: a ConfigMap holds at most 1 MiB, names and
  metadata included. Larger code belongs in an image built FROM the trainer image.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import os
import re
import stat

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError

LIMIT_BYTES = 1000000
KEY_RE = re.compile(r"^[-._a-zA-Z0-9]{1,253}\Z")
VARIABLE = "trainjob_script_dir"


class ScriptDirError(TrainfleetError):
    pass


def _fail(path, why):
    raise ScriptDirError("%s %s: %s" % (VARIABLE, _quote(path), why))


def _quote(value):
    """The value as to_json quotes it in the other preflight messages."""
    return json.dumps(str(value), ensure_ascii=False)


def read_script_dir(path, limit=LIMIT_BYTES):
    """{data, binary_data, files, bytes} of the directory's top-level regular files."""
    if not isinstance(path, str) or not path or re.search(r"[\x00-\x1f]", path):
        _fail(path, "must be the path of a local directory (no control characters)")
    full = os.path.abspath(os.path.expanduser(path))
    try:
        info = os.stat(full)
    except OSError as exc:
        _fail(path, "cannot be read (%s)" % (exc.strerror or exc))
    if not stat.S_ISDIR(info.st_mode):
        _fail(path, "is not a directory")
    data, binary, total = {}, {}, 0
    for entry in sorted(os.listdir(full)):
        if entry.startswith(".") or entry == "__pycache__":
            continue
        file_path = os.path.join(full, entry)
        mode = os.lstat(file_path).st_mode
        if stat.S_ISLNK(mode):
            _fail(path, "%s is a symbolic link; copy the file in instead" % _quote(entry))
        if stat.S_ISDIR(mode):
            _fail(path, "%s is a directory; only the files at the top are shipped (a ConfigMap is flat): "
                        "flatten the code, or build an image FROM the trainer image" % _quote(entry))
        if not stat.S_ISREG(mode):
            _fail(path, "%s is not a regular file" % _quote(entry))
        if not KEY_RE.match(entry):
            _fail(path, "the file name %s is not a ConfigMap key (letters, digits, '-', '_' and '.')" % _quote(entry))
        # O_NOFOLLOW: a file swapped for a symbolic link after the check above is refused, not followed.
        try:
            handle = os.fdopen(os.open(file_path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb")
        except OSError as exc:
            _fail(path, "%s cannot be read (%s)" % (_quote(entry), exc.strerror or exc))
        with handle:
            content = handle.read(limit + 1)
        total += len(content) + len(entry)
        if total > limit:
            _fail(path, "holds more than %d bytes; a ConfigMap holds at most 1 MiB: build an image FROM the "
                        "trainer image for larger code" % limit)
        try:
            data[entry] = content.decode("utf-8")
        except UnicodeDecodeError:
            binary[entry] = base64.b64encode(content).decode("ascii")
    if not data and not binary:
        _fail(path, "has no file to ship")
    return {"data": data, "binary_data": binary, "files": sorted(list(data) + list(binary)), "bytes": total}


def script_configmap(path, name, namespace, labels, limit=LIMIT_BYTES):
    """The ConfigMap <name> in <namespace> carrying the directory's files."""
    content = read_script_dir(path, limit)
    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})}}
    if content["data"]:
        configmap["data"] = content["data"]
    if content["binary_data"]:
        configmap["binaryData"] = content["binary_data"]
    return configmap
