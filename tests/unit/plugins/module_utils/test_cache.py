# -*- coding: utf-8 -*-
"""module_utils/cache.py and its lookups: where the build cache is, and the kubectl the cluster step built."""

from __future__ import absolute_import, division, print_function

import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
for _path in (ROOT, os.path.join(ROOT, ".collections")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from ansible.errors import AnsibleError  # noqa: E402

from ansible_collections.trainfleet.training.plugins.lookup.built_kubectl import LookupModule as BuiltKubectl  # noqa: E402
from ansible_collections.trainfleet.training.plugins.lookup.cache_dir import LookupModule as CacheDir  # noqa: E402
from ansible_collections.trainfleet.training.plugins.module_utils import cache  # noqa: E402


@pytest.mark.parametrize("environ, expected", [
    ({"TRAINFLEET_CACHE": "/srv/tf", "HOME": "/home/u"}, "/srv/tf"),
    ({"TRAINFLEET_CACHE": "", "HOME": "/home/u"}, "/home/u/.cache/trainfleet"),
    ({"HOME": "/home/u"}, "/home/u/.cache/trainfleet"),
])
def test_cache_dir(environ, expected):
    assert cache.cache_dir(environ) == expected


def test_cache_dir_lookup_reads_the_environment(monkeypatch):
    monkeypatch.setenv("TRAINFLEET_CACHE", "/srv/elsewhere")
    assert CacheDir().run([]) == ["/srv/elsewhere"]
    monkeypatch.delenv("TRAINFLEET_CACHE")
    monkeypatch.setenv("HOME", "/home/someone")
    assert CacheDir().run([]) == ["/home/someone/.cache/trainfleet"]


def _kubectl(root, version, executable=True):
    path = root / "kubernetes" / version / "bin" / "kubectl"
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755 if executable else 0o644)
    return str(path)


def test_built_kubectl_none_built_falls_back_to_the_path(tmp_path):
    assert cache.built_kubectl(str(tmp_path)) == "kubectl"
    assert cache.built_kubectl(str(tmp_path / "missing"), fallback="k") == "k"


def test_built_kubectl_newest_version_by_number_not_by_text(tmp_path):
    _kubectl(tmp_path, "v1.9.0")
    newest = _kubectl(tmp_path, "v1.31.2")
    _kubectl(tmp_path, "v1.32.0", executable=False)
    assert cache.built_kubectl(str(tmp_path)) == newest


def test_built_kubectl_cache_path_with_glob_characters(tmp_path):
    root = tmp_path / "a[b]*"
    built = _kubectl(root, "v1.32.2")
    assert cache.built_kubectl(str(root)) == built


def test_built_kubectl_lookup(tmp_path):
    built = _kubectl(tmp_path, "v1.32.2")
    assert BuiltKubectl().run([str(tmp_path)]) == [built]
    for bad in ([], ["", ], [str(tmp_path), "x"], [None]):
        with pytest.raises(AnsibleError, match="one term, the cache directory"):
            BuiltKubectl().run(bad)
