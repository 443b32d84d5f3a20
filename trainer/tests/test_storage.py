"""S3 URI parsing and the local storage backend (atomic writes)."""

import os

import pytest

from trainer import storage
from trainer.storage import LocalStorage, StorageError, check_local_dir_writable, parse_s3_uri, s3_endpoint_url


@pytest.mark.parametrize("uri, bucket, prefix", [
    ("s3://my-bucket", "my-bucket", ""),
    ("s3://my-bucket/", "my-bucket", ""),
    ("s3://my.bucket-1/data/digits", "my.bucket-1", "data/digits"),
    ("s3://abc/a/b/c/", "abc", "a/b/c"),
])
def test_parse_s3_uri(uri, bucket, prefix):
    loc = parse_s3_uri(uri)
    assert (loc.bucket, loc.prefix) == (bucket, prefix)
    assert loc.key("model.pt") == (f"{prefix}/model.pt" if prefix else "model.pt")
    assert str(loc) == uri.rstrip("/")


@pytest.mark.parametrize("uri", ["s3://", "s3:///prefix", "s3:/bucket/x", "S3://bucket/x", "http://bucket/x", "s3://ab/x",
                                 "s3://Bucket/x", "s3://bad_bucket/x", "s3://-bucket/x", "s3://bucket-/x", "s3://a..b/x",
                                 "s3://192.168.1.1/x", "s3://bucket/a//b", "s3://" + "a" * 64 + "/x"])
def test_parse_s3_uri_rejects(uri):
    with pytest.raises(StorageError):
        parse_s3_uri(uri)


def test_endpoint_precedence(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://generic:1")
    assert s3_endpoint_url() == "http://generic:1"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://s3only:2")
    assert s3_endpoint_url() == "http://s3only:2"
    assert s3_endpoint_url("http://flag:3") == "http://flag:3"


def test_local_storage_round_trip(tmp_path):
    store = LocalStorage(str(tmp_path / "a" / "b"))
    assert store.read_bytes("x") is None and store.list() == []
    uri = store.write_bytes("x.bin", b"one")
    assert uri == str(tmp_path / "a" / "b" / "x.bin")
    store.write_bytes("x.bin", b"two")
    assert store.read_bytes("x.bin") == b"two"
    store.write_bytes("y.bin", b"3")
    assert store.list() == ["x.bin", "y.bin"] and store.list("y") == ["y.bin"]
    store.delete("y.bin")
    store.delete("y.bin")
    assert store.list() == ["x.bin"]


def test_local_write_is_atomic_on_failure(tmp_path, monkeypatch):
    """A crash between writing the temp file and the rename leaves the old content and no temp file."""
    store = LocalStorage(str(tmp_path))
    store.write_bytes("snap", b"old")

    def boom(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(storage.os, "replace", boom)
    with pytest.raises(OSError):
        store.write_bytes("snap", b"new-but-never-visible")
    monkeypatch.undo()
    assert store.read_bytes("snap") == b"old"
    assert sorted(os.listdir(tmp_path)) == ["snap"]


def test_check_local_dir_writable(tmp_path):
    assert check_local_dir_writable(str(tmp_path)) is None
    assert check_local_dir_writable(str(tmp_path / "new" / "deeper")) is None
    (tmp_path / "f").write_text("x")
    assert "not a directory" in check_local_dir_writable(str(tmp_path / "f"))
    assert check_local_dir_writable(str(tmp_path / "f" / "sub")) is not None


def test_local_files_get_ordinary_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        LocalStorage(str(tmp_path)).write_bytes("model.pt", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "model.pt").stat().st_mode & 0o777 == 0o644


def test_launch_std_fix_matches_documented_behaviour():
    """trainer.launch's Std.from_str (torchrun fix for torch < 2.0 on Python 3.11) and whether this torch needs it."""
    from torch.distributed.elastic.multiprocessing.api import Std  # pylint: disable=import-outside-toplevel

    from trainer import launch  # pylint: disable=import-outside-toplevel

    assert launch._from_str("0") == Std.NONE and launch._from_str("3") == Std.ALL  # pylint: disable=protected-access
    assert launch._from_str("0:3,1:0") == {0: Std.ALL, 1: Std.NONE}  # pylint: disable=protected-access
    with pytest.raises(ValueError):
        launch._from_str("7")  # pylint: disable=protected-access
    if int(__import__("torch").__version__.split(".")[0]) >= 2:
        assert not launch.needs_std_fix()
