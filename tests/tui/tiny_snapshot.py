"""A small, fixed snapshot for the explorer's tests: always present, byte-for-byte stable.

Hand-written schedule (no randomness) on a toy allocator: two segments, allocations
with Python and C++ frames (one stack with recursion), a pending free on a second
stream, an annotation span, an OOM with ``device_free``, and a second device whose
trace holds only the dump's ``snapshot`` entry. The segment list at the end agrees with
the trace, as in a real dump.
"""

from __future__ import annotations

import pickle
from pathlib import Path

MIB = 1 << 20
KIB = 1 << 10
BASE = 0x7F3A00000000
SMALL = 0x7F3A40000000

NATIVE = [{"filename": "??", "line": 0, "name": "torch::unwind::unwind()"},
          {"filename": "??", "line": 0, "name": "torch::CapturedTraceback::gather(bool, bool, bool)"},
          {"filename": "CUDACachingAllocator.cpp", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"}]
TORCH = {"filename": "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", "line": 125, "name": "forward"}
TRAIN = {"filename": "/home/user/project/train.py", "line": 88, "name": "train_step"}
MAIN = {"filename": "/home/user/project/train.py", "line": 120, "name": "main"}
BLOCK = {"filename": "/home/user/project/model.py", "line": 31, "name": "Block.forward"}
ADAM = {"filename": "/venv/lib/python3.12/site-packages/torch/optim/adam.py", "line": 301, "name": "step"}

STACK_FORWARD = NATIVE + [TORCH, BLOCK, BLOCK, BLOCK, TRAIN, MAIN]
STACK_OPTIM = NATIVE + [ADAM, TRAIN, MAIN]
STACK_MAIN = NATIVE + [TRAIN, MAIN]

# (action, address, size, stack, stream)
SCHEDULE = [
    ("segment_alloc", BASE, 20 * MIB, STACK_MAIN, 0),
    ("alloc", BASE, 4 * MIB, STACK_MAIN, 0),
    ("alloc", BASE + 4 * MIB, 2 * MIB, STACK_FORWARD, 0),
    ("alloc", BASE + 6 * MIB, 6 * MIB, STACK_FORWARD, 0),
    ("segment_alloc", SMALL, 2 * MIB, STACK_FORWARD, 0),
    ("alloc", SMALL, 512 * KIB, STACK_FORWARD, 0),
    ("alloc", SMALL + 512 * KIB, 256 * KIB, STACK_FORWARD, 0),
    ("free_requested", BASE + 4 * MIB, 2 * MIB, STACK_FORWARD, 0),
    ("free_completed", BASE + 4 * MIB, 2 * MIB, STACK_FORWARD, 0),
    ("alloc", BASE + 12 * MIB, 3 * MIB, STACK_OPTIM, 0),
    ("alloc", BASE + 4 * MIB, 1 * MIB, STACK_OPTIM, 0),
    ("free_requested", SMALL, 512 * KIB, STACK_FORWARD, 0),
    ("free_completed", SMALL, 512 * KIB, STACK_FORWARD, 0),
    ("alloc", SMALL, 128 * KIB, STACK_OPTIM, 0),
    ("free_requested", BASE + 6 * MIB, 6 * MIB, STACK_FORWARD, 0),
    ("free_completed", BASE + 6 * MIB, 6 * MIB, STACK_FORWARD, 0),
    ("alloc", BASE + 6 * MIB, 5 * MIB, STACK_FORWARD, 0),
    ("alloc", BASE + 15 * MIB, 4 * MIB, STACK_FORWARD, 0),
    ("free_requested", SMALL + 512 * KIB, 256 * KIB, STACK_OPTIM, 7),  # still in use on stream 7
    ("oom", 0, 24 * MIB, STACK_FORWARD, 0),
    ("free_requested", BASE + 12 * MIB, 3 * MIB, STACK_OPTIM, 0),
    ("free_completed", BASE + 12 * MIB, 3 * MIB, STACK_OPTIM, 0),
]
T0 = 1_790_000_000_000_000
STEP_US = 1500
OPTIM_START, OPTIM_END = 9, 13  # event indices the optimizer annotation spans


def tiny_snapshot() -> dict:
    trace = []
    for k, (action, addr, size, stack, stream) in enumerate(SCHEDULE):
        entry = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": T0 + k * STEP_US,
                 "compile_context": "N/A", "user_metadata": "step=3" if stack is STACK_OPTIM else "",
                 "frames": stack}
        if action == "oom":
            entry["device_free"] = 18 * MIB
        trace.append(entry)
    end = T0 + len(SCHEDULE) * STEP_US
    trace.append({"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": end,
                  "compile_context": "N/A", "user_metadata": ""})
    second = [{"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": end,
               "compile_context": "N/A", "user_metadata": ""}]
    return {
        "segments": _final_segments(),
        "device_traces": [trace, second],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False},
        "external_annotations": [
            {"stage": "START", "name": "Optimizer.step#Adam.step", "device": 0, "time_us": T0 + OPTIM_START * STEP_US},
            {"stage": "END", "name": "Optimizer.step#Adam.step", "device": 0, "time_us": T0 + OPTIM_END * STEP_US},
        ],
    }


def _final_segments() -> list[dict]:
    """The state the schedule leaves, as the dump would list it."""
    def block(addr, size, state, stack):
        return {"address": addr, "size": size, "requested_size": size, "state": state,
                "frames": stack if state != "inactive" else []}

    large = [block(BASE, 4 * MIB, "active_allocated", STACK_MAIN),
             block(BASE + 4 * MIB, 1 * MIB, "active_allocated", STACK_OPTIM),
             block(BASE + 5 * MIB, 1 * MIB, "inactive", None),
             block(BASE + 6 * MIB, 5 * MIB, "active_allocated", STACK_FORWARD),
             block(BASE + 11 * MIB, 4 * MIB, "inactive", None),
             block(BASE + 15 * MIB, 4 * MIB, "active_allocated", STACK_FORWARD),
             block(BASE + 19 * MIB, 1 * MIB, "inactive", None)]
    small = [block(SMALL, 128 * KIB, "active_allocated", STACK_OPTIM),
             block(SMALL + 128 * KIB, 384 * KIB, "inactive", None),
             block(SMALL + 512 * KIB, 256 * KIB, "active_pending_free", STACK_FORWARD),
             block(SMALL + 768 * KIB, 1280 * KIB, "inactive", None)]
    segments = []
    for addr, size, blocks, kind in ((BASE, 20 * MIB, large, "large"), (SMALL, 2 * MIB, small, "small")):
        allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        active = sum(b["size"] for b in blocks if b["state"] != "inactive")
        segments.append({"device": 0, "address": addr, "total_size": size, "allocated_size": allocated,
                         "active_size": active, "requested_size": active, "stream": 0, "segment_type": kind,
                         "segment_pool_id": (0, 0), "is_expandable": False, "frames": STACK_MAIN,
                         "blocks": blocks})
    return segments


def write_tiny_snapshot(directory: Path, name: str = "tiny_oom.pickle") -> Path:
    path = Path(directory) / name
    with open(path, "wb") as f:
        pickle.dump(tiny_snapshot(), f, protocol=4)
    return path
