"""Files that hold one step, or none: a line repeating inside one call is not an iteration.

Made to resemble real public snapshots: a GPT script's dump holding one ``AdamW.step``
(the optimizer replacing its state tensor by tensor), a forward pass dumped before its
backward (every layer's activations kept), torch.compile's ``pad_mm_benchmark`` spans. The
loop these files lack still shows where there is one: a training loop with no annotations.
"""

from __future__ import annotations

from memtui.analysis.leaks import find_leaks
from memtui.analysis.steps import iteration_marks
from memtui.open import open_snapshot
from tests.fixtures.opened import frame, write_snapshot

MIB = 1 << 20
TORCH = "/venv/lib/python3.12/site-packages/torch"
CALL = {"filename": f"{TORCH}/nn/modules/module.py", "line": 1775, "name": "_call_impl"}
OPT_WRAP = {"filename": f"{TORCH}/optim/optimizer.py", "line": 485, "name": "wrapper"}
MAIN = frame(90, "<module>", "/home/u/train.py")


class Trace:
    def __init__(self) -> None:
        self.entries: list[dict] = []
        self.next_addr = 0x7F0000000000
        self.t = 1_000_000

    def alloc(self, size: int, frames: list[dict]) -> int:
        addr, self.next_addr = self.next_addr, self.next_addr + size
        self.add("alloc", addr, size, frames)
        return addr

    def free(self, addr: int, size: int, frames: list[dict]) -> None:
        self.add("free_requested", addr, size, frames)
        self.add("free_completed", addr, size, frames)

    def add(self, action: str, addr: int, size: int, frames: list[dict]) -> None:
        self.t += 10
        self.entries.append({"action": action, "addr": addr, "size": size, "frames": frames, "time_us": self.t})


def layer_stack(line: int) -> list[dict]:
    """An allocation inside a layer's forward, called through the module machinery from the script."""
    return [frame(line, "forward", "/home/u/model.py"), CALL, frame(40, "forward", "/home/u/model.py"), CALL,
            frame(30, "train", "/home/u/train.py"), MAIN]


def test_one_traced_optimizer_step_is_too_few_steps(tmp_path):
    # The optimizer replaces its state tensor by tensor (new one made, old one freed), 60
    # times in its one step: no iteration, and never a leak.
    t = Trace()
    state = [t.alloc(4 * MIB, [frame(12, "<module>", "/home/u/init.py")]) for _ in range(60)]
    start = t.t
    step = [frame(76, "step", "/home/u/optimizer.py"), OPT_WRAP, frame(33, "train", "/home/u/train.py"), MAIN]
    for old in state:
        t.alloc(4 * MIB, step)
        t.free(old, 4 * MIB, step)
    notes = [{"stage": "START", "name": "Optimizer.step#AdamW.step", "device": 0, "time_us": start},
             {"stage": "END", "name": "Optimizer.step#AdamW.step", "device": 0, "time_us": t.t + 1}]
    snap = open_snapshot(write_snapshot(tmp_path / "one_step.pickle", [], t.entries, notes))
    report = find_leaks(snap, snap.devices[0])
    assert report.verdict == "cannot tell" and report.confidence == "low"
    assert report.points.kind == "annotation" and report.points.steps == 1
    assert "1 sample " in report.evidence[0].text or "only 1 sample" in report.evidence[0].text


def test_a_forward_pass_dumped_before_backward_is_one_step(tmp_path):
    # 48 layers, each keeping its activations: the same lines repeat 48 times inside one
    # call of the model, which the program never leaves.
    t = Trace()
    t.alloc(64 * MIB, [frame(20, "<module>", "/home/u/train.py")])
    for _ in range(48):
        t.alloc(8 * MIB, layer_stack(126))
        tmp = t.alloc(2 * MIB, layer_stack(127))
        t.alloc(8 * MIB, layer_stack(128))
        t.free(tmp, 2 * MIB, layer_stack(127))
    snap = open_snapshot(write_snapshot(tmp_path / "forward.pickle", [], t.entries))
    assert iteration_marks(snap, snap.devices[0]) is None
    report = find_leaks(snap, snap.devices[0])
    assert report.verdict == "cannot tell" and report.confidence == "low"
    assert "no repeated step" in report.evidence[0].text


def test_compiler_spans_are_not_steps(tmp_path):
    t = Trace()
    notes = []
    for _ in range(30):
        notes.append({"stage": "START", "name": "pad_mm_benchmark (dynamo_timed)", "device": 0, "time_us": t.t + 1})
        a = t.alloc(MIB, [frame(5, "bench", f"{TORCH}/_inductor/fx_passes/pad_mm.py"), MAIN])
        t.free(a, MIB, [frame(5, "bench", f"{TORCH}/_inductor/fx_passes/pad_mm.py"), MAIN])
        notes.append({"stage": "END", "name": "pad_mm_benchmark (dynamo_timed)", "device": 0, "time_us": t.t + 1})
    snap = open_snapshot(write_snapshot(tmp_path / "compile.pickle", [], t.entries, notes))
    marks = iteration_marks(snap, snap.devices[0])
    assert marks is None or marks[0] != "annotation"


def test_a_training_loop_without_annotations_still_shows_its_steps(tmp_path):
    # forward (through the model), backward's first allocation at the backward() line, the
    # optimizer's temporaries, and one tensor kept per step: 12 steps, a leak.
    t = Trace()
    keep = [frame(35, "train", "/home/u/train.py"), MAIN]
    for _ in range(12):
        acts = [t.alloc(8 * MIB, layer_stack(126)) for _ in range(4)]
        seed = t.alloc(512, [{"filename": f"{TORCH}/_tensor.py", "line": 600, "name": "backward"},
                             frame(31, "train", "/home/u/train.py"), MAIN])
        for a in acts:
            t.free(a, 8 * MIB, [frame(31, "train", "/home/u/train.py"), MAIN])
        t.free(seed, 512, [frame(31, "train", "/home/u/train.py"), MAIN])
        tmp = t.alloc(MIB, [{"filename": f"{TORCH}/optim/adam.py", "line": 300, "name": "_single_tensor_adam"},
                            OPT_WRAP, frame(33, "train", "/home/u/train.py"), MAIN])
        t.free(tmp, MIB, [frame(33, "train", "/home/u/train.py"), MAIN])
        t.alloc(MIB, keep)
    snap = open_snapshot(write_snapshot(tmp_path / "loop.pickle", [], t.entries))
    kind, name, indices = iteration_marks(snap, snap.devices[0])
    assert kind == "iterations" and len(indices) == 12 and "train.py:30" in name
    report = find_leaks(snap, snap.devices[0])
    assert report.verdict == "leak" and "train.py:35" in report.growing[0].label


def test_growth_that_has_not_stopped_is_not_a_plateau():
    import numpy as np

    from memtui.analysis.leaks import KINDS, classify_growth

    # Flat for most of the run, then rising into its end: not a plateau.
    row = np.array([[5] * 16 + [6, 7, 8, 9]])
    kinds, _, _ = classify_growth(row)
    assert KINDS[int(kinds[0])] == "rising"
    row = np.array([[1, 2, 3, 4] + [5] * 16])
    assert KINDS[int(classify_growth(row)[0][0])] == "plateau"


def test_a_trace_too_short_to_hold_a_burst_cannot_tell_about_cycles(tmp_path):
    # A dump whose ring buffer kept one free (a public OOM-time dump): no burst could have
    # been seen, so "no cycles" would be unearned.
    from memtui.analysis.cycles import find_cycles

    t = Trace()
    t.free(0x7F0000000000, MIB, [frame(5, "<module>")])
    snap = open_snapshot(write_snapshot(tmp_path / "short.pickle", [], t.entries))
    report = find_cycles(snap, snap.devices[0])
    assert report.verdict == "cannot tell" and report.to_json()["cycles_suspected"] is None
    assert "too short" in report.evidence[0].text


def test_one_inference_pass_whose_memory_comes_and_goes_is_not_no_leak(tmp_path):
    # One forward pass under no_grad, as a public inference dump holds it: every layer's
    # output made and let go, nothing growing over the time windows, and no step to compare.
    t = Trace()
    t.alloc(64 * MIB, [frame(20, "<module>", "/home/u/infer.py")])
    previous = t.alloc(8 * MIB, layer_stack(126))
    for _ in range(48):
        out = t.alloc(8 * MIB, layer_stack(128))
        t.free(previous, 8 * MIB, layer_stack(128))
        previous = out
    snap = open_snapshot(write_snapshot(tmp_path / "inference.pickle", [], t.entries))
    assert iteration_marks(snap, snap.devices[0]) is None
    report = find_leaks(snap, snap.devices[0])
    assert (report.verdict, report.confidence) == ("cannot tell", "low")
    assert "no repeated step" in report.evidence[0].text
