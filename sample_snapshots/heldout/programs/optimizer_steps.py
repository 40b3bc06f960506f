"""Optimizers whose state makes memory jump once, or a trace that holds nothing but an optimizer
step: growth that is not a leak."""

from __future__ import annotations

import copy
import sys

import torch
from _harness import Harness, main
from torch import nn


def mlp(width=2048, depth=4):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.SiLU()]
    return nn.Sequential(*layers).cuda()


def adam_state_first_step(name):
    h = Harness(name)
    h.record(stacks="python")
    net = mlp()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(8):
        with h.step():
            x = torch.randn(512, 2048, device="cuda")
            net(x).pow(2).mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""An MLP (4 layers of 2048), Adam, 8 steps of batch 512, traced
        from the first line: the first optimizer step allocates exp_avg and exp_avg_sq for every
        parameter (twice the parameters' size), after which each step looks like the last.""")


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=16384, n_positions=256, bos_token_id=0,
                     eos_token_id=0)
    return GPT2LMHeadModel(cfg).cuda()


def adamw_single_step_traced(name):
    h = Harness(name)
    model = _gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    for step in range(3):
        with h.step():
            ids = torch.randint(0, 16384, (8, 128), device="cuda")
            model(input_ids=ids, labels=ids).loss.backward()
            if step == 2:
                h.record(stacks="python")
                opt.step()
                h.dump()
                h.stop_recording()
            else:
                opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""GPT-2 (4 layers, width 512, vocabulary 16384) from its config,
        AdamW with foreach=False. Two steps run untraced; in the third, history is turned on after
        backward and the snapshot is taken right after opt.step(): the trace holds a single
        optimizer step, which updates each parameter in turn (per-parameter temporaries
        allocated and freed, hundreds of similar alloc/free pairs), with no growth.""")


def adamw_first_step_traced(name):
    h = Harness(name)
    model = _gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with h.step():
        ids = torch.randint(0, 16384, (8, 128), device="cuda")
        model(input_ids=ids, labels=ids).loss.backward()
        h.record(stacks="all", max_entries=20_000)
        opt.step()
        h.dump()
    h.finish(leak=False, workload="""GPT-2 (4 layers, width 512, vocabulary 16384), one forward and
        backward untraced, then history on for the very first AdamW step (foreach): the trace is
        the optimizer creating its state (exp_avg, exp_avg_sq per parameter) so memory only rises
        in it, by about twice the parameters' size, once. Python and C++ stacks.""")


def sgd_keep_grads(name):
    h = Harness(name)
    h.record(stacks="python", context="all")
    net = mlp(1024, 6)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
    for _ in range(8):
        with h.step():
            x = torch.randn(1024, 1024, device="cuda")
            net(x).abs().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=False)
    h.finish(leak=False, workload="""An MLP (6 layers of 1024), SGD with momentum, 8 steps;
        zero_grad(set_to_none=False) keeps the gradient tensors allocated (zeroed) between steps,
        so gradients and momentum buffers appear in step 1 and stay.""")


def ema_copy_second_step(name):
    h = Harness(name)
    h.record(stacks="python")
    net = mlp(2048, 3)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    ema = None
    for step in range(8):
        with h.step():
            x = torch.randn(256, 2048, device="cuda")
            net(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if step == 1:
                ema = copy.deepcopy(net).requires_grad_(False)
            elif ema is not None:
                with torch.no_grad():
                    for pe, p in zip(ema.parameters(), net.parameters()):
                        pe.lerp_(p, 0.01)
    h.finish(leak=False, workload="""An MLP (3 layers of 2048) with AdamW; at step 2 an exponential
        moving average copy of the model is made (copy.deepcopy) and updated in place afterwards:
        two step-ups (optimizer state at step 1, the EMA copy at step 2), then flat.""")


def fused_adam_warm_then_plateau(name):
    h = Harness(name)
    h.record(stacks="python")
    net = mlp(1536, 4)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, fused=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    for _ in range(10):
        with h.step():
            x = torch.randn(384, 1536, device="cuda")
            net(x).square().mean().backward()
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""An MLP (4 layers of 1536), fused Adam with a cosine learning
        rate schedule, 10 steps: state created in step 1, then a plateau.""")


PROGRAMS = {f.__name__: f for f in (adam_state_first_step, adamw_single_step_traced, adamw_first_step_traced,
                                     sgd_keep_grads, ema_copy_second_step, fused_adam_warm_then_plateau)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
