"""Things kept between steps on purpose or by mistake: caches that never evict, caches that do,
closures, tiny tensors, state-only recordings of a leak, a leak seen through a ring buffer."""

from __future__ import annotations

import sys
from collections import OrderedDict

import torch
import torch.nn.functional as F
from _harness import Harness, main


class Encoder(torch.nn.Module):
    def __init__(self, vocab=16000, width=512):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, width)
        self.layer = torch.nn.TransformerEncoderLayer(width, 8, 2048, batch_first=True)

    def forward(self, ids):
        return self.layer(self.emb(ids)).mean(1)


def cache_dict_never_evicts(name):
    h = Harness(name)
    h.record(stacks="python")
    enc = Encoder().cuda().eval()
    cache = {}
    for request_id in range(12):
        with h.step("inference"):
            ids = torch.randint(0, 16000, (64, 96), device="cuda")
            key = f"req-{request_id}"
            if key not in cache:
                with torch.no_grad():
                    cache[key] = {"embedding": enc(ids), "tokens": ids}
            scores = cache[key]["embedding"] @ cache[key]["embedding"].T
            scores.softmax(-1).max().item()
    h.finish(leak=True, leak_what="a dict cache keyed by request id (every id new) keeps each "
             "request's embeddings and token ids on the GPU forever", workload="""An embedding
             service: a transformer encoder layer turns each request (64 x 96 tokens) into
             embeddings, stored in a dict keyed by request id for reuse; ids never repeat and
             nothing is evicted, 12 requests.""")


def lru_cache_bounded(name):
    h = Harness(name)
    h.record(stacks="python")
    enc = Encoder().cuda().eval()
    cache: OrderedDict = OrderedDict()
    for request_id in range(16):
        with h.step("inference"):
            key = request_id % 10
            if key in cache:
                cache.move_to_end(key)
            else:
                with torch.no_grad():
                    cache[key] = enc(torch.randint(0, 16000, (64, 96), device="cuda"))
                if len(cache) > 4:
                    cache.popitem(last=False)
            (cache[key] @ cache[key].T).softmax(-1).max().item()
    h.finish(leak=False, workload="""The same encoder behind an LRU cache (OrderedDict, at most 4
        entries, oldest evicted): memory grows over the first 4 requests and then stays level
        for the other 12.""")


def shape_buffer_cache_plateau(name):
    h = Harness(name)
    h.record(stacks="python")
    buffers = {}

    def workspace(seq):
        if seq not in buffers:                  # warm-up: one buffer per new shape
            buffers[seq] = torch.empty(32, 8, seq, seq, device="cuda")
        return buffers[seq]

    w = torch.randn(512, 512, device="cuda", requires_grad=True)
    opt = torch.optim.SGD([w], lr=1e-3)
    for step in range(14):
        with h.step():
            seq = (64, 128, 192, 256)[step % 4]
            x = torch.randn(32, seq, 512, device="cuda")
            q = (x @ w).view(32, seq, 8, 64).transpose(1, 2)
            ws = workspace(seq)
            with torch.no_grad():
                torch.matmul(q, q.transpose(-1, -2), out=ws)
            (ws.softmax(-1) @ q).sum().backward()
            opt.step()
            opt.zero_grad()
    h.finish(leak=False, workload="""A loop cycling through 4 sequence lengths keeps one attention
        workspace per length in a dict: memory grows during the first 4 steps (a new shape each)
        and is flat for the remaining 10, a warm-up that plateaus.""")


def closure_callbacks_leak(name):
    h = Harness(name)
    h.record(stacks="python", context="alloc")
    pending = []
    w = torch.randn(1024, 1024, device="cuda", requires_grad=True)
    opt = torch.optim.Adam([w], lr=1e-3)
    for _step in range(10):
        with h.step():
            x = torch.randn(2048, 1024, device="cuda")
            y = torch.tanh(x @ w)
            y.mean().backward()
            opt.step()
            opt.zero_grad()
            snapshot = y.detach()
            pending.append(lambda s=snapshot: s.norm().item())   # "report later", never drained
    h.finish(leak=True, leak_what="a list of report callbacks (lambdas) each capturing the step's "
             "2048 x 1024 output, never run or cleared", workload="""A single-matrix model
             trained with Adam for 10 steps; after each step a callback capturing the step's
             output is queued for reporting, and the queue is never drained (no cycles: the
             lambdas hold the tensors by default argument). Recorded with context='alloc'.""")


def detached_loss_on_gpu_leak(name):
    h = Harness(name)
    h.record(stacks="python")
    net = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        with h.step():
            x = torch.randn(128, 512, device="cuda")
            y = torch.randint(0, 10, (128,), device="cuda")
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.detach())
    h.finish(leak=True, leak_what="losses.append(loss.detach()): one 4-byte scalar a step, each in "
             "a 512-byte block of its own", workload="""A small classifier, SGD, 40 steps; the loop
             keeps each detached loss on the GPU in a list (no graphs), a leak of one 512-byte
             block per step.""")


def activations_list_leak(name):
    h = Harness(name)
    h.record(stacks="python", max_entries=3000)
    net = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    kept = []
    for _step in range(30):
        with h.step():
            x = torch.randn(256, 1024, device="cuda")
            feats = net[:2](x)
            net[2:](feats).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            kept.append(feats.detach().clone())
    h.finish(leak=True, leak_what="intermediate features (256 x 1024 floats) cloned into a list "
             "every step", workload="""A 4-layer linear stack, SGD, 30 steps; each step's
             intermediate features are cloned into a list that is never cleared. History was
             turned on with max_entries=3000, which the run did not reach: the whole run is in
             the trace.""")


def leak_state_only(name):
    h = Harness(name)
    h.record(enabled="state", context="state", stacks="python")
    net = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 2048)).cuda()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    seen = []
    for _ in range(10):
        with h.step():
            x = torch.randn(512, 2048, device="cuda")
            out = net(x)
            out.square().mean().backward()
            opt.step()
            opt.zero_grad()
            seen.append(out.detach())
    h.finish(leak=True, leak_what="each step's output (512 x 2048 floats) kept in a list",
             workload="""An MLP (2048 wide), Adam, 10 steps, keeping every step's output in a
             list. Recorded with enabled='state': the snapshot has stacks for live blocks but no
             trace at all, so the file alone cannot show growth over time.""")


def metrics_to_cpu_ok(name):
    h = Harness(name)
    h.record(stacks="python")
    net = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 100)).cuda()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    all_preds, all_targets = [], []
    for _ in range(12):
        with h.step():
            x = torch.randn(512, 1024, device="cuda")
            y = torch.randint(0, 100, (512,), device="cuda")
            logits = net(x)
            F.cross_entropy(logits, y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            all_preds.append(logits.argmax(-1).cpu())
            all_targets.append(y.cpu())
    h.finish(leak=False, workload="""A classifier, Adam, 12 steps; predictions and targets are
        collected every step, but on the CPU (.cpu()), so the GPU holds nothing more after step 1
        than before it.""")


PROGRAMS = {f.__name__: f for f in (cache_dict_never_evicts, lru_cache_bounded, shape_buffer_cache_plateau,
                                     closure_callbacks_leak, detached_loss_on_gpu_leak, activations_list_leak,
                                     leak_state_only, metrics_to_cpu_ok)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
