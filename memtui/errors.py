"""The one exception family for problems a user can act on.

Everything that reaches the command line as a failure is a ``MemtuiError``: the CLI
prints its message on one line and exits with its ``exit_code``. Anything else reaching
the user is a bug.
"""

from __future__ import annotations


class MemtuiError(Exception):
    """A user-facing failure: one line of text, one exit status."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        message = printable(message)
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class SnapshotError(MemtuiError):
    """The input file cannot be read as a memory snapshot."""


class UnsafeSnapshotError(SnapshotError):
    """The input tried to load code (a pickle global); it was refused."""


class UsageError(MemtuiError):
    """The command line asked for something that does not exist or cannot be done."""


class MissingDependencyError(MemtuiError):
    """An optional package is needed for this feature."""


def printable(text: str) -> str:
    # Messages quote file names and pickle globals, which come from elsewhere: an escape
    # sequence or a newline in one must neither reach the terminal raw nor break the line.
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP reached the process (memtui/exit_signals.py). A
    KeyboardInterrupt, so that whatever stops on Ctrl-C stops on the others too; the
    process ends with status 128 + ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
