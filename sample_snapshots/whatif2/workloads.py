"""A second set of deterministic GPU workloads for the what-if truth, all held out.

Measured with the protocol of ``../whatif/workloads.py``:

    python sample_snapshots/whatif/workloads.py --workloads sample_snapshots/whatif2/workloads.py --out DIR

Each workload is a function ``NAME(torch, dev)`` that builds everything it needs (seeded), runs a
few steps and lets go of it all when it returns. Sizes that depend on data come from seeded
``random.Random`` streams, never from tensor values, so every run asks for the same memory.
"""

from __future__ import annotations

import os
import random

MiB = 1 << 20
SPLIT = "heldout2"


def _seed(torch) -> None:
    torch.manual_seed(0)
    random.seed(0)


def mistral_ckpt_accum_bf16(torch, dev):
    """A Mistral decoder (6 layers, hidden 512, 8 query and 2 key/value heads, sliding window 256,
    eager attention) from its config with transformers' gradient checkpointing, trained under
    autocast(bfloat16) with AdamW; each optimizer step accumulates 2 micro-batches of 8 at
    different lengths (384+640, 1024+192, 512+768 tokens), gradients clipped before the step."""
    from transformers import MistralConfig, MistralForCausalLM

    _seed(torch)
    cfg = MistralConfig(hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
                        num_key_value_heads=2, vocab_size=8000, max_position_embeddings=2048, sliding_window=256,
                        use_cache=False, attn_implementation="eager")
    model = MistralForCausalLM(cfg).to(dev)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for micro in ((384, 640), (1024, 192), (512, 768)):
        for seq in micro:
            ids = torch.randint(0, 8000, (8, seq), device=dev)
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss / len(micro)
            loss.backward()
            del loss
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def whisper_growing_batch(torch, dev):
    """A Whisper encoder-decoder (4+4 layers, d_model 384, 80 mel bins, 1500 input frames) from its
    config, AdamW; the batch grows step by step (2, 4, 6, 8, 11, 14 clips) while the target
    length changes every step (48..224 tokens)."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    _seed(torch)
    cfg = WhisperConfig(vocab_size=8000, num_mel_bins=80, encoder_layers=4, decoder_layers=4,
                        encoder_attention_heads=6, decoder_attention_heads=6, d_model=384, encoder_ffn_dim=1536,
                        decoder_ffn_dim=1536, max_source_positions=750, max_target_positions=448, pad_token_id=0,
                        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    model = WhisperForConditionalGeneration(cfg).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for batch, tgt in ((2, 96), (4, 224), (6, 48), (8, 160), (11, 128), (14, 64)):
        feats = torch.randn(batch, 80, 1500, device=dev)
        labels = torch.randint(3, 8000, (batch, tgt), device=dev)
        model(input_features=feats, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def gqa_decode_drop_finished(torch, dev):
    """Batched greedy decoding by hand with a KV cache grown by torch.cat every token: 8
    pre-norm layers (width 1024, 8 query heads and 4 key/value heads of 128, keys and values
    repeated for the query heads at each step), float16 on the GPU, 48 prompts of 128 tokens;
    each sequence stops after its own seeded number of new tokens (32..320) and finished rows
    are dropped from the batch and from every cache by index_select; no grad."""
    import torch.nn.functional as F

    _seed(torch)
    rng = random.Random(11)
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    layers, heads, kv_heads, hd, batch, prompt = 8, 8, 4, 128, 48, 128
    width, rep = heads * hd, heads // kv_heads
    w = [tuple(torch.randn(*s, device=dev, dtype=dtype) * 0.02 for s in
               ((width, width), (width, 2 * kv_heads * hd), (width, width), (width, 4 * width), (4 * width, width)))
         for _ in range(layers)]
    remaining = [rng.randint(32, 320) for _ in range(batch)]
    cache = [None] * layers
    with torch.no_grad():
        x = torch.randn(batch, prompt, width, device=dev, dtype=dtype)
        while remaining:
            b, s = x.shape[0], x.shape[1]
            for i, (wq, wkv, wo, w1, w2) in enumerate(w):
                h = F.layer_norm(x, (width,))
                q = (h @ wq).view(b, s, heads, hd).transpose(1, 2)
                k, v = (h @ wkv).view(b, s, 2, kv_heads, hd).permute(2, 0, 3, 1, 4)
                if cache[i] is not None:
                    k, v = torch.cat([cache[i][0], k], dim=2), torch.cat([cache[i][1], v], dim=2)
                cache[i] = (k, v)
                k, v = (t.repeat_interleave(rep, dim=1) for t in (k, v))
                att = F.scaled_dot_product_attention(q, k, v, is_causal=s > 1)
                x = x + att.transpose(1, 2).reshape(b, s, width) @ wo
                x = x + F.gelu(F.layer_norm(x, (width,)) @ w1) @ w2
                del q, k, v, att, h
            x = F.layer_norm(x[:, -1:, :], (width,))
            remaining = [r - 1 for r in remaining]
            keep = [j for j, r in enumerate(remaining) if r > 0]
            if len(keep) < len(remaining):
                idx = torch.tensor(keep, device=dev, dtype=torch.long)
                cache = [(c[0].index_select(0, idx), c[1].index_select(0, idx)) for c in cache]
                x = x.index_select(0, idx)
                remaining = [remaining[j] for j in keep]
    del cache, x, w


def regnety_channels_last_fp16(torch, dev):
    """timm's regnety_008 (100 classes) in channels_last memory format under autocast(float16)
    with GradScaler, SGD with Nesterov momentum; each step accumulates 1-3 micro-batches of
    changing size (16..48 images at 160 px) before the optimizer step (the CPU smoke run uses
    bfloat16)."""
    import timm

    _seed(torch)
    model = timm.create_model("regnety_008", pretrained=False, num_classes=100).to(dev)
    model = model.to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)
    scaler = torch.amp.GradScaler(dev.type, init_scale=1024.0)
    amp = torch.float16 if dev.type == "cuda" else torch.bfloat16  # CPU float16 convolutions crawl
    for micro in ((32, 24), (48,), (16, 16, 32), (40, 24)):
        for b in micro:
            x = torch.randn(b, 3, 160, 160, device=dev).contiguous(memory_format=torch.channels_last)
            y = torch.randint(0, 100, (b,), device=dev)
            with torch.autocast(dev.type, dtype=amp):
                loss = torch.nn.functional.cross_entropy(model(x), y) / len(micro)
            scaler.scale(loss).backward()
            del loss
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


_HOST_WEIGHTS: dict = {}


def _host_weights(torch, pinned: bool):
    """The streamed layers' weights in (pinned) host memory, made once per process: host memory
    is not the GPU allocator's, and making 200 M random numbers every run would be slow."""
    if pinned not in _HOST_WEIGHTS:
        gen = torch.Generator().manual_seed(3)
        layers = []
        for _ in range(8):
            pair = tuple(torch.randn(*s, generator=gen, dtype=torch.float32).mul_(0.02).half()
                         for s in ((6144, 2048), (2048, 6144)))
            layers.append(tuple(t.pin_memory() for t in pair) if pinned else pair)
        _HOST_WEIGHTS[pinned] = layers
    return _HOST_WEIGHTS[pinned]


def weight_streaming_two_streams(torch, dev):
    """Inference with weights streamed from pinned host memory: while layer i runs on the default
    stream, layer i+1's two float16 matrices (2048x6144, 24 MiB each) are copied to the GPU on a
    copy stream; each copy is handed over with wait_stream + record_stream and dropped after its
    layer (the free completes when the default stream's kernels end); 8 residual MLP layers,
    batches of 1024..8192 rows, each result copied back to the host."""
    import torch.nn.functional as F

    _seed(torch)
    cuda = dev.type == "cuda"
    host = _host_weights(torch, pinned=cuda)
    dtype = torch.float16 if cuda else torch.float32
    copy = torch.cuda.Stream() if cuda else None
    main = torch.cuda.current_stream() if cuda else None

    def fetch(i):
        if not cuda:
            return tuple(t.to(dtype) for t in host[i])
        with torch.cuda.stream(copy):
            return tuple(t.to(dev, non_blocking=True) for t in host[i])

    with torch.no_grad():
        for batch in (2048, 8192, 1024, 4096, 6144, 3072):
            x = torch.randn(batch, 2048, device=dev, dtype=dtype)
            nxt = fetch(0)
            for i in range(len(host)):
                cur = nxt
                if cuda:
                    main.wait_stream(copy)
                    for t in cur:
                        t.record_stream(main)
                nxt = fetch(i + 1) if i + 1 < len(host) else None
                x = x + F.gelu(x @ cur[0].t()) @ cur[1].t()
                del cur
            x.float().cpu()
            del x


def distilbert_server_mixed(torch, dev):
    """An inference server loop: a DistilBERT encoder (4 layers, dim 512) from its config, float16
    on the GPU, under inference_mode, serves 48 requests of seeded mixed sizes (1..64 texts,
    each of its own length, padded to the longest rounded up to 16, up to 512 tokens, with an
    attention mask), every 12th request a bulk job of 96x512; each answer (mean-pooled
    embeddings) is copied to the host."""
    from transformers import DistilBertConfig, DistilBertModel

    _seed(torch)
    rng = random.Random(5)
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    cfg = DistilBertConfig(vocab_size=16000, dim=512, n_layers=4, n_heads=8, hidden_dim=2048,
                           max_position_embeddings=512)
    model = DistilBertModel(cfg).to(dev, dtype).eval()
    with torch.inference_mode():
        for r in range(48):
            if r % 12 == 11:
                lengths = [512] * 96
            else:
                batch = rng.choice((1, 2, 4, 8, 16, 32, 64))
                top = rng.randint(8, 512)
                lengths = [rng.randint(max(1, top // 4), top) for _ in range(batch)]
            padded = min(512, -(-max(lengths) // 16) * 16)
            mask = (torch.arange(padded)[None, :] < torch.tensor(lengths)[:, None]).to(dev)
            ids = torch.randint(1, 16000, (len(lengths), padded), device=dev)
            out = model(input_ids=ids, attention_mask=mask).last_hidden_state
            m = mask.unsqueeze(-1).to(out.dtype)
            ((out * m).sum(1) / m.sum(1)).float().cpu()
            del out, m, mask, ids


def alternating_big_buffers(torch, dev):
    """Large buffers of two alternating sizes freed and made again (fragmentation-prone): each of
    48 steps makes a buffer of size A (even steps, 192 MiB growing by 64 MiB every 12 steps) or B
    (odd steps, 304 MiB growing by 48 MiB), uses it with the previous one and drops that one;
    right after, 1-3 medium tensors (3..18 MiB, seeded) are made that live for 2-6 steps and
    may be cut from the big block just freed."""
    rng = random.Random(13)
    kept = []
    big = None
    for step in range(48):
        phase = step // 12
        size = (192 + 64 * phase if step % 2 == 0 else 304 + 48 * phase) * MiB
        new = torch.empty(size // 4, dtype=torch.float32, device=dev)
        new[: 1 << 20].fill_(float(step))
        if big is not None:
            new[: 1 << 20].add_(big[: 1 << 20])
        big = new
        del new
        for _ in range(rng.randint(1, 3)):
            t = torch.empty(rng.randint(3, 18) * MiB + rng.randint(0, 255) * 512, dtype=torch.uint8, device=dev)
            t[:4096].fill_(1)
            kept.append((step + rng.randint(2, 6), t))
        kept = [(end, t) for end, t in kept if end > step]
    del big, kept


_COMPILED = None


def _compiled_block(torch):
    """Compiled once per process (later runs reuse the warm-up run's code)."""
    global _COMPILED
    if _COMPILED is None:
        import torch.nn.functional as F

        def block(x, g, w_gate, w_up, w_down):
            h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g
            return x + F.linear(F.silu(F.linear(h, w_gate)) * F.linear(h, w_up), w_down)

        backend = os.environ.get("WHATIF_COMPILE_BACKEND", "inductor")
        _COMPILED = torch.compile(block, dynamic=True, backend=backend)
    return _COMPILED


def compile_dynamic_swiglu(torch, dev):
    """Four RMSNorm + SwiGLU residual blocks (width 768, hidden 2048) written as one function under
    torch.compile(dynamic=True) (one graph for every length), Adam, batch 16 at 96, 320, 200,
    512, 448, 160 tokens."""
    block = _compiled_block(torch)
    _seed(torch)
    d, f = 768, 2048
    layers = [[torch.ones(d, device=dev, requires_grad=True)] +
              [(torch.randn(*s, device=dev) * 0.02).requires_grad_() for s in ((f, d), (f, d), (d, f))]
              for _ in range(4)]
    opt = torch.optim.Adam([p for layer in layers for p in layer], lr=1e-4)
    for seq in (96, 320, 200, 512, 448, 160):
        x = torch.randn(16, seq, d, device=dev)
        for layer in layers:
            x = block(x, *layer)
        x.square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def embedding_bag_fused_adam(torch, dev):
    """A recommender-style model: an embedding table (200000 x 256, 195 MiB) summed over bags
    (embedding_bag) into a 3-layer MLP; Adam(fused=True) on everything (the table's gradient is
    dense, so its two states are as large as the table), gradients clipped with
    clip_grad_norm_(foreach=True) and zeroed in place (set_to_none=False, so they stay allocated);
    6 steps of batch 1024..8192 with bags of 8..40 ids."""
    from torch import nn

    _seed(torch)
    table = nn.EmbeddingBag(200000, 256, mode="sum").to(dev)
    mlp = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1)).to(dev)
    params = list(table.parameters()) + list(mlp.parameters())
    opt = torch.optim.Adam(params, lr=1e-3, fused=True)
    for batch, bag in ((1024, 16), (4096, 8), (2048, 40), (8192, 24), (3072, 32), (6144, 12)):
        ids = torch.randint(0, 200000, (batch, bag), device=dev)
        target = torch.rand(batch, 1, device=dev)
        loss = nn.functional.binary_cross_entropy_with_logits(mlp(table(ids)), target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=False)


def qwen2_padded_varlen(torch, dev):
    """A Qwen2 decoder (4 layers, hidden 512, 8 query and 2 key/value heads, tied embeddings, SDPA
    attention) from its config, AdamW(foreach=True); 6 training steps of 12 rows, each row of its
    own seeded length (the batch padded on the left to its longest row, attention mask, padding
    labelled -100), and after every second step an evaluation forward of 32 rows at 256 tokens
    under no_grad."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    _seed(torch)
    rng = random.Random(17)
    cfg = Qwen2Config(hidden_size=512, intermediate_size=1792, num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=2, vocab_size=8000, max_position_embeddings=1024,
                      tie_word_embeddings=True, use_cache=False, attn_implementation="sdpa")
    model = Qwen2ForCausalLM(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    for step in range(6):
        top = rng.randint(96, 768)
        lengths = [rng.randint(top // 3, top) for _ in range(12)]
        width = max(lengths)
        mask = (torch.arange(width)[None, :] >= torch.tensor([width - n for n in lengths])[:, None]).long().to(dev)
        ids = torch.randint(1, 8000, (12, width), device=dev)
        labels = ids.masked_fill(mask == 0, -100)
        model.train()
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 2 == 1:
            model.eval()
            with torch.no_grad():
                model(input_ids=torch.randint(1, 8000, (32, 256), device=dev)).logits.argmax(-1)
    del opt, model


WORKLOADS = {f.__name__: f for f in (
    mistral_ckpt_accum_bf16, whisper_growing_batch, gqa_decode_drop_finished, regnety_channels_last_fp16,
    weight_streaming_two_streams, distilbert_server_mixed, alternating_big_buffers, compile_dynamic_swiglu,
    embedding_bag_fused_adam, qwen2_padded_varlen)}

# cuDNN keeps the plan it fell back to after a workspace request failed under a cap: the capped
# trials of the CNN run in fresh processes (see FRESH_TRIALS in ../whatif/workloads.py).
FRESH_TRIALS = {"regnety_channels_last_fp16"}
