"""Input pipelines and housekeeping: DataLoader workers, a side-stream prefetcher, empty_cache
every step, models swapped, activations offloaded, sequence and recommendation models."""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
from _harness import Harness, main
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Noise(Dataset):
    def __init__(self, n, shape):
        self.n, self.shape = n, shape

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.shape, generator=g), i % 10


def small_cnn():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(64, 10)).cuda()


def dataloader_workers_pinned(name):
    h = Harness(name)
    h.record(stacks="python")
    model = small_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Noise(320, (3, 96, 96)), batch_size=32, num_workers=2, pin_memory=True,
                        persistent_workers=False)
    for x, y in loader:
        with h.step():
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""A small CNN fed by a DataLoader with 2 worker processes and
        pinned memory (non_blocking copies), SGD, 10 batches of 32 images at 96 px.""")


class Prefetcher:
    """Copies the next batch on a side stream while the current one trains."""

    def __init__(self, batches):
        self.batches = iter(batches)
        self.stream = torch.cuda.Stream()
        self.next = None
        self._load()

    def _load(self):
        try:
            cpu = next(self.batches)
        except StopIteration:
            self.next = None
            return
        with torch.cuda.stream(self.stream):
            self.next = cpu.cuda(non_blocking=True).float().div_(255)

    def __iter__(self):
        return self

    def __next__(self):
        torch.cuda.current_stream().wait_stream(self.stream)
        batch = self.next
        if batch is None:
            raise StopIteration
        batch.record_stream(torch.cuda.current_stream())
        self._load()
        return batch


def side_stream_prefetch(name):
    h = Harness(name)
    h.record(stacks="python")
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 64 * 64, 1024), nn.ReLU(), nn.Linear(1024, 10)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [torch.randint(0, 255, (256, 3, 64, 64), dtype=torch.uint8).pin_memory() for _ in range(10)]
    for x in Prefetcher(batches):
        with h.step():
            y = torch.zeros(x.shape[0], dtype=torch.long, device="cuda")
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""An image classifier whose batches are copied to the GPU and
        converted on a side stream one step ahead (wait_stream, record_stream), Adam, 10 steps:
        each batch's free waits for the main stream's use to finish.""")


def empty_cache_every_step(name):
    h = Harness(name)
    h.record(stacks="python")
    model = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 2048)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for batch in (256, 1024, 512, 2048, 768, 1536, 256, 1024):
        with h.step():
            model(torch.randn(batch, 2048, device="cuda")).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
    h.finish(leak=False, workload="""An MLP, Adam, 8 steps of changing batch size, calling
        torch.cuda.empty_cache() at the end of every step: bursts of segment frees each step, and
        new segments allocated again in the next.""")


def model_swap(name):
    h = Harness(name)
    h.record(stacks="python")
    for _phase, width in (("a", 3072), ("b", 2048)):
        model = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width)).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for _ in range(3):
            with h.step():
                model(torch.randn(512, width, device="cuda")).square().mean().backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
        del model, opt
    h.finish(leak=False, workload="""Two models trained one after the other (3 AdamW steps each): the
        first (3072 wide) and its optimizer are deleted before the second (2048 wide) is built,
        a large drop by reference counting between the phases.""")


def activation_offload_cpu(name):
    h = Harness(name)
    h.record(stacks="python")
    model = nn.Sequential(*[nn.Sequential(nn.Linear(2048, 2048), nn.Tanh()) for _ in range(6)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _ in range(5):
        with h.step():
            x = torch.randn(1024, 2048, device="cuda")
            with torch.autograd.graph.save_on_cpu(pin_memory=True):
                loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""A 6-layer tanh MLP, SGD, 5 steps, with
        torch.autograd.graph.save_on_cpu: activations saved for backward go to pinned host
        memory and come back during backward, so the GPU holds few activations at once.""")


def lstm_packed_varlen(name):
    h = Harness(name)
    h.record(stacks="python")
    lstm = nn.LSTM(256, 512, num_layers=2, batch_first=True).cuda()
    head = nn.Linear(512, 5).cuda()
    opt = torch.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    for step in range(6):
        with h.step():
            lengths = torch.randint(20, 120 + 20 * step, (32,), generator=g).sort(descending=True).values
            x = torch.randn(32, int(lengths[0]), 256, device="cuda")
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
            _, (hn, _) = lstm(packed)
            F.cross_entropy(head(hn[-1]), torch.randint(0, 5, (32,), device="cuda")).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""A 2-layer LSTM (cuDNN) over packed variable-length sequences
        (lengths 20 to 220, growing with the step), Adam, 6 steps.""")


def embeddingbag_sparse(name):
    h = Harness(name)
    h.record(stacks="python")
    bag = nn.EmbeddingBag(200_000, 64, mode="sum", sparse=True).cuda()
    tower = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).cuda()
    sparse_opt = torch.optim.SparseAdam(list(bag.parameters()), lr=1e-3)
    dense_opt = torch.optim.Adam(tower.parameters(), lr=1e-3)
    for _ in range(8):
        with h.step():
            idx = torch.randint(0, 200_000, (4096 * 20,), device="cuda")
            offsets = torch.arange(0, 4096 * 20, 20, device="cuda")
            out = tower(bag(idx, offsets)).squeeze(-1)
            F.binary_cross_entropy_with_logits(out, torch.rand(4096, device="cuda")).backward()
            sparse_opt.step()
            dense_opt.step()
            sparse_opt.zero_grad(set_to_none=True)
            dense_opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""A recommendation model: an EmbeddingBag of 200,000 x 64 with
        sparse gradients (SparseAdam) and a small dense tower (Adam), 8 steps of 4096 samples x 20
        ids: SparseAdam's dense state for the whole table appears at step 1.""")


def unet_growing_batch(name):
    h = Harness(name)
    h.record(stacks="python")

    def block(a, b):
        return nn.Sequential(nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU())

    enc1, enc2, dec = block(3, 32).cuda(), block(32, 64).cuda(), block(96, 32).cuda()
    head = nn.Conv2d(32, 2, 1).cuda()
    params = [p for m in (enc1, enc2, dec, head) for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    for batch in (2, 4, 6, 8, 12):
        with h.step():
            x = torch.randn(batch, 3, 128, 128, device="cuda")
            a = enc1(x)
            b = enc2(F.max_pool2d(a, 2))
            y = head(dec(torch.cat([F.interpolate(b, scale_factor=2.0), a], 1)))
            F.cross_entropy(y, torch.randint(0, 2, (batch, 128, 128), device="cuda")).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""A two-level U-Net (conv, batch norm, ReLU, skip joined by
        torch.cat), Adam, batch growing 2 to 12 at 128 px: peaks rise every step, what survives a
        step does not grow.""")


def grad_accum_logging_leak(name):
    h = Harness(name)
    h.record(stacks="python")
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    micro_outputs = []                           # "for the epoch-end histogram"
    for _ in range(6):
        with h.step():
            for _ in range(4):
                out = model(torch.randn(256, 1024, device="cuda"))
                (out.square().mean() / 4).backward()
                micro_outputs.append(out.detach())
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=True, leak_what="every micro-batch's output (256 x 1024 floats) is kept in a list "
             "meant for an epoch-end histogram that never comes", workload="""An MLP with gradient
             accumulation (4 micro-batches per optimizer step, SGD with momentum), 6 steps; each
             micro-batch's detached output is appended to a list kept for the whole run.""")


PROGRAMS = {f.__name__: f for f in (dataloader_workers_pinned, side_stream_prefetch, empty_cache_every_step,
                                     model_swap, activation_offload_cpu, lstm_packed_varlen, embeddingbag_sparse,
                                     unet_growing_batch, grad_accum_logging_leak)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
