"""Log lines from ranks that share one stdout must never tear (the rank line is how rank 0 is found)."""

import subprocess
import sys

from trainer import emit
from trainer.tests.conftest import REPO_ROOT, base_env


class RecordingStream:
    def __init__(self):
        self.writes = []
        self.flushes = 0

    def write(self, text):
        self.writes.append(text)

    def flush(self):
        self.flushes += 1


def test_emit_is_one_write_with_its_newline_then_a_flush():
    stream = RecordingStream()
    emit("trainfleet-rank: rank=0 local_rank=0 world_size=2", stream)
    assert stream.writes == ["trainfleet-rank: rank=0 local_rank=0 world_size=2\n"]
    assert stream.flushes == 1


def test_emit_defaults_to_stdout(capsys):
    emit("hello")
    assert capsys.readouterr().out == "hello\n"


WRITER = """
import sys
from trainer import emit
for i in range(int(sys.argv[2])):
    emit(f"trainfleet-rank: rank={sys.argv[1]} line={i} " + "x" * 200)
"""


def test_two_unbuffered_processes_on_one_pipe_never_tear_a_line():
    """What torchrun does in a pod: two workers, PYTHONUNBUFFERED=1, one shared stdout pipe."""
    count = 3000
    cmd = f"{sys.executable} -c '{WRITER}' 0 {count} & {sys.executable} -c '{WRITER}' 1 {count} & wait"
    proc = subprocess.run(["sh", "-c", cmd], cwd=REPO_ROOT, env=base_env(), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 * count
    torn = [line for line in lines if not (line.startswith("trainfleet-rank: rank=") and line.endswith("x" * 200)) or line.count("trainfleet-rank:") != 1]
    assert not torn, torn[:3]
    for rank in ("0", "1"):
        assert [line.split()[2] for line in lines if line.split()[1] == f"rank={rank}"] == [f"line={i}" for i in range(count)]
