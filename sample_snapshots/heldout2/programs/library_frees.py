"""Memory freed from inside library code (autocast, packed sequences, checkpointing) or in bursts
by a helper, all by reference counting: no reference cycles, although the collector runs."""

from __future__ import annotations

import os
import random
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))
from _harness import Harness, main  # noqa: E402


def _seed(seed=0):
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def event_log(step, n=1200):
    """Small, acyclic bookkeeping records: they make the automatic collector run, and are freed by
    reference counting."""
    return [{"step": step, "i": i, "vals": (i, -i)} for i in range(n)]


class LSTMTagger(nn.Module):
    def __init__(self, vocab=8000, width=256, hidden=512, tags=24):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.lstm = nn.LSTM(width, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, tags)

    def forward(self, ids):
        states, _ = self.lstm(self.emb(ids))
        return self.out(states)


def lstm_autocast_fp16_loop(name):
    h = Harness(name)
    _seed()
    h.record(stacks="python", context="all")
    model = LSTMTagger().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(10):
        with h.step():
            ids = torch.randint(0, 8000, (32, 128), device="cuda")
            tags = torch.randint(0, 24, (32, 128), device="cuda")
            with torch.autocast("cuda", dtype=torch.float16):
                logits = model(ids)
                loss = F.cross_entropy(logits.flatten(0, 1).float(), tags.flatten())
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            event_log(step)
    h.finish(leak=False, workload="""A 2-layer LSTM tagger (hidden 512) trained under
        torch.autocast(float16) with a GradScaler, AdamW, 10 steps of 32 x 128 tokens. Inside the
        autocast region the library makes float16 copies of the weights (the LSTM's flat weights
        too) and frees them when the region's tensors are dropped; activations go at the end of
        backward. All by reference counting; the automatic collector runs every step (the step's
        event records) and frees no CUDA memory.""")


class PackedGRU(nn.Module):
    def __init__(self, feat=80, hidden=384, classes=30):
        super().__init__()
        self.gru = nn.GRU(feat, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, classes)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        states, _ = self.gru(packed)
        padded, _ = pad_packed_sequence(states, batch_first=True, total_length=x.shape[1])
        return self.out(padded)


def gru_packed_varlen_frames(name):
    h = Harness(name)
    _seed()
    h.record(stacks="python", context="alloc")
    model = PackedGRU().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    for step in range(8):
        with h.step():
            lengths = torch.randint(100, 600, (24,), generator=gen)
            frames = torch.randn(24, int(lengths.max()), 80, device="cuda")
            labels = torch.randint(0, 30, (24, frames.shape[1]), device="cuda")
            mask = (torch.arange(frames.shape[1])[None, :] < lengths[:, None]).cuda()
            logits = model(frames, lengths)
            F.cross_entropy(logits[mask], labels[mask]).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            event_log(step, 1000)
    h.finish(leak=False, workload="""A bidirectional 2-layer GRU (hidden 384) over batches of 24
        variable-length feature sequences (100 to 600 frames of 80), packed with
        pack_padded_sequence (enforce_sorted=False) and unpacked with pad_packed_sequence, Adam,
        8 steps. The packing, sorting and unpacking buffers are made and freed inside torch's
        rnn utilities by reference counting; sizes differ step to step. Recorded with
        context='alloc'.""")


class CheckpointedStack(nn.Module):
    def __init__(self, width=384, heads=6, layers=4):
        super().__init__()
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(width, heads, 4 * width, batch_first=True,
                                                               dropout=0.0, norm_first=True)
                                    for _ in range(layers))
        self.head = nn.Linear(width, 16)

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return self.head(x.mean(1))


def transformer_checkpoint_nonreentrant(name):
    h = Harness(name)
    _seed()
    h.record(stacks="python", context="all")
    model = CheckpointedStack().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(8):
        with h.step():
            x = torch.randn(16, 256, 384, device="cuda")
            y = torch.randint(0, 16, (16,), device="cuda")
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            event_log(step)
    h.finish(leak=False, workload="""A 4-block pre-norm transformer encoder (width 384) with each
        block wrapped in torch.utils.checkpoint.checkpoint(use_reentrant=False), AdamW, 8 steps of
        16 x 256: block activations are dropped in the forward pass and recomputed, then freed,
        during backward, by the checkpoint machinery's saved-tensor hooks. No reference cycles;
        the automatic collector runs (event records) and frees no CUDA memory.""")


def _drop_burst(store, keep_last):
    """Deletes all but the newest entries of a buffer store, one `del` at a time."""
    for key in sorted(store)[:-keep_last] if keep_last else sorted(store):
        del store[key]


def _accumulate_and_flush(h, proj, steps, flush_every):
    store = {}
    total = torch.zeros((), device="cuda")
    for step in range(steps):
        with h.step():
            for k in range(6):
                chunk = torch.randn(512, 2048, device="cuda")
                store[(step, k)] = proj(chunk)          # 4 MiB each
                del chunk
            total += sum(t.mean() for t in store.values())
            if step % flush_every == flush_every - 1:
                _drop_burst(store, keep_last=0)         # a burst of frees, all by refcount
            event_log(step, 900)
    _drop_burst(store, keep_last=0)
    return total.item()


def helper_del_bursts_refcount(name):
    h = Harness(name)
    _seed()
    h.record(stacks="python", context="all", max_entries=600)
    proj = nn.Linear(2048, 2048).cuda().requires_grad_(False)
    with torch.no_grad():
        result = _accumulate_and_flush(h, proj, steps=12, flush_every=3)
    h.finish(leak=False, result=result, workload="""A projection applied to 6 random 512 x 2048
        chunks per step (4 MiB outputs, 24 MiB a step) kept in a dict; every 3rd
        step a helper function deletes every entry with `del store[key]` in a burst, so memory
        climbs for 3 steps and drops at once, a sawtooth freed by reference counting, with the
        automatic collector on and running (bookkeeping records) but no cycles. History in a
        600-entry ring buffer, which wraps: the trace keeps only the last steps.""")


PROGRAMS = {f.__name__: f for f in (lstm_autocast_fp16_loop, gru_packed_varlen_frames,
                                     transformer_checkpoint_nonreentrant, helper_del_bursts_refcount)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
