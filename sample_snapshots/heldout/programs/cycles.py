"""Reference cycles that hold CUDA tensors, freed by Python's collector (or not at all), next
to programs whose frees are all by reference counting."""

from __future__ import annotations

import gc
import sys

import torch
from _harness import Harness, main


class Node:
    """A tree node that knows its parent and its children: a reference cycle per edge."""

    def __init__(self, value, parent=None) -> None:
        self.value = value
        self.parent = parent
        self.children: list[Node] = []
        if parent is not None:
            parent.children.append(self)


def bookkeeping(n=1200):
    """Small container objects, the way logging and metric code makes them: they move Python's
    generation-0 counter, so the automatic collector runs every step or two."""
    return [{"i": i, "tags": [i]} for i in range(n)]


def _tree_step(w, x):
    root = Node(x @ w)
    for _ in range(3):
        Node(torch.relu(root.value) * 0.5, parent=root)
    return sum(c.value.sum() for c in root.children)


def cycles_auto_gc(name):
    h = Harness(name)
    h.record(stacks="python")
    w = torch.randn(2048, 2048, device="cuda") * 0.01
    for _ in range(16):
        with h.step():
            x = torch.randn(1024, 2048, device="cuda")
            _tree_step(w, x).item()
            bookkeeping()
    h.finish(leak=False, workload="""Each step builds a small tree of Node objects (parent and child
        links: reference cycles) holding 8 MiB CUDA tensors and then drops it; nothing frees the
        tree but Python's automatic collector, which runs as the step's bookkeeping objects
        accumulate, so tensors are freed in bursts inside later steps.""")


def cycles_explicit_collect_all(name):
    h = Harness(name)
    h.record(stacks="all", max_entries=40_000)
    gc.disable()
    w = torch.randn(2048, 2048, device="cuda") * 0.01
    for step in range(12):
        with h.step():
            x = torch.randn(1024, 2048, device="cuda")
            _tree_step(w, x).item()
            if step % 4 == 3:
                gc.collect()
    gc.enable()
    h.finish(leak=False, workload="""The Node trees of cycles_auto_gc with the automatic collector
        off and gc.collect() called every 4th step: allocated memory climbs for 4 steps and drops
        at each collect, a sawtooth. Python and C++ stacks.""")


def cycles_gc_disabled_leak(name):
    h = Harness(name)
    h.record(stacks="python")
    gc.disable()
    w = torch.randn(2048, 2048, device="cuda") * 0.01
    for _ in range(10):
        with h.step():
            x = torch.randn(1024, 2048, device="cuda")
            _tree_step(w, x).item()
            bookkeeping()
    h.dump()
    gc.enable()
    h.finish(leak=True, leak_what="unreachable Node trees (reference cycles) holding their CUDA "
             "tensors, never collected because the program turned the collector off",
             unreachable_cycles_hold_cuda=True, workload="""The Node trees of cycles_auto_gc in a
             program that calls gc.disable() for speed: the cycles are garbage but nothing ever
             collects them, so every step's tensors stay (the collector never ran while recording,
             so no collection freed anything).""")


def cycles_exception_frames(name):
    h = Harness(name)
    h.record(stacks="python", context="all")
    errors = []

    def risky(x):
        big = x.repeat(4, 1)                    # a local that the traceback's frame will keep
        try:
            raise ValueError(f"bad batch {big.shape}")
        except ValueError as e:
            err = e                              # the frame now refers to the exception: a cycle
            return err

    w = torch.randn(1024, 1024, device="cuda")
    for _step in range(12):
        with h.step():
            x = torch.randn(1024, 1024, device="cuda") @ w
            errors.append(risky(x))
            if len(errors) > 2:
                errors.pop(0)                   # forgotten, but the frame <-> exception cycle remains
            bookkeeping(900)
    h.finish(leak=False, workload="""A helper catches its own exception and returns it after binding
        it to a local (err = e): the exception's traceback holds the helper's frame, whose locals
        hold the exception and a 16 MiB CUDA tensor. A list keeps the last two errors; older ones
        are dropped, but only Python's collector can free them (it runs as bookkeeping objects
        accumulate).""")


def cycles_ring_cut(name):
    h = Harness(name)
    h.record(stacks="python", max_entries=1500)
    w = torch.randn(2048, 2048, device="cuda") * 0.01
    for _ in range(40):
        with h.step():
            x = torch.randn(512, 2048, device="cuda")
            _tree_step(w, x).item()
            bookkeeping()
    h.finish(leak=False, workload="""The Node trees of cycles_auto_gc for 40 steps, with history
        in a 1,500-entry ring buffer that wrapped: the trace holds the last few steps, starting
        mid-step, with collector bursts inside them.""")


def cycles_context_none(name):
    h = Harness(name)
    h.record(context=None)
    gc.disable()
    w = torch.randn(2048, 2048, device="cuda") * 0.01
    for step in range(12):
        with h.step():
            x = torch.randn(1024, 2048, device="cuda")
            _tree_step(w, x).item()
            if step % 3 == 2:
                gc.collect()
    gc.enable()
    h.finish(leak=False, workload="""Node-tree cycles collected by gc.collect() every third step,
        recorded with context=None: the trace has every event and no stack at all.""")


def autograd_closure_cycle(name):
    h = Harness(name)
    h.record(stacks="python")
    lin = torch.nn.Linear(2048, 2048).cuda()
    opt = torch.optim.SGD(lin.parameters(), lr=1e-3)

    class Step:
        def __init__(self, x):
            self.x = x
            self.out = lin(x)
            self.on_done = lambda: self.out.sum()   # the lambda refers to self: a cycle

    for _ in range(14):
        with h.step():
            s = Step(torch.randn(1024, 2048, device="cuda"))
            s.on_done().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del s
            bookkeeping()
    h.finish(leak=False, workload="""Each training step is an object whose callback lambda refers
        back to it (self.on_done = lambda: self.out.sum()): when the step object is dropped its
        input and output (8 MiB each) wait for the automatic collector, which frees them a step
        or two later.""")


def refcount_only_autocast(name):
    h = Harness(name)
    h.record(stacks="python")
    net = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 2048)).cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    for _ in range(10):
        with h.step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = net(torch.randn(1024, 2048, device="cuda"))
                loss = out.float().square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            bookkeeping()
    h.finish(leak=False, workload="""An MLP under autocast(bfloat16), AdamW, 10 steps: autocast's
        bfloat16 weight copies are freed when the autocast region exits and activations when
        backward ends, all by reference counting; the automatic collector runs (bookkeeping
        objects) but finds no CUDA tensors in cycles.""")


PROGRAMS = {f.__name__: f for f in (cycles_auto_gc, cycles_explicit_collect_all, cycles_gc_disabled_leak,
                                     cycles_exception_frames, cycles_ring_cut, cycles_context_none,
                                     autograd_closure_cycle, refcount_only_autocast)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
