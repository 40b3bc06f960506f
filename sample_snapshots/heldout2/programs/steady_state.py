"""Programs whose memory grows at first, or within a step, or within a request, and then stops
growing or is given back: none of them leaks."""

from __future__ import annotations

import copy
import functools
import os
import random
import sys
from collections import deque

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))
from _harness import Harness, main  # noqa: E402

VOCAB = 4096


def _seed(seed=0):
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def mistral_adamw_lazy_state(name):
    from transformers import MistralConfig, MistralForCausalLM

    h = Harness(name)
    _seed()
    h.record(stacks="python", context="all")
    cfg = MistralConfig(hidden_size=256, intermediate_size=704, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=512, sliding_window=None)
    model = MistralForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
    losses = []
    for _ in range(8):
        with h.step():
            ids = torch.randint(0, VOCAB, (8, 192), device="cuda")
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
            loss.backward()
            opt.step()                                 # exp_avg / exp_avg_sq appear here, once
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
    h.finish(leak=False, workload="""A small Mistral (2 layers, hidden 256) from its config, AdamW,
        8 steps of 8 x 192 tokens. AdamW creates its two state tensors per parameter lazily inside
        the first optimizer.step(); memory at the start of each step rises once (step 2) and is
        flat afterwards.""")


class CausalBlock(nn.Module):
    def __init__(self, width=256, heads=4):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm1 = nn.LayerNorm(width)
        self.ff = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.norm2 = nn.LayerNorm(width)

    def forward(self, x, mask):
        a, _ = self.attn(x, x, x, attn_mask=mask, need_weights=False)
        x = self.norm1(x + a)
        return self.norm2(x + self.ff(x))


def mha_mask_lru_warmup(name):
    h = Harness(name)
    _seed()
    h.record(stacks="python", context="alloc")

    @functools.lru_cache(maxsize=8)
    def causal_mask(n):
        return torch.full((n, n), float("-inf"), device="cuda").triu_(1)

    blocks = nn.ModuleList(CausalBlock() for _ in range(2)).cuda()
    opt = torch.optim.SGD(blocks.parameters(), lr=1e-3)
    for step in range(12):
        with h.step():
            n = (256, 512, 1024)[step % 3]
            x = torch.randn(4, n, 256, device="cuda")
            mask = causal_mask(n)
            for block in blocks:
                x = block(x, mask)
            x.square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload=f"""Two causal attention blocks (nn.MultiheadAttention, width 256)
        trained with plain SGD on sequences cycling through 3 lengths (256, 512, 1024); the causal
        mask of each length comes from a functools.lru_cache'd builder, so the first 3 steps each
        add one mask (0.25, 1 and 4 MiB) and the cache then stays at 3 entries for the other 9
        steps ({causal_mask.cache_info().currsize} masks at the end). Recorded with
        context='alloc'.""")


def convnext_ema_once(name):
    import timm

    h = Harness(name)
    _seed()
    h.record(stacks="python")
    model = timm.create_model("convnext_atto", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ema = None
    for _ in range(10):
        with h.step():
            if ema is None:
                ema = copy.deepcopy(model).eval().requires_grad_(False)
            x = torch.randn(32, 3, 128, 128, device="cuda")
            y = torch.randint(0, 10, (32,), device="cuda")
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 0.001)
    h.finish(leak=False, workload="""timm convnext_atto, AdamW, 10 steps of 32 images at 128 px; at
        the first step an exponential-moving-average copy of the model is made with
        copy.deepcopy and then updated in place (torch._foreach_lerp_) every step. The copy and
        AdamW's state both appear during the first step; nothing grows afterwards.""")


class TinyDecoder(nn.Module):
    """A decoder whose key/value cache is a list of (k, v) pairs grown by torch.cat."""

    def __init__(self, vocab=VOCAB, width=256, heads=4, layers=3):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, width)
        self.qkv = nn.ModuleList(nn.Linear(width, 3 * width) for _ in range(layers))
        self.proj = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))
        self.out = nn.Linear(width, vocab)

    def forward(self, ids, cache):
        x = self.emb(ids)
        b, t, _ = x.shape
        for i, (qkv, proj) in enumerate(zip(self.qkv, self.proj)):
            q, k, v = (z.transpose(1, 2) for z in qkv(x).view(b, t, 3, self.heads, -1).unbind(2))
            prefill = cache[i] is None
            if not prefill:
                k = torch.cat([cache[i][0], k], dim=2)
                v = torch.cat([cache[i][1], v], dim=2)
            cache[i] = (k, v)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=prefill and t > 1)
            x = x + proj(a.transpose(1, 2).reshape(b, t, -1))
        return self.out(x[:, -1])


def _serve(model, prompt, new_tokens):
    """One generation request: its cache lives only in this call."""
    cache = [None] * len(model.qkv)
    ids = prompt
    with torch.inference_mode():
        nxt = model(ids, cache).argmax(-1, keepdim=True)
        out = [nxt]
        for _ in range(new_tokens - 1):
            nxt = model(nxt, cache).argmax(-1, keepdim=True)
            out.append(nxt)
    return torch.cat(out, dim=1).cpu()


def tiny_decoder_kv_requests(name):
    h = Harness(name)
    _seed()
    model = TinyDecoder().cuda().eval()
    replies = []
    requests = 5
    for r in range(requests):
        if r == requests - 1:
            h.record(stacks="python", context="all")   # trace only the last request
        with h.step("inference"):
            prompt = torch.randint(0, VOCAB, (8, 64 + 32 * r), device="cuda")
            replies.append(_serve(model, prompt, 96))
    h.finish(leak=False, workload="""A hand-written 3-layer decoder (width 256) serving 5 generation
        requests one after another (batch 8, prompts of 64 to 192 tokens, 96 new tokens each):
        the key/value cache is a list of (k, v) grown by torch.cat at every token inside the
        request's function and dropped when it returns, so memory climbs within a request and
        falls back after it. History is turned on only before the last request.""")


def _validate(h, model, batches=3):
    """One validation pass: outputs are kept until the epoch's accuracy is known, then cleared."""
    model.eval()
    val_outputs = []
    for _ in range(batches):
        with h.step("eval"), torch.no_grad():
            x = torch.randn(32, 3, 256, 256, device="cuda")
            feats = model.forward_features(x)
            val_outputs.append({"features": feats, "logits": model.forward_head(feats),
                                "target": torch.randint(0, 10, (32,), device="cuda")})
    acc = torch.stack([(o["logits"].argmax(-1) == o["target"]).float().mean() for o in val_outputs]).mean().item()
    val_outputs.clear()                                # end of the validation epoch
    model.train()
    return acc


def mobilevit_val_epoch_outputs(name):
    import timm

    h = Harness(name)
    _seed()
    h.record(stacks="python", context="state")
    model = timm.create_model("mobilevit_xxs", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    accs = []
    for _epoch in range(3):
        model.train()
        for _ in range(4):
            with h.step("train"):
                x = torch.randn(16, 3, 256, 256, device="cuda")
                y = torch.randint(0, 10, (16,), device="cuda")
                F.cross_entropy(model(x), y).backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
        accs.append(_validate(h, model))
    h.finish(leak=False, workload="""timm mobilevit_xxs, AdamW, 3 epochs of 4 training steps (16
        images at 256 px) and 3 validation batches (32 images) under no_grad. Validation keeps
        every batch's features, logits and targets in a list until the epoch's accuracy is
        computed, then clears it: memory grows through each validation pass and is back at the
        same level when the next epoch's training starts. Recorded with context='state'.""")


def gpt2_grad_accum_4(name):
    from transformers import GPT2Config, GPT2LMHeadModel

    h = Harness(name)
    _seed()
    h.record(stacks="all", context="all")
    cfg = GPT2Config(n_layer=3, n_embd=384, n_head=6, vocab_size=8192, n_positions=512, bos_token_id=0,
                     eos_token_id=0)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    accum = 4
    for _ in range(6):
        with h.step():
            for _micro in range(accum):
                ids = torch.randint(0, 8192, (4, 128), device="cuda")
                (model(input_ids=ids, labels=ids, use_cache=False).loss / accum).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""GPT-2 (3 layers, width 384) from its config, SGD with momentum,
        6 optimizer steps, each accumulating gradients over 4 micro-batches of 4 x 128 tokens
        (the gradient buffers appear in the first micro-batch and are summed into after), with
        gradient clipping. The momentum buffers appear in the first step; flat afterwards.
        Python and C++ stacks.""")


def transformer_act_ring3(name):
    h = Harness(name)
    _seed()
    h.record(stacks="python", context=None)
    layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0)
    encoder = nn.TransformerEncoder(layer, num_layers=3, enable_nested_tensor=False).cuda()
    head = nn.Linear(256, 8).cuda()
    opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=1e-4)
    recent = deque(maxlen=3)                           # the last 3 steps' activations, for NaN hunts
    for _ in range(12):
        with h.step():
            x = torch.randn(16, 128, 256, device="cuda")
            y = torch.randint(0, 8, (16,), device="cuda")
            acts = encoder(x)
            F.cross_entropy(head(acts.mean(1)), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            recent.append(acts.detach().clone())
    h.finish(leak=False, workload="""A 3-layer nn.TransformerEncoder (width 256) with a linear head,
        Adam, 12 steps of 16 x 128; each step's encoder output is cloned into a deque with
        maxlen=3 (to look back at when a loss goes bad): it grows for 3 steps and then each new
        clone pushes the oldest out. Recorded with context=None: no stacks.""")


def t5_bf16_autocast_train(name):
    from transformers import T5Config, T5ForConditionalGeneration

    h = Harness(name)
    _seed()
    h.record(stacks="python", context="all")
    cfg = T5Config(d_model=256, d_ff=1024, d_kv=32, num_layers=2, num_decoder_layers=2, num_heads=4,
                   vocab_size=VOCAB, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = T5ForConditionalGeneration(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(6):
        with h.step():
            src = torch.randint(2, VOCAB, (16, 128), device="cuda")
            tgt = torch.randint(2, VOCAB, (16, 64), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=src, labels=tgt).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""T5 (2+2 layers, d_model 256) from its config trained under
        torch.autocast(bfloat16) (no scaler), AdamW, 6 steps of 16 x 128 source and 16 x 64
        target tokens. Autocast's bfloat16 copies of the weights live only within each step's
        autocast region; AdamW's state appears in the first step.""")


PROGRAMS = {f.__name__: f for f in (mistral_adamw_lazy_state, mha_mask_lru_warmup, convnext_ema_once,
                                     tiny_decoder_kv_requests, mobilevit_val_epoch_outputs, gpt2_grad_accum_4,
                                     transformer_act_ring3, t5_bf16_autocast_train)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
