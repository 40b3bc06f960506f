"""``python -m memtui`` and the ``memtui`` command: the exit signals are held before anything
is imported (memtui/exit_signals.py), so that even a Ctrl-C at start-up ends in one line."""

from memtui.exit_signals import hold_early_signals

hold_early_signals()

import sys  # noqa: E402

from memtui.cli import ends_as_python_does, main  # noqa: E402
from memtui.process_end import end  # noqa: E402


def run() -> None:
    code = main()
    if ends_as_python_does(sys.argv[1:]):
        raise SystemExit(code)
    end(code)


if __name__ == "__main__":
    run()
