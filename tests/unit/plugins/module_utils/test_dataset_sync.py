# -*- coding: utf-8 -*-
"""module_utils/dataset_sync: what may be staged, and the plan (upload, keep, refuse, delete)."""

from __future__ import annotations

import hashlib
import os

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils import dataset_sync as ds


def _tree(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.csv").write_bytes(b"1,0\n")
    (tmp_path / "sub" / "b.npz").write_bytes(b"npz")
    (tmp_path / ".hidden").write_bytes(b"x")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "c.csv").write_bytes(b"2,1\n")
    return tmp_path


def test_scan_directory_recursive_sorted_without_hidden(tmp_path):
    entries = ds.scan_source(str(_tree(tmp_path)))
    assert [e["rel"] for e in entries] == ["a.csv", "sub/b.npz"]
    assert ds.data_file_count(entries) == 2


def test_text_shards_are_data_files_and_the_rest_is_not(tmp_path):
    """The transformer's *.txt shards count as data (the trainer's TEXT_SUFFIXES), dataset.json does not."""
    (tmp_path / "part-000.txt").write_bytes(b"text")
    (tmp_path / "dataset.json").write_bytes(b"{}")
    entries = ds.scan_source(str(tmp_path))
    assert [e["rel"] for e in entries] == ["dataset.json", "part-000.txt"]
    assert ds.data_file_count(entries) == 1


def test_scan_list_of_files_by_base_name(tmp_path):
    _tree(tmp_path)
    entries = ds.scan_source([str(tmp_path / "sub" / "b.npz"), str(tmp_path / "a.csv")])
    assert [e["rel"] for e in entries] == ["a.csv", "b.npz"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.csv").write_bytes(b"x")
    with pytest.raises(ds.SyncError, match="have the same name"):
        ds.scan_source([str(tmp_path / "a.csv"), str(other / "a.csv")])


@pytest.mark.parametrize("make,match", [
    (lambda p: os.symlink("/etc/passwd", str(p / "link.csv")), "symbolic link"),
    (lambda p: (p / "bad\nname.csv").write_bytes(b"1"), "control character"),
    (lambda p: (p / "{{ x }}.csv").write_bytes(b"1"), "template marker"),
])
def test_scan_refuses_what_should_not_be_published(tmp_path, make, match):
    _tree(tmp_path)
    make(tmp_path)
    with pytest.raises(ds.SyncError, match=match):
        ds.scan_source(str(tmp_path))


def test_scan_refuses_missing_empty_and_too_many(tmp_path):
    with pytest.raises(ds.SyncError, match="is not a directory"):
        ds.scan_source(str(tmp_path / "missing"))
    with pytest.raises(ds.SyncError, match="holds no file"):
        ds.scan_source(str(tmp_path))
    for i in range(3):
        (tmp_path / ("%d.csv" % i)).write_bytes(b"1")
    with pytest.raises(ds.SyncError, match="more than 2 files"):
        ds.scan_source(str(tmp_path), max_files=2)
    with pytest.raises(ds.SyncError, match="is not a regular file"):
        ds.scan_source([str(tmp_path)])


def test_manifest_hash_depends_on_content_only(tmp_path):
    entries = ds.with_digests(ds.scan_source(str(_tree(tmp_path))))
    files, digest = ds.manifest(entries)
    assert files[0] == {"path": "a.csv", "size": 4, "sha256": hashlib.sha256(b"1,0\n").hexdigest()}
    assert ds.manifest(list(reversed(entries)))[1] == digest
    (tmp_path / "a.csv").write_bytes(b"1,1\n")
    assert ds.manifest(ds.with_digests(ds.scan_source(str(tmp_path))))[1] != digest


def _entry(rel, data):
    return {"path": "/src/" + rel, "rel": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "md5": hashlib.md5(data).hexdigest()}


def test_plan_uploads_new_and_changed_keeps_the_rest():
    entries = [_entry("new.csv", b"n"), _entry("same.csv", b"s"), _entry("changed.csv", b"c2"),
               _entry("theirs-same.csv", b"t")]
    remote = {"p/same.csv": {"etag": "x", "size": 1}, "p/changed.csv": {"etag": "x", "size": 2},
              "p/theirs-same.csv": {"etag": hashlib.md5(b"t").hexdigest(), "size": 1}}
    meta = {"p/same.csv": {ds.META_DATASET: "d", ds.META_SHA256: hashlib.sha256(b"s").hexdigest()},
            "p/changed.csv": {ds.META_DATASET: "d", ds.META_SHA256: hashlib.sha256(b"c1").hexdigest()},
            "p/theirs-same.csv": {}}
    result = ds.plan(entries, remote, meta.get, "p/", "d")
    assert [(u["key"], u["reason"]) for u in result["upload"]] == [("p/new.csv", "new"), ("p/changed.csv", "changed")]
    assert [u["key"] for u in result["unchanged"]] == ["p/same.csv", "p/theirs-same.csv"]
    assert result["conflicts"] == [] and result["delete"] == [] and result["extra"] == []


def test_plan_refuses_to_overwrite_someone_elses_object_unless_asked():
    entries = [_entry("a.csv", b"mine")]
    remote = {"p/a.csv": {"etag": hashlib.md5(b"theirs").hexdigest(), "size": 6}}
    result = ds.plan(entries, remote, lambda key: {}, "p/", "d")
    assert [c["key"] for c in result["conflicts"]] == ["p/a.csv"] and result["upload"] == []
    result = ds.plan(entries, remote, lambda key: {}, "p/", "d", overwrite_unowned=True)
    assert [u["key"] for u in result["upload"]] == ["p/a.csv"] and result["conflicts"] == []


def test_plan_deletes_only_this_datasets_objects():
    remote = {"p/gone.csv": {"etag": "x", "size": 1}, "p/other-dataset.csv": {"etag": "x", "size": 1},
              "p/theirs.csv": {"etag": "x", "size": 1}}
    meta = {"p/gone.csv": {ds.META_DATASET: "d"}, "p/other-dataset.csv": {ds.META_DATASET: "e"}, "p/theirs.csv": {}}
    kept = ds.plan([], remote, meta.get, "p/", "d")
    assert kept["delete"] == [] and [e["key"] for e in kept["extra"]] == sorted(remote)
    result = ds.plan([], remote, meta.get, "p/", "d", delete=True)
    assert result["delete"] == [{"key": "p/gone.csv", "size": 1}]
    assert [(e["key"], e["owned"]) for e in result["extra"]] == [("p/other-dataset.csv", True), ("p/theirs.csv", False)]


def test_normalize_prefix():
    assert ds.normalize_prefix("a/b") == "a/b/" and ds.normalize_prefix("/a/b/") == "a/b/" and ds.normalize_prefix("") == ""
