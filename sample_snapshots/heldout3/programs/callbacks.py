"""A callback registry: functions subscribe to named events (batch_start, batch_end, ...) and
a plain loop emits them. A leaking metrics callback and three kinds of reference cycles."""

from __future__ import annotations

import collections
import gc
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


class Registry:
    def __init__(self) -> None:
        self._subs: dict[str, list] = collections.defaultdict(list)

    def on(self, event: str):
        def register(fn):
            self._subs[event].append(fn)
            return fn
        return register

    def emit(self, event: str, **ctx) -> None:
        for fn in self._subs[event]:
            fn(**ctx)


def run_loop(h: Harness, bus: Registry, steps: int, make_batch, step_fn) -> None:
    for i in range(steps):
        with h.step():
            batch = make_batch(i)
            bus.emit("batch_start", step=i, batch=batch)
            out = step_fn(batch)
            bus.emit("batch_end", step=i, batch=batch, **out)
            del batch, out
        bus.emit("after_step", step=i)


def small_cnn(width=64, classes=10):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.BatchNorm2d(width), torch.nn.ReLU(),
        torch.nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), torch.nn.BatchNorm2d(2 * width), torch.nn.ReLU(),
        torch.nn.Conv2d(2 * width, 4 * width, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4 * width, classes)).cuda()


def image_batch(b=32, size=64, classes=10):
    return torch.randn(b, 3, size, size, device="cuda"), torch.randint(0, classes, (b,), device="cuda")


# ----------------------------------------------------------------------------- a leak


def metrics_dict_gpu_tensors_leak(name):
    import timm

    seed_all()
    h = Harness(name)
    model = timm.create_model("levit_128s", pretrained=False, num_classes=100).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    bus = Registry()
    metrics: dict[str, list] = collections.defaultdict(list)

    @bus.on("batch_end")
    def track(step, batch, loss, logits, feats):
        metrics["loss"].append(loss.detach())
        metrics["probs"].append(logits.detach().softmax(-1))
        metrics["tokens"].append(feats.detach())          # 16 x 16 x 384 floats per step

    def step_fn(batch):
        x, y = batch
        feats = model.forward_features(x)
        logits = model.forward_head(feats)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return {"loss": loss, "logits": logits, "feats": feats}

    h.record(stacks="python", context="all")
    run_loop(h, bus, 20, lambda i: image_batch(16, 224, 100), step_fn)
    h.finish(leak=True, leak_what="metrics['loss'|'probs'|'tokens'].append(...): a batch_end callback "
             "stores each step's detached loss, probabilities and 16 x 16 x 384 token features as GPU tensors",
             workload="""timm levit_128s (random init, 100 classes), AdamW, 20 steps of 16 images at
             224 x 224 run by a loop that emits events to a callback registry; a metrics callback on
             batch_end appends the step's loss, softmax probabilities and token features, all still
             on the GPU, to a dict of lists that nothing trims.""")


# ----------------------------------------------------------------------------- cycles


class StagingLease:
    """A staging buffer leased in pairs; each lease points at its partner and has a finaliser."""

    released = 0

    def __init__(self, buf: torch.Tensor) -> None:
        self.buf = buf
        self.partner: StagingLease | None = None

    def __del__(self) -> None:
        StagingLease.released += 1


def del_finalizer_pair_cycle(name):
    seed_all()
    h = Harness(name)
    model = small_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    bus = Registry()
    state = {}

    @bus.on("batch_start")
    def lease(step, batch):
        x, _ = batch
        a, b = StagingLease(x.clone()), StagingLease(torch.empty_like(x))
        a.partner, b.partner = b, a               # a cycle through objects with __del__
        state["lease"] = a

    @bus.on("batch_end")
    def give_back(step, batch, loss):
        state.pop("lease")
        state.setdefault("log", []).append([{"step": step, "n": [n]} for n in range(2500)])
        state["log"] = state["log"][-1:]

    def step_fn(batch):
        x, y = batch
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return {"loss": loss.item()}

    h.record(stacks="python", context="alloc")
    run_loop(h, bus, 14, lambda i: image_batch(64, 96), step_fn)
    h.finish(leak=False, finalizers_run=StagingLease.released, workload="""A small CNN, SGD, 14 steps
             of 64 images at 96 x 96 run by a loop with a callback registry; a batch_start callback
             leases a pair of staging buffers (7 MiB each) as two StagingLease objects that point at
             each other and define __del__, and batch_end drops them: a cycle of finalisable
             objects per step, freed only by Python's automatic collector (the callbacks' log
             records make thousands of small objects per step). Recorded with context='alloc'.""")


def collect_every3_cycles(name):
    seed_all()
    h = Harness(name)
    model = small_cnn(width=96)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    bus = Registry()

    @bus.on("batch_end")
    def keep_context(step, batch, loss, acts):
        ctx = {"step": step, "acts": acts, "input": batch[0]}
        ctx["self"] = ctx                          # a dict that contains itself

    @bus.on("after_step")
    def collect(step):
        if step % 3 == 2:
            gc.collect()

    def step_fn(batch):
        x, y = batch
        acts = model[:3](x)
        loss = F.cross_entropy(model[3:](acts), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return {"loss": loss.item(), "acts": acts.detach()}

    gc.collect()
    gc.disable()                                   # the program relies on its own collections
    h.record(stacks="all", context="all")
    run_loop(h, bus, 12, lambda i: image_batch(32, 64), step_fn)
    gc.enable()
    h.finish(leak=False, workload="""A small CNN (width 96), Adam, 12 steps of 32 images at 64 x
             64 with a callback registry; a batch_end callback puts the step's first-block
             activations (48 MiB) and input into a context dict that contains itself (a cycle), and
             an after_step callback calls gc.collect() every 3rd step, the automatic collector being
             off: allocated memory climbs for three steps and drops at each collection. Python and
             C++ stacks.""")


class Probe(torch.nn.Module):
    """A linear probe built per step; its readout closure refers back to the probe."""

    def __init__(self, feats: torch.Tensor, classes: int = 10) -> None:
        super().__init__()
        self.head = torch.nn.Linear(feats.shape[1], classes, device=feats.device)
        self.register_buffer("feats", feats)

        probe = self

        def readout():
            return probe.head(probe.feats).argmax(1)

        self.readout = readout                    # module -> __dict__ -> closure -> cell -> module


def closure_on_module_attr_cycle(name):
    seed_all()
    h = Harness(name)
    model = small_cnn(width=64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    bus = Registry()
    agreement = []

    @bus.on("batch_end")
    def probe_features(step, batch, loss, feats):
        probe = Probe(feats)
        agreement.append(float((probe.readout() == batch[1]).float().mean()))
        rows = [{"step": step, "cls": [c]} for c in range(2500)]   # a per-step report table
        del rows, probe

    def step_fn(batch):
        x, y = batch
        feats = model[:6](x)
        loss = F.cross_entropy(model[6:](feats), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return {"loss": loss.item(), "feats": feats.detach().flatten(1)[:, :16384].contiguous()}

    h.record(stacks="python", context="state")
    run_loop(h, bus, 15, lambda i: image_batch(128, 64), step_fn)
    h.finish(leak=False, workload="""A small CNN, SGD with momentum, 15 steps of 128 images at 64 x
             64 with a callback registry; a batch_end callback builds a linear Probe module on the
             step's features (128 x 16384, 8 MiB, registered as a buffer) whose readout closure, stored as
             an attribute of the module, refers back to the module: a cycle per step, freed when
             Python's automatic collector runs (the callback's report rows make thousands of small
             objects). Recorded with context='state'.""")


PROGRAMS = {f.__name__: f for f in (metrics_dict_gpu_tensors_leak, del_finalizer_pair_cycle, collect_every3_cycles,
                                     closure_on_module_attr_cycle)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
