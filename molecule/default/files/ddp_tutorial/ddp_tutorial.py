"""The PyTorch tutorials' DDP shape, written for trainfleet's live tests; it never imports trainfleet.

Launched with plain torchrun; gloo, a Linear model, an all-reduce per step.
"""
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from tutorial_util import STEPS

dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(nn.Linear(10, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(STEPS):
    optimizer.zero_grad()
    loss = model(torch.randn(32, 10)).pow(2).mean()
    loss.backward()
    optimizer.step()
print(f"tutorial: rank {dist.get_rank()} of {dist.get_world_size()} done, loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
