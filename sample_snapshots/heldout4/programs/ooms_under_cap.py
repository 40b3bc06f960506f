"""Runs that end in an out-of-memory error under a per-process cap. Four ask for more than the
whole free memory could give (a batch or sequence far too large, an output canvas larger than the
cap); three leave plenty free but only in holes smaller than the request (a carved-up KV pool,
index shards with every other one evicted, per-stream states in the small pool)."""

from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from _harness import Harness, MiB, main  # noqa: E402

DEV = torch.device("cuda")


def headroom(h):
    return h.cap_bytes - torch.cuda.memory_reserved()


def largest_free_block(pool):
    sizes = [b["size"] for seg in torch.cuda.memory_snapshot() if (seg["segment_type"] == "small") == (pool == "small")
             for b in seg["blocks"] if b["state"] == "inactive"]
    return max(sizes, default=0)


# ----------------------------------------------------------------------------- too large for the cap


def gpt2_batch_size_finder(name):
    h = Harness(name)
    h.cap(2.0)
    h.dump_at_oom = True
    h.record(stacks="python", context="all")
    cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, n_positions=256)   # GPT-2's own vocab
    model = transformers.GPT2LMHeadModel(cfg).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    fits, caught = [], False
    for batch in (1, 4, 64):                      # the finder jumps to the target batch after two probes
        try:
            with h.step():
                ids = torch.randint(0, cfg.vocab_size, (batch, 256), device=DEV)
                logits = model(ids).logits
                loss = F.cross_entropy(logits.view(-1, cfg.vocab_size), ids.roll(-1, 1).view(-1))
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                del ids, logits, loss
            fits.append(batch)
        except torch.OutOfMemoryError:
            caught = True
            break
    h.finish(leak=False, oom_caught=caught, workload=f"""A batch-size finder for a 2-layer GPT-2 (128
             wide, full 50,257-token vocabulary, 256 tokens) under a 2 GiB cap: batches {fits} train,
             then batch 64 asks for its fp32 logits (64 x 256 x 50,257, 3.07 GiB) in one piece, more
             than the whole cap. Dumped by the OOM observer; history with Python stacks.""")


def vit_gigapixel_tile_attention(name):
    h = Harness(name)
    h.cap(2.5)
    h.dump_at_oom = True
    h.record(stacks="all", context="all")
    cfg = transformers.ViTConfig(image_size=1024, patch_size=8, hidden_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=128, attn_implementation="eager")
    model = transformers.ViTModel(cfg, add_pooling_layer=False).to(DEV).eval()
    caught = False
    try:
        with torch.no_grad():
            for size, batch in ((256, 4), (512, 2), (1024, 1)):
                with h.step("inference"):
                    x = torch.randn(batch, 3, size, size, device=DEV)
                    feats = model(pixel_values=x, interpolate_pos_encoding=True).last_hidden_state
                    pooled = feats[:, 1:].mean(1).cpu()
                    del x, feats, pooled
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""A ViT encoder (patch 8, 64 wide, 4 heads,
             eager attention) run on tiles of 256, 512 and 1024 px: at 1024 px one image is 16,385
             tokens and the first layer's attention scores (1 x 4 x 16,385^2 fp32, 4 GiB) are larger
             than the whole 2.5 GiB cap. Dumped by the OOM observer; history with Python and C++
             stacks.""")


class Upscaler(torch.nn.Module):
    def __init__(self, width=64, scale=4):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.ReLU(),
                                        torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU(),
                                        torch.nn.Conv2d(width, 3 * scale * scale, 3, padding=1))
        self.shuffle = torch.nn.PixelShuffle(scale)

    def forward(self, x):
        return self.shuffle(self.body(x))


def tiled_upscaler_canvas(name):
    h = Harness(name)
    h.cap(2.0)
    model = Upscaler().to(DEV).eval()
    tile, scale, caught = 256, 4, False
    try:
        for side in (1024, 2048, 4608):
            with h.step("inference"):
                image = torch.rand(1, 3, side, side, device=DEV)
                h.expect_request(3 * (side * scale) ** 2 * 4)
                canvas = torch.empty(1, 3, side * scale, side * scale, device=DEV)
                with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                    for y in range(0, side, tile):
                        for x in range(0, side, tile):
                            out = model(image[:, :, y:y + tile, x:x + tile])
                            canvas[:, :, y * scale:(y + tile) * scale, x * scale:(x + tile) * scale] = out.float()
                canvas.mean().item()
                del image, canvas, out
    except torch.OutOfMemoryError:
        caught = True
        h.dump_plain()
    h.finish(leak=False, oom_caught=caught, workload="""A 4x super-resolution CNN (3 convs + pixel
             shuffle, bf16 autocast) run tile by tile on 1,024, 2,048 and 4,608 px images, writing
             into a full-size fp32 canvas: the 18,432 px canvas (3.8 GiB) is larger than the whole
             2 GiB cap. History never on: the except block pickles torch.cuda.memory._snapshot(),
             so there is no trace.""")


def llama_long_context_ramp(name):
    h = Harness(name)
    h.cap(2.5)
    h.dump_at_oom = True
    h.record(stacks="python", context="alloc")
    cfg = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=8,
                                   num_key_value_heads=8, vocab_size=4000, max_position_embeddings=8192,
                                   attn_implementation="eager", bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(cfg).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    caught = False
    try:
        for seq in (512, 1024, 8192):             # context-length curriculum, jumping to the target
            with h.step():
                ids = torch.randint(3, 4000, (2, seq), device=DEV)
                loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                del ids, loss
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload="""A 2-layer Llama (128 wide, 8 heads, eager
             attention) trained with AdamW on 2 sequences of 512, 1,024, then 8,192 tokens under a
             2.5 GiB cap: at 8,192 the first layer's attention scores (2 x 8 x 8,192^2 fp32, 4 GiB)
             are larger than the whole cap. Dumped by the OOM observer; history with context
             'alloc'.""")


# ----------------------------------------------------------------------------- free, but in holes


def paged_kv_pool_long_prompt(name):
    h = Harness(name)
    h.cap(3.0)
    h.dump_at_oom = True
    rng = random.Random(4)
    cfg = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=4000, max_position_embeddings=512,
                                   bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(cfg).to(DEV).eval()
    page = 1 << 20                               # bf16 elements: 2 MiB a page
    caught, pool, finished = False, {}, 0
    h.record(stacks="python", context="all", max_entries=2500)
    try:
        with torch.no_grad():
            with h.step("profile"):
                model(torch.randint(3, 4000, (1, 48), device=DEV))
                torch.cuda.empty_cache()
                budget = (headroom(h) - 48 * MiB) // (2 * MiB) * (2 * MiB)   # like gpu_memory_utilization
                probe = torch.empty(budget, dtype=torch.uint8, device=DEV)
                del probe                         # cached: the pool's one big segment
            used, sid = 0, 0
            while used < budget:
                with h.step("decode"):
                    pages = min(rng.randrange(8, 33), (budget - used) // (2 * MiB))
                    pool[sid] = torch.empty(pages, page, dtype=torch.bfloat16, device=DEV)
                    used += pages * 2 * MiB
                    out = model(torch.randint(3, 4000, (1, rng.randint(16, 48)), device=DEV), use_cache=True)
                    cache = out.past_key_values
                    for _ in range(3):
                        out = model(out.logits[:, -1:].argmax(-1), past_key_values=cache, use_cache=True)
                    pool[sid].view(-1)[:64].copy_(out.logits[0, 0, :64])
                    del out, cache
                    sid += 1
            with h.step("decode"):
                for s in range(1, sid, 2):        # every other sequence finishes
                    del pool[s]
                    finished += 1
            with h.step("prefill"):
                staging = torch.empty(128 * page, dtype=torch.bfloat16, device=DEV)   # 256 MiB in one piece
                del staging
    except torch.OutOfMemoryError:
        caught = True
    h.finish(leak=False, oom_caught=caught, workload=f"""A paged-KV server under a 3 GiB cap: a
             profiling pass allocates and frees one buffer of all the memory but 48 MiB, then
             {len(pool) + finished} sequences (tiny Llama, greedy decode) each take a KV buffer of
             16-64 MiB carved out of that cached segment; every other sequence finishes, leaving
             {finished} holes of 16-64 MiB (about half the pool free), and a long prompt's 256 MiB
             staging buffer fits in none of them nor in the 48 MiB left under the cap. Dumped by the
             OOM observer; ring buffer of 2,500 entries cut long before.""")


def retrieval_shard_cache_evictions(name):
    h = Harness(name)
    h.cap(2.5)
    h.dump_at_oom = True
    h.record(stacks="python", context="state")
    enc = transformers.DistilBertModel(transformers.DistilBertConfig(vocab_size=4000, dim=256, n_layers=2, n_heads=4,
                                                                     hidden_dim=512, pad_token_id=0)).to(DEV).eval()
    rows, dim = 4096, 256                          # a shard: 4 MiB of fp32 embeddings, 5 per 20 MiB segment
    host = torch.randn(rows, dim).pin_memory()
    shards, samples, hits, caught = [], [], [], False
    try:
        with torch.no_grad():
            with h.step("encode"):
                q = enc(torch.randint(1, 4000, (8, 32), device=DEV)).last_hidden_state[:, 0].contiguous()
                hits.append((q @ host.to(DEV).T).topk(4).indices.cpu())
                torch.cuda.empty_cache()
            full = False
            while not full and len(shards) < 2000:
                with h.step("load"):
                    for _ in range(32):
                        if headroom(h) < 20 * MiB and largest_free_block("large") < rows * dim * 4:
                            full = True
                            break
                        shards.append(host.to(DEV, non_blocking=True))
                        hits.append((q @ shards[-1].T).topk(4).indices.cpu())
            with h.step("load"):                    # 1 MiB row samples for re-ranking, in what is left
                while headroom(h) >= 2 * MiB:
                    samples.append(shards[len(samples) % len(shards)][:1024].clone())
            with h.step("evict"):
                for i in range(1, len(shards), 2):  # the cold half of the index
                    shards[i] = None
            with h.step("load"):
                long_shard = torch.randn(9728, dim).pin_memory().to(DEV)   # 9.5 MiB
                del long_shard
    except torch.OutOfMemoryError:
        caught = True
    kept = sum(s is not None for s in shards)
    h.finish(leak=False, oom_caught=caught, workload=f"""A retrieval index under a 2.5 GiB cap: a
             DistilBERT query encoder, then {len(shards)} embedding shards of 4 MiB copied from
             pinned memory until the cap is full (five to a 20 MiB segment) and scored against the
             queries, then {len(samples)} row samples of 1 MiB fill the last few MiB; every other
             shard is evicted ({kept} kept), so about half of the memory is free in 4 MiB holes,
             and a 9.5 MiB shard needs a new 20 MiB segment that the cap cannot give. Dumped by the
             OOM observer; history with context 'state'.""")


def stream_state_slabs(name):
    h = Harness(name)
    h.cap(2.0)
    h.dump_at_oom = True
    h.record(stacks="python", context=None)
    width, ctx = 1024, 160                        # a stream's state: 160 x 1024 fp32 = 640 KiB (small pool)
    proj = torch.nn.Linear(width, width, bias=False, device=DEV)
    rows = (headroom(h) - 320 * MiB) // (width * 4) // (64 * ctx) * (64 * ctx)
    table = torch.nn.Embedding(rows, width, device=DEV)
    states, caught = [], False
    try:
        with torch.no_grad():
            for chunk in range(4):
                with h.step("ingest"):
                    x = table.weight[chunk * 64 * ctx:(chunk + 1) * 64 * ctx].view(64, ctx, width)
                    y = torch.tanh_(x @ proj.weight.T)          # 40 MiB, large pool
                    states.extend(y[i].clone() for i in range(64))
                    del y
            torch.cuda.empty_cache()
            with h.step("ingest"):
                while headroom(h) >= 2 * MiB:                    # top up with copies until the cap is reached
                    states.append(states[len(states) % 256].clone())
            with h.step("retire"):
                for i in range(1, len(states), 2):               # every other stream ends
                    states[i] = None
            with h.step("ingest"):
                longer = table.weight[:256] @ proj.weight.T      # a 256-token stream: 1 MiB, still small pool
                del longer
    except torch.OutOfMemoryError:
        caught = True
    live = sum(s is not None for s in states)
    h.finish(leak=False, oom_caught=caught, workload=f"""Per-stream recurrent states under a 2 GiB cap:
             an embedding table takes all but 320 MiB, then {len(states)} stream states of 640 KiB
             (three to a 2 MiB small-pool segment) fill the rest; every other stream ends ({live}
             left), leaving about half of the small pool free in holes of 640-768 KiB, and a longer
             stream's 1 MiB state needs a new small segment the cap cannot give. Dumped by the OOM
             observer; history without stacks (context None).""")


PROGRAMS = {f.__name__: f for f in (gpt2_batch_size_finder, vit_gigapixel_tile_attention, tiled_upscaler_canvas,
                                    llama_long_context_ramp, paged_kv_pool_long_prompt,
                                    retrieval_shard_cache_evictions, stream_state_slabs)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
