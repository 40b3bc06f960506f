"""``python -m memtui`` and the ``memtui`` command: the exit signals are held before anything
is imported (memtui/exit_signals.py), so that even a Ctrl-C at start-up ends in one line."""

from memtui.exit_signals import hold_early_signals

hold_early_signals()

import atexit  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

from memtui.cli import ends_as_python_does, main  # noqa: E402


def run() -> None:
    code = main()
    if ends_as_python_does(sys.argv[1:]):
        raise SystemExit(code)
    end(code)


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


if __name__ == "__main__":
    run()
