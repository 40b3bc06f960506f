"""memtui: explore PyTorch CUDA memory snapshots in the terminal."""

from __future__ import annotations

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # ``memtui.record`` needs torch; import it only when someone asks for it so the
    # viewer never pays for (or requires) torch.
    if name == "record":
        import importlib

        return importlib.import_module("memtui.record")
    raise AttributeError(f"module 'memtui' has no attribute {name!r}")
