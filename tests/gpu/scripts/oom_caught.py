"""Runs out of memory under a 1 GiB cap, catches it, frees everything and exits 0."""

import torch

torch.cuda.set_per_process_memory_fraction((1 << 30) / torch.cuda.get_device_properties(0).total_memory)
held = []
try:
    while True:
        held.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
except torch.cuda.OutOfMemoryError:
    print(f"caught the OOM after {len(held)} tensors")
held.clear()
