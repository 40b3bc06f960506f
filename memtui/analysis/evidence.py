"""What a free's stack says about why the memory was released, and how verdicts carry evidence.

A CUDA free happens when the last reference to a tensor goes. *Which* code dropped that
reference is in the free's stack, when it was recorded:

* with ``stacks="all"`` the C++ frames name the mechanism (DESIGN.md, section 4):

  - the **cycle collector**: ``gc_collect_main``, ``delete_garbage``, ``_PyGC_Collect``
    (builds without their static symbols name them after a neighbouring export:
    ``PyObject_GC_Del`` as a *caller* of a deallocation, ``PyInit_gc`` for ``gc.collect()``);
    the collector's ``tp_clear`` calls (``THPVariable_clear``, ``subtype_clear``) hang below;
  - an **exception** being released with its traceback: ``tb_dealloc``, ``frame_dealloc``,
    ``BaseException_dealloc``/``_clear`` (``PyTraceBack_Here`` as the caller of a
    deallocation in such builds: nothing in it frees a tensor, so it stands for
    ``tb_dealloc``);
  - **interpreter or module teardown**: ``module_dealloc``, ``_PyModule_Clear``,
    ``finalize_modules``, ``Py_FinalizeEx``;
  - the **autograd engine** dropping what backward no longer needs (on its own thread,
    ``torch::autograd::Engine::thread_main``);
  - otherwise **reference counting** from the interpreter: ``subtype_dealloc``,
    ``dict_dealloc``, ``odict_dealloc``, ``list_dealloc`` called from the eval loop
    (``_PyEval_EvalFrameDefault``): a ``del``, a rebinding, a container or a frame going away.

  The collector shows in every stack of memory it frees, so with C++ frames its absence
  is evidence too.
* with ``stacks="python"`` only the Python line is known: where the program was when the
  reference went. :func:`python_relation` compares it with where the memory was made.

Verdicts built on these carry an :class:`Evidence` list and a confidence: ``high`` when
frames say it, ``medium`` when Python stacks and lifetimes agree, ``low`` when the file
cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memtui.model.frames import StackTable

# Why memory was released, by what the free's stack shows.
COLLECTOR = "collector"
EXCEPTION = "exception"
TEARDOWN = "teardown"
AUTOGRAD = "autograd"
REFCOUNT = "refcount"
UNKNOWN = "unknown"  # no C++ frames to tell (Python stacks, or none)
RELEASES = (COLLECTOR, EXCEPTION, TEARDOWN, AUTOGRAD, REFCOUNT, UNKNOWN)

# Substrings of C++ function names, checked in this order: the collector wins because
# whatever else is on the stack (a traceback it clears, say) was held by a cycle.
_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (COLLECTOR, ("gc_collect", "collect_generations", "collect_with_callback", "delete_garbage", "_PyGC_Collect",
                 "PyGC_Collect", "_Py_RunGC", "gc_collect_main", "PyObject_GC_Del", "PyInit_gc", "gcmodule.c")),
    (EXCEPTION, ("tb_dealloc", "tb_clear", "frame_dealloc", "BaseException_dealloc", "BaseException_clear",
                 "PyTraceBack_", "traceback.c")),
    (TEARDOWN, ("module_dealloc", "_PyModule_Clear", "finalize_modules", "Py_FinalizeEx", "_PyImport_Cleanup",
                "finalize_interp", "atexit_")),
    # Only on the engine's own thread: a graph dropped from Python releases its saved
    # tensors too, and that is reference counting.
    (AUTOGRAD, ("torch::autograd::Engine::",)),
)
# Containers and objects whose deallocation drops what they hold.
_CONTAINERS = ("odict_dealloc", "dict_dealloc", "list_dealloc", "tupledealloc", "tuple_dealloc", "frame_clear",
               "subtype_dealloc")
# Frames of the interpreter: with one of these and no marker above, reference counting freed it.
_INTERPRETER = ("THPVariable_dealloc", "_Py_Dealloc", "Py_DecRef", "_PyObject_", "PyEval_", "_PyEval_EvalFrameDefault")

CONFIDENCES = ("high", "medium", "low")


@dataclass(frozen=True)
class Evidence:
    """One observation behind a verdict, in words a user can check against the trace.

    ``supports`` names the verdict it speaks for (``cycles``, ``not cycles``, ...);
    ``event`` is a trace index to look at (-1 when none).
    """

    text: str
    supports: str
    event: int = -1

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "supports": self.supports, "event": self.event}


def lower_confidence(a: str, b: str) -> str:
    return a if CONFIDENCES.index(a) > CONFIDENCES.index(b) else b


class FreeStacks:
    """Release mechanism of every stack of a snapshot, from its C++ frames (computed per
    distinct stack, so per-event work is one lookup)."""

    def __init__(self, stacks: StackTable) -> None:
        self.stacks = stacks
        n = len(stacks)
        self.kind = np.full(n + 1, RELEASES.index(UNKNOWN), np.int8)  # slot 0: no stack
        self.marker: list[str] = [""] * (n + 1)
        self.native = np.zeros(n + 1, bool)  # the stack has C++ frames beyond the recorder's and allocator's
        frames = stacks.frames
        names = [frames.name_of(f) for f in range(len(frames))] if n else []
        for sid in range(n):
            ids = stacks.frame_ids(sid)
            kind, marker, native = _classify([(names[int(f)], frames.filename_of(int(f))) for f in ids
                                              if frames.native[int(f)]])
            self.kind[sid + 1] = RELEASES.index(kind)
            self.marker[sid + 1] = marker
            self.native[sid + 1] = native

    def of(self, sid: int) -> str:
        return RELEASES[int(self.kind[int(sid) + 1])]

    def of_stacks(self, sids: np.ndarray) -> np.ndarray:
        """Release index (into RELEASES) of each stack id (-1: no stack gives UNKNOWN)."""
        return self.kind[np.asarray(sids, np.int64) + 1]

    def has_native(self, sids: np.ndarray) -> np.ndarray:
        return self.native[np.asarray(sids, np.int64) + 1]

    def marker_of(self, sid: int) -> str:
        """The C++ frame that decided a stack's release kind, shortened for a sentence."""
        return _short(self.marker[int(sid) + 1])


def _classify(native: list[tuple[str, str]]) -> tuple[str, str, bool]:
    """(release kind, deciding frame, whether there were meaningful C++ frames)."""
    if not native:
        return UNKNOWN, "", False
    for kind, markers in _MARKERS:
        for name, filename in native:
            where = f"{name} {filename}"
            if any(m in where for m in markers):
                return kind, name, True
    for marker in _CONTAINERS + _INTERPRETER:  # the most telling frame first: the container that let go
        for name, _ in native:
            if marker in name:
                return REFCOUNT, name, True
    return UNKNOWN, "", True


def _short(name: str) -> str:
    cut = name.find("(")
    return (name[:cut] if cut > 0 else name).strip()


RELEASE_WORDS = {
    COLLECTOR: "the cycle collector",
    EXCEPTION: "an exception's traceback being released",
    TEARDOWN: "module or interpreter teardown",
    AUTOGRAD: "the autograd engine releasing what backward no longer needs",
    REFCOUNT: "reference counting (a del, a rebinding, a container or a function's frame going away)",
    UNKNOWN: "not recorded",
}


# -- Python stacks -----------------------------------------------------------------------------
def python_frames(stacks: StackTable, sid: int) -> list[tuple[str, int, str]]:
    """(filename, line, function) of a stack's Python frames, innermost first."""
    if sid < 0:
        return []
    frames = stacks.frames
    return [(frames.filename_of(int(f)), int(frames.line[int(f)]), frames.name_of(int(f)))
            for f in stacks.frame_ids(sid) if not frames.native[int(f)]]


SCOPE_EXIT = "scope_exit"  # freed at a line of the alloc's own stack: the function that made it returned there
SAME_LINE = "same_line"  # freed at the very line that made it: a statement's temporary, or a variable rebound
SAME_FUNCTION = "same_function"  # freed in a function that made it, at another line, while it still ran
IN_LIBRARY = "library"  # freed inside torch's (or another library's) own Python code
ELSEWHERE = "elsewhere"  # freed in code unrelated to where it was made
NO_STACK = "no_stack"


def python_relation(free: list[tuple[str, int, str]], alloc: list[tuple[str, int, str]]) -> tuple[str, int]:
    """How a free's innermost Python frame relates to the allocation's stack.

    Returns the relation and, for SCOPE_EXIT, the depth of the matching alloc frame
    (how many frames of the alloc stack had returned by then).
    """
    if not free:
        return NO_STACK, 0
    top = free[0]
    for depth, frame in enumerate(alloc):
        if frame == top:
            return (SCOPE_EXIT, depth) if depth > 0 else (SAME_LINE, 0)
    if any(frame[0] == top[0] and frame[2] == top[2] for frame in alloc):
        return SAME_FUNCTION, 0
    if is_library_frame(top):
        return IN_LIBRARY, 0
    return ELSEWHERE, 0


def is_library_frame(frame: tuple[str, int, str]) -> bool:
    """Whether a Python frame is in torch's (or another installed library's) own code."""
    path = frame[0].replace("\\", "/")
    return "/torch/" in path or "/site-packages/" in path or path.startswith("<frozen")


def frame_text(frame: tuple[str, int, str]) -> str:
    filename = frame[0].replace("\\", "/").rsplit("/", 1)[-1]
    return f"{filename}:{frame[1]} {frame[2]}"
