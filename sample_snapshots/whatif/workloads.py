"""Deterministic GPU workloads: what each allocator setting does to the same request stream.

Each workload is a function ``run(torch, dev)`` that builds everything it needs (seeded), runs a
few training or inference steps and lets go of it all when it returns. The same function runs:

* once under torch's defaults with ``_record_memory_history`` on: ``NAME.pickle`` (the request
  stream an allocator model replays);
* once more under torch's defaults with a per-process cap at which it runs out of memory, with
  history on and the snapshot dumped by an out-of-memory observer: ``NAME.oom.pickle``;
* in one process per allocator setting (``PYTORCH_CUDA_ALLOC_CONF`` is read at the first CUDA
  use, so each setting needs a process of its own): uncapped twice (memory_stats at the end),
  then a bisection on ``set_per_process_memory_fraction`` for the smallest cap it completes
  under, then the run at the cap the defaults ran out of memory at.

Every measured run (and both recordings) starts from the same state: one warm-up run of the
workload in the same process (so compiled code, cuBLAS/cuDNN handles and lazily loaded kernels
exist), then ``gc.collect()``, the cuBLAS workspaces cleared, ``empty_cache()`` and the
statistics reset. The allocator holds nothing at the start of each run.

    python sample_snapshots/whatif/workloads.py --out DIR [--jobs 16] [NAME ...]
    python sample_snapshots/whatif/workloads.py --smoke [NAME ...]    # each once on the CPU

``--out`` runs everything and writes ``DIR/NAME.truth.json`` next to the two pickles.
``--workloads FILE`` measures the workloads of another file with this protocol (see
``use_workloads``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import time
import traceback

MiB = 1 << 20
GiB = 1 << 30

SETTINGS = [
    "",
    "expandable_segments:True",
    "max_split_size_mb:64",
    "max_split_size_mb:256",
    "roundup_power2_divisions:4",
    "garbage_collection_threshold:0.8",
    "max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,1024:4,>:8],garbage_collection_threshold:0.8",
]
RESOLUTION = 0.01      # bisection stops when the bracket is narrower than 1% of its upper end
MAX_ENTRIES = 1_000_000
SPLIT_SEED = 26


# --------------------------------------------------------------------------- workloads

def _seed(torch) -> None:
    torch.manual_seed(0)
    random.seed(0)


def _autocast(torch, dev, dtype):
    return torch.autocast(dev.type, dtype=dtype)


def _mlp(torch, widths, dev):
    from torch import nn

    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.GELU()]
    return nn.Sequential(*layers[:-1]).to(dev)


def gpt2_varlen(torch, dev):
    """GPT-2 (4 layers, width 512, vocabulary 8192) from its transformers config, AdamW, 8
    steps of batch 8 whose sequence length changes every step (64..512 tokens)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    _seed(torch)
    cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=512, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for seq in (64, 256, 128, 512, 96, 384, 200, 448):
        ids = torch.randint(0, 8192, (8, seq), device=dev)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def llama_varlen_bf16(torch, dev):
    """A Llama (4 layers, hidden 512, grouped-query attention, eager attention) from its config,
    trained under autocast(bfloat16) with AdamW, 6 steps of batch 6 at changing lengths."""
    from transformers import LlamaConfig, LlamaForCausalLM

    _seed(torch)
    cfg = LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=4, vocab_size=8000, max_position_embeddings=1024,
                      attn_implementation="eager")
    model = LlamaForCausalLM(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for seq in (128, 320, 64, 512, 256, 480):
        ids = torch.randint(0, 8000, (6, seq), device=dev)
        with _autocast(torch, dev, torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def bert_growing_batch(torch, dev):
    """BERT (4 layers, hidden 384) for sequence classification from its config, Adam, batch
    growing 4, 8, 16, 32, 64 at 128 tokens."""
    from transformers import BertConfig, BertForSequenceClassification

    _seed(torch)
    cfg = BertConfig(hidden_size=384, num_hidden_layers=4, num_attention_heads=6, intermediate_size=1536,
                     vocab_size=8000, num_labels=4)
    model = BertForSequenceClassification(cfg).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for batch in (4, 8, 16, 32, 64):
        ids = torch.randint(0, 8000, (batch, 128), device=dev)
        labels = torch.randint(0, 4, (batch,), device=dev)
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def mlp_growing_batch(torch, dev):
    """An MLP (4096 wide, 4 layers), SGD with momentum, batch growing 1.6x per step from 256
    to 4294 over 7 steps."""
    _seed(torch)
    model = _mlp(torch, [4096] * 5, dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    batch = 256.0
    for _ in range(7):
        x = torch.randn(int(batch), 4096, device=dev)
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        batch *= 1.6


def kv_cache_cat(torch, dev):
    """Greedy decoding by hand: 6 attention layers (8 heads of 64) whose key/value caches grow
    by torch.cat every token, batch 16, a 64-token prompt then 320 new tokens, no grad."""
    import torch.nn.functional as F

    _seed(torch)
    layers, heads, hd, batch, width = 6, 8, 64, 16, 512
    w = [(torch.randn(width, 3 * width, device=dev) * 0.02, torch.randn(width, width, device=dev) * 0.02,
          torch.randn(width, 4 * width, device=dev) * 0.02, torch.randn(4 * width, width, device=dev) * 0.02)
         for _ in range(layers)]
    cache = [None] * layers
    with torch.no_grad():
        h = torch.randn(batch, 64, width, device=dev)
        for _ in range(321):
            x = h
            for i, (wqkv, wo, w1, w2) in enumerate(w):
                q, k, v = (x @ wqkv).split(width, dim=-1)
                q, k, v = (t.view(batch, -1, heads, hd).transpose(1, 2) for t in (q, k, v))
                if cache[i] is None:
                    cache[i] = (k, v)
                else:
                    cache[i] = (torch.cat([cache[i][0], k], dim=2), torch.cat([cache[i][1], v], dim=2))
                att = F.softmax(q @ cache[i][0].transpose(-1, -2) / hd ** 0.5, dim=-1) @ cache[i][1]
                x = x + att.transpose(1, 2).reshape(batch, -1, width) @ wo
                x = x + F.gelu(x @ w1) @ w2
            h = x[:, -1:, :]
    del cache


def llama_dynamic_cache_generate(torch, dev):
    """A Llama (4 layers, hidden 512) from its config generating 160 tokens greedily for a
    batch of 4 with transformers' own cache (DynamicCache grows its tensors by torch.cat)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    _seed(torch)
    cfg = LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=8, vocab_size=8000, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).to(dev).eval()
    ids = torch.randint(0, 8000, (4, 96), device=dev)
    past = None
    with torch.no_grad():
        for _ in range(160):
            out = model(input_ids=ids if past is None else ids[:, -1:], past_key_values=past, use_cache=True)
            past = out.past_key_values
            ids = torch.cat([ids, out.logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            del out
    del past


def _timm_train(torch, dev, name, sizes, batch, opt_name="sgd", dtype=None, scaler=False, **kw):
    import timm

    _seed(torch)
    model = timm.create_model(name, pretrained=False, **kw).to(dev)
    opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if opt_name == "sgd"
           else torch.optim.AdamW(model.parameters(), lr=1e-3))
    grad_scaler = torch.amp.GradScaler(dev.type, init_scale=1024.0) if scaler else None
    for size in sizes:
        x = torch.randn(batch, 3, size, size, device=dev)
        y = torch.randint(0, kw.get("num_classes", 10), (batch,), device=dev)
        if dtype is not None:
            with _autocast(torch, dev, dtype):
                loss = torch.nn.functional.cross_entropy(model(x), y)
        else:
            loss = torch.nn.functional.cross_entropy(model(x), y)
        if grad_scaler is not None:
            grad_scaler.scale(loss).backward()
            grad_scaler.step(opt)
            grad_scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)


def resnet18_timm(torch, dev):
    """timm's resnet18 (100 classes), SGD with momentum, 4 steps of 32 images at 128 px."""
    _timm_train(torch, dev, "resnet18", (128,) * 4, 32, num_classes=100)


def efficientnet_varres_bf16(torch, dev):
    """timm's efficientnet_b0 (10 classes) under autocast(bfloat16), AdamW, batch 24 at image
    sizes changing every step (96, 160, 128, 192, 112)."""
    _timm_train(torch, dev, "efficientnet_b0", (96, 160, 128, 192, 112), 24, "adamw", torch.bfloat16,
                num_classes=10)


def convnext_fp16_scaler(torch, dev):
    """timm's convnext_atto (10 classes) under autocast(float16) with GradScaler, AdamW, 4 steps of
    32 images at 128 px."""
    _timm_train(torch, dev, "convnext_atto", (128,) * 4, 32, "adamw", torch.float16, scaler=True, num_classes=10)


def vit_train_eval(torch, dev):
    """timm's vit_tiny_patch16_224 (10 classes): 2 training steps of batch 32, an evaluation of
    batch 128 under no_grad, 2 more training steps, another evaluation; AdamW."""
    import timm

    _seed(torch)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        for _ in range(2):
            model.train()
            x = torch.randn(32, 3, 224, 224, device=dev)
            y = torch.randint(0, 10, (32,), device=dev)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        model.eval()
        with torch.no_grad():
            model(torch.randn(128, 3, 224, 224, device=dev)).argmax(-1)


def gpt2_fp16_scaler(torch, dev):
    """GPT-2 (6 layers, width 384) from its config under autocast(float16) with GradScaler,
    AdamW, 6 steps of batch 8 at changing lengths."""
    from transformers import GPT2Config, GPT2LMHeadModel

    _seed(torch)
    cfg = GPT2Config(n_layer=6, n_embd=384, n_head=6, vocab_size=8192, n_positions=512, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(dev.type, init_scale=1024.0)
    for seq in (384, 128, 512, 256, 448, 64):
        ids = torch.randint(0, 8192, (8, seq), device=dev)
        with _autocast(torch, dev, torch.float16):
            loss = model(input_ids=ids, labels=ids).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


def gpt2_grad_checkpointing(torch, dev):
    """GPT-2 (8 layers, width 512) with transformers' gradient checkpointing, AdamW, 3 steps of
    batch 8 at 256, 512 and 384 tokens."""
    from transformers import GPT2Config, GPT2LMHeadModel

    _seed(torch)
    cfg = GPT2Config(n_layer=8, n_embd=512, n_head=8, vocab_size=8192, n_positions=512, use_cache=False, bos_token_id=0,
                     eos_token_id=0)
    model = GPT2LMHeadModel(cfg).to(dev)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for seq in (256, 512, 384):
        ids = torch.randint(0, 8192, (8, seq), device=dev)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def checkpoint_blocks_varbatch(torch, dev):
    """Six residual MLP blocks (1536 wide) each under torch.utils.checkpoint (non-reentrant),
    Adam, batches 512, 2048, 1024, 4096, 768."""
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    _seed(torch)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(1536)
            self.up = nn.Linear(1536, 4 * 1536)
            self.down = nn.Linear(4 * 1536, 1536)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    blocks = nn.ModuleList([Block() for _ in range(6)]).to(dev)
    opt = torch.optim.Adam(blocks.parameters(), lr=1e-4)
    for batch in (512, 2048, 1024, 4096, 768):
        h = torch.randn(batch, 1536, device=dev)
        for block in blocks:
            h = checkpoint(block, h, use_reentrant=False)
        h.square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def multistream_record_stream(torch, dev):
    """Two loader streams make batches of changing size that the default stream consumes:
    each batch is handed over with wait_stream + record_stream and dropped while the default
    stream's kernels still use it (frees completed only when those kernels end); an MLP
    (1024 wide) trains on them with SGD, 12 steps."""
    _seed(torch)
    model = _mlp(torch, [1024] * 4, dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    cuda = dev.type == "cuda"
    streams = [torch.cuda.Stream() for _ in range(2)] if cuda else [None, None]
    main = torch.cuda.current_stream() if cuda else None
    for step in range(12):
        side = streams[step % 2]
        batch = (512, 1536, 1024, 3072)[step % 4]
        if cuda:
            with torch.cuda.stream(side):
                x = torch.randn(batch, 1024, device=dev) * 2.0
                extra = torch.randn(batch * 4, 1024, device=dev)
            main.wait_stream(side)
            x.record_stream(main)
            extra.record_stream(main)
        else:
            x = torch.randn(batch, 1024, device=dev) * 2.0
            extra = torch.randn(batch * 4, 1024, device=dev)
        loss = model(x).square().mean() + extra.mean()
        del x, extra
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def _compiled_fns(torch):
    """The compiled functions live in the module so later runs reuse the code compiled in the
    warm-up run (dynamo guards on shapes, not on which tensors are passed)."""
    global _COMPILED
    if "_COMPILED" in globals():
        return _COMPILED
    import torch.nn.functional as F

    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)

    def mlp(x, w1, b1, w2, b2, w3, b3):
        h = F.gelu(F.linear(x, w1, b1))
        h = F.gelu(F.linear(h, w2, b2))
        return F.linear(h, w3, b3)

    def attn_block(x, wqkv, wo, w1, w2, g1, g2):
        b, s, d = x.shape
        h = F.layer_norm(x, (d,), g1)
        q, k, v = F.linear(h, wqkv).view(b, s, 3, 8, d // 8).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + F.linear(a, wo)
        return x + F.linear(F.gelu(F.linear(F.layer_norm(x, (d,), g2), w1)), w2)

    backend = os.environ.get("WHATIF_COMPILE_BACKEND", "inductor")
    _COMPILED = (torch.compile(mlp, backend=backend), torch.compile(attn_block, dynamic=False, backend=backend))
    return _COMPILED


def compile_mlp_varbatch(torch, dev):
    """A three-layer MLP (1024 -> 4096 -> 4096 -> 1024) written as a function under
    torch.compile (default mode), SGD by hand, batches 256, 1024, 512, 2048, 1536."""
    mlp, _ = _compiled_fns(torch)
    _seed(torch)
    shapes = [(4096, 1024), (4096,), (4096, 4096), (4096,), (1024, 4096), (1024,)]
    params = [(torch.randn(s, device=dev) * 0.02).requires_grad_() for s in shapes]
    for batch in (256, 1024, 512, 2048, 1536):
        x = torch.randn(batch, 1024, device=dev)
        mlp(x, *params).square().mean().backward()
        with torch.no_grad():
            for p in params:
                p -= 1e-3 * p.grad
                p.grad = None


def compile_attention_block(torch, dev):
    """Four pre-norm attention blocks (width 512, 8 heads, SDPA) written as one function under
    torch.compile(dynamic=False), Adam, batch 8 at 128, 384, 256, 512 tokens."""
    _, block = _compiled_fns(torch)
    _seed(torch)
    d = 512
    layers = [[(torch.randn(s, device=dev) * 0.02).requires_grad_() for s in
               ((3 * d, d), (d, d), (4 * d, d), (d, 4 * d))] + [torch.ones(d, device=dev, requires_grad=True)
                                                                  for _ in range(2)] for _ in range(4)]
    opt = torch.optim.Adam([p for layer in layers for p in layer], lr=1e-4)
    for seq in (128, 384, 256, 512):
        x = torch.randn(8, seq, d, device=dev)
        for layer in layers:
            x = block(x, *layer)
        x.square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def cuda_graph_infer_train(torch, dev):
    """An MLP scorer (2048 wide) captured in a CUDA graph (torch.cuda.graph: a private memory
    pool) and replayed between eager training steps of a second MLP whose batch grows (256 ..
    4096); the graph is released at the end."""
    _seed(torch)
    scorer = _mlp(torch, [2048] * 4, dev).eval()
    static_in = torch.randn(512, 2048, device=dev)
    graph = None
    if dev.type == "cuda":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(2):
                scorer(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), torch.no_grad():
            static_out = scorer(static_in)
    model = _mlp(torch, [2048] * 4, dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for batch in (256, 1024, 512, 2048, 4096, 1024):
        x = torch.randn(batch, 2048, device=dev)
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        static_in.copy_(torch.randn(512, 2048, device=dev))
        if graph is not None:
            graph.replay()
            static_out.sum().item()
    del graph


def fragmenting_buffers(torch, dev):
    """A data pipeline by hand: a rolling window of 12 buffers of pseudo-random size (1..48 MiB,
    fixed seed) where the oldest is dropped as a new one comes, and every 8th step a large
    batch (160..400 MiB) is built, reduced and dropped; 96 steps."""
    rng = random.Random(7)
    window = []
    for step in range(96):
        window.append(torch.empty(rng.randint(1, 48) * MiB + rng.randint(0, 4095) * 16, dtype=torch.uint8,
                                  device=dev))
        if len(window) > 12:
            window.pop(0)
        if step % 8 == 7:
            big = torch.empty(rng.randint(160, 400) * MiB // 4, dtype=torch.float32, device=dev)
            big.fill_(1.0)
            big.sum()
            del big
    del window


def t5_seq2seq_varlen(torch, dev):
    """T5 (4 encoder and 4 decoder layers, d_model 256) from its config, AdamW, 5 steps of batch
    16 with source and target lengths that change every step."""
    from transformers import T5Config, T5ForConditionalGeneration

    _seed(torch)
    cfg = T5Config(d_model=256, d_ff=1024, d_kv=32, num_layers=4, num_decoder_layers=4, num_heads=8,
                   vocab_size=8000, decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for src, tgt in ((128, 32), (384, 96), (64, 128), (512, 64), (256, 160)):
        ids = torch.randint(1, 8000, (16, src), device=dev)
        labels = torch.randint(1, 8000, (16, tgt), device=dev)
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def unet_conv_growing(torch, dev):
    """A small U-Net (conv, batch norm, ReLU; three levels; skip connections joined by torch.cat),
    Adam, batch growing 2, 4, 8, 12 at 128x128."""
    from torch import nn

    _seed(torch)

    def cbr(a, b):
        return nn.Sequential(nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2, self.d3 = cbr(3, 32), cbr(32, 64), cbr(64, 128)
            self.u2, self.u1 = cbr(128 + 64, 64), cbr(64 + 32, 32)
            self.head = nn.Conv2d(32, 2, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(nn.functional.max_pool2d(a, 2))
            c = self.d3(nn.functional.max_pool2d(b, 2))
            b = self.u2(torch.cat([nn.functional.interpolate(c, scale_factor=2.0), b], 1))
            return self.head(self.u1(torch.cat([nn.functional.interpolate(b, scale_factor=2.0), a], 1)))

    model = UNet().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for batch in (2, 4, 8, 12):
        x = torch.randn(batch, 3, 128, 128, device=dev)
        y = torch.randint(0, 2, (batch, 128, 128), device=dev)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


WORKLOADS = {f.__name__: f for f in (
    gpt2_varlen, llama_varlen_bf16, bert_growing_batch, mlp_growing_batch, kv_cache_cat,
    llama_dynamic_cache_generate, resnet18_timm, efficientnet_varres_bf16, convnext_fp16_scaler, vit_train_eval,
    gpt2_fp16_scaler, gpt2_grad_checkpointing, checkpoint_blocks_varbatch, multistream_record_stream,
    compile_mlp_varbatch, compile_attention_block, cuda_graph_infer_train, fragmenting_buffers,
    t5_seq2seq_varlen, unet_conv_growing)}


WORKLOADS_FILE = None  # --workloads FILE: the registry (and split) come from that file
SPLIT = None           # that file's SPLIT: the split every one of its workloads gets


def use_workloads(path: str) -> None:
    """Measure the workloads of ``path`` instead of this file's: a Python file defining
    ``WORKLOADS`` (name -> function), and optionally ``SPLIT`` (the split all of them get) and
    ``FRESH_TRIALS`` (names whose capped trials need fresh processes, as below)."""
    import importlib.util

    global WORKLOADS, WORKLOADS_FILE, SPLIT, FRESH_TRIALS
    WORKLOADS_FILE = os.path.abspath(path)
    spec = importlib.util.spec_from_file_location("whatif_workloads_file", WORKLOADS_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    WORKLOADS = dict(module.WORKLOADS)
    SPLIT = getattr(module, "SPLIT", None)
    FRESH_TRIALS = set(getattr(module, "FRESH_TRIALS", ()))


def split_of() -> dict[str, str]:
    """Half the workloads build the model, half are held out: a fixed-seed shuffle (a file given
    with ``--workloads`` that sets ``SPLIT`` puts all of its workloads in that split)."""
    if SPLIT is not None:
        return dict.fromkeys(WORKLOADS, SPLIT)
    names = sorted(WORKLOADS)
    random.Random(SPLIT_SEED).shuffle(names)
    half = len(names) // 2
    return {name: ("build" if i < half else "heldout") for i, name in enumerate(names)}


# --------------------------------------------------------------------------- one process

def _is_oom(exc: BaseException) -> bool:
    import torch

    text = str(exc)
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text or "ALLOC_FAILED" in text


def _clean(torch) -> dict:
    """Let go of everything a run left: the allocator holds nothing afterwards."""
    gc.collect()
    torch.cuda.synchronize()
    if hasattr(torch._C, "_cuda_clearCublasWorkspaces"):
        torch._C._cuda_clearCublasWorkspaces()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()
    return {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}


STAT_KEYS = ("reserved_bytes.all.peak", "allocated_bytes.all.peak", "num_alloc_retries", "num_ooms",
             "allocation.all.allocated", "segment.all.allocated", "segment.all.freed", "num_sync_all_streams",
             "num_device_alloc", "num_device_free", "oversize_allocations.allocated")


class Trial:
    """One run of the workload from a clean allocator, under an optional cap.

    Python's automatic garbage collection is off during the run (``gc.collect()`` runs between
    runs): a cycle collected at a different moment in two processes would change the request
    stream, and the truth must describe the stream that was recorded.
    """

    def __init__(self, torch, fn, total: int) -> None:
        self.torch, self.fn, self.total = torch, fn, total
        self.ooms: list[dict] = []
        if hasattr(torch._C, "_cuda_attach_out_of_memory_observer"):
            torch._C._cuda_attach_out_of_memory_observer(self._observe)
        self.hook = None

    def _observe(self, device, segment_size, limit, device_free) -> None:
        # torch passes the size of the segment it tried to create (the request rounded up to a
        # segment: 2 MiB, 20 MiB or a 2 MiB multiple) and the limit (the cap, or the device's memory).
        torch = self.torch
        self.ooms.append({"segment_size": int(segment_size), "limit": int(limit),
                          "device_free": int(device_free),
                          "served_before": int(torch.cuda.memory_stats().get("allocation.all.allocated", 0)),
                          "reserved_at_oom": int(torch.cuda.memory_reserved()),
                          "allocated_at_oom": int(torch.cuda.memory_allocated())})
        if self.hook is not None:
            self.hook()

    def cap_fraction(self, cap: int | None) -> tuple[float, int]:
        fraction = 1.0 if cap is None else min(1.0, cap / self.total)
        return fraction, int(fraction * float(self.total))

    def run(self, cap: int | None = None, set_cap: bool = True) -> dict:
        torch = self.torch
        start = _clean(torch)
        result: dict = {"cap_bytes": None, "start": start, "gc_during_run": "disabled"}
        if cap is not None and set_cap:
            fraction, effective = self.cap_fraction(cap)
            torch.cuda.set_per_process_memory_fraction(fraction)
            result.update(cap_bytes=effective, fraction=fraction)
        self.ooms = []
        t0 = time.time()
        error = None
        gc.disable()
        try:
            self.fn(torch, torch.device("cuda"))
            torch.cuda.synchronize()
            result["completed"] = True
        except Exception as exc:  # noqa: BLE001 - an OOM is the expected failure; others are reported
            result["completed"] = False
            error = (type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "", _is_oom(exc))
            if not error[2]:
                result["traceback"] = traceback.format_exc()[-1500:]
            del exc
        finally:
            gc.enable()
        result["seconds"] = round(time.time() - t0, 3)
        stats = torch.cuda.memory_stats()
        result["stats"] = {k: int(stats.get(k, 0)) for k in STAT_KEYS}
        if error is not None:
            result["error"] = {"type": error[0], "message": error[1], "oom": error[2]}
        # The last OOM is the one that ended the run; earlier ones were caught inside torch
        # (cuDNN tries a plan with a smaller workspace when a workspace request fails).
        result["oom"] = self.ooms[-1] if self.ooms and not result["completed"] else None
        result["ooms_observed"] = len(self.ooms)
        if self.ooms and (result["completed"] or len(self.ooms) > 1):
            result["first_oom"] = self.ooms[0]
        return result


def _trial_summary(t: dict) -> dict:
    return {"cap_bytes": t["cap_bytes"], "completed": t["completed"],
            "reserved_peak": t["stats"]["reserved_bytes.all.peak"], "served": t["stats"]["allocation.all.allocated"],
            "num_alloc_retries": t["stats"]["num_alloc_retries"], "num_ooms": t["stats"]["num_ooms"],
            "oom": t["oom"], "seconds": t["seconds"]}


def bisect(run_at, first: dict) -> tuple[list, list]:
    """The smallest cap the workload completes under: ``[fails, passes]`` within RESOLUTION.

    ``run_at(cap)`` runs the workload under ``cap`` and returns the trial's result; ``first``
    is the uncapped run. Starts from the uncapped reserved peak (passes) and just under the
    allocated peak (cannot pass unless torch falls back to smaller workspaces), and checks
    both ends by running them.
    """
    trials = []
    hi = first["stats"]["reserved_bytes.all.peak"]
    lo = int(first["stats"]["allocated_bytes.all.peak"] * 0.995)
    lo_seen = False
    for _ in range(12):
        r = run_at(hi)
        trials.append(r)
        if r["completed"]:
            break
        lo, lo_seen, hi = hi, True, int(hi * 1.03)
    else:
        raise RuntimeError("no passing cap found")
    hi = trials[-1]["cap_bytes"]
    while hi - lo > RESOLUTION * hi or not lo_seen:
        mid = (lo + hi) // 2 if hi - lo > RESOLUTION * hi else lo
        r = run_at(mid)
        trials.append(r)
        if r["completed"]:
            hi = r["cap_bytes"]
            if mid == lo:
                lo = int(lo * 0.95)
        else:
            if r.get("error") and not r["error"]["oom"]:
                raise RuntimeError("a capped run failed with something other than an OOM")
            lo, lo_seen = r["cap_bytes"], True
        if len(trials) > 40:
            raise RuntimeError("bisection did not converge")
    return [lo, hi], trials


def _prepared(name: str):
    import torch

    total = torch.cuda.get_device_properties(0).total_memory
    trial = Trial(torch, WORKLOADS[name], total)
    warm = trial.run()
    return torch, total, trial, {"completed": warm["completed"], "seconds": warm["seconds"],
                                 "error": warm.get("error")}


def measure(name: str, setting: str, oom_cap: str | None, path: str, bisection: bool = True) -> None:
    """Uncapped twice, bisection for the smallest cap, then the run at ``oom_cap``."""
    out: dict = {"workload": name, "settings": setting, "env": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                 "trials_in": "this process"}

    def save() -> None:
        _write_json(path, out)

    torch = None
    try:
        torch, total, trial, out["warmup"] = _prepared(name)
        out["device_total"] = total
        first = trial.run()
        second = trial.run()
        out["uncapped"] = first
        out["uncapped_repeat"] = second
        keys = ("allocation.all.allocated", "reserved_bytes.all.peak")
        out["repeatable"] = all(first["stats"][k] == second["stats"][k] for k in keys)
        save()
        if not first["completed"]:
            raise RuntimeError("the uncapped run did not complete")
        if bisection:
            bracket, trials = bisect(trial.run, first)
            out["bisection"] = {"bracket": bracket, "trials": [_trial_summary(t) for t in trials]}
            save()
            if oom_cap is not None:
                out["capped"] = trial.run(bracket[0] if oom_cap == "auto" else int(oom_cap))
    except Exception:  # noqa: BLE001 - reported in the result file for the orchestrator
        out["failure"] = traceback.format_exc()[-3000:]
    if torch is not None:
        out["torch"] = torch.__version__
        out["gpu"] = torch.cuda.get_device_name(0)
    save()


def one_trial(name: str, cap: int, path: str) -> None:
    """A fresh process: the warm-up run, then one run under ``cap``."""
    out: dict = {"workload": name}
    try:
        _, _, trial, out["warmup"] = _prepared(name)
        out["run"] = trial.run(cap)
    except Exception:  # noqa: BLE001
        out["failure"] = traceback.format_exc()[-3000:]
    _write_json(path, out)


def record(name: str, cap: int | None, snap_path: str, path: str, stacks: str, context: str | None) -> None:
    """One run under the defaults with history on; with ``cap``, the snapshot is taken by the
    OOM observer at every OOM, so the file left is the one taken at the OOM that ended the run."""
    import pickle

    out: dict = {"workload": name, "env": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "stacks": stacks,
                 "context": context, "max_entries": MAX_ENTRIES}
    try:
        torch, total, trial, out["warmup"] = _prepared(name)
        out["state_at_trace_start"] = _clean(torch)
        if cap is not None:
            fraction, effective = trial.cap_fraction(cap)
            torch.cuda.set_per_process_memory_fraction(fraction)
            out["cap_bytes"], out["fraction"] = effective, fraction
            trial.hook = lambda: torch.cuda.memory._dump_snapshot(snap_path)
        torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES, stacks=stacks, context=context)
        r = trial.run(cap, set_cap=False)
        trial.hook = None
        if cap is None or not r["oom"]:
            torch.cuda.memory._dump_snapshot(snap_path)
        torch.cuda.memory._record_memory_history(enabled=None)
        out["run"] = r
        with open(snap_path, "rb") as f:
            snap = pickle.load(f)
        trace = snap["device_traces"][0]
        out["trace_entries"] = len(trace)
        out["trace_actions"] = {}
        for e in trace:
            out["trace_actions"][e["action"]] = out["trace_actions"].get(e["action"], 0) + 1
        out["segments_at_dump"] = len(snap["segments"])
        ooms = [e for e in trace if e["action"] == "oom"]
        if ooms:
            out["oom_request_size"] = ooms[-1]["size"]
        out["ring_buffer_wrapped"] = len(trace) >= MAX_ENTRIES
    except Exception:  # noqa: BLE001
        out["failure"] = traceback.format_exc()[-3000:]
    _write_json(path, out)


def _write_json(path: str, obj) -> None:
    with open(path + ".part", "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(path + ".part", path)


# --------------------------------------------------------------------------- orchestration

# cuDNN keeps the plan that worked after a workspace request failed, for the rest of the
# process: a bisection inside one process would measure a program that has already fallen
# back. These workloads run each capped trial in a fresh process instead.
FRESH_TRIALS = {"resnet18_timm", "efficientnet_varres_bf16", "convnext_fp16_scaler", "unet_conv_growing"}
RECORD_ATTEMPTS = [("python", "all"), ("all", "all"), ("python", "alloc"), ("python", None)]


class Orchestrator:
    def __init__(self, out: str, jobs: int, deadline: float, proc_timeout: float, resume: bool = False) -> None:
        import threading
        from concurrent.futures import ThreadPoolExecutor

        self.out, self.raw, self.resume = out, os.path.join(out, "raw"), resume
        os.makedirs(self.raw, exist_ok=True)
        self.start, self.deadline, self.proc_timeout = time.time(), deadline, proc_timeout
        self.pool = ThreadPoolExecutor(max_workers=jobs)
        self.lock = threading.Lock()
        self.pending = 0
        self.idle = threading.Event()
        self.log = open(os.path.join(self.raw, "processes.log"), "a")

    def submit(self, fn, *args) -> None:
        with self.lock:
            self.pending += 1
            self.idle.clear()

        def task() -> None:
            try:
                if time.time() - self.start < self.deadline:
                    fn(*args)
                else:
                    print(f"deadline: not started {fn.__name__}{args}", flush=True)
            except Exception:  # noqa: BLE001
                traceback.print_exc()
            finally:
                with self.lock:
                    self.pending -= 1
                    if self.pending == 0:
                        self.idle.set()
        self.pool.submit(task)

    def proc(self, args: list[str], setting: str) -> int:
        if time.time() - self.start > self.deadline + self.proc_timeout:
            return -1                           # past the hard end: a bisection stops here
        env = {**os.environ, "PYTORCH_CUDA_ALLOC_CONF": setting, "PYTHONUNBUFFERED": "1",
               "TORCHINDUCTOR_COMPILE_THREADS": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        if not setting:
            env.pop("PYTORCH_CUDA_ALLOC_CONF")
        if WORKLOADS_FILE:
            args = ["--workloads", WORKLOADS_FILE, *args]
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), *args], env=env, stdout=self.log,
                             stderr=subprocess.STDOUT)
        try:
            return p.wait(timeout=self.proc_timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            print(f"timeout: {args}", flush=True)
            return -9

    def say(self, text: str) -> None:
        print(f"{time.time() - self.start:6.0f}s {text}", flush=True)

    def measure(self, name: str, idx: int, oom_cap: str | None) -> None:
        result = f"{self.raw}/{name}.s{idx}.json"
        args = ["--measure", name, "--setting-index", str(idx), "--result", result]
        done = _load(result) or {}
        if self.resume and done.get("bisection") and not done.get("failure"):
            pass                                # measured by an earlier run into this folder
        elif name in FRESH_TRIALS:
            self.proc(args + ["--no-bisection"], SETTINGS[idx])
            self.fresh_bisection(name, idx, oom_cap, result)
        else:
            self.proc(args + (["--oom-cap", oom_cap] if oom_cap else []), SETTINGS[idx])
        self.say(f"measured {name} [{SETTINGS[idx]}]")
        if idx == 0:
            bracket = ((_load(result) or {}).get("bisection") or {}).get("bracket")
            cap = str(bracket[0]) if bracket else None
            if cap:
                self.submit(self.record, name, int(cap))
            for i in range(1, len(SETTINGS)):
                self.submit(self.measure, name, i, cap)

    def fresh_bisection(self, name: str, idx: int, oom_cap: str | None, result: str) -> None:
        out = _load(result) or {}
        first = out.get("uncapped")
        if not first or not first.get("completed"):
            return
        out["trials_in"] = "a fresh process each (warm-up run, then the capped run)"
        count = [0]

        def run_at(cap: int) -> dict:
            count[0] += 1
            path = f"{self.raw}/{name}.s{idx}.trial{count[0]}.json"
            self.proc(["--trial", name, "--cap", str(cap), "--result", path], SETTINGS[idx])
            res = _load(path) or {}
            if "run" not in res:
                raise RuntimeError(f"trial process failed: {res.get('failure', 'no result')[-500:]}")
            return res["run"]
        try:
            bracket, trials = bisect(run_at, first)
            out["bisection"] = {"bracket": bracket, "trials": [_trial_summary(t) for t in trials]}
            _write_json(result, out)
            if oom_cap is not None or idx == 0:
                out["capped"] = run_at(bracket[0] if idx == 0 else int(oom_cap))
        except Exception:  # noqa: BLE001
            out["failure"] = traceback.format_exc()[-3000:]
        _write_json(result, out)

    def record(self, name: str, cap: int | None) -> None:
        stem = f"{name}.oom" if cap else name
        if self.resume and os.path.exists(os.path.join(self.out, stem + ".pickle")):
            return
        for attempt, (stacks, context) in enumerate(RECORD_ATTEMPTS):
            path = f"{self.raw}/{stem}.rec{attempt}.json"
            args = ["--record", name, "--snap", os.path.join(self.out, stem + ".pickle"), "--result", path,
                    "--stacks", stacks, "--context", str(context)]
            self.proc(args + (["--cap", str(cap)] if cap else []), "")
            res = _load(path) or {}
            err = (res.get("run") or {}).get("error")
            if res.get("run") and not (err and not err["oom"]) and not res.get("failure"):
                break
        self.say(f"recorded {stem} after {attempt + 1} attempt(s)")

    def run(self, names: list[str]) -> None:
        for name in sorted(names, key=lambda n: (n not in FRESH_TRIALS, not n.startswith("compile_"))):
            self.submit(self.record, name, None)
            self.submit(self.measure, name, 0, "auto")
        self.idle.wait()
        self.pool.shutdown()
        for name in names:
            assemble(self.out, name)


def _load(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _recording(raw: str, stem: str) -> dict | None:
    """The last recording attempt of ``stem`` (earlier attempts failed), with their errors."""
    attempts = [_load(f"{raw}/{stem}.rec{i}.json") for i in range(len(RECORD_ATTEMPTS))]
    attempts = [a for a in attempts if a is not None] or [a for a in [_load(f"{raw}/{stem}.rec.json")] if a]
    if not attempts:
        return None
    rec = dict(attempts[-1])
    rec.setdefault("stacks", "python")
    rec.setdefault("context", "all")
    rec["failed_attempts"] = [{"stacks": a.get("stacks"), "context": a.get("context"),
                               "error": (a.get("run") or {}).get("error"), "failure": a.get("failure")}
                              for a in attempts[:-1]]
    return rec


def assemble(out: str, name: str) -> None:
    """NAME.truth.json from the raw results of its processes."""
    raw = os.path.join(out, "raw")
    rec, oom_rec = _recording(raw, name), _recording(raw, f"{name}.oom")
    results = [_load(f"{raw}/{name}.s{i}.json") for i in range(len(SETTINGS))]
    default = results[0] or {}
    d_capped = default.get("capped") or {}
    d_served = (d_capped.get("oom") or {}).get("served_before")
    truth: dict = {
        "workload": name, "description": " ".join(WORKLOADS[name].__doc__.split()),
        "split": split_of()[name], "gpu": default.get("gpu"), "torch": default.get("torch"),
        "device_total": default.get("device_total"),
        "protocol": {
            "warmup": "one uncapped run of the workload in the same process before every measured run; then "
                      "gc.collect(), cuBLAS workspaces cleared, empty_cache(), statistics reset",
            "gc_during_runs": (default.get("uncapped") or {}).get("gc_during_run", "enabled"),
            "bisection_trials_in": default.get("trials_in", "this process"),
            "resolution": RESOLUTION},
        "settings": [],
    }
    for key, r, file in (("recording", rec, f"{name}.pickle.xz"), ("oom_recording", oom_rec, f"{name}.oom.pickle.xz")):
        if r is None:
            truth[key] = None
            continue
        run = r.get("run") or {}
        st = run.get("stats", {})
        entry = {"file": file, "settings": "", "max_entries": r.get("max_entries", MAX_ENTRIES),
                 "stacks": r["stacks"], "context": r["context"], "trace_entries": r.get("trace_entries"),
                 "trace_actions": r.get("trace_actions"), "ring_buffer_wrapped": r.get("ring_buffer_wrapped"),
                 "state_at_trace_start": r.get("state_at_trace_start"), "completed": run.get("completed"),
                 "error": run.get("error"), "reserved_peak": st.get("reserved_bytes.all.peak"),
                 "allocated_peak": st.get("allocated_bytes.all.peak"), "served": st.get("allocation.all.allocated"),
                 "num_ooms": st.get("num_ooms"), "failed_attempts": r["failed_attempts"], "failure": r.get("failure")}
        if key == "oom_recording":
            entry.update(cap_bytes=r.get("cap_bytes"), fraction=r.get("fraction"), oom=run.get("oom"),
                         request_size=r.get("oom_request_size"),
                         first_oom=run.get("first_oom"),
                         dumped_by="out-of-memory observer at the OOM that ended the run")
        truth[key] = entry
    for setting, res in zip(SETTINGS, results):
        entry: dict = {"settings": setting}
        if res is None:
            entry["missing"] = True
            truth["settings"].append(entry)
            continue
        un = res.get("uncapped") or {}
        st = un.get("stats", {})
        entry.update({
            "reserved_peak": st.get("reserved_bytes.all.peak"), "allocated_peak": st.get("allocated_bytes.all.peak"),
            "num_alloc_retries": st.get("num_alloc_retries"), "num_ooms": st.get("num_ooms"),
            "served": st.get("allocation.all.allocated"), "segments_allocated": st.get("segment.all.allocated"),
            "completed": un.get("completed"), "repeatable": res.get("repeatable"),
            "repeat_reserved_peak": (res.get("uncapped_repeat") or {}).get("stats", {}).get("reserved_bytes.all.peak")})
        bis = res.get("bisection")
        if bis:
            entry["min_cap_bracket"] = bis["bracket"]
            entry["bisection_trials"] = bis["trials"]
            entry["passed_after_caught_oom"] = any(t["completed"] and t["num_ooms"] for t in bis["trials"])
        cap = res.get("capped")
        if cap:
            cs = cap.get("stats", {})
            served = cs.get("allocation.all.allocated")
            entry["at_default_oom_cap"] = {
                "cap_bytes": cap.get("cap_bytes"), "completed": cap.get("completed"), "oom": cap.get("oom"),
                "error": cap.get("error"), "served": served, "num_ooms": cs.get("num_ooms"),
                "num_alloc_retries": cs.get("num_alloc_retries"), "reserved_peak": cs.get("reserved_bytes.all.peak"),
                "served_default_failed_request": None if d_served is None or served is None else
                bool(cap.get("completed")) or served > d_served}
        if res.get("failure"):
            entry["failure"] = res["failure"]
        truth["settings"].append(entry)
    if rec and default.get("uncapped"):
        d_st = default["uncapped"]["stats"]
        truth["recording_matches_default_run"] = (rec.get("run") or {}).get("stats", {}).get(
            "allocation.all.allocated") == d_st["allocation.all.allocated"]
    if oom_rec and d_capped.get("oom"):
        truth["oom_recording_matches_default_capped_run"] = (
            ((oom_rec.get("run") or {}).get("oom") or {}).get("served_before") == d_served)
    with open(os.path.join(out, f"{name}.truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)
        f.write("\n")


def table(out: str) -> str:
    """The README's table: one row per truth file in ``out``."""
    import glob

    short = {"": "default", "expandable_segments:True": "expandable", "max_split_size_mb:64": "split64",
             "max_split_size_mb:256": "split256", "roundup_power2_divisions:4": "pow2/4",
             "garbage_collection_threshold:0.8": "gc0.8", SETTINGS[-1]: "combo"}
    rows = ["| workload | split | trace events (oom file) | reserved peak, MiB: " + ", ".join(
        short[s] for s in SETTINGS) + " | served at the default's OOM cap |", "| --- | --- | --- | --- | --- |"]
    for path in sorted(glob.glob(os.path.join(out, "*.truth.json"))):
        with open(path) as f:
            t = json.load(f)
        peaks = ", ".join("-" if s.get("reserved_peak") is None else str(s["reserved_peak"] >> 20)
                          for s in t["settings"])
        rescued = []
        for s in t["settings"][1:]:
            capped = s.get("at_default_oom_cap") or {}
            if capped.get("served_default_failed_request"):
                rescued.append(short[s["settings"]] + ("" if capped.get("completed") else " (then OOM)"))
        rec, oom = t.get("recording") or {}, t.get("oom_recording") or {}
        rows.append(f"| `{t['workload']}` | {t['split']} | {rec.get('trace_entries')} ({oom.get('trace_entries')}) "
                    f"| {peaks} | {', '.join(rescued) or 'none'} |")
    return "\n".join(rows)


def smoke(names: list[str]) -> int:
    import torch

    os.environ["WHATIF_COMPILE_BACKEND"] = "eager"
    bad = 0
    for name in names:
        t0 = time.time()
        try:
            WORKLOADS[name](torch, torch.device("cpu"))
            print(f"ok   {name} {time.time() - t0:.1f}s", flush=True)
        except Exception:  # noqa: BLE001
            bad += 1
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out")
    p.add_argument("--jobs", type=int, default=16)
    p.add_argument("--deadline", type=float, default=420.0, help="seconds after which no process starts")
    p.add_argument("--proc-timeout", type=float, default=240.0)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--measure")
    p.add_argument("--setting-index", type=int, default=0)
    p.add_argument("--oom-cap")
    p.add_argument("--record")
    p.add_argument("--cap", type=int)
    p.add_argument("--snap")
    p.add_argument("--result")
    p.add_argument("--assemble", action="store_true")
    p.add_argument("--no-bisection", action="store_true")
    p.add_argument("--table", action="store_true")
    p.add_argument("--resume", action="store_true", help="keep results already in --out")
    p.add_argument("--trial")
    p.add_argument("--stacks", default="python")
    p.add_argument("--context", default="all")
    p.add_argument("--workloads", help="a Python file whose WORKLOADS (and SPLIT) replace this file's")
    p.add_argument("names", nargs="*")
    a = p.parse_args(argv)
    if a.workloads:
        use_workloads(a.workloads)
    if a.measure:
        measure(a.measure, SETTINGS[a.setting_index], a.oom_cap, a.result, bisection=not a.no_bisection)
        return 0
    if a.trial:
        one_trial(a.trial, a.cap, a.result)
        return 0
    if a.record:
        record(a.record, a.cap, a.snap, a.result, a.stacks, None if a.context == "None" else a.context)
        return 0
    names = a.names or list(WORKLOADS)
    if a.smoke:
        return smoke(names)
    if a.table:
        print(table(a.out))
        return 0
    if a.assemble:
        for name in names:
            assemble(a.out, name)
        return 0
    Orchestrator(a.out, a.jobs, a.deadline, a.proc_timeout, a.resume).run(names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
