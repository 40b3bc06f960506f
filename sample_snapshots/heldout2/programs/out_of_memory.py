"""Out-of-memory errors under a per-process cap: three where the failing request is larger than
everything free (capacity), three where more than enough is free in total but only in holes too
small for it (fragmentation)."""

from __future__ import annotations

import os
import random
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))
from _harness import Harness, MiB, main  # noqa: E402


def _seed(seed=0):
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


# ---------------------------------------------------------------------------------- capacity

def _run_chunk(layers, batch):
    """One inference chunk through a stack of 4096-wide layers, keeping one activation at a time."""
    x = torch.randn(batch, 4096, device="cuda")
    for layer in layers:
        x = torch.relu_(layer(x))
    return x.mean().item()


def oom_batch_finder_doubling(name):
    h = Harness(name)
    _seed()
    h.cap(3.0)
    h.dump_at_oom = True
    h.record(stacks="python", context="all")
    layers = [nn.Linear(4096, 4096, device="cuda") for _ in range(3)]
    batch, largest_ok = 4096, None
    caught = False
    try:
        with torch.inference_mode():
            while True:
                with h.step("inference"):
                    _run_chunk(layers, batch)
                largest_ok = batch
                batch *= 2
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, largest_batch_that_ran=largest_ok, workload="""A
        batch-size finder for serving a 3-layer MLP (4096 wide, 192 MiB of weights) under a 3
        GiB cap: the batch doubles from 4096 rows until a chunk fails. The chunk of 65,536 rows
        runs (1 GiB input and 1 GiB output at a time); at 131,072 rows the 2 GiB input fits, and
        the first layer's 2 GiB output is more than all the cap has left. Dumped by the OOM
        observer.""")


def oom_gpt2_eval_logits(name):
    from transformers import GPT2Config, GPT2LMHeadModel

    h = Harness(name)
    _seed()
    h.cap(2.0)
    h.dump_at_oom = True
    h.record(stacks="all", context="alloc")
    cfg = GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=50257, n_positions=1024)
    model = GPT2LMHeadModel(cfg).cuda().eval()
    picks = []
    try:
        for seq in (256, 512, 1024):
            with h.step("eval"), torch.no_grad():
                ids = torch.randint(0, 50257, (16, seq), device="cuda")
                logits = model(input_ids=ids, use_cache=False).logits
                picks.append(logits[:, -1].argmax(-1).cpu())
                del logits
        caught = False
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""GPT-2 (2 layers, width 256) with the full
        50,257-token vocabulary, evaluated under no_grad on batches of 16 sequences of 256, 512,
        then 1024 tokens under a 2 GiB cap: the logits tensor alone is 0.77, 1.53, then 3.07
        GiB, and the last is larger than the whole cap. Python and C++ stacks,
        context='alloc'; dumped by the OOM observer.""")


def oom_wide_mlp_on_device(name):
    h = Harness(name)
    _seed()
    h.cap(3.125)
    h.dump_at_oom = True
    h.record(stacks="python", context="all", max_entries=16)
    layers = []
    try:
        with h.step("build"):
            for _ in range(16):
                layers.append(nn.Linear(8192, 8192, device="cuda"))   # 256 MiB of weight each
        model = nn.Sequential(*layers)
        caught = False
        print(sum(p.numel() for p in model.parameters()))
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, layers_built=len(layers), workload="""A 16-layer MLP of
        8192 x 8192 linear layers (4 GiB of float32 weights) built directly on the GPU
        (device='cuda'), layer after layer, under a 3.125 GiB cap: 12 layers fit, and the 13th
        layer's 256 MiB weight is about twice what the cap has left. History in a 16-entry ring
        buffer (it wraps: only the last allocations are in the trace); dumped by the OOM
        observer.""")


# ---------------------------------------------------------------------------------- fragmentation

def oom_feature_shards_every_other(name):
    h = Harness(name)
    _seed()
    h.cap(2.0)
    h.dump_at_oom = True
    h.record(stacks="all", context="all")
    try:
        with h.step("load"):
            shards = [torch.empty(2048, 1024, device="cuda").normal_() for _ in range(200)]   # 8 MiB each
        with h.step("evict"):
            kept = shards[0::2]                 # every other shard is evicted
            del shards
        with h.step("pack"):
            h.expect_request(32 * 8 * MiB)
            dense = torch.cat(kept[:32])        # one 256 MiB block of 32 shards
            print(dense.shape)
        caught = False
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""A feature store under a 2 GiB cap loads 200
        shards of 8 MiB (the allocator packs two into each 20 MiB segment: 100 segments, 2000
        MiB), evicts every other one (leaving a 12 MiB hole in every segment, 1.2 GiB free in
        all), then packs 32 of the kept shards into one 256 MiB tensor with torch.cat: no hole is
        large enough and the cap has only 48 MiB left. Python and C++ stacks; dumped by the OOM
        observer.""")


def oom_varlen_memaware_batcher(name):
    h = Harness(name)
    _seed()
    h.cap(2.0)
    rng = random.Random(0)
    running = []
    caught = False
    try:
        step = 0
        while h.cap_bytes - torch.cuda.memory_reserved() > 120 * MiB:
            with h.step("encode"):
                lo = 1792 + 16 * step
                lengths = [min(2432, rng.randint(lo, lo + 320)) for _ in range(8)]
                states = [torch.randn(n, 1024, device="cuda") for n in lengths]   # 7 to 9.5 MiB each
                for s in states:
                    s.tanh_()
                running.extend(states[0::2])    # the odd ones finished this step and are dropped
                del states, s
            step += 1
        with h.step("batch"):
            reserved, allocated = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()
            budget = (h.cap_bytes - reserved) + (reserved - allocated) // 2   # "free" by the counters
            longest = max(t.shape[0] for t in running)
            rows = max(1, budget // (longest * 1024 * 4))
            h.expect_request(rows * longest * 1024 * 4)
            padded = torch.zeros(rows, longest, 1024, device="cuda")
            print(padded.shape)
    except torch.OutOfMemoryError:
        caught = True
        h.dump_plain()                          # the handler saves the allocator state
    h.finish(leak=False, oom_caught=caught, workload="""An encoder loop over variable-length
        sequences (7 to 9.5 MiB of states each, lengths growing from step to step) under a 2 GiB
        cap: each step encodes 8 sequences, keeps the 4 still running and drops the 4 finished
        ones, until the cap is nearly reserved. A memory-aware batcher then sizes one padded
        batch from the counters (the cap's headroom plus half of reserved minus allocated) and
        asks for it: the free bytes are there, but in holes of at most 20 MiB, and the request
        fails. History was never on: the except block pickles torch.cuda.memory._snapshot(), so
        the file has segments and blocks and no trace.""")


def oom_kv_continuous_batching(name):
    h = Harness(name)
    _seed()
    h.cap(2.0)
    h.dump_at_oom = True
    h.record(stacks="python", context="all", max_entries=20_000)
    rng = random.Random(0)
    layers, heads, head_dim, chunk = 6, 8, 64, 64

    def admit():
        return {"target": rng.randint(1024, 4600), "len": 640,
                "kv": [torch.randn(heads, 640, head_dim, device="cuda") for _ in range(2 * layers)]}

    active, finished = [], 0
    try:
        with torch.no_grad():
            for _step in range(400):
                with h.step("decode"):
                    active.append(admit())      # one new request joins the batch every step
                    for req in active:
                        req["len"] += chunk
                        kv = req["kv"]
                        for i, cache in enumerate(kv):
                            kv[i] = torch.cat([cache, torch.randn(heads, chunk, head_dim, device="cuda")], dim=1)
                    done = [r for r in active if r["len"] >= r["target"]]
                    active = [r for r in active if r["len"] < r["target"]]
                    finished += len(done)
                    del done
        caught = False
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, requests_finished=finished, workload="""Continuous
        batching under a 2 GiB cap: one request joins every step, each with 12 key/value caches
        (6 layers, 8 heads of 64) that grow by torch.cat 64 tokens at a time from 640 tokens to
        a target of 1,024 to 4,600 (1.25 to 9 MiB per cache), and leave when they reach it.
        Caches of different requests share the allocator's 20 MiB segments; as they grow, move
        and are freed they leave holes, and a cat's request for a new segment fails with well
        over its size free in holes. History in a 20,000-entry ring buffer (wrapped); dumped by
        the OOM observer.""")


PROGRAMS = {f.__name__: f for f in (oom_batch_finder_doubling, oom_gpt2_eval_logits, oom_wide_mlp_on_device,
                                     oom_feature_shards_every_other, oom_varlen_memaware_batcher,
                                     oom_kv_continuous_batching)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
