"""How the ``memtui`` command's process ends once its work is done (memtui/__main__.py).

Apart from the entry point, so that it can be imported (by tests, by the benchmarks) without
the entry point's own start: that holds the exit signals at import.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading


def end(code: int) -> None:
    """End the process with ``code``, without tearing the interpreter down object by object.

    Once the command is done, what must happen at exit is the output flushed and the exit
    handlers run (the cache's background write waited for, logging closed); freeing the
    model's objects one by one and the modules after them only delays the exit (0.04 s
    after a 10M-event ``info``), as the kernel takes the memory back at once. Where a
    thread that is not a daemon still runs, or the output cannot be flushed, the
    interpreter ends as usual.
    """
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream: the usual exit reports it
        raise SystemExit(code) from None
    if others:
        raise SystemExit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()  # what the exit handlers printed
        sys.stderr.flush()
    finally:
        os._exit(code)

