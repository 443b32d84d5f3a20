"""--min-epoch-s: epochs padded to a known length, so that a fault injected by a test lands mid-run."""

import time

import pytest

from trainer.loop import pad_epoch
from trainer.metrics import parse_epoch_line, parse_result_line
from trainer.tests.conftest import single


def test_pad_epoch_sleeps_the_rest_only():
    slept = []
    assert pad_epoch(5.0, 1.5, sleep=slept.append) == 3.5
    assert slept == [3.5]
    slept.clear()
    assert pad_epoch(5.0, 7.0, sleep=slept.append) == 0.0
    assert pad_epoch(0.0, 0.2, sleep=slept.append) == 0.0
    assert not slept


def test_default_is_no_pause():
    slept = []
    pad_epoch(0, 0.0, sleep=slept.append)
    assert not slept


@pytest.mark.integration
def test_padded_run_lasts_the_epochs_it_says(tmp_path):
    """Three epochs of at least 1 s each; the pause is not in the reported throughput."""
    args = ["--dataset", "synthetic", "--synthetic-samples", "400", "--synthetic-features", "8", "--epochs", "3",
            "--batch-size", "64", "--min-epoch-s", "1", "--output-dir", str(tmp_path / "out")]
    start = time.monotonic()
    proc = single(args, timeout=180)
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    epochs = [parse_epoch_line(line) for line in proc.stdout.splitlines() if parse_epoch_line(line)]
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    assert elapsed >= 3.0
    result = [parse_result_line(line) for line in proc.stdout.splitlines() if parse_result_line(line)][-1]
    # 320 training samples take well under a second: an unpadded rate, not 320 samples per padded second
    assert result["samples_per_s"] > 320
