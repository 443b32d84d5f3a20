"""trainfleet DDP trainer: a small, serious PyTorch DistributedDataParallel trainer.

Run it with torchrun (``python -m torch.distributed.run ... -m trainer.train``) or as a plain
single process (``python -m trainer.train``). See trainer/README.md for the CLI and the log-line
contract that the Ansible side (pytorchjob_logs, the train role) parses.
"""

import sys

__version__ = "0.1.0"

# Log-line prefixes: a contract with the rest of trainfleet (see README.md, "Log lines").
RANK_PREFIX = "trainfleet-rank:"
EPOCH_PREFIX = "trainfleet-epoch:"
RESULT_PREFIX = "trainfleet-result:"
RESUME_PREFIX = "trainfleet-resume:"
STOPPED_PREFIX = "trainfleet-stopped:"
INFO_PREFIX = "trainfleet-info:"
WARNING_PREFIX = "trainfleet-warning:"
STALL_PREFIX = "trainfleet-stall:"
ERROR_PREFIX = "trainfleet-trainer: error:"
EVALUATE_PREFIX = "trainfleet-evaluate:"
COMPILE_PREFIX = "trainfleet-compile:"
# The formats of these lines live in trainer.metrics (one place); emit() writes them.


def emit(line, stream=None):
    """Write one whole log line with a single write() and flush.

    torchrun's workers share the container's stdout, and the image runs with PYTHONUNBUFFERED=1,
    under which ``print(x)`` issues two writes ("x", then "\\n"). Two ranks printing at once then
    produce "rank=0 ...rank=1 ...\\n\\n" and the rank line that pytorchjob_logs looks for is lost.
    One write of line + newline (well under PIPE_BUF) is never split by another process.
    """
    stream = sys.stdout if stream is None else stream
    stream.write(line + "\n")
    stream.flush()
