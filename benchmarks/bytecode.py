"""Whether the packages a run imports have their bytecode compiled, as an install leaves them.

pip compiles a package's modules as it installs it; a copy whose bytecode was never written
(a container image built with PYTHONDONTWRITEBYTECODE, a read-only folder) compiles every
module again in every process that imports it. On a 16-core GPU host numpy without bytecode
took 0.26-0.37 s to import against 0.13-0.14 s with it, more than the scan of a 10M-event file
on its cores: a figure measured so is the interpreter's, not memtui's. The benchmarks say so
in a line rather than compile another's packages themselves.

memtui's own modules are another matter: the benchmarks run the checkout's copy, which is
compiled only where a process was let write its bytecode (never where PYTHONDONTWRITEBYTECODE
is set, and a module edited since is compiled again in every process that imports it). A
user's ``pip install .`` compiles it, so :func:`compile_checkout` does, before anything is
measured: the explorer's warm first screen at 10M events took 0.76 s here with none of
memtui's bytecode against 0.66 s with it (6 runs each, in turn), a compile no user waits for.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import sys
from pathlib import Path

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


def compile_checkout(root: Path) -> None:
    """Compile the bytecode of the memtui under ``root`` (the checkout the benchmarks run), as
    an install does; quiet unless a module fails to compile."""
    if not compileall.compile_dir(str(root / "memtui"), quiet=1, workers=0):
        raise SystemExit(f"memtui's modules under {root} do not all compile")


def say_if_missing() -> None:
    """One line on standard error naming the packages without bytecode, if any."""
    lacking = missing()
    if not lacking:
        return
    named = ", ".join(f"{name} ({n} of {total} modules)" for name, (n, total) in lacking.items())
    print(f"note: no compiled bytecode for {named}: every process here compiles them as it imports them, "
          f"which an installed copy does not; `python -m compileall -q <package folder>` first",
          file=sys.stderr, flush=True)
