"""Record scenarios with a known cause, and training runs whose memory categories are known.

    python sample_snapshots/scenarios.py --out DIR [SCENARIO ...]

Needs PyTorch and a CUDA GPU. Like workloads.py (whose ``Run`` it uses), each scenario runs
in a process of its own, records with torch's own API, and writes ``NAME.pickle`` and
``NAME.truth.json``. The truth says what the scenario is known to be: ``cause`` (a
reference cycle, a leak, a plateau, a burst that is not a cycle, or a kind of OOM) and,
for the training runs, parameter, gradient and optimizer-state bytes summed over the live
tensors. Most scenarios run twice, with ``stacks="python"`` (``NAME_py``) and
``stacks="all"`` (``NAME_all``).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import MiB, Run, _mlp, run_each  # noqa: E402


def _blob(torch, mib: int):
    return torch.empty(mib * MiB, dtype=torch.uint8, device="cuda")


# -- reference cycles -----------------------------------------------------------------------
class _Node:
    def __init__(self, tensor) -> None:
        self.tensor = tensor
        self.other = None


def cycle_simple(run: Run) -> None:
    """Each iteration's tensor sits in a two-node cycle; gc is disabled between collections
    the interpreter would run anyway, so they pile up until the cap."""
    run.truth.update(cause="reference_cycle", cycles=True, oom_kind="capacity")
    run.cap(2)
    torch = run.torch
    gc.disable()
    try:
        for _ in range(200):
            a, b = _Node(_blob(torch, 64)), _Node(None)
            a.other, b.other = b, a
    except torch.OutOfMemoryError as exc:
        run.truth["oom"] = True
        run.truth["oom_message"] = str(exc).splitlines()[0]
    gc.enable()


class _Awaitable:
    """The blog's callback leak: a tensor's view callback captures ``self``."""

    def __init__(self, tensor) -> None:
        self.tensor = tensor
        self.callback = lambda: self.tensor.view(-1)


def cycle_awaitable(run: Run) -> None:
    """The blog's callback leak. Each iteration's Python allocations run a young collection
    while its object is still in use, so every object survives into the middle generation
    and is freed only when that generation is collected: in bursts at the loop's own line.
    Later a large request fails while a pile is waiting for the collector."""
    run.truth.update(cause="reference_cycle", cycles=True, oom_kind="capacity")
    run.cap(4)
    torch = run.torch
    gc.collect()
    gc.set_threshold(700, 20, 10)
    for i in range(120):
        pending = _Awaitable(_blob(torch, 64))
        _junk = [[] for _ in range(800)]  # Python allocations: the collector runs here
        del pending, _junk
        if i >= 50:
            try:
                big = _blob(torch, 3300)
                del big
            except torch.OutOfMemoryError as exc:
                run.truth["oom"] = True
                run.truth["oom_message"] = str(exc).splitlines()[0]
                break


def cycle_gc_interval(run: Run) -> None:
    run.truth.update(cause="reference_cycle", cycles=True, oom_kind=None)
    torch = run.torch
    gc.disable()
    for step in range(40):
        a, b = _Node(_blob(torch, 32)), _Node(None)
        a.other, b.other = b, a
        if step % 10 == 9:
            gc.collect()
    gc.enable()


# -- big bursts that are not cycles ---------------------------------------------------------------
def exception_cleanup(run: Run) -> None:
    """An OOM is caught; the exception's traceback keeps the failing frame's tensors alive
    until the handler ends, then they go in one burst."""
    run.truth.update(cause="exception_cleanup", cycles=False, oom_kind="capacity")
    run.cap(2)
    torch = run.torch

    def fill() -> None:
        held = []
        while True:
            held.append(_blob(torch, 128))

    for _ in range(2):
        try:
            fill()
        except torch.OutOfMemoryError:
            run.truth["oom"] = True
        _blob(torch, 64)  # work goes on after the burst


def del_model(run: Run) -> None:
    run.truth.update(cause="del_model", cycles=False, oom_kind=None)
    torch = run.torch
    for _ in range(3):
        model = _mlp(torch, 2048, 4)
        opt = torch.optim.Adam(model.parameters())
        model(torch.randn(256, 2048, device="cuda")).sum().backward()
        opt.step()
        del model, opt


def optimizer_state_replaced(run: Run) -> None:
    run.truth.update(cause="optimizer_state_replaced", cycles=False, oom_kind=None)
    torch = run.torch
    model = _mlp(torch, 2048, 3)
    for _ in range(3):
        opt = torch.optim.Adam(model.parameters())  # the old optimizer's state goes with it
        model(torch.randn(256, 2048, device="cuda")).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def empty_cache(run: Run) -> None:
    run.truth.update(cause="empty_cache", cycles=False, oom_kind=None)
    torch = run.torch
    for _ in range(3):
        blobs = [_blob(torch, 32) for _ in range(16)]
        del blobs
        torch.cuda.empty_cache()


def eval_loop_end(run: Run) -> None:
    """An evaluation keeps every batch's outputs in a dict, all freed when it returns."""
    run.truth.update(cause="eval_loop_end", cycles=False, oom_kind=None)
    torch = run.torch
    model = _mlp(torch, 2048, 2)

    def evaluate() -> float:
        outputs = {}
        with torch.no_grad():
            for i in range(24):
                outputs[i] = model(torch.randn(512, 2048, device="cuda"))
        return sum(float(o.mean()) for o in outputs.values())

    for _ in range(3):
        evaluate()


def zero_grad_bursts(run: Run) -> None:
    run.truth.update(cause="zero_grad", cycles=False, oom_kind=None)
    torch = run.torch
    model = _mlp(torch, 2048, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _ in range(6):
        model(torch.randn(256, 2048, device="cuda")).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


# -- leaks and plateaus ---------------------------------------------------------------------
def leak_loss_list(run: Run) -> None:
    run.truth.update(cause="leak", leak=True, cycles=False, oom_kind=None, leak_line="losses.append(loss)")
    torch = run.torch
    model = _mlp(torch, 1024, 3)
    losses = []
    for _ in range(25):
        loss = model(torch.randn(512, 1024, device="cuda")).square().mean()
        losses.append(loss)  # keeps each step's graph and activations alive
    run.truth["kept"] = len(losses)


def leak_cache_dict(run: Run) -> None:
    run.truth.update(cause="leak", leak=True, cycles=False, oom_kind=None)
    torch = run.torch
    cache = {}
    for step in range(30):
        cache[step] = torch.randn(1024, 1024, device="cuda")  # never evicted
        _ = torch.randn(2048, 2048, device="cuda").sum()
    run.truth["kept"] = len(cache)


def leak_hooks(run: Run) -> None:
    run.truth.update(cause="leak", leak=True, cycles=False, oom_kind=None)
    torch = run.torch
    model = _mlp(torch, 1024, 3)
    kept = []
    model[0].register_forward_hook(lambda m, i, o: kept.append(o))
    for _ in range(20):
        model(torch.randn(256, 1024, device="cuda")).sum().backward()
    run.truth["kept"] = len(kept)


def plateau_warmup(run: Run) -> None:
    run.truth.update(cause="plateau", leak=False, cycles=False, oom_kind=None)
    torch = run.torch
    model = _mlp(torch, 2048, 3)
    opt = torch.optim.Adam(model.parameters())
    for _ in range(12):  # Adam's state appears at the first step, then nothing grows
        model(torch.randn(256, 2048, device="cuda")).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def plateau_bounded_cache(run: Run) -> None:
    run.truth.update(cause="plateau", leak=False, cycles=False, oom_kind=None)
    torch = run.torch
    from collections import OrderedDict

    cache: OrderedDict = OrderedDict()
    for step in range(40):
        cache[step] = torch.randn(512, 1024, device="cuda")
        if len(cache) > 8:
            cache.popitem(last=False)
        _ = torch.randn(1024, 1024, device="cuda").sum()


def kv_cache_grows_then_freed(run: Run) -> None:
    run.truth.update(cause="plateau", leak=False, cycles=False, oom_kind=None,
                     note="a KV cache grows through one generation and is freed at its end, three times")
    torch = run.torch
    for _ in range(3):
        keys = []
        for _ in range(24):
            keys.append(torch.randn(8, 64, 1024, device="cuda"))
        del keys


# -- OOMs of each kind ----------------------------------------------------------------------------
def oom_fragmentation(run: Run) -> None:
    """Two 1000 MiB tensors are freed and their segments split by 44 MiB blocks; every other
    block is freed, so about 1 GiB sits free in 44 MiB holes that a 1.2 GiB request
    cannot use, and the cap leaves no room for a new segment."""
    run.truth.update(cause="oom", oom_kind="fragmentation", cycles=False)
    run.cap(3)
    torch = run.torch
    big = [_blob(torch, 1000), _blob(torch, 1000)]
    del big
    blocks = [_blob(torch, 44) for _ in range(44)]
    kept = blocks[::2]
    del blocks
    try:
        _blob(torch, 1228)
    except torch.OutOfMemoryError as exc:
        run.truth["oom"] = True
        run.truth["oom_message"] = str(exc).splitlines()[0]
    run.truth["kept_blocks"] = len(kept)


def oom_capacity(run: Run) -> None:
    run.truth.update(cause="oom", oom_kind="capacity", cycles=False)
    run.cap(2)
    torch = run.torch
    held = []
    try:
        while True:
            held.append(_blob(torch, 256))
    except torch.OutOfMemoryError as exc:
        run.truth["oom"] = True
        run.truth["oom_message"] = str(exc).splitlines()[0]


def oom_growing_batch(run: Run) -> None:
    """A batch that grows under a small per-process cap (the cap's headroom and a segment
    pinned by one live block both matter)."""
    run.truth.update(cause="oom", oom_kind="process_cap", cycles=False)
    torch = run.torch
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(0.05)
    run.truth["cap_bytes"] = int(0.05 * total)
    model = _mlp(torch, 4096, 2)
    pinned = _blob(torch, 64)
    batch = 512
    try:
        while True:
            x = torch.randn(batch, 4096, device="cuda")
            model(x).sum().backward()
            del x
            batch = int(batch * 1.5)
    except torch.OutOfMemoryError as exc:
        run.truth["oom"] = True
        run.truth["oom_message"] = str(exc).splitlines()[0]
        run.truth["oom_batch"] = batch
    del pinned


# -- training runs with known categories --------------------------------------------------------
def _train(run: Run, make_opt, steps: int = 3, width: int = 2048, depth: int = 3, set_to_none: bool = True,
           amp: bool = False) -> None:
    torch = run.torch
    model = _mlp(torch, width, depth)
    opt = make_opt(torch, model.parameters())
    scaler = torch.amp.GradScaler("cuda") if amp else None
    for step in range(steps):
        x = torch.randn(512, width, device="cuda")
        if amp:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).float().square().mean()
            scaler.scale(loss).backward()
            run.model_bytes(model, opt)  # gradients as they are just before zero_grad
            scaler.step(opt)
            scaler.update()
        else:
            loss = model(x).square().mean()
            loss.backward()
            run.model_bytes(model, opt)
            opt.step()
        if step == steps - 1:
            run.model_bytes(model, opt)
            run.truth["gradients_bytes_before_zero_grad"] = run.truth["gradients_bytes"]
        opt.zero_grad(set_to_none=set_to_none)
    run.model_bytes(model, opt)
    run.truth.update(cause="training", zero_grad_set_to_none=set_to_none)
    run.finish()  # while the model and the optimizer are alive: the file's end holds them


def train_mlp_sgd(run: Run) -> None:
    _train(run, lambda torch, p: torch.optim.SGD(p, lr=1e-3, momentum=0.9))


def train_mlp_adam(run: Run) -> None:
    _train(run, lambda torch, p: torch.optim.Adam(p, lr=1e-3))


def train_adamw_amp(run: Run) -> None:
    _train(run, lambda torch, p: torch.optim.AdamW(p, lr=1e-3), amp=True)


def train_keep_grads(run: Run) -> None:
    _train(run, lambda torch, p: torch.optim.Adam(p, lr=1e-3), set_to_none=False)


def train_fused_adam(run: Run) -> None:
    _train(run, lambda torch, p: torch.optim.Adam(p, lr=1e-3, fused=True))


def train_foreach_adamw(run: Run) -> None:
    _train(run, lambda torch, p: torch.optim.AdamW(p, lr=1e-3, foreach=True))


SCENARIOS = {f.__name__: f for f in (
    cycle_simple, cycle_awaitable, cycle_gc_interval, exception_cleanup, del_model, optimizer_state_replaced,
    empty_cache, eval_loop_end, zero_grad_bursts, leak_loss_list, leak_cache_dict, leak_hooks, plateau_warmup,
    plateau_bounded_cache, kv_cache_grows_then_freed, oom_fragmentation, oom_capacity, oom_growing_batch,
    train_mlp_sgd, train_mlp_adam, train_adamw_amp, train_keep_grads, train_fused_adam, train_foreach_adamw,
)}
ENV = {"oom_growing_batch_expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}


def names() -> list[str]:
    out = [f"{name}_{stacks}" for name in SCENARIOS for stacks in ("py", "all")]
    return out + ["oom_growing_batch_expandable_py"]


def run_one(name: str, out_dir: str) -> None:
    base, _, stacks = name.rpartition("_")
    scenario = SCENARIOS[base.removesuffix("_expandable")]
    run = Run(os.path.join(out_dir, name), stacks="all" if stacks == "all" else "python",
              workload=(scenario.__doc__ or scenario.__name__).split("\n\n")[0].replace("\n", " ").strip())
    scenario(run)
    if not run.done:
        run.finish()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenarios"))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args(argv)
    if args.one:
        run_one(args.one, args.out)
        return 0
    return run_each(__file__, args.out, args.scenarios or names(), lambda name: ENV.get(name.rpartition("_")[0], {}))


if __name__ == "__main__":
    sys.exit(main())
