"""Inference servers written with asyncio: client coroutines put requests on an asyncio.Queue,
worker coroutines take them off and run the model synchronously (no await inside the GPU work),
and answers go back through futures. One step is one request (or one dynamic batch)."""

from __future__ import annotations

import asyncio
import collections
import gc
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))

import timm  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from _harness import Harness, main  # noqa: E402

DEV = torch.device("cuda")
STOP = object()


class Request:
    __slots__ = ("rid", "payload", "future")

    def __init__(self, rid, payload):
        self.rid, self.payload = rid, payload
        self.future = asyncio.get_running_loop().create_future()


async def serve(h, handle, payloads, workers=2, kind="inference", think=(0, 3)):
    """Clients submit ``payloads`` one by one; ``workers`` coroutines answer them with ``handle``."""
    queue: asyncio.Queue = asyncio.Queue(maxsize=4)
    rng = random.Random(7)

    async def worker():
        while True:
            req = await queue.get()
            if req is STOP:
                return
            try:
                with h.step(kind):
                    answer = handle(req)      # synchronous GPU work inside the coroutine
            except Exception as exc:          # fail the client instead of leaving it waiting
                req.future.set_exception(exc)
                raise
            req.future.set_result(answer)
            del req, answer
            await asyncio.sleep(0)

    async def client(cid, mine):
        got = []
        for rid, payload in mine:
            req = Request(rid, payload)
            await queue.put(req)
            got.append(await req.future)
            for _ in range(rng.randint(*think)):
                await asyncio.sleep(0)
        return got

    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    items = list(enumerate(payloads))
    clients = [client(c, items[c::3]) for c in range(3)]
    answers = await asyncio.gather(*clients)
    for _ in tasks:
        await queue.put(STOP)
    await asyncio.gather(*tasks)
    return [a for per_client in answers for a in per_client]


def run_server(h, handle, payloads, **kw):
    return asyncio.run(serve(h, handle, payloads, **kw))


def token_prompts(n, vocab, lo, hi, seed=0):
    rng = random.Random(seed)
    return [torch.randint(0, vocab, (1, rng.randint(lo, hi))) for _ in range(n)]


# ----------------------------------------------------------------------------- GPT-2 prefix server


def gpt2_prefix_hidden_states_server(name):
    h = Harness(name)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=192, n_head=4, vocab_size=8000, n_positions=256,
                                  bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg).to(DEV).eval()
    prefix_cache: dict = {}

    def handle(req):
        ids = req.payload.to(DEV, non_blocking=True)
        with torch.no_grad():
            out = model(ids, output_hidden_states=True, use_cache=False)
        # "so a follow-up turn can reuse the prompt's states": keyed by the request, never evicted
        prefix_cache[("chat", req.rid)] = out.hidden_states
        return int(out.logits[0, -1].argmax())

    with torch.no_grad():
        model(torch.zeros(1, 8, dtype=torch.long, device=DEV))
    h.record(stacks="python", context="all")
    answers = run_server(h, handle, token_prompts(32, 8000, 24, 96))
    h.dump()
    h.finish(leak=True, leak_what="the hidden states of every prompt, kept in a dict keyed by request id",
             workload=f"""Tiny GPT-2 (2 layers, 192 wide) behind an asyncio queue: 3 client coroutines
             send 32 prompts of 24-96 tokens, 2 worker coroutines answer each with the next token.
             Each worker stores the prompt's hidden states (3 tensors, 54-216 KiB) in a prefix cache
             keyed by request id that nothing ever reads or evicts ({len(answers)} answers).""")


# ----------------------------------------------------------------------------- BERT embeddings


def bert_embedding_service_dedupe_ids(name):
    h = Harness(name)
    cfg = transformers.BertConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=512, vocab_size=8000, max_position_embeddings=256)
    model = transformers.BertModel(cfg).to(DEV).eval()
    seen: dict[int, torch.Tensor] = {}
    rng = random.Random(3)

    def make_batch():
        lens = [rng.randint(64, 128) for _ in range(16)]
        ids = torch.zeros(16, 128, dtype=torch.long)
        mask = torch.zeros(16, 128, dtype=torch.long)
        for i, n in enumerate(lens):
            ids[i, :n] = torch.randint(1, 8000, (n,))
            mask[i, :n] = 1
        return ids, mask

    def handle(req):
        ids, mask = (t.to(DEV) for t in req.payload)
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=ids, attention_mask=mask)
        # kept "to skip a request that comes back with the same id"; ids never come back
        seen[req.rid] = out.last_hidden_state
        pooled = (out.last_hidden_state * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return torch.nn.functional.normalize(pooled.float(), dim=-1).cpu()

    h.record(stacks="python", context="alloc")
    answers = run_server(h, handle, [make_batch() for _ in range(24)], workers=3)
    h.dump()
    h.finish(leak=True, leak_what="each request's last_hidden_state (16 x 128 x 256 fp32, 2 MiB), kept by request id",
             workload=f"""Sentence-embedding service: a 2-layer BERT (256 wide) under bf16 autocast
             in inference mode, 3 worker coroutines, 24 requests of 16 padded sentences each
             ({len(answers)} answered, mean-pooled embeddings returned on the CPU). A dedupe table
             keeps every request's full last_hidden_state on the GPU, keyed by request id.""")


# ----------------------------------------------------------------------------- Llama decoding


def llama_greedy_decode_per_request_cache(name):
    h = Harness(name)
    cfg = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=4000,
                                   max_position_embeddings=512, bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(cfg).to(DEV).eval()
    rng = random.Random(11)

    def handle(req):
        prompt, new_tokens = req.payload
        ids = prompt.to(DEV)
        tokens = []
        with torch.no_grad():
            out = model(ids, use_cache=True)
            cache = out.past_key_values
            for _ in range(new_tokens):
                nxt = out.logits[:, -1:].argmax(-1)
                tokens.append(nxt)
                out = model(nxt, past_key_values=cache, use_cache=True)
        text = torch.cat(tokens, 1).tolist()[0]
        del out, cache, tokens, ids             # the request's KV cache goes with it
        return text

    payloads = [(p, rng.randint(8, 24)) for p in token_prompts(14, 4000, 16, 120, seed=5)]
    h.record(stacks="python", context="all", max_entries=8000)
    answers = run_server(h, handle, payloads, workers=2)
    h.dump()
    h.finish(leak=False, workload=f"""Greedy decoding with a tiny Llama (2 layers, GQA 4/2 heads)
             behind an asyncio queue: 14 requests with prompts of 16-120 tokens and 8-24 new tokens
             each, a DynamicCache per request grown token by token and dropped when the request is
             answered ({sum(map(len, answers))} tokens in all). Ring buffer of 8,000 entries, so the
             trace starts during a late request.""")


# ----------------------------------------------------------------------------- ViT classifier


def vit_dynamic_batching_result_lru(name):
    h = Harness(name)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=96, num_classes=100).to(DEV).eval()
    copy_stream = torch.cuda.Stream()
    lru: collections.OrderedDict = collections.OrderedDict()
    images = [torch.randn(3, 96, 96).pin_memory() for _ in range(30)]
    rng = random.Random(2)
    stats = {"hits": 0, "batches": []}

    async def batcher(queue):
        while True:
            first = await queue.get()
            if first is STOP:
                return
            batch, stop = [first], False
            while len(batch) < 8:
                try:
                    nxt = queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
                if nxt is STOP:
                    stop = True
                    break
                batch.append(nxt)
            with h.step("inference"):
                found = {}
                for r in batch:
                    if r.payload in lru:
                        lru.move_to_end(r.payload)
                        found[r.payload] = lru[r.payload]
                        stats["hits"] += 1
                misses = sorted({r.payload for r in batch} - set(found))
                if misses:
                    with torch.cuda.stream(copy_stream):
                        x = torch.stack([images[k] for k in misses]).pin_memory().to(DEV, non_blocking=True)
                    torch.cuda.current_stream().wait_stream(copy_stream)
                    x.record_stream(torch.cuda.current_stream())
                    with torch.no_grad():
                        tokens = model.forward_features(x)
                    for i, k in enumerate(misses):
                        found[k] = lru[k] = tokens[i:i + 1].clone()
                        while len(lru) > 12:                  # bounded: 12 entries
                            lru.popitem(last=False)
                    del x, tokens
                with torch.no_grad():
                    feats = torch.cat([found[r.payload] for r in batch])
                    labels = model.forward_head(feats).argmax(-1).tolist()
                del feats, found
            stats["batches"].append(len(batch))
            for r, lab in zip(batch, labels):
                r.future.set_result(lab)
            if stop:
                return

    async def go():
        queue: asyncio.Queue = asyncio.Queue()
        task = asyncio.create_task(batcher(queue))

        async def client(n):
            reqs = []
            for i in range(n):
                reqs.append(Request(i, rng.randrange(30)))
                await queue.put(reqs[-1])
                for _ in range(rng.randint(0, 2)):
                    await asyncio.sleep(0)
            return [await r.future for r in reqs]

        clients = asyncio.ensure_future(asyncio.gather(*(client(12) for _ in range(5))))
        await asyncio.wait([clients, task], return_when=asyncio.FIRST_COMPLETED)
        if task.done():                               # the batcher died: say why, do not hang
            clients.cancel()
            task.result()
        await queue.put(STOP)
        await task
        return clients.result()

    h.record(stacks="python", context=None)
    asyncio.run(go())
    h.dump()
    h.finish(leak=False, workload=f"""ViT-tiny (timm, 96 px) image classifier behind a dynamic
             batcher coroutine: 5 clients send 60 requests for 30 distinct images; the batcher takes
             up to 8 queued requests at once ({len(stats['batches'])} batches of
             {min(stats['batches'])}-{max(stats['batches'])}), copies the misses from pinned memory on a
             side stream and keeps their patch tokens in an LRU of 12 entries ({stats['hits']} hits).
             Batch sizes vary, the cache stops growing once full. History without stacks
             (context None).""")


# ----------------------------------------------------------------------------- Whisper sessions


class Session:
    def __init__(self, sid):
        self.sid, self.utterances, self.closed = sid, [], False


class Utterance:
    def __init__(self, session, features):
        self.session = session
        session.utterances.append(self)          # parent <-> child
        self.features = features
        self.on_done = self.finish               # bound method: refers back to self
        self.encoded = None
        self.log: list[dict] = []

    def finish(self, tokens):
        self.log.extend({"pos": i, "token": t, "flags": [i % 2, t % 3]} for i, t in enumerate(tokens))
        return tokens


def whisper_transcription_sessions(name):
    h = Harness(name)
    cfg = transformers.WhisperConfig(d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                     decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512,
                                     num_mel_bins=80, max_source_positions=500, vocab_size=2000,
                                     max_target_positions=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                     decoder_start_token_id=1)
    model = transformers.WhisperForConditionalGeneration(cfg).to(DEV).eval()
    sessions: dict[int, Session] = {}

    def handle(req):
        sid, feats = req.payload
        if sid not in sessions:
            for old in [s for s in sessions if s != sid]:
                sessions.pop(old).closed = True   # the session object is dropped, its cycle stays
            sessions[sid] = Session(sid)
        utt = Utterance(sessions[sid], feats.to(DEV))
        with torch.no_grad():
            utt.encoded = model.model.encoder(utt.features).last_hidden_state
            ids = torch.full((utt.features.shape[0], 1), cfg.decoder_start_token_id, device=DEV)
            for _ in range(12):
                hid = model.model.decoder(input_ids=ids, encoder_hidden_states=utt.encoded).last_hidden_state
                ids = torch.cat([ids, model.proj_out(hid[:, -1:]).argmax(-1)], 1)
        tokens = ids[0].tolist() * 20
        return utt.on_done(tokens)[:12]

    payloads = [(i // 3, torch.randn(4, 80, 1000)) for i in range(24)]
    h.record(stacks="python", context="all")
    run_server(h, handle, payloads, workers=1, kind="inference")
    sessions.clear()
    gc.collect()                                  # the server's shutdown sweep
    h.dump()
    h.finish(leak=False, workload="""Tiny Whisper (2+2 layers, 256 wide) transcribing 24 utterances
             (4 chunks of 80 x 1000 mel frames each) in sessions of 3, one worker coroutine, greedy
             decoding of 12 tokens. Each Utterance registers itself in its Session's list and keeps a
             bound method of itself, so utterances and sessions form reference cycles holding the
             mel features (1.2 MiB) and encoder output (2 MiB) of each utterance; a dropped session is freed only
             when the collector runs (automatically, with a few hundred log dicts per utterance, and
             once more at shutdown).""")


PROGRAMS = {f.__name__: f for f in (gpt2_prefix_hidden_states_server, bert_embedding_service_dedupe_ids,
                                    llama_greedy_decode_per_request_cache, vit_dynamic_batching_result_lru,
                                    whisper_transcription_sessions)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
