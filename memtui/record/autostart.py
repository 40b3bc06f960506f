"""``MEMTUI_LIVE=1``: serve any Python process that uses CUDA, with no change to its code.

memtui installs ``memtui-live.pth`` into site-packages; at interpreter start it imports this
module only when ``MEMTUI_LIVE`` is set. Nothing happens then either until torch is
imported, and nothing more until CUDA is initialized: a launcher such as torchrun, which
imports torch but never touches the GPU, serves nothing, and each rank serves itself.

torch's own hook for "when CUDA initializes" (``torch.cuda._lazy_call``) runs the start
inside the first CUDA call, before any allocation, so the recording misses nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

from memtui.record.serving import ENV_VAR


def _say(text: str) -> None:
    print(f"memtui: {text}", file=sys.stderr, flush=True)


def _start() -> None:
    try:
        from memtui.record.serving import live

        session = live()
        _say(f"serving CUDA memory at {session.path} (memtui watch attaches)")
    except Exception as exc:  # the job comes first: a failure to serve never stops it
        _say(f"live serving did not start ({exc})")


def _torch_ready(torch) -> None:
    lazy_call = getattr(getattr(torch, "cuda", None), "_lazy_call", None)
    if lazy_call is None:
        _say(f"this torch ({getattr(torch, '__version__', '?')}) offers no hook at CUDA start; "
             "use memtui run --live or memtui.record.live()")
        return
    lazy_call(_start)  # now if CUDA is already initialized, else inside its initialization


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Finds ``torch`` as the other finders would, and runs ``_torch_ready`` once it has loaded."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # once is enough, and find_spec below must not find us
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        original = getattr(loader, "exec_module", None)
        if original is None:
            return spec

        def exec_module(module):
            original(module)
            try:
                _torch_ready(module)
            except Exception as exc:
                _say(f"live serving did not start ({exc})")

        loader.exec_module = exec_module
        return spec


def install(environ=os.environ) -> bool:
    """Arrange serving for this process if ``MEMTUI_LIVE`` asks for it; True if arranged."""
    if environ.get(ENV_VAR, "").strip().lower() in ("", "0", "no", "off", "false"):
        return False
    torch = sys.modules.get("torch")
    if torch is not None:
        _torch_ready(torch)
    else:
        sys.meta_path.insert(0, _AfterTorchImport())
    return True


install()
