"""A DDP script that hangs, written for trainfleet's live tests; it never imports trainfleet.

Rank 1 never reaches the all-reduce that rank 0 waits in (a peer stuck in a loop of its own), so
rank 0 would wait for gloo's timeout (30 min) and nothing crashes: only the train step's
progress_timeout can tell.
"""
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
print(f"hang: rank {dist.get_rank()} of {dist.get_world_size()} ready", flush=True)
if dist.get_rank() == 0:
    dist.all_reduce(torch.ones(1))
else:
    time.sleep(3600)
