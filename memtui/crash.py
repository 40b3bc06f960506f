"""What a bug looks like to a user: one line naming a short report file, never a traceback.

An exception that is not a :class:`memtui.errors.MemtuiError` is a bug. Its traceback
(without local variables, which could hold pieces of the snapshot) goes to a report under
the cache folder, ``crashes/crash-<time>-<pid>.txt``, with the versions that matter; the
terminal gets one line with the report's path. The newest ``KEEP_REPORTS`` are kept.
"""

from __future__ import annotations

import os
import platform
import sys
import time
import traceback

CRASH_EXIT = 70  # EX_SOFTWARE: an internal error, not a problem with the input
KEEP_REPORTS = 20
_FRAMES = 40  # innermost frames kept: enough to locate a bug, short enough to paste


def crash_folder(cache_root: str | None = None) -> str:
    """``crashes`` under the cache folder this run uses: ``cache_root`` (the model cache's
    root, from ``--cache-dir``) or the default one."""
    if cache_root:
        return os.path.join(cache_root, "crashes")
    from memtui.cache.store import default_cache_dir

    return os.path.join(default_cache_dir(), "crashes")


def write_crash_report(error: BaseException, context: str = "", cache_root: str | None = None) -> str:
    """Write the report for ``error``; returns its path. Raises OSError if it cannot."""
    folder = crash_folder(cache_root)
    os.makedirs(folder, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = os.path.join(folder, f"crash-{stamp}-{os.getpid()}.txt")
    lines = [
        f"memtui crash report, {time.strftime('%Y-%m-%d %H:%M:%S %z')}",
        f"memtui {_memtui_version()}, textual {_version('textual')}, numpy {_version('numpy')}",
        f"python {platform.python_version()} on {platform.platform()}",
        f"command: {' '.join(sys.argv)}",
    ]
    if context:
        lines.append(f"while: {context}")
    lines.append("")
    lines.extend(traceback.format_exception(type(error), error, error.__traceback__, limit=-_FRAMES))
    from memtui.atomic import write_bytes_atomic

    write_bytes_atomic(path, "\n".join(line.rstrip("\n") for line in lines).encode("utf-8", "replace") + b"\n",
                       force=True)
    _prune(folder)
    return path


def report_crash(error: BaseException, context: str = "", cache_root: str | None = None) -> int:
    """Write the report and print the one line on stderr; returns :data:`CRASH_EXIT`."""
    from memtui.errors import printable

    summary = printable(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)[:200]
    try:
        where = f"a report is in {write_crash_report(error, context, cache_root)}"
    except Exception as exc:  # a full disk must not turn one line into two tracebacks
        where = f"no report could be written ({type(exc).__name__}: {exc})"
    print(f"memtui: internal error ({summary}); {where}", file=sys.stderr)
    return CRASH_EXIT


def _memtui_version() -> str:
    from memtui import __version__

    return __version__


def _version(package: str) -> str:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:
        return "?"


def _prune(folder: str) -> None:
    try:
        reports = sorted(name for name in os.listdir(folder) if name.startswith("crash-") and name.endswith(".txt"))
    except OSError:
        return
    for name in reports[:-KEEP_REPORTS]:
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass
