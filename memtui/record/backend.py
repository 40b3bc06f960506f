"""The one place memtui talks to torch: imported on first use, with one-line errors.

Everything torch-specific and version-dependent lives here so the rest of the recording
code reads as plain steps (start, snapshot, stop) and the feature checks stay in one file.
"""

from __future__ import annotations

import inspect
import sys

from memtui.errors import MemtuiError, MissingDependencyError

INSTALL_HINT = "pip install 'memtui[record]'"


class CudaUnavailableError(MemtuiError):
    """Recording CUDA memory needs a CUDA device, and this process sees none."""


def torch_module():
    """``import torch``, or a MissingDependencyError that says how to install it."""
    try:
        import torch
    except ImportError as exc:
        if exc.name == "torch":
            raise MissingDependencyError(f"recording needs PyTorch, which is not installed: {INSTALL_HINT}") from None
        raise MissingDependencyError(f"PyTorch is installed but failed to import ({exc})") from None
    return torch


def cuda_torch():
    """torch, checked to see at least one CUDA device (a ROCm build's GPUs count: torch.cuda is HIP there)."""
    torch = torch_module()
    if not torch.cuda.is_available():
        if not getattr(torch.version, "cuda", None) and not getattr(torch.version, "hip", None):
            why = f"this PyTorch build ({torch.__version__}) has no CUDA support (nor ROCm)"
        else:
            why = f"PyTorch {torch.__version__} sees no CUDA device"
        other = _other_accelerator(torch)
        hint = (f"; this machine's {other} is not recorded by memtui run: record it with torch.{other}.memory."
                "_record_memory_history and _dump_snapshot, then open the file with memtui") if other else ""
        raise CudaUnavailableError(f"CUDA is not available: {why}; memtui run records CUDA (and ROCm) GPUs{hint}")
    return torch


def _other_accelerator(torch) -> str | None:
    """The accelerator torch sees when it is not CUDA (``xpu``, ``npu``, ``mps``...), or None."""
    try:
        found = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    except Exception:  # an older torch without torch.accelerator, or a backend that fails to answer
        return None
    kind = getattr(found, "type", None)
    return kind if isinstance(kind, str) and kind != "cuda" else None


def _parameters(fn) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


# Set by start_history/stop_history, for torch versions that cannot be asked.
_enabled_here = False


def history_enabled(torch) -> bool:
    """Whether the allocator is recording history now (by us or by the script itself)."""
    if not torch.cuda.is_initialized():
        # Recording initializes CUDA, so nothing records yet; and torch 2.11 crashes
        # (SIGSEGV) when the allocator is asked before CUDA is initialized.
        return False
    probe = getattr(torch._C, "_cuda_isHistoryEnabled", None)
    if probe is not None:
        return bool(probe())
    return _enabled_here


def start_history(torch, *, max_entries: int, stacks: str, context: str | None) -> None:
    """Start recording allocator history (``enabled='all'``)."""
    global _enabled_here
    record = torch.cuda.memory._record_memory_history
    kwargs: dict = {"enabled": "all", "context": context, "stacks": stacks, "max_entries": max_entries}
    params = _parameters(record)
    # Without this, record_function scopes (step markers, optimizer steps) reach
    # `external_annotations` only from the thread that started recording.
    if "global_record_annotations" in params:
        kwargs["global_record_annotations"] = True
    # Recording initializes CUDA in C++ only; initializing it from Python too keeps
    # torch.cuda.is_initialized() truthful, which the checks in this file rely on.
    torch.cuda.init()
    record(**kwargs)
    _enabled_here = True


def stop_history(torch) -> None:
    global _enabled_here
    torch.cuda.memory._record_memory_history(enabled=None)
    _enabled_here = False


def take_snapshot(torch) -> dict:
    """The allocator's state and history as plain Python objects (what ``_dump_snapshot`` pickles)."""
    return torch.cuda.memory._snapshot()


def attach_oom_observer(torch, observer) -> None:
    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        raise MemtuiError(f"PyTorch {torch.__version__} cannot report CUDA out-of-memory events to Python")
    attach(observer)


def set_step_metadata(torch, text: str, prefix: str) -> None:
    """Stamp later trace entries of this thread with ``text`` (their ``user_metadata``).

    Best effort: older torch lacks it, and metadata the script set itself (anything not
    starting with ``prefix``) is left alone.
    """
    memory = torch.cuda.memory
    get = getattr(memory, "_get_memory_metadata", None)
    put = getattr(memory, "_set_memory_metadata", None)
    # Before CUDA is initialized nothing is recorded, and the allocator must not be touched
    # (see history_enabled); a recording that starts later stamps the step itself.
    if get is None or put is None or not torch.cuda.is_initialized():
        return
    try:
        current = get()
        if current and not current.startswith(prefix):
            return
        put(text)
    except RuntimeError:
        # An allocator backend without metadata support (cudaMallocAsync) refuses it.
        return


def open_scope(torch, name: str):
    """Enter a ``record_function`` scope that stays open until ``close_scope``.

    While history is recorded, its enter and exit land in the snapshot's
    ``external_annotations`` as START and END, which is how steps become visible there.
    """
    scope = torch.autograd.profiler.record_function(name)
    scope.__enter__()
    return scope


def close_scope(scope) -> None:
    try:
        scope.__exit__(None, None, None)
    except Exception as exc:  # a marker must never break the script being recorded
        print(f"memtui: could not close step marker ({exc})", file=sys.stderr)
