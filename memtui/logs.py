"""memtui's log lines: what a failure that memtui works around (a cache file rejected, a
file read another way) leaves for a caller that configured logging. Nothing is shown
otherwise.

The logging module is imported when a line is written, not at the start: about 7 ms of a cold
``memtui info``'s imports (130 ms), for lines that only a failure writes.
"""

from __future__ import annotations

CACHE = "memtui.cache"  # the model cache, its index and its curves
LOAD = "memtui.load"  # the way a file was read


def info(logger: str, message: str, *args: object) -> None:
    import logging

    logging.getLogger(logger).info(message, *args)


def debug(logger: str, message: str, *args: object) -> None:
    import logging

    logging.getLogger(logger).debug(message, *args)
