"""Out-of-memory errors under a cap: three where the failing request is larger than everything
free (capacity) and three where plenty is free in total but only in holes smaller than the
request (fragmentation)."""

from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _harness import Harness, MiB, main  # noqa: E402


def seed_all(seed: int = 0) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def mib(n: int) -> torch.Tensor:
    return torch.empty(n * MiB, dtype=torch.uint8, device="cuda")


# ----------------------------------------------------------------------------- capacity


def oom_mlp_batch_x8_capacity(name):
    seed_all()
    h = Harness(name)
    h.cap(2.0)
    h.dump_at_oom = True
    h.record(stacks="all", context="all")
    net = torch.nn.Sequential(torch.nn.Linear(1024, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 1024)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    caught = False
    try:
        for batch in (1024, 8192, 98304):
            with h.step():
                x = torch.randn(batch, 1024, device="cuda")
                y = torch.randn(batch, 1024, device="cuda")
                loss = F.mse_loss(net(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                del x, y, loss
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""An MLP (1024 -> 8192 -> 1024) trained with
             a batch that grows eightfold and more each step (1,024, 8,192, 98,304 rows) under a 2
             GiB cap: at 98,304 rows the first hidden activation alone (3 GiB) is larger than the
             whole cap. Dumped by the OOM observer, history on, Python and C++ stacks.""")


def oom_attention_scores_plain_snapshot(name):
    seed_all()
    h = Harness(name)
    h.cap(3.0)
    b, heads, d = 2, 8, 64
    caught = False
    try:
        with torch.no_grad():
            for seq in (1024, 2048, 8192):
                with h.step("inference"):
                    q, k, v = (torch.randn(b, heads, seq, d, device="cuda") for _ in range(3))
                    h.expect_request(b * heads * seq * seq * 4)
                    scores = (q @ k.transpose(-1, -2)) * d ** -0.5
                    out = scores.softmax(-1) @ v
                    del q, k, v, scores, out
    except torch.OutOfMemoryError:
        caught = True
        h.dump_plain()
    h.finish(leak=False, oom_caught=caught, workload="""Plain (unfused) attention over ever longer
             sequences under a 3 GiB cap, batch 2, 8 heads: at 8,192 tokens the score matrix q @ k^T
             (2 x 8 x 8192 x 8192 floats, 4 GiB) is larger than the whole cap. History was never on:
             the except block pickles torch.cuda.memory._snapshot(), so there is no trace.""")


def oom_width_search_params(name):
    seed_all()
    h = Harness(name)
    h.cap(3.0)
    h.dump_at_oom = True
    h.record(stacks="python", context="alloc")
    caught = False
    results = {}
    try:
        for width in (2048, 8192, 32768):
            with h.step("build"):
                with torch.device("cuda"):
                    net = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                              torch.nn.Linear(width, width))
                opt = torch.optim.SGD(net.parameters(), lr=1e-3)
                x = torch.randn(64, width, device="cuda")
                loss = net(x).pow(2).mean()
                loss.backward()
                opt.step()
                results[width] = loss.item()
                del net, opt, x, loss
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""A width search: an MLP of two square
             Linear layers is built directly on the GPU (torch.device('cuda')) at widths 2,048,
             8,192 and 32,768 and trained one step each under a 3 GiB cap; the first 32,768 x
             32,768 weight (4 GiB) is larger than the whole cap. Dumped by the OOM observer,
             context='alloc'.""")


# ----------------------------------------------------------------------------- fragmentation


def oom_alternate_free_holes(name):
    seed_all()
    h = Harness(name)
    h.cap(3.0)
    h.dump_at_oom = True
    h.record(stacks="python", context="all")
    caught = False
    try:
        with h.step("setup"):
            weights = mib(480)                     # a model's weights, allocated first
            arena = mib(2560)                      # a warm-up pass: its segment stays cached
            del arena
        with h.step("forward"):
            feats, masks = [], []
            for _ in range(20):                    # interleaved: feature map, its dropout mask
                feats.append(mib(60))
                masks.append(mib(60))
        with h.step("free_masks"):
            del masks                              # every other block freed
        with h.step("request"):
            h.expect_request(400 * MiB)
            big = mib(400)
            del big
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""Under a 3 GiB cap: 480 MiB of weights, then a
             2.5 GiB warm-up tensor freed (its segment stays cached); 20 feature maps and 20 masks of
             60 MiB each are allocated alternately out of that segment and the masks are freed,
             leaving 60 MiB holes between live blocks (about 1.35 GiB free in all, the largest hole
             220 MiB); a 400 MiB request then fails. Dumped by the OOM observer.""", weights_mib=weights.numel() // MiB)


def oom_growing_varlen_buffers(name):
    seed_all()
    h = Harness(name)
    h.cap(2.5)
    h.dump_at_oom = True
    h.record(stacks="all", context="alloc")
    caught = False
    steps = 0
    try:
        with h.step("setup"):
            weights = mib(520)
            warm = mib(2000)                       # warm-up at the longest padded shape: segment stays cached
            del warm
        pooled, buf = [], None
        for i in range(200):
            with h.step():
                new = mib(40 + 8 * i)              # this batch's token buffer: longer every batch
                pooled.append(mib(2))              # its pooled output, kept
                buf = new                          # the previous batch's buffer is freed
                del new
            steps += 1
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, batches_served=steps, workload="""Under a 2.5 GiB cap:
             520 MiB of weights and a 2,000 MiB warm-up tensor freed (its segment stays cached);
             then batches whose token buffer grows by 8 MiB each (40 MiB, 48 MiB, ...), each
             followed by a 2 MiB pooled output that is kept, the previous buffer freed: every freed
             buffer leaves a hole just smaller than the next request, pinned between kept outputs.
             It fails at a request of a few hundred MiB while well over 1 GiB is free in holes.
             Python and C++ stacks, context='alloc'; dumped by the OOM observer.""",
             weights_mib=weights.numel() // MiB, last_buffer_mib=None if buf is None else buf.numel() // MiB)


def oom_block_cache_evict_pattern(name):
    seed_all()
    h = Harness(name)
    h.cap(3.5)
    h.dump_at_oom = True
    h.record(stacks="python", context="all", max_entries=64)
    caught = False
    cache: dict[int, torch.Tensor] = {}
    try:
        with h.step("setup"):
            base = mib(480)
            arena = mib(3080)                      # the first, largest batch: segment stays cached
            del arena
        for s in range(8):                         # the block cache fills, 6 blocks a step
            with h.step():
                for j in range(6):
                    cache[6 * s + j] = mib(64)
        with h.step("evict"):
            for key in [k for k in cache if k % 4]:   # an eviction policy that keeps every 4th block
                del cache[key]
        with h.step("request"):
            h.expect_request(256 * MiB)
            big = mib(256)
            del big
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""Under a 3.5 GiB cap: a 480 MiB base
             allocation, a 3,080 MiB first batch freed (its segment stays cached), then a cache of
             48 blocks of 64 MiB filled over 8 steps out of that segment; an eviction keeps every
             4th block, leaving 192 MiB holes between the kept ones (about 2.3 GiB free in all), and
             a 256 MiB request fails. Recorded into a ring buffer of 64 entries (cut); dumped by the
             OOM observer.""", base_mib=base.numel() // MiB)


PROGRAMS = {f.__name__: f for f in (oom_mlp_batch_x8_capacity, oom_attention_scores_plain_snapshot,
                                     oom_width_search_params, oom_alternate_free_holes, oom_growing_varlen_buffers,
                                     oom_block_cache_evict_pattern)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
