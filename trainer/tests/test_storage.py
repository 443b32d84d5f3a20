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


def _client_error(code, status):
    from botocore.exceptions import ClientError  # pylint: disable=import-outside-toplevel

    return ClientError({"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")


def test_transient_errors_are_network_5xx_and_throttling():
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError  # pylint: disable=import-outside-toplevel

    assert storage.is_transient(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    assert storage.is_transient(ConnectTimeoutError(endpoint_url="http://x"))
    assert storage.is_transient(ReadTimeoutError(endpoint_url="http://x"))
    assert storage.is_transient(ConnectionResetError(104, "Connection reset by peer"))
    assert storage.is_transient(_client_error("InternalError", 500))
    assert storage.is_transient(_client_error("ServiceUnavailable", 503))
    assert storage.is_transient(_client_error("SlowDown", 503))
    assert storage.is_transient(_client_error("Throttling", 400))
    assert storage.is_transient(_client_error("Whatever", 429))
    assert not storage.is_transient(_client_error("AccessDenied", 403))
    assert not storage.is_transient(_client_error("NoSuchBucket", 404))
    assert not storage.is_transient(_client_error("InvalidDigest", 400))
    assert not storage.is_transient(ValueError("bad"))


def test_backoff_doubles_is_capped_and_bounded():
    policy = storage.RetryPolicy(attempts=8, base_s=0.5)

    class Top:  # the largest jitter: the raw delay itself
        @staticmethod
        def random():
            return 1.0

    assert [policy.delay(n, Top) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert policy.max_total_s() == 31.5
    assert 0.25 <= policy.delay(1) <= 0.5
    assert storage.RetryPolicy(attempts=1).max_total_s() == 0


class FlakyClient:  # pylint: disable=too-few-public-methods
    """Stands in for a boto3 client in this unit test: put_object fails ``failures`` times, then works."""

    def __init__(self, failures, error):
        self.failures, self.error, self.calls = failures, error, []

    def put_object(self, **kwargs):
        self.calls.append(kwargs)
        if len(self.calls) <= self.failures:
            raise self.error
        return {}


def test_s3_write_retries_then_succeeds_and_reports_each_retry():
    from botocore.exceptions import EndpointConnectionError  # pylint: disable=import-outside-toplevel

    client = FlakyClient(2, EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    heard, slept = [], []
    store = storage.S3Storage("s3://bucket/p", client=client, retry=storage.RetryPolicy(attempts=3, base_s=0.1),
                              on_retry=lambda *args: heard.append(args), sleep=slept.append)
    assert store.write_bytes("x", b"data") == "s3://bucket/p/x"
    assert len(client.calls) == 3 and client.calls[0]["Key"] == "p/x" and client.calls[0]["ContentMD5"] == "jXd/OF09/siBXSD3SWAm3A=="
    assert [(op, where, attempt) for op, where, attempt, _delay, _exc in heard] == [("put", "s3://bucket/p/x", 1), ("put", "s3://bucket/p/x", 2)]
    assert len(slept) == 2 and 0.05 <= slept[0] <= 0.1 and 0.1 <= slept[1] <= 0.2


def test_s3_write_gives_up_after_the_attempts_and_fails_at_once_on_a_real_error():
    from botocore.exceptions import EndpointConnectionError  # pylint: disable=import-outside-toplevel

    client = FlakyClient(10, EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    store = storage.S3Storage("s3://bucket/p", client=client, retry=storage.RetryPolicy(attempts=3, base_s=0.1), sleep=lambda s: None)
    with pytest.raises(StorageError, match=r"S3 put of s3://bucket/p/x failed after 3 attempt\(s\)"):
        store.write_bytes("x", b"data")
    assert len(client.calls) == 3
    denied = FlakyClient(10, _client_error("AccessDenied", 403))
    store = storage.S3Storage("s3://bucket/p", client=denied, sleep=lambda s: None)
    with pytest.raises(Exception, match="AccessDenied"):
        store.write_bytes("x", b"data")
    assert len(denied.calls) == 1


def test_local_size(tmp_path):
    store = LocalStorage(str(tmp_path))
    assert store.size("x") is None
    store.write_bytes("x", b"12345")
    assert store.size("x") == 5


def test_a_breaker_makes_the_calls_after_a_failed_back_off_try_once_until_one_succeeds_or_the_window_ends():
    """An outage costs a run one back-off, not one per write: the stores of a run share a breaker."""
    from botocore.exceptions import EndpointConnectionError  # pylint: disable=import-outside-toplevel

    now = [100.0]
    breaker = storage.Breaker(30, clock=lambda: now[0])
    down = FlakyClient(100, EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    policy = storage.RetryPolicy(attempts=4, base_s=0.1)
    metrics_store = storage.S3Storage("s3://bucket/out", client=down, retry=policy, sleep=lambda s: None, breaker=breaker)
    snapshot_store = storage.S3Storage("s3://bucket/snap", client=down, retry=policy, sleep=lambda s: None, breaker=breaker)
    with pytest.raises(StorageError, match=r"failed after 4 attempt\(s\): "):
        metrics_store.write_bytes("metrics.jsonl", b"m")
    assert len(down.calls) == 4 and breaker.open_until == 130.0
    now[0] = 110.0
    with pytest.raises(StorageError, match=r"snapshot-1 failed after 1 attempt\(s\) \(one try: a call failed all 4 less than 30s ago\)"):
        snapshot_store.write_bytes("snapshot-1", b"s")
    assert len(down.calls) == 5 and breaker.open_until == 130.0  # a single try does not keep it open longer
    now[0] = 131.0  # the window is over: patient again
    with pytest.raises(StorageError, match=r"failed after 4 attempt\(s\): "):
        snapshot_store.write_bytes("snapshot-2", b"s")
    assert len(down.calls) == 9 and breaker.open_until == 161.0
    down.failures = len(down.calls)  # the endpoint is back: the next try succeeds and closes it
    assert snapshot_store.write_bytes("snapshot-3", b"s") == "s3://bucket/snap/snapshot-3"
    assert len(down.calls) == 10 and breaker.open_until is None
    down.failures = 100
    with pytest.raises(StorageError, match=r"failed after 4 attempt\(s\): "):
        metrics_store.write_bytes("metrics.jsonl", b"m")
    breaker.close()  # the run's final outputs: every try again
    with pytest.raises(StorageError, match=r"failed after 4 attempt\(s\): "):
        metrics_store.write_bytes("model.pt", b"w")
    assert len(down.calls) == 18
    breaker.close()
    denied = FlakyClient(10, _client_error("AccessDenied", 403))  # a real error fails at once and does not open it
    with pytest.raises(Exception, match="AccessDenied"):
        storage.S3Storage("s3://bucket/p", client=denied, retry=policy, sleep=lambda s: None, breaker=breaker).write_bytes("x", b"d")
    assert len(denied.calls) == 1 and breaker.open_until is None
