"""What the frames of a stack say about the memory it allocated or freed.

Each built-in category rule (memtui/analysis/categories.py) looks for one of a few kinds of
frame, checked once per distinct frame and then once per distinct stack (a few hundred even
in a million-event trace); events only look their stack's flags up. Each kind is a frame a
user can find in the stack view:

- ``PARAM``: the model's weights being made: ``Module._apply`` (what ``.to()``, ``.cuda()``,
  ``.half()`` run), ``Module.to_empty``, ``torch/nn/parameter.py``, a ``torch.nn`` module's
  ``__init__`` or ``reset_parameters``, or ``from_pretrained`` loading a checkpoint;
- ``OPTIM``: a Python frame under ``torch/optim/`` (the optimizer's step, its state's
  initialisation);
- ``ZERO_GRAD``: ``zero_grad`` of an optimizer or a module (frees the gradients);
- ``BACKWARD_CALL``: the main thread inside ``backward()`` (``torch/_tensor.py backward``,
  ``torch.autograd.backward/grad``, ``_engine_run_backward``);
- ``ENGINE``: a C++ frame of the autograd engine or of a backward node
  (``torch::autograd::Engine::…``, ``AddmmBackward0::apply``): the autograd thread;
- ``ACCUMULATE_GRAD``: ``AccumulateGrad``, the node that writes ``.grad``;
- ``WORKSPACE``: a library's scratch space kept for the process (``getCUDABlasLtWorkspace``,
  ``setWorkspaceForHandle``, cuDNN's workspace);
- ``MODULE_CALL``: ``Module._call_impl``, inside some module's ``forward``.
"""

from __future__ import annotations

import re

import numpy as np

from memtui.model.frames import StackTable

PARAM = 1 << 0
OPTIM = 1 << 1
ZERO_GRAD = 1 << 2
BACKWARD_CALL = 1 << 3
ENGINE = 1 << 4
ACCUMULATE_GRAD = 1 << 5
WORKSPACE = 1 << 6
MODULE_CALL = 1 << 7

_BACKWARD_CALLS = {
    ("torch/_tensor.py", "backward"),
    ("torch/autograd/__init__.py", "backward"),
    ("torch/autograd/__init__.py", "grad"),
    ("torch/autograd/graph.py", "_engine_run_backward"),
}
_PARAM_FUNCTIONS = {"_apply", "to_empty"}
_MODULE_INIT = {"__init__", "reset_parameters", "_reset_parameters"}
_ENGINE = re.compile(r"torch::autograd::(?:Engine::|python::PythonEngine::)|autograd::generated::\w+Backward\w*"
                     r"|torch::autograd::Node::operator\(\)|torch::autograd::call_function")
_WORKSPACE = re.compile(r"getCUDABlasLtWorkspace|setWorkspaceForHandle|getCurrentCUDABlasHandle"
                        r"|cudnn\w*[Ww]orkspace|getCUDNNWorkspace")


def frame_flags(filename: str, name: str, native: bool) -> int:
    """The kinds (module docstring) of one frame."""
    if native:
        flags = 0
        if _ENGINE.search(name):
            flags |= ENGINE
        if "AccumulateGrad" in name:
            flags |= ACCUMULATE_GRAD | ENGINE
        if _WORKSPACE.search(name):
            flags |= WORKSPACE
        return flags
    path = filename.replace("\\", "/")
    flags = 0
    torch_at = path.rfind("torch/")
    inside = path[torch_at:] if torch_at >= 0 and (torch_at == 0 or path[torch_at - 1] == "/") else ""
    if inside:
        if (inside, name) in _BACKWARD_CALLS:
            flags |= BACKWARD_CALL
        if inside.startswith("torch/optim/"):
            flags |= OPTIM
        if name == "zero_grad":
            flags |= ZERO_GRAD
        if inside == "torch/nn/modules/module.py":
            if name in _PARAM_FUNCTIONS:
                flags |= PARAM
            elif name == "_call_impl":
                flags |= MODULE_CALL
        elif inside == "torch/nn/parameter.py" or (inside.startswith("torch/nn/modules/") and name in _MODULE_INIT):
            flags |= PARAM
    elif name == "from_pretrained":  # transformers and others: a checkpoint loaded onto the GPU
        flags |= PARAM
    elif name == "zero_grad":  # a trainer's own zero_grad (Lightning, transformers' Trainer)
        flags |= ZERO_GRAD
    return flags


def stack_flags(stacks: StackTable) -> np.ndarray:
    """The OR of the frame kinds of every stack, indexed by stack id + 1 (slot 0: no stack)."""
    frames = stacks.frames
    strings = frames.strings
    per_frame = np.zeros(len(frames), np.int32)
    for fid in range(len(frames)):
        per_frame[fid] = frame_flags(strings[int(frames.filename[fid])], strings[int(frames.name[fid])],
                                     bool(frames.native[fid]))
    out = np.zeros(len(stacks) + 1, np.int32)
    if len(stacks) and len(stacks.flat):
        # One reduceat over the flat frame array: every stack's frames are one run of it.
        starts = stacks.offsets[:-1]
        nonempty = stacks.offsets[1:] > starts
        ored = np.bitwise_or.reduceat(per_frame[stacks.flat], np.minimum(starts, len(stacks.flat) - 1))
        out[1:][nonempty] = ored[nonempty]
    return out
