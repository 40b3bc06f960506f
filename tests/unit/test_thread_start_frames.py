"""C++ stacks of the autograd engine's threads bottom out in glibc's thread start; the
symbolizer names those frames by object file or assembly source (``thread48.o``,
``clone3.S``). They begin every thread, so they never name one: every view labels such an
allocation by what is known (the backward node, else the autograd engine)."""

from __future__ import annotations

import json

from memtui.cli import main
from memtui.model.relevance import is_native_frame
from memtui.open import open_snapshot
from tests.fixtures.opened import segment, write_snapshot

MIB = 1 << 20
INTERNAL = [{"filename": "??", "line": 0, "name": "torch::unwind::unwind()"},
            {"filename": "??", "line": 0, "name": "torch::CapturedTraceback::gather(bool, bool, bool)"},
            {"filename": "CUDACachingAllocator.cpp", "line": 0,
             "name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long)"}]
THREAD = [{"filename": "??", "line": 0, "name": "torch::autograd::Engine::thread_main(std::shared_ptr<"
                                              "torch::autograd::GraphTask> const&)"},
          {"filename": "thread48.o", "line": 0, "name": "execute_native_thread_routine"},
          {"filename": "./nptl/pthread_create.c", "line": 447, "name": "start_thread"},
          {"filename": "./misc/../sysdeps/unix/sysv/linux/x86_64/clone3.S", "line": 78, "name": "clone3"}]


def test_object_files_assembly_and_libraries_are_native():
    for name in ("thread48.o", "./misc/../sysdeps/unix/sysv/linux/x86_64/clone3.S", "/lib/x86_64-linux-gnu/libc.so.6",
                 "libtorch_cuda.so"):
        assert is_native_frame(name), name
    assert not is_native_frame("/home/u/train.py")


def _run(capsys, *args: str) -> str:
    capsys.readouterr()
    assert main([*args, "--no-cache"]) == 0
    return capsys.readouterr().out


def test_engine_thread_stacks_are_named_by_the_engine_in_every_view(tmp_path, capsys):
    base = 0x7F0000000000
    stack = INTERNAL + THREAD
    trace = [{"action": "segment_alloc", "addr": base, "size": 20 * MIB, "frames": stack},
             {"action": "alloc", "addr": base, "size": 20 * MIB, "frames": stack}]
    seg = segment(base, 20 * MIB, [(0, 20 * MIB, "active_allocated")])
    seg["blocks"][0]["frames"] = stack
    path = write_snapshot(tmp_path / "engine.pickle", [seg], trace)
    snap = open_snapshot(path)
    label = snap.stacks.top_frame_text(int(snap.devices[0].trace.stack[1]))
    assert label == "autograd engine (backward) [C++]"
    views = [_run(capsys, "top", str(path)), _run(capsys, "breakdown", str(path), "--by", "site"),
             json.dumps(json.loads(_run(capsys, "top", str(path), "--json")))]
    for text in views:
        assert "autograd engine (backward)" in text
        assert "clone3" not in text and "execute_native_thread_routine" not in text and "start_thread" not in text
    # The stack view lists every frame past the allocator's, innermost first: the engine's.
    listing = _run(capsys, "stack", str(path), f"{base:x}_0").split("alloc at event 1:", 1)[1].strip().splitlines()
    assert "torch::autograd::Engine::thread_main" in listing[0]
