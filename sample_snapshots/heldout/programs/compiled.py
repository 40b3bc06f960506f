"""torch.compile and CUDA graphs: compile-time allocations in the first steps, private pools."""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
from _harness import Harness, main
from torch import nn


class Block(nn.Module):
    def __init__(self, d=512):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, 8, d // 8).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def compile_transformer_train(name):
    h = Harness(name)
    h.record(stacks="python")
    model = nn.Sequential(*[Block() for _ in range(3)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step_fn = torch.compile(model)
    for _ in range(6):
        with h.step():
            x = torch.randn(8, 256, 512, device="cuda")
            step_fn(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""Three pre-norm transformer blocks (width 512, SDPA attention)
        under torch.compile (default mode), AdamW, 6 steps of 8 x 256 tokens, traced from the
        start: the first step compiles (with its own benchmark and compile-time allocations),
        later steps run the compiled kernels.""")


def compile_reduce_overhead_infer(name):
    h = Harness(name)
    h.record(stacks="python")
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).cuda().eval()
    fast = torch.compile(model, mode="reduce-overhead")
    total = 0.0
    with torch.no_grad():
        for _ in range(10):
            with h.step("inference"):
                total += fast(torch.randn(512, 1024, device="cuda")).sum().item()
    h.finish(leak=False, workload="""An MLP for inference under torch.compile(mode='reduce-overhead'):
        after warm-up runs the model is captured in CUDA graphs whose memory comes from a private
        pool that stays; 10 batches of 512.""")


def cuda_graph_manual(name):
    h = Harness(name)
    h.record(stacks="python")
    model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 2048)).cuda().eval()
    static_x = torch.randn(256, 2048, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        static_y = model(static_x)
    outs = []
    for _ in range(12):
        with h.step("inference"):
            static_x.copy_(torch.randn(256, 2048, device="cuda"))
            graph.replay()
            outs.append(static_y.sum().item())
    h.finish(leak=False, workload="""An MLP captured by hand in a CUDA graph (torch.cuda.graph, after
        warm-up on a side stream) and replayed 12 times with new inputs copied into its static
        input: the capture's memory lives in the graph's private pool.""")


def compile_growing_batch_dynamic(name):
    h = Harness(name)
    h.record(stacks="python", context="alloc")
    model = nn.Sequential(nn.Linear(1024, 2048), nn.SiLU(), nn.Linear(2048, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    fn = torch.compile(model, dynamic=True)
    for batch in (128, 256, 384, 512, 768, 1024):
        with h.step():
            fn(torch.randn(batch, 1024, device="cuda")).abs().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""An MLP under torch.compile(dynamic=True), SGD, batch growing 128
        to 1024: one compiled graph for all sizes; each step's peak is higher, nothing is kept.
        Recorded with context='alloc'.""")


PROGRAMS = {f.__name__: f for f in (compile_transformer_train, compile_reduce_overhead_infer, cuda_graph_manual,
                                     compile_growing_batch_dynamic)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
