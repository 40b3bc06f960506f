"""Record CUDA memory snapshots from Python: ``memtui.record``.

    import memtui

    with memtui.record("run.pickle"):           # record the block, write one snapshot
        train()

    memtui.record.on_oom("oom.pickle")          # write a snapshot at the moment of a CUDA OOM
    memtui.record.step()                        # mark the end of a training step
    memtui.record.live()                        # serve the memory to `memtui watch` while running
    with memtui.record.Stepper(5, 8, "steps.pickle"):   # record steps 5-7 only
        ...

Needs torch (``pip install 'memtui[record]'``), which is imported on first use, never at
import time; nothing here imports the viewer.
"""

from __future__ import annotations

import sys
import types

from memtui.record.backend import INSTALL_HINT, CudaUnavailableError
from memtui.record.files import rank_path, with_tag, write_snapshot
from memtui.record.oom import OomDump, on_oom
from memtui.record.recording import DEFAULT_MAX_ENTRIES, Options, Recording, Stepper
from memtui.record.steps import STEP_PREFIX, current_step, parse_steps, step

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "INSTALL_HINT",
    "STEP_PREFIX",
    "CudaUnavailableError",
    "OomDump",
    "Options",
    "Recording",
    "Stepper",
    "current_step",
    "dump",
    "live",
    "on_oom",
    "parse_steps",
    "rank_path",
    "record",
    "step",
    "with_tag",
    "write_snapshot",
]


def record(
    path="memory.pickle",
    *,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    stacks: str = "python",
    context: str | None = "all",
) -> Recording:
    """``with memtui.record(path):`` -- see ``Recording``."""
    return Recording(path, max_entries=max_entries, stacks=stacks, context=context)


def dump(path="memory.pickle") -> str:
    """Write a snapshot of the allocator now (recording or not); returns the path written."""
    from memtui.record.backend import cuda_torch, take_snapshot

    return write_snapshot(take_snapshot(cuda_torch()), rank_path(path))


def live(**options):
    """Serve this process's CUDA memory to ``memtui watch`` (see :func:`memtui.record.serving.live`)."""
    from memtui.record.serving import live as start

    return start(**options)


class _CallableModule(types.ModuleType):
    # Lets ``memtui.record(...)`` be used directly while ``memtui.record.step()`` and the
    # other helpers stay plain module attributes.
    def __call__(self, *args, **kwargs) -> Recording:
        return record(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
