"""How many cores this process may use: those it may run on (``taskset`` and cgroup cpusets
are respected), not the machine's count."""

from __future__ import annotations

import os


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1
