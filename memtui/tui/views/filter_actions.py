"""The explorer's filter (`\\`) and export (`x`) keys, and the filters the help lists.

A filter narrows the event log to the matching events ("12,345 of 1,000,000"); the
timeline and the segment map keep showing the whole trace and mark what matches (the
timeline under its axis, the map by drawing matching allocations apart). The main screen
computes it in a worker (:func:`memtui.tui.views.log_scope.filter_scope`) and shows it with
``MainScreen.set_scope``; the export writes what the log lists.
"""

from __future__ import annotations

# (key, action, description, shown in the footer), as the main screen lists its keys.
FILTER_KEYS = [
    ("backslash", "filter", "Filter", True),
    ("x", "export", "Export", True),
    ("escape", "clear_filter", "Clear filter", False),
]
FILTER_PALETTE = [
    ("filter", "Filter events", "Show only the events matching a filter expression (docs/filter.md)"),
]
# Shown in the help screen: what people filter for, most common first.
FILTER_EXAMPLES = [
    ("size>1MiB file:train.py leaked", "big allocations from train.py never freed"),
    ("action:alloc live", "allocations still in memory at the end"),
    ("action:oom or action:segment", "OOMs and cudaMalloc/cudaFree"),
    ("func:forward -freed", "forward's allocations not freed in the trace"),
    ("time:10s..12s", "two seconds of the trace (time since its first event)"),
    ("event:1000..2000", "a window of events by index"),
    ("id:7f064c000000_0", "one allocation's alloc and frees (a bare id works too)"),
    ("stream:0x55d0c0a81f30", "one CUDA stream"),
    ("pool:0,0 seg:7f0640000000", "the default pool, one segment"),
    ('ctx:"Region: 0/0" meta:epoch=3', "compile context, user metadata"),
    ("a or b, -a, not a, ( )", "combine: spaces AND, or, not; parentheses group"),
]
