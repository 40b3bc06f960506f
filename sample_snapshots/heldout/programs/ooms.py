"""Out-of-memory errors of both kinds: the request larger than everything free (capacity), and
enough free bytes in total but no block large enough (fragmentation). Each is re-run by the
runner with expandable_segments:True to check which it was."""

from __future__ import annotations

import gc
import sys

import torch
from _harness import Harness, MiB, main


def _holes(h: Harness, big_mib: int, piece_mib: int, pieces: int, filler_mib: int):
    """A cached segment split into pieces, every other piece freed, the rest of the cap taken."""
    big = torch.empty(big_mib * MiB, dtype=torch.uint8, device="cuda")
    del big                                     # the segment stays cached, whole
    parts = [torch.empty(piece_mib * MiB, dtype=torch.uint8, device="cuda") for _ in range(pieces)]
    kept = parts[::2]                           # carved out of the cached segment
    del parts
    filler = torch.empty(filler_mib * MiB, dtype=torch.uint8, device="cuda")
    return kept, filler


def oom_fragmentation_holes(name):
    h = Harness(name)
    h.cap(2.0)
    h.dump_at_oom = True
    h.record(stacks="python")
    try:
        with h.step("setup"):
            kept, filler = _holes(h, 1024, 40, 24, 900)
        with h.step("request"):
            h.expect_request(300 * MiB)
            torch.empty(300 * MiB, dtype=torch.uint8, device="cuda")
        caught = False
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""Under a 2 GiB cap: a 1 GiB tensor is freed
        (its segment stays cached), 24 tensors of 40 MiB are carved out of that segment, every
        other one is freed (12 holes of 40 MiB), a 900 MiB tensor takes most of the rest of the
        cap, then a 300 MiB request fails: over 500 MiB is free, in holes of 40 to 104 MiB.
        Dumped by the OOM observer, history on.""")


def oom_fragmentation_no_history(name):
    h = Harness(name)
    h.cap(2.0)
    try:
        kept, filler = _holes(h, 1024, 48, 20, 880)
        h.expect_request(256 * MiB)
        torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
        caught = False
    except torch.OutOfMemoryError:
        caught = True
        h.dump_plain()                          # what a handler that saves the state would do
    h.finish(leak=False, oom_caught=caught, workload="""The fragmentation pattern (a cached 1 GiB
        segment split into 48 MiB pieces, every other one freed, a filler taking the cap's rest)
        under a 2 GiB cap, and a 256 MiB request that fails. History was never on: the except
        block pickles torch.cuda.memory._snapshot(), so the file has segments and blocks but no
        trace and no stacks.""")


def oom_doubling_batch_no_history(name):
    h = Harness(name)
    h.cap(1.5)
    net = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)).cuda()
    batch = 1024
    try:
        while True:
            h.expect_request(batch * 4096 * 4)
            with h.step():
                net(torch.randn(batch, 4096, device="cuda")).sum().backward()
            batch *= 2
    except torch.OutOfMemoryError:
        h.dump_plain()
    h.finish(leak=False, oom_caught=True, workload="""An MLP (4096 wide) whose batch doubles from 1024
        every step under a 1.5 GiB cap until a request fails. History was never on; the except
        block pickles torch.cuda.memory._snapshot(): no trace, no stacks.""")


def oom_huge_logits(name):
    from transformers import GPT2Config, GPT2LMHeadModel

    h = Harness(name)
    h.cap(2.0)
    h.dump_at_oom = True
    h.record(stacks="python")
    cfg = GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=50257, n_positions=1024)
    model = GPT2LMHeadModel(cfg).cuda()
    try:
        for seq in (128, 256, 1024):
            with h.step():
                ids = torch.randint(0, 50257, (16, seq), device="cuda")
                model(input_ids=ids, labels=ids).loss.backward()
                model.zero_grad(set_to_none=True)
        caught = False
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""GPT-2 (2 layers, width 256) with the full
        50,257-token vocabulary under a 2 GiB cap, batch 16 at 128, 256, then 1024 tokens: the
        logits and the loss's copies of them (16 x seq x 50257 floats each) run it out of memory
        before the 1024-token step. Dumped by the OOM observer.""")


def oom_state_only(name):
    h = Harness(name)
    h.cap(1.0)
    h.dump_at_oom = True
    h.record(enabled="state", context="state", stacks="python")
    net = torch.nn.Sequential(torch.nn.Linear(2048, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 2048)).cuda()
    try:
        for batch in (256, 512, 1024, 2048, 4096, 8192):
            with h.step():
                net(torch.randn(batch, 2048, device="cuda")).mean().backward()
        caught = False
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""An MLP (2048 -> 8192 -> 2048) whose batch
        doubles under a 1 GiB cap until it runs out. Recorded with enabled='state': the snapshot
        taken at the OOM has stacks for the live blocks but no trace.""")


def oom_expandable_near_cap(name):
    h = Harness(name, note="run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    h.cap(2.0)
    h.dump_at_oom = True
    h.record(stacks="python")
    held = []
    try:
        with h.step("fill"):
            for _ in range(18):
                held.append(torch.empty(100 * MiB, dtype=torch.uint8, device="cuda"))
            left = h.cap_bytes - torch.cuda.memory_reserved()
        with h.step("request"):
            want = (int(left * 1.006) // (2 * MiB) + 1) * 2 * MiB
            h.expect_request(want)
            held.append(torch.empty(want, dtype=torch.uint8, device="cuda"))
        caught = False
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""With expandable_segments:True already on, 18
        tensors of 100 MiB fill most of a 2 GiB cap, then one request a little (about 0.6%,
        rounded up to the 2 MiB page) larger than what the cap leaves fails: a capacity OOM
        within 1% of the limit, with no holes to speak of. Dumped by the OOM observer.""")


class RetryTrainer:
    """Halves the batch after an OOM; keeps the last error around for a status report."""

    def __init__(self, h):
        self.h = h
        self.net = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                                       torch.nn.Linear(4096, 4096)).cuda()
        self.opt = torch.optim.SGD(self.net.parameters(), lr=1e-4)
        self.last_error = None
        self.batch = 16384

    def step(self):
        x = torch.randn(self.batch, 4096, device="cuda")
        hidden = self.net[0](x)
        out = self.net[2](self.net[1](hidden))
        out.square().mean().backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def fit(self, steps):
        done = 0
        while done < steps:
            with self.h.step():
                self.last_error = None          # releases the traceback and its frames' tensors
                try:
                    self.step()
                    done += 1
                except torch.OutOfMemoryError as e:
                    self.last_error = e
                    self.batch //= 2


def oom_caught_traceback_released(name):
    h = Harness(name)
    h.cap(1.25)
    h.record(stacks="python")
    RetryTrainer(h).fit(4)
    h.finish(leak=False, oom_caught=True, workload="""A trainer starts at batch 16384 under a 1.25
        GiB cap; the step runs out of memory; the handler stores the exception in
        self.last_error (its traceback keeps the failed step's frames and their tensors alive)
        and halves the batch. The next attempt starts by setting self.last_error = None, which
        frees them by reference counting; 4 steps then complete at the smaller batch. Dumped at
        the end.""")


def oom_caught_gc_collect(name):
    h = Harness(name)
    h.cap(1.25)
    h.record(stacks="all", max_entries=20_000)
    net = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)).cuda()
    batch = 12288
    done = 0
    while done < 3:
        with h.step():
            try:
                net(torch.randn(batch, 4096, device="cuda")).square().mean().backward()
                net.zero_grad(set_to_none=True)
                done += 1
            except torch.OutOfMemoryError:
                net.zero_grad(set_to_none=True)
                gc.collect()
                torch.cuda.empty_cache()
                batch //= 2
    h.finish(leak=False, oom_caught=True, workload="""An MLP (4096 wide) starting at batch 12288
        under a 1.25 GiB cap: the OOM is caught, the handler calls gc.collect() and
        torch.cuda.empty_cache() and halves the batch, until 3 steps complete. Python and C++
        stacks.""")


def oom_kvcache_cat(name):
    h = Harness(name)
    h.cap(0.5)
    h.dump_at_oom = True
    h.record(stacks="python")
    layers, batch, heads, hd = 4, 64, 8, 64
    caches = [[None, None] for _ in range(layers)]
    try:
        with torch.no_grad():
            for _token in range(4000):
                with h.step("decode"):
                    for layer in caches:
                        k = torch.randn(batch, heads, 1, hd, device="cuda")
                        v = torch.randn(batch, heads, 1, hd, device="cuda")
                        layer[0] = k if layer[0] is None else torch.cat([layer[0], k], dim=2)
                        layer[1] = v if layer[1] is None else torch.cat([layer[1], v], dim=2)
        caught = False
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, tokens_decoded=len(h.steps), workload="""A key/value
        cache for 4 layers (batch 64, 8 heads of 64) grown by torch.cat one token at a time under
        a 512 MiB cap until it runs out: each cat allocates a slightly larger copy and frees the
        old one. Dumped by the OOM observer.""")


def oom_fragmentation_ring_cut(name):
    h = Harness(name)
    h.cap(2.0)
    h.dump_at_oom = True
    h.record(stacks="python", max_entries=400)
    try:
        with h.step("churn"):
            for i in range(200):
                t = torch.randn(64 + (i % 7) * 32, 1024, device="cuda")
                (t @ t.T).sum()
        with h.step("setup"):
            kept, filler = _holes(h, 1024, 32, 30, 900)
        with h.step("request"):
            h.expect_request(320 * MiB)
            torch.empty(320 * MiB, dtype=torch.uint8, device="cuda")
        caught = False
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""Small matrix churn, then the fragmentation
        pattern (a cached 1 GiB segment split into 32 MiB pieces, every other one freed, a 900 MiB
        filler) under a 2 GiB cap and a 320 MiB request that fails. History in a 400-entry ring
        buffer: the trace starts near the end of the churn (its beginning is lost), and holds the
        whole setup and the OOM.""")


def oom_bert_long_seq_all(name):
    from transformers import BertConfig, BertForMaskedLM

    h = Harness(name)
    h.cap(1.5)
    h.dump_at_oom = True
    h.record(stacks="all", max_entries=40_000)
    cfg = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                     vocab_size=8192, max_position_embeddings=1024, attn_implementation="eager")
    model = BertForMaskedLM(cfg).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    try:
        for seq in (128, 256, 512, 1024):
            with h.step():
                ids = torch.randint(0, 8192, (24, seq), device="cuda")
                model(input_ids=ids, labels=ids).loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
        caught = False
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""BERT for masked LM (4 layers, hidden 256,
        eager attention) from its config, Adam, batch 24 with the sequence length doubling from
        128 under a 1.5 GiB cap: the attention matrices at long lengths run it out of memory.
        Python and C++ stacks; dumped by the OOM observer.""")


PROGRAMS = {f.__name__: f for f in (oom_fragmentation_holes, oom_fragmentation_no_history,
                                     oom_doubling_batch_no_history, oom_huge_logits, oom_state_only,
                                     oom_expandable_near_cap,
                                     oom_caught_traceback_released, oom_caught_gc_collect, oom_kvcache_cat,
                                     oom_fragmentation_ring_cut, oom_bert_long_seq_all)}
ENV = {"oom_expandable_near_cap": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS, env=ENV))
