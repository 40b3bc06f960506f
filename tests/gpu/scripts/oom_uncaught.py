"""Fills a 1 GiB memory cap with 256 MiB tensors until CUDA runs out of memory; never catches it."""

import torch

torch.cuda.set_per_process_memory_fraction((1 << 30) / torch.cuda.get_device_properties(0).total_memory)
held = []
while True:
    held.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
