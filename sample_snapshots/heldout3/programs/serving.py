"""Inference server loops: requests come off a queue, each handled as one step. KV caches kept
per request (a leak) or grown token by token and dropped (not one), and a validator whose
caught exceptions make reference cycles."""

from __future__ import annotations

import collections
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _harness import Harness, main  # noqa: E402

Request = collections.namedtuple("Request", "rid prompt max_new")


def seed_all(seed: int = 0) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def request_queue(n, vocab, batch=4, prompt_len=(48, 96), max_new=24):
    rng = random.Random(3)
    q = collections.deque()
    for i in range(n):
        t = rng.randint(*prompt_len)
        q.append(Request(f"req-{i:03d}", torch.randint(0, vocab, (batch, t)), max_new))
    return q


# ----------------------------------------------------------------------------- a leak

KV_BY_REQUEST: dict[str, object] = {}


def llama_kv_by_request_id_leak(name):
    from transformers import LlamaConfig, LlamaForCausalLM

    seed_all()
    h = Harness(name)
    cfg = LlamaConfig(vocab_size=4000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    model = LlamaForCausalLM(cfg).cuda().eval()

    def serve(req):
        ids = req.prompt.cuda()
        out = model(input_ids=ids, use_cache=True)
        past = out.past_key_values
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens = [nxt]
        for _ in range(req.max_new - 1):
            out = model(input_ids=nxt, past_key_values=past, use_cache=True)
            past = out.past_key_values
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(nxt)
        KV_BY_REQUEST[req.rid] = past          # "for follow-up turns": never evicted
        return torch.cat(tokens, 1).cpu()

    queue = request_queue(10, 4000)
    h.record(stacks="python", context="all")
    with torch.no_grad():
        while queue:
            req = queue.popleft()
            with h.step("inference"):
                serve(req)
    h.finish(leak=True, leak_what="KV_BY_REQUEST[rid] = past_key_values: each request's KV cache (2 layers, "
             "batch 4, up to 120 positions) is kept in a global dict for follow-up turns that never come",
             workload="""A Llama model (2 layers, width 256, grouped-query attention) from its config
             served from a queue: each request (one step) prefills a batch of 4 prompts of 48 to 96
             tokens and decodes 24 tokens greedily with past_key_values, then stores the request's
             cache in a module-level dict keyed by request id; nothing evicts it. 10 requests.""")


# ----------------------------------------------------------------------------- look-alikes


class TinyDecoder(torch.nn.Module):
    """A small decoder whose attention takes and returns plain (k, v) tensors per layer."""

    def __init__(self, vocab=3000, width=256, heads=4, layers=3) -> None:
        super().__init__()
        self.heads = heads
        self.emb = torch.nn.Embedding(vocab, width)
        self.pos = torch.nn.Embedding(1024, width)
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(width, 3 * width) for _ in range(layers))
        self.proj = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))
        self.mlp = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                                           torch.nn.Linear(4 * width, width)) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(width)
        self.out = torch.nn.Linear(width, vocab)

    def forward(self, ids, start, cache):
        b, t = ids.shape
        x = self.emb(ids) + self.pos(torch.arange(start, start + t, device=ids.device))
        new_cache = []
        for i, (qkv, proj, mlp) in enumerate(zip(self.qkv, self.proj, self.mlp)):
            q, k, v = qkv(x).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            if cache is not None:
                k = torch.cat([cache[i][0], k], 2)       # grows by one position per token
                v = torch.cat([cache[i][1], v], 2)
            new_cache.append((k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            x = x + proj(a.transpose(1, 2).reshape(b, t, -1))
            x = x + mlp(x)
        return self.out(self.norm(x)), new_cache


def generate(model, prompt, max_new):
    logits, cache = model(prompt, 0, None)
    pos = prompt.shape[1]
    nxt = logits[:, -1].argmax(-1, keepdim=True)
    out = [nxt]
    for _ in range(max_new - 1):
        logits, cache = model(nxt, pos, cache)
        pos += 1
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        out.append(nxt)
    return torch.cat(out, 1).cpu()               # the cache goes when this returns


def decoder_kv_cat_all_requests(name):
    seed_all()
    h = Harness(name)
    model = TinyDecoder().cuda().eval()
    queue = request_queue(8, 3000, batch=8, max_new=48)
    latencies = []
    h.record(stacks="python", context="all")
    with torch.no_grad():
        while queue:
            req = queue.popleft()
            with h.step("inference"):
                t0 = time.perf_counter()
                generate(model, req.prompt.cuda(), req.max_new)
                latencies.append(time.perf_counter() - t0)
    h.finish(leak=False, workload="""A hand-written 3-layer decoder (width 256) serving 8 requests
             from a queue, one step each: prefill a batch of 8 prompts, then 48 greedy tokens, the
             per-layer K and V grown by torch.cat one position per token; the cache is local to the
             request and dropped when it ends. History on for all requests.""")


def decoder_kv_cat_last_request_traced(name):
    seed_all()
    h = Harness(name)
    model = TinyDecoder(width=384, heads=6, layers=2).cuda().eval()
    queue = request_queue(8, 3000, batch=8, prompt_len=(64, 128), max_new=40)
    served = 0
    with torch.no_grad():
        while queue:
            req = queue.popleft()
            if not queue:                          # trace only the last request
                h.record(stacks="python", context="all")
            with h.step("inference"):
                generate(model, req.prompt.cuda(), req.max_new)
            served += 1
    h.finish(leak=False, workload="""The hand-written decoder (2 layers, width 384) serving 8
             requests, one step each, each growing its K and V with torch.cat token by token (40
             tokens) and dropping them at the end; memory history is turned on just before the last
             request, so only that request is in the trace.""")


# ----------------------------------------------------------------------------- a cycle


class ValidationResult:
    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.ok = True
        self.error: Exception | None = None
        self.confidence = 0.0


def check_confidence(probs: torch.Tensor, threshold: float) -> float:
    conf = float(probs.max(1).values.mean())
    if conf < threshold:
        raise ValueError(f"low confidence {conf:.3f}")
    return conf


def validator_exception_result_cycle(name):
    import timm

    seed_all()
    h = Harness(name)
    model = timm.create_model("convnext_atto", pretrained=False, num_classes=100).cuda().eval()
    access_log = []

    def validate(rid, images):
        result = ValidationResult(rid)
        feats = model.forward_features(images)
        probs = model.forward_head(feats).softmax(1)
        try:
            result.confidence = check_confidence(probs, threshold=0.5)
        except ValueError as e:
            result.ok = False
            result.error = e                      # e.__traceback__ -> this frame -> result, images, feats
        return result

    h.record(stacks="python", context="all")
    with torch.no_grad():
        for i in range(16):
            with h.step("inference"):
                images = torch.randn(64, 3, 128, 128, device="cuda")
                res = validate(f"req-{i}", images)
                access_log.append((res.rid, res.ok))
                # the server's per-request logging records
                entries = [{"rid": res.rid, "field": k, "vals": [k]} for k in range(3000)]
                del entries, res, images
    h.finish(leak=False, workload="""A validation service (timm convnext_atto, eval, no_grad): each
             request (one step) scores 64 images at 128 x 128 and, when the mean confidence is below
             a threshold (always, with random weights), stores the caught ValueError on the result
             object; the exception's traceback holds the validate() frame, whose locals hold the
             result, the 12 MiB input and the features: a cycle per request, freed when Python's
             automatic collector runs (the per-request logging makes thousands of small objects).""")


PROGRAMS = {f.__name__: f for f in (llama_kv_by_request_id_leak, decoder_kv_cat_all_requests,
                                     decoder_kv_cat_last_request_traced, validator_exception_result_cycle)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
