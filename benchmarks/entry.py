"""How the benchmarks start memtui: as its console script does, and with what around it.

``pip install .`` writes a ``memtui`` script that imports ``memtui.__main__`` and calls
``run()``; ``python -m memtui`` goes through runpy instead, a module more to import in every
process (5 ms here). The benchmarks start the checkout's memtui (PYTHONPATH) the script's
way, with any interpreter.

What they cannot change is the interpreter's site: an editable install (``pip install -e``)
puts an import hook there that every process loads as it starts (pathlib, importlib.util:
about 20 ms of CPU a process here), which a user's ``pip install .`` does not have. Run the
benchmarks with the Python of an environment where memtui was installed with ``pip install .``
(or not installed at all) to measure what a user meets; :func:`editable_hook` says which
it is, and the tables print it.
"""

from __future__ import annotations

import site
import sys
from pathlib import Path

RUN = "import sys\nfrom memtui.__main__ import run\nsys.argv[0] = 'memtui'\nsys.exit(run())\n"


def memtui_argv(*args: str, python: str = sys.executable) -> list[str]:
    """``memtui ARGS`` as the installed script runs it, with ``python``."""
    return [python, "-c", RUN, *args]


def editable_hook() -> str | None:
    """The editable install's hook that this interpreter's site loads for memtui, if any."""
    folders = [*site.getsitepackages(), site.getusersitepackages()]
    for folder in map(Path, folders):
        for hook in sorted(folder.glob("__editable__*memtui*.pth")) if folder.is_dir() else []:
            return str(hook)
    return None


def install_note() -> str:
    hook = editable_hook()
    if hook is None:
        return "memtui started as its installed script starts it; no editable install's import hook in this Python"
    return (f"this Python loads an editable install's import hook in every process ({Path(hook).name}): "
            "a user's pip install . has none; run with a Python without it to measure what users meet")
