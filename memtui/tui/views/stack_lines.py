"""Turning a stack into what the inspector shows: collapsed repeats and source context.

Pure (no textual): recursion and repeated wrappers collapse into one group with a count,
and source lines come from the file when it exists on this machine.
"""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass

MAX_PERIOD = 8  # longest repeated run of frames (a recursion cycle) that is collapsed


@dataclass
class FrameGroup:
    """Frames shown once, standing for ``repeat`` consecutive copies of themselves."""

    frames: list[int]
    repeat: int = 1


def collapse_repeats(frames: list[int]) -> list[FrameGroup]:
    """Group consecutive repeats of a frame or of a short cycle of frames."""
    groups: list[FrameGroup] = []
    i, n = 0, len(frames)
    while i < n:
        best_period, best_reps = 1, 1
        for period in range(1, min(MAX_PERIOD, (n - i) // 2) + 1):
            unit = frames[i:i + period]
            reps = 1
            while frames[i + reps * period:i + (reps + 1) * period] == unit:
                reps += 1
            # Prefer the cycle that hides the most lines.
            if reps > 1 and (reps - 1) * period > (best_reps - 1) * best_period:
                best_period, best_reps = period, reps
        groups.append(FrameGroup(frames[i:i + best_period], best_reps))
        i += best_period * best_reps
    return groups


def source_context(filename: str, line: int, context: int = 2) -> list[tuple[int, str]]:
    """(line number, text) around ``line`` of ``filename``, or [] when the file is not here."""
    if line <= 0 or not filename or not os.path.isfile(filename):
        return []
    lines = linecache.getlines(filename)
    if not lines or line > len(lines):
        return []
    lo, hi = max(1, line - context), min(len(lines), line + context)
    return [(k, lines[k - 1].rstrip("\n").expandtabs(4)) for k in range(lo, hi + 1)]
