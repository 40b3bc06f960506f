"""Which frames of a stack matter to a user: the one rule every view uses.

A recorded stack runs from the innermost frame outwards. With ``stacks="all"`` it starts
with the machinery that recorded it (the unwinder, ``CapturedTraceback::gather``) and the
allocator's own calls (``DeviceCachingAllocator::malloc``, ``at::detail::empty_cuda``,
``create_out``): true, but never the answer to "who asked for this memory". Those are
*internal* frames: hidden by default everywhere and never used as a label.

An allocation's *label frame* is, in order of preference:

1. the innermost frame of the user's own Python code (not inside the torch package);
2. else the innermost Python frame (torch's own Python code);
3. else, for stacks with C++ frames only (the autograd engine's threads), the frame
   that names the operation: the backward node (``AddmmBackward0``, also when it releases
   its saved tensors), else the ATen op (``aten::addmm``), else the autograd engine,
   else the innermost frame past the internal ones.

Code torch *generated* is never the user's: an FX graph module's ``forward``
(``fx_generated_<hash>.py`` with ``enrich_profiler_metadata``, ``<eval_with_key>.N``
without) and Inductor's output code. A generated frame that carries
``fx_original_trace`` (``augment_with_fx_traces``) stands for the line of the model that
the FX node came from: in rule 1 and 2 it counts as that original frame (the innermost
user frame of the original trace, else its innermost frame), so a compiled region's
allocation is labelled by the model's own line; one without falls through to the user's
code that called the compiled region.

An *event* is labelled by its stack's label when that is the user's own code; else, when
the entry has ``forward_frames`` (recorded in backward with anomaly mode on), by the
forward traceback's label, the line whose backward allocated (``model.py:12 forward
(backward)``); else by its stack's label as above. The same choice groups allocations
by call site (:func:`site_stacks`).
"""

from __future__ import annotations

import re

import numpy as np

# Frame keys beyond filename/line/name that memtui reads (torch's augment_with_fx_traces),
# and the extra under which a forward traceback line keeps its own text.
FX_NODE_OP, FX_NODE_NAME, FX_NODE_TARGET, FX_ORIGINAL_TRACE = (
    "fx_node_op", "fx_node_name", "fx_node_target", "fx_original_trace")
FORWARD_TEXT = "forward_frame"

# Bumped whenever a rule here changes what a frame is or which frame labels a stack: the
# model cache keeps the flags and labels, so a cached model of an older rule is rebuilt.
RULES_VERSION = 2

# Frames whose filename is one of these, or ends so, are native (C++) frames: sources,
# and the object files, assembly and shared libraries a symbolizer names when it has no
# source line (``thread48.o``, glibc's ``clone3.S``, ``libc.so.6``).
_NATIVE_FILENAMES = ("??", "")
_NATIVE_SUFFIXES = (".cpp", ".cc", ".cxx", ".c", ".h", ".hh", ".hpp", ".hxx", ".inl", ".cu", ".cuh", ".o", ".S",
                    ".s", ".asm", ".so", ".a")
_SHARED_LIBRARY = re.compile(r"\.so(?:\.\d+)+$")

# Where every thread begins (glibc, libstdc++): true of every thread, so never a label.
_THREAD_START = ("start_thread", "clone3", "clone", "execute_native_thread_routine", "__libc_start_main",
                 "__libc_start_call_main", "_start")

# Recording and allocating, never the code that asked for memory (matched in the
# function name or file name of a native frame).
_INTERNAL_MARKERS = (
    # the recorder
    "torch::unwind::", "CapturedTraceback", "gather_with_cpp", "memory_snapshot.cpp",
    # the allocator and tensor creation under every op
    "CachingAllocator", "empty_generic", "empty_strided_generic", "empty_cuda", "empty_strided_cuda",
    "wrapper_CUDA__empty", "wrapper_CUDA_memory_format_empty", "create_out", "set_output_raw_strided",
    "allocate_or_resize_outputs", "resize_bytes_cuda",
    # the same under other accelerators' allocators (ROCm builds keep the CUDA names)
    "empty_xpu", "empty_strided_xpu", "wrapper_XPU__empty", "wrapper_XPU_memory_format_empty", "resize_bytes_xpu",
    "empty_mps", "empty_strided_mps", "empty_npu", "empty_strided_npu",
    # releasing a tensor's storage under every free
    "reset_not_null_", "~TensorImpl", "decref_pyobject",
)

_BACKWARD_NODE = re.compile(
    r"autograd::generated::(\w+?Backward\w*?)(?:_apply_functional|::apply\b|::release_variables)")
_ATEN_OP = re.compile(r"at::_ops::(\w+)::(?:call|redispatch)")
_AUTOGRAD_ENGINE = re.compile(r"torch::autograd::Engine::\w+")


def is_native_frame(filename: str) -> bool:
    """True for C++/interpreter frames (filename '??', '' or a C/C++ source)."""
    return (filename in _NATIVE_FILENAMES or filename.endswith(_NATIVE_SUFFIXES)
            or bool(_SHARED_LIBRARY.search(filename)))


def is_thread_start(name: str) -> bool:
    """True for the frames every thread starts with (``start_thread``, ``clone3``, ...)."""
    return name.strip() in _THREAD_START


_GENERATED = re.compile(r"(?:^|/)(?:fx_generated_\w*\.py|<eval_with_key>\.\d+)$|/torchinductor_[^/]*/")
_TRACEBACK_LINE = re.compile(r'^\s*File "(.*)", line (\d+), in (.*)$')


def is_generated_frame(filename: str) -> bool:
    """True for code torch generated: FX graph modules and Inductor's output."""
    return bool(_GENERATED.search(filename.replace("\\", "/")))


def parse_traceback(text: str) -> list[tuple[str, int, str]]:
    """(filename, line, function) of each ``File "...", line N, in name`` line of a formatted
    traceback (``traceback.format_stack``, FX's ``stack_trace``), outermost first."""
    found = []
    for line in text.splitlines():
        m = _TRACEBACK_LINE.match(line)
        if m:
            found.append((m.group(1), int(m.group(2)), m.group(3).strip()))
    return found


def is_torch_frame(filename: str) -> bool:
    """True for Python frames inside the torch package itself."""
    path = filename.replace("\\", "/")
    return "/torch/" in path or path.startswith("torch/")


def is_internal_frame(filename: str, name: str) -> bool:
    """True for the recorder's and the allocator's own native frames."""
    if not is_native_frame(filename):
        return False
    where = f"{name} {filename}"
    return any(marker in where for marker in _INTERNAL_MARKERS)


def short_native_name(name: str) -> str:
    """A C++ function as a user reads it: ``AddmmBackward0 (backward)``, ``aten::addmm``,
    else the name without its argument list and with at most two namespaces."""
    m = _BACKWARD_NODE.search(name)
    if m:
        return f"{m.group(1)} (backward)"
    m = _ATEN_OP.search(name)
    if m:
        return f"aten::{m.group(1)}"
    if _AUTOGRAD_ENGINE.search(name):
        return "autograd engine (backward)"
    depth = 0
    for i, ch in enumerate(name):
        if ch in "(<":
            if depth == 0 and ch == "(":
                name = name[:i]
                break
            depth += 1
        elif ch in ")>":
            depth = max(0, depth - 1)
    return "::".join(name.strip().split("::")[-2:])


def label_frames(ids: np.ndarray, names: list[str], native: np.ndarray, user: np.ndarray, internal: np.ndarray,
                 depth: int = 1, original: np.ndarray | None = None) -> tuple[int, ...]:
    """The label frame of one stack (module docstring), and with ``depth`` > 1 the next
    frames of the same kind outwards. ``names`` are the function names of ``ids``;
    ``original`` maps an FX frame to the frame its fx_original_trace names (or -1)."""
    if len(ids) == 0:
        return ()
    if original is not None and len(original) and (original[ids] >= 0).any():
        ids = np.where(original[ids] >= 0, original[ids], ids)
    picked = ids[user[ids]]
    if not len(picked):
        picked = ids[~native[ids]]
    if len(picked):
        return tuple(int(f) for f in picked[:depth])
    for pattern in (_BACKWARD_NODE, _ATEN_OP, _AUTOGRAD_ENGINE):
        for fid, name in zip(ids, names):
            if pattern.search(name):
                return (int(fid),)
    outside = [int(f) for f, name in zip(ids, names) if not internal[f] and not is_thread_start(name)] \
        if names else [int(f) for f in ids[~internal[ids]]]
    return (outside[0] if outside else int(ids[0]),)


def site_stacks(stack: np.ndarray, forward: np.ndarray, label_is_user: np.ndarray) -> np.ndarray:
    """The stack that names each entry (module docstring): its own when its label is the
    user's code or it has no forward traceback, else the forward traceback's."""
    stack = np.asarray(stack)
    forward = np.asarray(forward)
    if not len(forward) or not (forward >= 0).any():
        return stack
    own_is_user = np.append(label_is_user, False)[np.where(stack >= 0, stack, len(label_is_user))]
    return np.where((forward >= 0) & ~own_is_user, forward, stack).astype(stack.dtype)


def shown_frames(ids: np.ndarray, native: np.ndarray, internal: np.ndarray, show_native: bool = False) -> list[int]:
    """Frames a stack view shows: its Python frames, or for a C++-only stack its frames
    past the internal ones; with ``show_native`` every frame, as recorded."""
    ids = np.asarray(ids)
    if show_native:
        return [int(f) for f in ids]
    outside = ids[~internal[ids]] if len(ids) else ids
    python = outside[~native[outside]]
    return [int(f) for f in (python if len(python) else outside)]
