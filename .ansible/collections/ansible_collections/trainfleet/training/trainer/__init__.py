"""trainfleet DDP trainer: a small, serious PyTorch DistributedDataParallel trainer.

Run it with torchrun (``python -m torch.distributed.run ... -m trainer.train``) or as a plain
single process (``python -m trainer.train``). See trainer/README.md for the CLI and the log-line
contract that the Ansible side (pytorchjob_logs, the train role) parses.
"""

__version__ = "0.1.0"

# Log-line prefixes: a contract with the rest of trainfleet (see README.md, "Log lines").
RANK_PREFIX = "trainfleet-rank:"
EPOCH_PREFIX = "trainfleet-epoch:"
RESULT_PREFIX = "trainfleet-result:"
RESUME_PREFIX = "trainfleet-resume:"
STOPPED_PREFIX = "trainfleet-stopped:"
