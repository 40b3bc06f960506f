"""Record a matrix of real training workloads, each with a truth file from the live objects.

    python sample_snapshots/workloads.py --out DIR [SCENARIO ...]

Needs PyTorch and a CUDA GPU (transformers for the ``hf_*`` scenarios). Each scenario runs
in a process of its own, records with torch's own API (``_record_memory_history`` and
``_dump_snapshot``, not memtui's recorder, so memtui is checked on files written the
way users write them) and leaves ``DIR/NAME.pickle`` plus ``DIR/NAME.truth.json``: what the
scenario did and figures taken from the model objects themselves (parameter, gradient
and optimizer-state bytes, the allocator's own counters just before the dump, whether
and where an OOM happened). sample_snapshots/README.md says what each file shows.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import threading

MiB = 1 << 20
GiB = 1 << 30


def _torch():
    import torch

    return torch


class Run:
    """One recording: history on at the start, the dump and the truth file at the end."""

    def __init__(self, out: str, *, stacks: str = "python", context: str | None = "all",
                 max_entries: int = 100_000, **facts) -> None:
        self.torch = _torch()
        self.out = out
        self.done = False
        self.truth: dict = {"stacks": stacks, "context": context, "max_entries": max_entries, **facts}
        self.torch.cuda.memory._record_memory_history(
            enabled="all" if context is not None else "state", context=context, stacks=stacks,
            max_entries=max_entries)

    def cap(self, gib: float) -> None:
        """A per-process cap of ``gib`` GiB, as ``set_per_process_memory_fraction`` sets one."""
        total = self.torch.cuda.get_device_properties(0).total_memory
        self.torch.cuda.set_per_process_memory_fraction(gib * GiB / total)
        self.truth["cap_bytes"] = int(gib * GiB)

    def model_bytes(self, model, optimizer=None) -> None:
        """Parameter, gradient and optimizer-state bytes, summed over the live tensors."""
        torch = self.torch
        params = list(model.parameters())
        self.truth["parameters_bytes"] = sum(p.numel() * p.element_size() for p in params)
        self.truth["gradients_bytes"] = sum(p.grad.numel() * p.grad.element_size() for p in params
                                            if p.grad is not None)
        if optimizer is not None:
            state = 0
            for per_param in optimizer.state.values():
                for value in per_param.values():
                    if torch.is_tensor(value) and value.is_cuda:
                        state += value.numel() * value.element_size()
            self.truth["optimizer_state_bytes"] = state

    def finish(self) -> None:
        self.done = True
        torch = self.torch
        torch.cuda.synchronize()
        self.truth["memory_allocated"] = torch.cuda.memory_allocated()
        self.truth["memory_reserved"] = torch.cuda.memory_reserved()
        self.truth["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        torch.cuda.memory._dump_snapshot(self.out + ".pickle")
        torch.cuda.memory._record_memory_history(enabled=None)
        self.truth.setdefault("oom", False)
        self.truth["torch"] = torch.__version__
        self.truth["gpu"] = torch.cuda.get_device_name(0)
        with open(self.out + ".truth.json", "w") as f:
            json.dump(self.truth, f, indent=2, sort_keys=True)
            f.write("\n")


def _gpt2(torch, layers: int = 2, width: int = 256):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=layers, n_embd=width, n_head=4, vocab_size=4096, n_positions=256)
    return GPT2LMHeadModel(config).cuda()


def _mlp(torch, width: int = 1024, depth: int = 3):
    from torch import nn

    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers).cuda()


def _hf(out: str, stacks: str) -> None:
    run = Run(out, stacks=stacks, workload="GPT-2 (2 layers, width 256) from its config, AdamW, 3 steps")
    torch = run.torch
    model = _gpt2(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(3):
        ids = torch.randint(0, 4096, (8, 128), device="cuda")
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        run.model_bytes(model, opt)
        opt.zero_grad(set_to_none=True)
    run.truth["gradients_bytes_before_zero_grad"] = run.truth.pop("gradients_bytes")
    run.finish()


def hf_gpt2_python(out: str) -> None:
    _hf(out, "python")


def hf_gpt2_all(out: str) -> None:
    _hf(out, "all")


def _compiled(out: str, mode: str | None, what: str) -> None:
    run = Run(out, stacks="python", workload=what)
    torch = run.torch
    model = _mlp(torch, 1024, 3)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    step = torch.compile(model, mode=mode) if mode else torch.compile(model)
    for _ in range(4):
        x = torch.randn(256, 1024, device="cuda")
        loss = step(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    run.model_bytes(model, opt)
    run.finish()


def compile_default(out: str) -> None:
    _compiled(out, None, "MLP under torch.compile (default mode), SGD, 4 steps")


def compile_cudagraphs(out: str) -> None:
    _compiled(out, "reduce-overhead", "MLP under torch.compile(mode='reduce-overhead'): CUDA graphs, private pool")


def checkpointing(out: str) -> None:
    from torch.utils.checkpoint import checkpoint

    run = Run(out, stacks="all", workload="8-block MLP with activation checkpointing per block, Adam, 3 steps")
    torch = run.torch
    blocks = torch.nn.ModuleList([_mlp(torch, 1024, 1) for _ in range(8)])
    opt = torch.optim.Adam(blocks.parameters(), lr=1e-3)
    for _ in range(3):
        h = torch.randn(512, 1024, device="cuda", requires_grad=True)
        for block in blocks:
            h = checkpoint(block, h, use_reentrant=False)
        h.square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    run.model_bytes(blocks, opt)
    run.finish()


def amp_gradscaler(out: str) -> None:
    run = Run(out, stacks="python", workload="MLP with autocast(float16) and GradScaler, AdamW, 3 steps")
    torch = run.torch
    model = _mlp(torch, 2048, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(3):
        x = torch.randn(512, 2048, device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).float().square().mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        run.model_bytes(model, opt)
        opt.zero_grad(set_to_none=False)
    run.truth["zero_grad_set_to_none"] = False
    run.finish()


def grad_accumulation(out: str) -> None:
    run = Run(out, stacks="python", workload="MLP, 4 micro-batches accumulated per step, SGD momentum, 2 steps")
    torch = run.torch
    model = _mlp(torch, 1024, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    for _ in range(2):
        for _ in range(4):
            x = torch.randn(256, 1024, device="cuda")
            (model(x).square().mean() / 4).backward()
        opt.step()
        run.model_bytes(model, opt)
        opt.zero_grad(set_to_none=True)
    run.finish()


def expandable_training(out: str) -> None:
    run = Run(out, stacks="all", workload="expandable segments; MLP training with batch 64..1024, Adam")
    torch = run.torch
    model = _mlp(torch, 2048, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for batch in (64, 256, 1024, 256, 64):
        x = torch.randn(batch, 2048, device="cuda")
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    run.model_bytes(model, opt)
    run.finish()


def ring_wrapped(out: str) -> None:
    run = Run(out, stacks="python", max_entries=600,
              workload="Linear+SGD for 200 steps with a 600-entry ring buffer: the trace starts mid-run")
    torch = run.torch
    model = _mlp(torch, 512, 2)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _ in range(200):
        model(torch.randn(64, 512, device="cuda")).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    run.model_bytes(model, opt)
    run.finish()


def _small_train(run, steps: int = 3) -> None:
    torch = run.torch
    model = _mlp(torch, 1024, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        model(torch.randn(256, 1024, device="cuda")).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    run.model_bytes(model, opt)


def context_alloc(out: str) -> None:
    run = Run(out, stacks="python", context="alloc", workload="MLP+Adam, 3 steps; stacks at alloc only")
    _small_train(run)
    run.finish()


def context_state(out: str) -> None:
    run = Run(out, stacks="python", context="state",
              workload="MLP+Adam, 3 steps; context='state': stacks of live blocks only, no trace")
    _small_train(run)
    run.finish()


def oom_caught_reraised(out: str) -> None:
    """The OOM is caught, buffers are dropped in the handler, and it is raised again: the
    snapshot is dumped in the outer handler, after the traceback's frames let go."""
    run = Run(out, stacks="all", workload="batch doubles under a 3 GiB cap; OOM caught, cleaned up, re-raised")
    run.cap(3)
    torch = run.torch
    model = _mlp(torch, 4096, 2)
    batch = 1024
    try:
        try:
            while True:
                model(torch.randn(batch, 4096, device="cuda")).sum().backward()
                batch *= 2
        except torch.OutOfMemoryError:
            run.truth["oom"] = True
            run.truth["oom_batch"] = batch
            gc.collect()
            raise
    except torch.OutOfMemoryError as exc:
        run.truth["oom_message"] = str(exc).splitlines()[0]
    run.model_bytes(model)
    run.finish()


def oom_worker_thread(out: str) -> None:
    """The OOM happens in a worker thread; the main thread dumps after joining it."""
    run = Run(out, stacks="python", workload="a worker thread fills a 2 GiB cap with 256 MiB tensors and OOMs")
    run.cap(2)
    torch = run.torch
    held = []

    def worker() -> None:
        try:
            while True:
                held.append(torch.empty(256 * MiB, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError as exc:
            run.truth["oom"] = True
            run.truth["oom_message"] = str(exc).splitlines()[0]
            run.truth["held_tensors"] = len(held)

    t = threading.Thread(target=worker, name="filler")
    t.start()
    t.join()
    run.finish()


def fragmentation_cap(out: str) -> None:
    """Meant as a fragmentation OOM, it is the counter-example: blocks over 10 MiB get a
    segment each, so freeing every other block frees whole segments and the larger request
    fits. scenarios.py's oom_fragmentation splits large segments to make the real one."""
    run = Run(out, stacks="python", workload="64 blocks of 44 MiB under a 3 GiB cap, every other one freed, then a "
              "600 MiB request (no OOM: each block had a segment of its own, so the freed ones were released)")
    run.cap(3)
    torch = run.torch
    blocks = []
    try:
        while len(blocks) < 64:
            blocks.append(torch.empty(44 * MiB, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError:
        pass
    run.truth["filled_blocks"] = len(blocks)
    kept = blocks[::2]
    del blocks
    try:
        torch.empty(600 * MiB, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as exc:
        run.truth["oom"] = True
        run.truth["oom_message"] = str(exc).splitlines()[0]
    run.truth["kept_blocks"] = len(kept)
    run.finish()


def _hog(ready_path: str, stop_path: str, gib: float) -> None:
    import time

    torch = _torch()
    held = torch.empty(int(gib * GiB), dtype=torch.uint8, device="cuda")
    open(ready_path, "w").close()
    while not os.path.exists(stop_path):
        time.sleep(0.05)
    del held


def second_process(out: str) -> None:
    """Another process holds most of the GPU; this one OOMs with little reserved itself."""
    import time

    torch = _torch()
    total = torch.cuda.get_device_properties(0).total_memory
    free_now, _ = torch.cuda.mem_get_info()
    hog_gib = (free_now - 3 * GiB) / GiB
    ready, stop = out + ".ready", out + ".stop"
    hog = subprocess.Popen([sys.executable, __file__, "--hog", ready, stop, str(hog_gib)])
    while not os.path.exists(ready):
        time.sleep(0.05)
    run = Run(out, stacks="python", workload=f"another process holds {hog_gib:.1f} GiB of the GPU; "
              "this one's batch doubles until OOM", other_process_bytes=int(hog_gib * GiB), device_total=total)
    model = _mlp(torch, 4096, 2)
    batch = 256
    try:
        while True:
            model(torch.randn(batch, 4096, device="cuda")).sum().backward()
            batch *= 2
    except torch.OutOfMemoryError as exc:
        run.truth["oom"] = True
        run.truth["oom_message"] = str(exc).splitlines()[0]
    run.finish()
    open(stop, "w").close()
    hog.wait()
    for path in (ready, stop):
        os.remove(path)


SCENARIOS = {
    "hf_gpt2_python": (hf_gpt2_python, {}),
    "hf_gpt2_all": (hf_gpt2_all, {}),
    "compile_default": (compile_default, {}),
    "compile_cudagraphs": (compile_cudagraphs, {}),
    "checkpointing": (checkpointing, {}),
    "amp_gradscaler": (amp_gradscaler, {}),
    "grad_accumulation": (grad_accumulation, {}),
    "expandable_training": (expandable_training, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    "ring_wrapped": (ring_wrapped, {}),
    "context_alloc": (context_alloc, {}),
    "context_state": (context_state, {}),
    "oom_caught_reraised": (oom_caught_reraised, {}),
    "oom_worker_thread": (oom_worker_thread, {}),
    "fragmentation_cap": (fragmentation_cap, {}),
    "second_process": (second_process, {}),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--hog"]:
        _hog(argv[1], argv[2], float(argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args(argv)
    if args.one:
        SCENARIOS[args.one][0](os.path.join(args.out, args.one))
        return 0
    return run_each(__file__, args.out, args.scenarios or list(SCENARIOS), lambda name: SCENARIOS[name][1])


def run_each(script: str, out: str, names: list[str], env_of) -> int:
    """Run ``script --one NAME`` for each name in a process of its own (a fresh allocator, and
    allocator settings from ``env_of(name)`` set before CUDA starts); 1 if any failed."""
    os.makedirs(out, exist_ok=True)
    failed = []
    for name in names:
        env = {**os.environ, **env_of(name)}
        code = subprocess.run([sys.executable, script, "--out", out, "--one", name], env=env).returncode
        print(f"{name}: {'ok' if code == 0 else f'exit {code}'}", flush=True)
        if code:
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
