"""Notebook cells pasted into a function: flat script bodies, globals-style state, a loop at
the bottom. Leaks, look-alikes, library frees and a cycle."""

from __future__ import annotations

import collections
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _harness import Harness, main  # noqa: E402


def seed_all(seed: int = 0) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


# ----------------------------------------------------------------------------- leaks


def gpt2_epoch_preds_never_scored_leak(name):
    from transformers import GPT2Config, GPT2LMHeadModel

    seed_all()
    h = Harness(name)
    # cell 1: model
    cfg = GPT2Config(vocab_size=2000, n_embd=256, n_layer=2, n_head=4, n_positions=128)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    # cell 2: bookkeeping for the epoch-end perplexity/calibration report
    steps_per_epoch = 500
    epoch_preds = []
    # cell 3: train
    h.record(stacks="python", context="alloc")
    for step in range(24):
        with h.step():
            ids = torch.randint(0, 2000, (8, 64), device="cuda")
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            epoch_preds.append(out.logits.detach().softmax(-1))
            if (step + 1) % steps_per_epoch == 0:     # never reached in this run
                epoch_preds.clear()
    h.finish(leak=True, leak_what="epoch_preds.append(logits.softmax(-1)): every step's 8 x 64 x 2000 "
             "probabilities (4 MiB) kept for an epoch-end report 500 steps away",
             workload="""GPT-2 (2 layers, width 256, vocabulary 2000) from its config, AdamW, 24
             steps written as notebook cells; each step's softmaxed logits are appended to a list
             for a calibration report at the end of a 500-step epoch, which the run never reaches.
             Recorded with context='alloc'.""")


HIDDEN = []


def vit_hook_hidden_states_leak(name):
    import timm

    seed_all()
    h = Harness(name)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def save_hidden(module, inputs, output):
        HIDDEN.append(output.detach())            # "for probing later"

    model.blocks[-1].register_forward_hook(save_hidden)
    h.record(stacks="python", context="all", max_entries=2000)
    for _ in range(16):
        with h.step():
            x = torch.randn(8, 3, 224, 224, device="cuda")
            y = torch.randint(0, 10, (8,), device="cuda")
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=True, leak_what="HIDDEN.append(output.detach()) in a forward hook on the last ViT block: "
             "8 x 197 x 192 hidden states (1.2 MiB) per step in a module-level list",
             workload="""timm vit_tiny_patch16_224 (random init), AdamW, 16 steps of 8 images; a
             forward hook on the last transformer block appends its (detached) hidden states to a
             global list for probing later. Recorded into a ring buffer of 2,000 entries, cut
             mid-run.""")


# ----------------------------------------------------------------------------- look-alikes


def resnet_amp_loss_deque(name):
    import timm

    seed_all()
    h = Harness(name)
    model = timm.create_model("resnet18", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    recent = collections.deque(maxlen=8)          # smoothed loss for the progress bar
    h.record(stacks="python", context="all")
    for step in range(30):
        with h.step():
            x = torch.randn(32, 3, 96, 96, device="cuda")
            y = torch.randint(0, 10, (32,), device="cuda")
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            recent.append(loss.detach())
            if step % 10 == 9:
                print(f"step {step}: {torch.stack(list(recent)).mean().item():.3f}")
    h.finish(leak=False, workload="""timm resnet18 (random init) trained with mixed precision:
             torch.autocast(float16) around the forward, GradScaler, SGD with momentum, 30 steps of
             32 images at 96 x 96; the last 8 detached losses are kept on the GPU in a
             deque(maxlen=8) for a smoothed progress line: it fills in 8 steps, then stays.""")


def qwen2_autocast_regions_loop(name):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    seed_all()
    h = Harness(name)
    cfg = Qwen2Config(vocab_size=3000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    model = Qwen2ForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    h.record(stacks="all", context="all")
    for _ in range(8):
        with h.step():
            ids = torch.randint(0, 3000, (8, 128), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=ids).logits
            loss = F.cross_entropy(logits[:, :-1].float().flatten(0, 1), ids[:, 1:].flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""Qwen2 (2 layers, width 256) from its config trained with the
             forward inside torch.autocast(bfloat16) regions and the loss outside in float32, AdamW,
             8 steps of 8 x 128 tokens; the bf16 weight copies autocast makes are freed when each
             region exits. Python and C++ stacks.""")


def phi_checkpoint_nonreentrant(name):
    from torch.utils.checkpoint import checkpoint
    from transformers import PhiConfig, PhiForCausalLM

    seed_all()
    h = Harness(name)
    cfg = PhiConfig(vocab_size=3000, hidden_size=256, intermediate_size=1024, num_hidden_layers=3,
                    num_attention_heads=4, max_position_embeddings=256)
    model = PhiForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    body = model.model

    def block_fn(layer, x, pos_emb, pos_ids):
        out = layer(x, position_embeddings=pos_emb, position_ids=pos_ids)
        return out[0] if isinstance(out, tuple) else out

    h.record(stacks="python", context="all")
    for _ in range(8):
        with h.step():
            ids = torch.randint(0, 3000, (8, 128), device="cuda")
            pos_ids = torch.arange(128, device="cuda")[None].expand(8, -1)
            x = body.embed_tokens(ids)
            pos_emb = body.rotary_emb(x, pos_ids)
            for layer in body.layers:
                x = checkpoint(block_fn, layer, x, pos_emb, pos_ids, use_reentrant=False)
            logits = model.lm_head(body.final_layernorm(x))
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""Phi (3 layers, width 256) from its config, each decoder layer
             run through torch.utils.checkpoint.checkpoint(use_reentrant=False): the layers'
             activations are dropped in the forward and recomputed (and freed again) during the
             backward. AdamW, 8 steps of 8 x 128 tokens.""")


# ----------------------------------------------------------------------------- a cycle


class ActNode:
    """One recorded activation; knows its parent and its children."""

    def __init__(self, name, tensor, parent=None) -> None:
        self.name, self.tensor, self.parent, self.children = name, tensor, parent, []
        if parent is not None:
            parent.children.append(self)


def activation_nodes_backptr_auto_gc(name):
    seed_all()
    h = Harness(name)
    layers = torch.nn.ModuleList(torch.nn.Linear(2048, 2048) for _ in range(4)).cuda()
    opt = torch.optim.SGD(layers.parameters(), lr=1e-3)
    norms = []
    h.record(stacks="python", context="all")
    for _ in range(20):
        with h.step():
            x = torch.randn(1024, 2048, device="cuda")
            node = root = ActNode("input", x)
            for i, lin in enumerate(layers):
                x = torch.relu(lin(x))
                node = ActNode(f"layer{i}", x, parent=node)
            loss = x.pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            norms.append({"root": root.name, "depth": len(root.children), "loss": loss.item()})
            trace_rows = [{"layer": i, "stat": [i, i]} for i in range(3000)]   # a cell's debug table
            del trace_rows, root, node, x, loss
    h.finish(leak=False, workload="""A 4-layer MLP (2048 wide, batch 1024) whose activations are
             recorded in a tree of ActNode objects with parent and child links (reference cycles),
             8 MiB each; the tree is dropped at the end of each step and nothing frees it but
             Python's automatic collector, which runs as each step's debug tables of small objects
             accumulate. 20 steps.""")


PROGRAMS = {f.__name__: f for f in (gpt2_epoch_preds_never_scored_leak, vit_hook_hidden_states_leak,
                                     resnet_amp_loss_deque, qwen2_autocast_regions_loop,
                                     phi_checkpoint_nonreentrant, activation_nodes_backptr_auto_gc)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
