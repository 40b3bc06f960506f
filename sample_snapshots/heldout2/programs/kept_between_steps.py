"""Memory that a program keeps from one step to the next by mistake: outputs with their graphs, a
cache that never evicts, a hook that stores into its module, closures, cloned gradients, a growing
torch.cat bank, a leak that begins late, and a slow one."""

from __future__ import annotations

import os
import random
import sys

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


def llama_monitor_logits_graph_leak(name):
    from transformers import LlamaConfig, LlamaForCausalLM

    h = Harness(name)
    _seed()
    h.record(stacks="python", context="all")
    cfg = LlamaConfig(hidden_size=256, intermediate_size=704, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=512)
    model = LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    prompt = torch.randint(0, VOCAB, (4, 128), device="cuda")
    monitor = []
    for _ in range(10):
        with h.step():
            ids = torch.randint(0, VOCAB, (8, 128), device="cuda")
            model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            # "watch the next-token distribution on a fixed prompt" -- forgot no_grad
            monitor.append(model(input_ids=prompt, use_cache=False).logits[:, -1])
    h.finish(leak=True, leak_what="monitor.append(logits[:, -1]) of a forward run with autograd on and "
             "never backpropagated: each kept slice holds its graph and every activation saved for "
             "backward", workload="""A small Llama (2 layers, hidden 256, grouped-query attention) from
             its config trained with AdamW for 10 steps of 8 x 128 tokens; after each step the
             program runs a fixed 4 x 128 prompt through the model to watch the last token's logits
             and appends that slice to a list, outside no_grad, so every monitoring forward's graph
             stays on the GPU.""")


def t5_encoder_cache_by_step(name):
    from transformers import T5Config, T5EncoderModel

    h = Harness(name)
    _seed()
    h.record(stacks="python", context="alloc")
    cfg = T5Config(d_model=256, d_ff=1024, d_kv=32, num_layers=3, num_heads=8, vocab_size=VOCAB)
    encoder = T5EncoderModel(cfg).cuda().eval()
    cache: dict[int, dict] = {}
    scores = []
    for step in range(12):
        with h.step("inference"):
            ids = torch.randint(0, VOCAB, (32, 128), device="cuda")
            mask = torch.ones_like(ids)
            with torch.inference_mode():
                if step not in cache:
                    cache[step] = {"hidden": encoder(input_ids=ids, attention_mask=mask).last_hidden_state,
                                   "mask": mask}
                pooled = cache[step]["hidden"].mean(1)
                scores.append((pooled @ pooled.T).diagonal().mean().item())
    h.finish(leak=True, leak_what="a dict keyed by step number keeps every batch's encoder states (32 x "
             "128 x 256 floats) and mask; keys never repeat and nothing is evicted",
             workload="""A T5 encoder (3 layers, d_model 256) from its config encodes 12 batches of
             32 x 128 tokens under inference_mode; each batch's hidden states and attention mask are
             stored in a dict keyed by the step number "for reuse", but no key is ever asked for
             twice and the dict is never pruned. Recorded with context='alloc'.""")


def _keep_on_module(module, args, output):
    """Forward hook: remembers the stage's output on the module itself, for a later look."""
    if not hasattr(module, "seen_outputs"):
        module.seen_outputs = []
    module.seen_outputs.append(output.detach())


def regnet_hook_module_attr_leak(name):
    import timm

    h = Harness(name)
    _seed()
    h.record(stacks="all", max_entries=150_000)
    model = timm.create_model("regnetx_002", pretrained=False, num_classes=10).cuda()
    model.s3.register_forward_hook(_keep_on_module)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(8):
        with h.step():
            x = torch.randn(32, 3, 160, 160, device="cuda")
            y = torch.randint(0, 10, (32,), device="cuda")
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=True, leak_what="a forward hook on stage s3 appends the stage's (detached) output to "
             "a list attribute of that module, module.seen_outputs, on every forward",
             workload="""timm regnetx_002 (10 classes), SGD with momentum, 8 steps of 32 images at
             160 px. A forward hook registered on the third stage stores each output on the module
             (module.seen_outputs.append(output.detach())), so one stage activation per step stays
             on the GPU. Python and C++ stacks.""")


def _make_log_line(step, loss, states):
    """Builds a deferred log line; the closure captures the tensors, not their values."""
    def line():
        return f"step {step}: loss {loss.item():.4f}, state norm {states.norm().item():.2f}"
    return line


def gru_logging_closure_leak(name):
    h = Harness(name)
    _seed()
    gru = nn.GRU(128, 512, num_layers=2, batch_first=True).cuda()
    head = nn.Linear(512, 16).cuda()
    opt = torch.optim.Adam([*gru.parameters(), *head.parameters()], lr=1e-3)
    pending_logs = []
    steps = 12
    for step in range(steps):
        if step == steps - 1:
            h.record(stacks="python", context="all")     # only the last step is traced
        with h.step():
            x = torch.randn(32, 64, 128, device="cuda")
            y = torch.randint(0, 16, (32,), device="cuda")
            out, _ = gru(x)
            loss = F.cross_entropy(head(out[:, -1]), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            pending_logs.append(_make_log_line(step, loss.detach(), out.detach()))
    print(pending_logs[-1]())
    h.finish(leak=True, leak_what="deferred log closures capture each step's GRU outputs (32 x 64 x 512 "
             "floats) and loss; the list of closures is only read at the end",
             workload="""A 2-layer GRU (hidden 512) with a linear head, Adam, 12 steps of 32
             sequences of 64 steps. A logger builds a closure per step (by a factory function, so
             each captures its own step's tensors) and queues it to be formatted later; the queue
             is never flushed during training, so every step's output tensor stays. History is
             turned on only before the last step: the trace holds that one step.""")


def neox_grad_clone_history(name):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    h = Harness(name)
    _seed()
    h.record(stacks="python", max_entries=2500)
    cfg = GPTNeoXConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=1024,
                        vocab_size=VOCAB, max_position_embeddings=512)
    model = GPTNeoXForCausalLM(cfg).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    grad_history = []
    for _ in range(8):
        with h.step():
            ids = torch.randint(0, VOCAB, (8, 128), device="cuda")
            model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
            grad_history.append([p.grad.detach().clone() for p in model.parameters() if p.grad is not None])
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=True, leak_what="a clone of every parameter's gradient appended to grad_history each "
             "step (about 15 MiB a step), for a gradient-noise analysis that never runs",
             workload="""GPT-NeoX (2 layers, hidden 256) from its config, Adam, 8 steps of 8 x 128
             tokens; before each optimizer step the loop clones all gradients into a list that is
             never cleared. History in a 2,500-entry ring buffer, which wraps: the trace begins in
             a late step.""")


def deit_token_bank_cat(name):
    import timm

    h = Harness(name)
    _seed()
    h.record(stacks="python", context=None)
    model = timm.create_model("deit_tiny_patch16_224", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    bank = torch.empty(0, 197, 192, device="cuda")
    for _ in range(10):
        with h.step():
            x = torch.randn(16, 3, 224, 224, device="cuda")
            y = torch.randint(0, 10, (16,), device="cuda")
            tokens = model.forward_features(x)
            F.cross_entropy(model.forward_head(tokens), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            bank = torch.cat([bank, tokens.detach()], dim=0)    # a feature bank with no bound
    h.finish(leak=True, leak_what="a token-feature bank grown by torch.cat every step (16 x 197 x 192 "
             "floats more each time) and never trimmed",
             workload="""timm deit_tiny_patch16_224, AdamW, 10 steps of 16 images at 224 px; each
             step's token features are concatenated onto a bank tensor (torch.cat makes a larger
             copy and the old one is freed), which is never cut back. Recorded with context=None: a
             full trace with no stacks.""")


def opt_late_hidden_leak(name):
    from transformers import OPTConfig, OPTForCausalLM

    h = Harness(name)
    _seed()
    h.record(stacks="python", context="state")
    cfg = OPTConfig(hidden_size=256, num_hidden_layers=2, ffn_dim=1024, num_attention_heads=4,
                    vocab_size=VOCAB, max_position_embeddings=512, word_embed_proj_dim=256)
    model = OPTForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tracked = []
    for step in range(14):
        with h.step():
            ids = torch.randint(0, VOCAB, (16, 256), device="cuda")
            analyse = step >= 6                         # "start collecting probes after warm-up"
            out = model(input_ids=ids, labels=ids, use_cache=False, output_hidden_states=analyse)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if analyse:
                tracked.append(out.hidden_states[-1].detach())
            del out
    h.finish(leak=True, leak_what="from step 7 on, the last hidden state of every batch (16 x 256 x 256 "
             "floats) is appended to a list for a probing analysis and kept",
             workload="""OPT (2 layers, hidden 256) from its config, AdamW, 14 steps of 16 x 256
             tokens. The first 6 steps are clean (memory flat after the optimizer state appears);
             from the 7th step on the loop asks for hidden states and keeps the last layer's,
             detached, in a list: the leak starts late. Recorded with context='state'.""")


def cnn_confusion_slow_leak(name):
    h = Harness(name)
    _seed()
    h.record(stacks="python", max_entries=1500)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(32, 32)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    per_step_confusion = []
    for _ in range(40):
        with h.step():
            x = torch.randn(64, 3, 32, 32, device="cuda")
            y = torch.randint(0, 32, (64,), device="cuda")
            logits = net(x)
            F.cross_entropy(logits, y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            conf = torch.zeros(32, 32, device="cuda")
            conf.index_put_((y, logits.argmax(-1)), torch.ones(64, device="cuda"), accumulate=True)
            per_step_confusion.append(conf)             # 4 KiB a step, on the GPU
    h.finish(leak=True, leak_what="a 32 x 32 float confusion matrix (4 KiB) kept on the GPU in a list "
             "every step", workload="""A small CNN (32 classes), SGD with momentum, 40 steps of 64
             images at 32 px; each step's confusion matrix is built on the GPU and appended to a
             list that is only summed at the end, a slow leak of 4 KiB a step. History in a
             1,500-entry ring buffer, which wraps mid-run.""")


PROGRAMS = {f.__name__: f for f in (llama_monitor_logits_graph_leak, t5_encoder_cache_by_step,
                                     regnet_hook_module_attr_leak, gru_logging_closure_leak,
                                     neox_grad_clone_history, deit_token_bank_cat, opt_late_hidden_leak,
                                     cnn_confusion_slow_leak)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
