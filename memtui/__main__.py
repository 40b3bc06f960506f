"""``python -m memtui`` and the ``memtui`` command: the exit signals are held before anything
is imported (memtui/exit_signals.py), so that even a Ctrl-C at start-up ends in one line."""

from memtui.exit_signals import hold_early_signals

hold_early_signals()

from memtui.cli import main  # noqa: E402


def run() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    run()
