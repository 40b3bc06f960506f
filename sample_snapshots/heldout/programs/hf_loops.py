"""Plain training and inference loops around transformers models built from their configs,
written the way notebooks and short scripts write them."""

from __future__ import annotations

import sys

import torch
from _harness import Harness, main

VOCAB = 8192


def gpt2(layers=2, width=256, heads=4, positions=512):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, vocab_size=VOCAB, n_positions=positions,
                     bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg).cuda()


def gpt2_loss_history_leak(name):
    h = Harness(name)
    h.record(stacks="all", max_entries=80_000)
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    history = []
    for _step in range(8):
        with h.step():
            ids = torch.randint(0, VOCAB, (8, 128), device="cuda")
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad()
            val = torch.randint(0, VOCAB, (8, 128), device="cuda")
            val_loss = model(input_ids=val, labels=val).loss   # no torch.no_grad(): a graph is built
            history.append(val_loss)             # for a plot later: keeps that graph alive
    h.finish(leak=True, leak_what="history.append(val_loss): each validation loss, computed without "
             "no_grad and never backpropagated, keeps its autograd graph and the activations saved "
             "for backward", workload="""GPT-2 (2 layers, width 256) from its config, AdamW, 8 steps
             of batch 8 x 128, each followed by a validation batch whose loss is computed with
             autograd on and appended (as a tensor) to a history list: each validation graph's
             saved activations stay on the GPU. Recorded with Python and C++ stacks.""")


def gpt2_loss_item_ok(name):
    h = Harness(name)
    h.record(stacks="python")
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    history = []
    for _step in range(8):
        with h.step():
            ids = torch.randint(0, VOCAB, (8, 128), device="cuda")
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            history.append(loss.item())
    h.finish(leak=False, workload="""GPT-2 (2 layers, width 256), AdamW, 8 steps; the loss is logged
        as loss.item() (a Python float). Optimizer state appears in step 1, then memory repeats
        step after step.""")


def gpt2_total_loss_tensor_leak(name):
    h = Harness(name)
    h.record(stacks="python", context="alloc")
    model = gpt2(layers=3)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    val_total = 0
    for _step in range(10):
        with h.step():
            ids = torch.randint(0, VOCAB, (4, 192), device="cuda")
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()                     # frees this graph's saved tensors
            opt.step()
            opt.zero_grad(set_to_none=True)
            val = torch.randint(0, VOCAB, (4, 192), device="cuda")
            val_total += model(input_ids=val, labels=val).loss   # graph kept: chained into val_total
    print("mean val loss", (val_total / 10).item())
    h.finish(leak=True, leak_what="val_total += loss on validation losses computed with autograd on: "
             "the running sum chains every validation graph, whose saved activations stay alive",
             workload="""GPT-2 (3 layers, width 256), SGD with momentum, 10 steps of batch 4 x 192,
             each with a validation batch whose loss is added to a running tensor total outside
             no_grad; the training loss itself is backpropagated (its graph is freed). Recorded
             with context='alloc'.""")


def llama_kvcache_requests(name):
    from transformers import LlamaConfig, LlamaForCausalLM

    h = Harness(name)
    h.record(stacks="python", max_entries=150_000)
    cfg = LlamaConfig(hidden_size=384, intermediate_size=1024, num_hidden_layers=3, num_attention_heads=6,
                      num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).cuda().eval()
    for request in range(4):
        with h.step("inference"):
            ids = torch.randint(0, VOCAB, (2, 48 + 16 * request), device="cuda")
            past = None
            with torch.inference_mode():
                for _ in range(64):
                    out = model(input_ids=ids if past is None else ids[:, -1:], past_key_values=past, use_cache=True)
                    past = out.past_key_values
                    ids = torch.cat([ids, out.logits[:, -1:].argmax(-1)], dim=1)
            del past, out
    h.finish(leak=False, workload="""A small Llama (3 layers, hidden 384, grouped-query attention)
        from its config serving 4 requests one after the other: greedy decoding of 64 tokens each
        with transformers' cache, which grows its key/value tensors by torch.cat every token and
        is dropped when the request ends. Memory climbs within a request and falls after it.""")


def t5_generate_batches(name):
    from transformers import T5Config, T5ForConditionalGeneration

    h = Harness(name)
    h.record(stacks="python", context="state")
    cfg = T5Config(d_model=256, d_ff=1024, d_kv=32, num_layers=3, num_decoder_layers=3, num_heads=8,
                   vocab_size=VOCAB, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = T5ForConditionalGeneration(cfg).cuda().eval()
    outputs = []
    for i in range(5):
        with h.step("inference"):
            src = torch.randint(2, VOCAB, (8, 64 + 32 * i), device="cuda")
            with torch.no_grad():
                gen = model.generate(src, max_new_tokens=24, min_new_tokens=24, do_sample=False, num_beams=1)
            outputs.append(gen.cpu())
    h.finish(leak=False, workload="""T5 (3+3 layers, d_model 256) from its config generating 24
        tokens greedily for 5 batches of growing source length; results moved to the CPU.
        Recorded with context='state' (stacks kept only for blocks alive at the dump).""")


def bert_eval_between_steps_ring(name):
    from transformers import BertConfig, BertForSequenceClassification

    h = Harness(name)
    h.record(stacks="python", max_entries=2500)
    cfg = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                     vocab_size=VOCAB, num_labels=3)
    model = BertForSequenceClassification(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    for _step in range(10):
        with h.step("train"):
            model.train()
            ids = torch.randint(0, VOCAB, (16, 128), device="cuda")
            y = torch.randint(0, 3, (16,), device="cuda")
            model(input_ids=ids, labels=y).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        with h.step("eval"):
            model.eval()
            with torch.no_grad():
                logits = model(input_ids=torch.randint(0, VOCAB, (64, 128), device="cuda")).logits
                acc = (logits.argmax(-1) == 0).float().mean().item()
    h.finish(leak=False, workload=f"""BERT (4 layers, hidden 256) for classification from its
        config: 10 AdamW steps of batch 16, each followed by an evaluation batch of 64 under
        no_grad (last accuracy {acc:.2f}). History kept in a 2,500-entry ring buffer, which
        wrapped: the trace starts in the middle of a late step.""")


def gpt2_seq_curriculum(name):
    h = Harness(name)
    h.record(stacks="python")
    model = gpt2(layers=2, width=384, heads=6)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for _step, seq in enumerate((64, 96, 128, 192, 256, 320, 384, 448, 512)):
        with h.step():
            ids = torch.randint(0, VOCAB, (8, seq), device="cuda")
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""GPT-2 (2 layers, width 384), Adam, a curriculum whose sequence
        length grows every step (64 to 512 tokens): each step's peak is higher than the last, but
        everything a step allocates is freed when it ends.""")


def lora_frozen_base(name):
    h = Harness(name)
    h.record(stacks="python")
    model = gpt2(layers=4, width=512, heads=8)
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = []
    for block in model.transformer.h:
        a = torch.nn.Linear(512, 8, bias=False).cuda()
        b = torch.nn.Linear(8, 512 * 3, bias=False).cuda()
        torch.nn.init.zeros_(b.weight)
        base = block.attn.c_attn

        def patched(x, base=base, a=a, b=b, orig=base.forward):
            return orig(x) + b(a(x))
        base.forward = patched
        adapters += [a, b]
    opt = torch.optim.AdamW([p for m in adapters for p in m.parameters()], lr=1e-3)
    for _step in range(6):
        with h.step():
            ids = torch.randint(0, VOCAB, (8, 256), device="cuda")
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""A frozen GPT-2 (4 layers, width 512) with low-rank adapters
        (rank 8) added to each attention projection; only the adapters train (AdamW, 6 steps):
        gradients and optimizer state exist only for them.""")


PROGRAMS = {f.__name__: f for f in (gpt2_loss_history_leak, gpt2_loss_item_ok, gpt2_total_loss_tensor_leak,
                                     llama_kvcache_requests, t5_generate_batches, bert_eval_between_steps_ring,
                                     gpt2_seq_curriculum, lora_frozen_base)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
