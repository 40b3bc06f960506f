"""Verdicts on evidence, on hand-made traces: the C++ frames of frees named as real builds
symbolize them, the per-process cap with a pinned segment, and a leak made on the autograd
thread."""

from __future__ import annotations

from memtui.analysis.cycles import find_cycles
from memtui.analysis.evidence import FreeStacks
from memtui.analysis.leaks import find_leaks
from memtui.analysis.oom import diagnose_ooms
from memtui.open import open_snapshot
from tests.fixtures.opened import GIB, MIB, frame, segment, write_snapshot

BASE = 0x7F0000000000
ALLOCATOR = [{"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::DeviceCachingAllocator::free"}]
TENSOR_DEALLOC = ["THPVariable_clear(THPVariable*)", "THPVariable_dealloc(_object*)"]
COLLECTOR = TENSOR_DEALLOC[:1] + ["subtype_clear", "delete_garbage", "gc_collect_main", "_Py_RunGC",
                                  "_PyEval_EvalFrameDefault"]
TRACEBACK = TENSOR_DEALLOC + ["subtype_dealloc", "list_dealloc", "frame_dealloc", "tb_dealloc",
                              "BaseException_dealloc", "_PyEval_EvalFrameDefault"]
DICT = TENSOR_DEALLOC + ["subtype_dealloc", "odict_dealloc", "dict_dealloc", "list_dealloc",
                         "_PyEval_EvalFrameDefault"]
CYCLE_OF_EXCEPTIONS = TENSOR_DEALLOC + ["frame_dealloc", "tb_dealloc", "BaseException_clear", "delete_garbage",
                                        "gc_collect_main"]


def native(names: list[str]) -> list[dict]:
    return [{"filename": "??", "line": 0, "name": n} for n in names]


def free_stack(names: list[str], line: int) -> list[dict]:
    return ALLOCATOR + native(names) + [frame(line, "train_step")]


def burst_trace(free_names: list[str], lives: int = 12, oom_first: bool = False) -> tuple[list, list]:
    """``lives`` 16 MiB allocations from one line in a loop, then freed back to back with the given frees."""
    trace, size = [], 16 * MIB
    trace.append({"action": "segment_alloc", "addr": BASE, "size": lives * size, "frames": [frame(9)]})
    for k in range(lives):
        trace.append({"action": "alloc", "addr": BASE + k * size, "size": size, "frames": [frame(10)]})
    if oom_first:
        trace.append({"action": "oom", "addr": 0, "size": 8 * GIB, "device_free": 60 * GIB,
                      "frames": [frame(10)]})
    for k in range(lives):
        for action in ("free_requested", "free_completed"):
            trace.append({"action": action, "addr": BASE + k * size, "size": size,
                          "frames": free_stack(free_names, 40)})
    return [segment(BASE, lives * size, [(0, lives * size, "inactive")])], trace


def open_written(tmp_path, name: str, segments: list, trace: list, annotations: list | None = None):
    return open_snapshot(write_snapshot(tmp_path / f"{name}.pickle", segments, trace, annotations), cache=None)


def test_release_mechanisms_by_frame_name(tmp_path):
    for names, kind in ((COLLECTOR, "collector"), (TRACEBACK, "exception"), (DICT, "refcount"),
                        (CYCLE_OF_EXCEPTIONS, "collector"),
                        (TENSOR_DEALLOC + ["module_dealloc", "finalize_modules"], "teardown"),
                        (["torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask>)"],
                         "autograd"), ([], "unknown")):
        segments, trace = burst_trace(names)
        snap = open_written(tmp_path, kind, segments, trace)
        releases = FreeStacks(snap.stacks)
        sid = int(snap.devices[0].trace.stack[-1])
        assert releases.of(sid) == kind, names


def test_a_collector_burst_is_cycles_with_high_confidence(tmp_path):
    snap = open_written(tmp_path, "gc", *burst_trace(COLLECTOR))
    report = find_cycles(snap, snap.devices[0])
    assert report.verdict == "cycles" and report.confidence == "high" and report.suspected
    assert any("gc_collect_main" in e.text or "delete_garbage" in e.text for e in report.evidence)


def test_a_traceback_released_after_an_oom_is_not_a_cycle(tmp_path):
    # An OOM inside a worker, then everything its frames held freed at once through the
    # exception's traceback: the burst the collector used to be blamed for.
    snap = open_written(tmp_path, "tb", *burst_trace(TRACEBACK, oom_first=True))
    report = find_cycles(snap, snap.devices[0])
    assert report.verdict == "no cycles" and report.confidence == "high" and not report.suspected
    assert [b.cause for b in report.other_bursts] == ["exception"]
    (d,) = diagnose_ooms(snap, 0)
    assert d.held_by_cycles == 0 and d.freed_after["cause"] == "exception"
    assert not any("garbage collector" in e.text for e in d.evidence)


def test_a_dict_of_tensors_going_out_of_scope_is_reference_counting(tmp_path):
    snap = open_written(tmp_path, "dict", *burst_trace(DICT))
    report = find_cycles(snap, snap.devices[0])
    assert report.verdict == "no cycles" and report.confidence == "high"
    assert [b.cause for b in report.other_bursts] == ["refcount"]
    assert any("odict_dealloc" in e.text or "dict_dealloc" in e.text for e in report.evidence)


def test_python_stacks_alone_say_they_cannot_tell(tmp_path):
    segments, trace = burst_trace([])
    for entry in trace:  # Python frames only: where the frees happened, not why
        if entry["action"].startswith("free"):
            entry["frames"] = [frame(40, "train_step")]
    snap = open_written(tmp_path, "py", segments, trace)
    report = find_cycles(snap, snap.devices[0])
    assert report.verdict == "cannot tell" and report.confidence == "low" and not report.suspected


def _growing_batch_under_a_cap(tmp_path, hole: int):
    """A batch that grows under a per-process cap until 1.27 GiB is refused, with ``hole``
    bytes free in a segment one live 64 MiB block pins."""
    pinned, batch = 64 * MIB, 1450 * MIB
    seg_a, seg_b = pinned + hole, batch
    a, b = BASE, BASE + (4 << 30)
    trace = [{"action": "segment_alloc", "addr": a, "size": seg_a, "frames": [frame(5)]},
             {"action": "alloc", "addr": a, "size": pinned, "frames": [frame(6, "setup")]}]
    sizes = (256 * MIB, 512 * MIB, 768 * MIB, 1230 * MIB)
    for size in sizes:  # earlier batches from the same line, each freed
        trace.append({"action": "alloc", "addr": a + pinned, "size": size, "frames": [frame(20)]})
        trace += [{"action": act, "addr": a + pinned, "size": size, "frames": [frame(21)]}
                  for act in ("free_requested", "free_completed")]
    trace += [{"action": "segment_alloc", "addr": b, "size": seg_b, "frames": [frame(30)]},
              {"action": "alloc", "addr": b, "size": batch, "frames": [frame(30)]},
              {"action": "oom", "addr": 0, "size": 1300 * MIB, "device_free": 70 * GIB, "frames": [frame(20)]}]
    segments = [segment(a, seg_a, [(0, pinned, "active_allocated"), (pinned, seg_a - pinned, "inactive")]),
                segment(b, seg_b, [(0, batch, "active_allocated")])]
    snap = open_written(tmp_path, "cap", segments, trace)
    (d,) = diagnose_ooms(snap)
    return d


def test_a_cap_with_a_pinned_segment_counts_the_headroom_and_what_expandable_segments_change(tmp_path):
    # 1.20 GiB free in holes for a 1.27 GiB request: packed together, the request would have
    # fit under almost every cap the recording allows (it needed 70 MiB of the up to 1.27 GiB
    # the cap left), so the cap's size, not recorded, decides: cannot tell.
    d = _growing_batch_under_a_cap(tmp_path, 1230 * MIB)
    assert d.verdict == "cannot tell" and d.confidence == "low" and d.process_limit and d.limit == "process cap"
    assert d.request_history["growing"]
    assert d.pinned["free"] == 1230 * MIB and d.pinned["live_bytes"] == 64 * MIB
    assert d.headroom_at_least == 0 and d.headroom_below > 0
    text = " ".join(e.text for e in d.evidence)
    assert "pinned" in text and "could not release" in text
    # What other settings would do comes from replaying the requests through the allocator model.
    assert "replayed through the allocator model with expandable_segments:True" in text
    assert {text for text, _ in d.replayed} >= {"expandable_segments:True", "max_split_size_mb:64"}
    assert "in 95% of that range it would have fit" in text


def test_a_grown_batch_with_small_holes_under_a_cap_is_the_cap(tmp_path):
    # 50 MiB of holes for a 1.27 GiB request: only a cap within 50 MiB of the range's top would
    # have let it fit (4% of the range): the batch outgrew what the cap leaves.
    d = _growing_batch_under_a_cap(tmp_path, 50 * MIB)
    assert (d.verdict, d.confidence) == ("process_cap", "medium")
    assert "outgrew what the cap leaves" in " ".join(e.text for e in d.evidence)


def test_a_leak_made_on_the_autograd_thread_names_its_backward_line(tmp_path):
    backward = [{"filename": "/py/torch/_tensor.py", "line": 626, "name": "backward"}, frame(12)]
    trace, kept = [], []
    for step in range(12):
        addr = BASE + step * (4 * MIB)
        trace.append({"action": "alloc", "addr": BASE + (1 << 32), "size": 2 * MIB, "frames": [frame(10)]})
        trace += [{"action": act, "addr": BASE + (1 << 32), "size": 2 * MIB, "frames": [frame(11)]}
                  for act in ("free_requested", "free_completed")]
        trace.append({"action": "alloc", "addr": BASE + (2 << 32), "size": 512, "frames": backward})
        trace += [{"action": act, "addr": BASE + (2 << 32), "size": 512, "frames": backward}
                  for act in ("free_requested", "free_completed")]
        trace.append({"action": "alloc", "addr": addr, "size": 4 * MIB})  # the autograd thread: no stack
        kept.append((step * 4 * MIB, 4 * MIB, "active_allocated"))
    seg = segment(BASE, 48 * MIB, kept)
    for block in seg["blocks"]:
        block["frames"] = []  # made on the autograd thread: no Python frames here either
    snap = open_written(tmp_path, "grad", [seg], trace)
    report = find_leaks(snap, snap.devices[0])
    assert report.verdict == "leak"
    (site,) = report.growing
    assert site.label == "(autograd thread) under backward() at /home/u/train.py:12 train_step"
    assert site.bytes == 48 * MIB and site.count == 12
