"""memtui's optional compiled half, ``memtui._native`` (built from src/memtui_native/ where a
C compiler exists: docs/performance.md), or None where it was not built. Every module that
uses it takes it from here and keeps its own numpy or Python way for None.

Nothing here imports numpy: the command line reads it before the heavy imports.
"""

from __future__ import annotations

from typing import Any

try:
    from memtui import _native as _module
except ImportError:  # built without a C compiler
    _module = None

native: Any = _module  # the compiled module has no type stubs
