"""An elastic DDP script in the shape of PyTorch's fault-tolerant torchrun tutorial; it never imports trainfleet.

Launched with plain torchrun (gloo). Rank 0 writes a snapshot (model, optimizer, epochs run) after
every epoch to --snapshot, replacing it atomically; every process that starts loads it when it
exists, so a run whose workers torchrun restarted after a lost pod resumes where it was. At the end
rank 0 prints one trainfleet-result line, the summary's opt-in contract.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--snapshot", required=True)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--epoch-s", type=float, default=4.0)
args = parser.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(nn.Linear(10, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
epochs_run = 0
if os.path.exists(args.snapshot):
    snapshot = torch.load(args.snapshot)
    model.module.load_state_dict(snapshot["MODEL_STATE"])
    optimizer.load_state_dict(snapshot["OPTIMIZER_STATE"])
    epochs_run = snapshot["EPOCHS_RUN"]
    print(f"ddp_snapshot: rank {rank} resumed from the snapshot of epoch {epochs_run}, world size {world}", flush=True)
resumed_from = epochs_run
loss = torch.zeros(())
for epoch in range(epochs_run, args.epochs):
    start = time.time()
    for _ in range(10):
        optimizer.zero_grad()
        loss = model(torch.randn(32, 10)).pow(2).mean()
        loss.backward()
        optimizer.step()
    time.sleep(max(0.0, args.epoch_s - (time.time() - start)))
    if rank == 0:
        os.makedirs(os.path.dirname(args.snapshot), exist_ok=True)
        partial = args.snapshot + ".partial"
        torch.save({"MODEL_STATE": model.module.state_dict(), "OPTIMIZER_STATE": optimizer.state_dict(),
                    "EPOCHS_RUN": epoch + 1}, partial)
        os.replace(partial, args.snapshot)
        print(f"ddp_snapshot: epoch {epoch + 1} of {args.epochs} done, world size {world}, snapshot saved", flush=True)
if rank == 0:
    result = {"final_loss": round(loss.item(), 6), "epochs": args.epochs, "world_size": world,
              "resumed_from_epoch": resumed_from}
    print("trainfleet-result: " + json.dumps(result), flush=True)
dist.destroy_process_group()
