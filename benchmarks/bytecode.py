"""Whether the packages a run imports have their bytecode compiled, as an install leaves them.

pip compiles a package's modules as it installs it; a copy whose bytecode was never written
(a container image built with PYTHONDONTWRITEBYTECODE, a read-only folder) compiles every
module again in every process that imports it. On a 16-core GPU host numpy without bytecode
took 0.26-0.37 s to import against 0.13-0.14 s with it, more than the scan of a 10M-event file
on its cores: a figure measured so is the interpreter's, not memtui's. The benchmarks say so
in a line rather than compile another's packages themselves.
"""

from __future__ import annotations

import importlib.util
import os
import sys

PACKAGES = ("numpy", "msgpack", "memtui")


def missing(packages: tuple[str, ...] = PACKAGES) -> dict[str, tuple[int, int]]:
    """Per package whose bytecode is not all there: (modules without it, modules)."""
    out = {}
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        sources = [os.path.join(folder, f) for top in spec.submodule_search_locations
                   for folder, _, files in os.walk(top) for f in files if f.endswith(".py")]
        lacking = sum(not os.path.exists(importlib.util.cache_from_source(s)) for s in sources)
        if lacking:
            out[name] = (lacking, len(sources))
    return out


def say_if_missing() -> None:
    """One line on standard error naming the packages without bytecode, if any."""
    lacking = missing()
    if not lacking:
        return
    named = ", ".join(f"{name} ({n} of {total} modules)" for name, (n, total) in lacking.items())
    print(f"note: no compiled bytecode for {named}: every process here compiles them as it imports them, "
          f"which an installed copy does not; `python -m compileall -q <package folder>` first",
          file=sys.stderr, flush=True)
