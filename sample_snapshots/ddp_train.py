"""A small DistributedDataParallel training run, for per-rank snapshots.

    torchrun --nproc-per-node 2 -m memtui run --out sample_snapshots/ranks sample_snapshots/ddp_train.py

Each rank trains the same MLP on its own GPU. Rank 1 also keeps a 256 MiB buffer alive for
the whole run, so its snapshot differs from rank 0's in a way a rank comparison should find.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import memtui.record


def main() -> None:
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank = dist.get_rank()
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
    model = DistributedDataParallel(model, device_ids=[local_rank])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    extra = torch.empty(256 << 20, dtype=torch.uint8, device="cuda") if rank == 1 else None
    for _ in range(4):
        x = torch.randn(512, 1024, device="cuda")
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        memtui.record.step()
    dist.barrier()
    del extra
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
