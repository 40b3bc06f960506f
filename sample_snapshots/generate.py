"""Make the sample snapshots in this folder. Needs PyTorch and a CUDA GPU.

    python sample_snapshots/generate.py [--out DIR] [SCENARIO ...]

With no scenario named, every one runs. Each runs in a process of its own, so each file
starts from a fresh allocator and a scenario can set allocator options before CUDA starts.
Files are written as DIR/NAME.pickle.xz through ``memtui.record`` (compressed by the
extension). README.md in this folder says what each one shows.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
GiB = 1 << 30


def _torch():
    import torch

    return torch


def _memtui():
    # Run from a checkout without installing: the package is one folder up.
    sys.path.insert(0, os.path.dirname(HERE))
    import memtui

    return memtui


def _mlp(torch, width: int, depth: int):
    from torch import nn

    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers).cuda()


def train_linear_adam(out: str) -> None:
    """Linear+Adam, 6 steps with step markers; Python and C++ stacks (stacks="all")."""
    torch, memtui = _torch(), _memtui()
    from torch import nn

    with memtui.record(out, stacks="all"):
        model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(6):
            x = torch.randn(512, 1024, device="cuda")
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            memtui.record.step()


def oom_training(out: str) -> None:
    """MLP training whose batch doubles each step until CUDA runs out of memory (2 GiB cap);
    the snapshot is written by the OOM observer at the moment of failure."""
    torch, memtui = _torch(), _memtui()
    torch.cuda.set_per_process_memory_fraction(2 * GiB / torch.cuda.get_device_properties(0).total_memory)
    memtui.record.on_oom(out, stacks="python")
    model = _mlp(torch, 2048, 3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch = 1024
    try:
        while True:
            x = torch.randn(batch, 2048, device="cuda")
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            memtui.record.step()
            batch *= 2
    except torch.cuda.OutOfMemoryError:
        print(f"  out of memory at batch {batch}, step {memtui.record.current_step()}")


class _Holder:
    """A tensor kept alive by a reference cycle: only the garbage collector frees it."""

    def __init__(self, tensor) -> None:
        self.tensor = tensor
        self.me = self


def refcycle_sawtooth(out: str) -> None:
    """Each step leaves a 32 MiB activation in a reference cycle; gc.collect() every 10 steps
    frees them: allocated memory climbs and drops, a sawtooth."""
    torch, memtui = _torch(), _memtui()
    weight = torch.randn(2048, 2048, device="cuda")
    gc.disable()
    try:
        with memtui.record(out, stacks="python"):
            for i in range(40):
                act = torch.empty(4096, 2048, device="cuda").normal_() @ weight
                _Holder(act)
                del act
                if i % 10 == 9:
                    gc.collect()
                memtui.record.step()
    finally:
        gc.enable()


def multistream(out: str) -> None:
    """Blocks freed on the default stream while a side stream still uses them
    (record_stream): at dump time they are `active_pending_free`."""
    torch, memtui = _torch(), _memtui()
    side = torch.cuda.Stream()
    with memtui.record(out, stacks="python"):
        big = torch.randn(4096, 4096, device="cuda")
        big.record_stream(side)  # its first version is replaced while the side stream reads it
        for _ in range(6):
            buf = torch.empty(16 * MiB // 4, device="cuda")
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(30):  # keep the side stream busy past the dump
                    big = torch.tanh(big @ big)
                buf.add_(1)
            buf.record_stream(side)
            del buf
            memtui.record.step()
    torch.cuda.synchronize()


def expandable_segments(out: str) -> None:
    """PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: segments grow and shrink in place
    (`segment_map` / `segment_unmap`), then empty_cache() unmaps the rest."""
    torch, memtui = _torch(), _memtui()
    with memtui.record(out, stacks="python"):
        model = _mlp(torch, 2048, 2)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for batch in (512, 2048, 8192, 1024, 16384, 256):
            x = torch.randn(batch, 2048, device="cuda")
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del x
            torch.cuda.empty_cache()
            memtui.record.step()


def context_none(out: str) -> None:
    """Recorded with context=None: the trace has events but no stack frames anywhere."""
    torch, memtui = _torch(), _memtui()
    with memtui.record(out, context=None):
        model = _mlp(torch, 1024, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(4):
            model(torch.randn(256, 1024, device="cuda")).sum().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            memtui.record.step()


def train_steps_3_6(out: str) -> None:
    """Ten training steps, only steps 3-5 recorded (Stepper(3, 6)): a trace that starts
    mid-run, with frees of blocks allocated before recording began."""
    torch, memtui = _torch(), _memtui()
    model = _mlp(torch, 2048, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with memtui.record.Stepper(3, 6, out, stacks="python"):
        for _ in range(10):
            model(torch.randn(1024, 2048, device="cuda")).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            memtui.record.step()


# name -> (function, extra environment for its process)
SCENARIOS = {
    "train_linear_adam": (train_linear_adam, {}),
    "oom_training": (oom_training, {}),
    "refcycle_sawtooth": (refcycle_sawtooth, {}),
    "multistream": (multistream, {}),
    "expandable_segments": (expandable_segments, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    "context_none": (context_none, {}),
    "train_steps_3_6": (train_steps_3_6, {}),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog=f"Scenarios: {', '.join(SCENARIOS)}."
    )
    parser.add_argument("--out", default=HERE, help="output directory (default: this folder)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # run one scenario in this process
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="scenarios to run (default: all)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.scenarios + [args.one or ""] if name and name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {unknown[0]!r}")
    if args.one:
        function, _ = SCENARIOS[args.one]
        function(os.path.join(args.out, f"{args.one}.pickle.xz"))
        return 0
    failed = []
    for name in args.scenarios or list(SCENARIOS):
        _, env = SCENARIOS[name]
        print(f"{name} ...", flush=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--out", args.out, "--one", name]
        code = subprocess.run(cmd, env={**os.environ, **env}).returncode
        if code != 0:
            print(f"{name} failed with exit status {code}", file=sys.stderr)
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
