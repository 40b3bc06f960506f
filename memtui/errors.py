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
