"""A pickle reader that can never run code.

Memory snapshots are plain dicts, lists, strings and numbers, so no global is ever
needed to rebuild one. ``find_class`` therefore refuses every global by name; the
payload of a hostile pickle (``os.system``, ``__reduce__`` of any class) is never
reached. The C unpickler is kept for speed: overriding ``find_class`` in a subclass
does not switch it to the pure-Python implementation.
"""

from __future__ import annotations

import pickle
from typing import BinaryIO

from memtui.errors import SnapshotError, UnsafeSnapshotError
from memtui.load.limits import GuardedStream
from memtui.load.source import memory_error_message


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that refuses every global and every persistent id."""

    def find_class(self, module: str, name: str):  # noqa: D102 - see class docstring
        raise UnsafeSnapshotError(
            f"refused: the file asks to import {module}.{name}; a memory snapshot never "
            "needs code, so nothing was run"
        )

    def persistent_load(self, pid):  # noqa: D102
        raise UnsafeSnapshotError("refused: the file uses pickle persistent ids, which snapshots never do")


def safe_load(stream: BinaryIO, description: str) -> object:
    """Unpickle ``stream`` with no globals allowed; every failure is a SnapshotError."""
    if isinstance(stream, GuardedStream):
        stream.check_opcodes()
    try:
        return RestrictedUnpickler(stream).load()
    except SnapshotError:
        raise
    except EOFError:
        raise SnapshotError(f"{description}: truncated pickle (the file ends before the snapshot does)") from None
    except RecursionError:
        raise SnapshotError(f"{description}: structure nested too deeply to be a memory snapshot") from None
    except MemoryError:
        raise SnapshotError(memory_error_message(stream, description)) from None
    except (pickle.UnpicklingError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            UnicodeDecodeError, OverflowError) as exc:
        raise SnapshotError(f"{description}: not a readable pickle ({_short(exc)})") from None
    except OSError as exc:
        raise SnapshotError(f"{description}: read failed ({_short(exc)})") from None


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:120]
