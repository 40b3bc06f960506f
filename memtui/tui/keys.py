"""The keyboard reference, built from the bindings themselves so help and docs never drift.

The app builds it when ? is pressed and hands it to the help screen; the keys every app and
the watch view share come from the leaf rows of memtui/tui/views/key_table.py, so nothing
here imports an app (no cycle app -> help -> keys -> app).
"""

from __future__ import annotations

from textual.binding import Binding

from memtui.tui.views.key_table import WATCH_BACK_KEY, app_key_rows, key_label


def _rows(bindings: list) -> list[tuple[str, str]]:
    rows = []
    for b in bindings:
        if isinstance(b, Binding):
            rows.append((key_label(b.key), b.description))
        else:
            rows.append((key_label(b[0]), b[2]))
    return rows


def key_reference() -> list[tuple[str, list[tuple[str, str]]]]:
    """(section, [(keys, what they do)]) for every key of the explorer."""
    from memtui.tui.screens.analysis_base import ReportTable
    from memtui.tui.screens.breakdown import BreakdownScreen
    from memtui.tui.screens.detail import DetailScreen
    from memtui.tui.screens.live import LiveScreen
    from memtui.tui.screens.main import SCREEN_KEYS
    from memtui.tui.widgets.breakdown_pane import BreakdownPane
    from memtui.tui.widgets.call_tree import CallTree
    from memtui.tui.widgets.choice_list import ChoiceList
    from memtui.tui.widgets.event_log import EventLog
    from memtui.tui.widgets.segment_map import SegmentMap
    from memtui.tui.widgets.stack_inspector import StackInspector

    everywhere = [("Tab / Shift+Tab", "Next / previous pane"), ("Ctrl+P", "Command palette (every action below)")]
    everywhere += _rows([row for row in app_key_rows("Quit", ctrl_c="quit") if row[3]])
    return [
        ("Everywhere", everywhere + _rows([Binding(k, a, d) for k, a, d, _show in SCREEN_KEYS])),
        ("Event log", _rows(EventLog.BINDINGS)),
        ("Segment map", _rows(SegmentMap.BINDINGS)),
        ("Stack inspector", _rows(StackInspector.BINDINGS)),
        ("Search bar", [("Enter", "Search"), ("Esc", "Close search")]),
        ("Filter bar", [("Enter", "Apply the filter (docs/filter.md)"), ("Esc", "Clear the filter")]),
        ("Event detail", _rows(DetailScreen.BINDINGS)),
        ("Breakdown pane (b)", _rows(BreakdownPane.BINDINGS)),
        ("Breakdown screen (B)", _rows(BreakdownScreen.BINDINGS)),
        ("Call tree", _rows(CallTree.BINDINGS)),
        ("Analysis screens' tables (L, W, C, D...)", _rows(ReportTable.BINDINGS)
         + [("Enter", "The row's events (see the screen's hint)"), ("Esc", "Close")]),
        ("Lists to pick from (an address's allocations, jobs)", _rows(ChoiceList.BINDINGS) + [("Esc", "Close")]),
        ("memtui watch (docs/watch.md)", _rows(LiveScreen.BINDINGS)
         + _rows([WATCH_BACK_KEY])),
    ]


def key_reference_markdown() -> str:
    lines = ["# memtui keys", "",
             "Every key of the explorer (`memtui SNAPSHOT`). `?` shows the same list in the app, and",
             "Ctrl+P searches the same actions by name. The footer shows the keys of the focused pane; a",
             "click on one presses it, and where they do not fit (80 columns), the mouse wheel over the",
             "footer brings in the rest. `f` and `F` step through one allocation's life: its alloc, its",
             "free requested, its free completed (a segment's: made, released).", ""]
    for section, rows in key_reference():
        lines += [f"## {section}", "", "| key | action |", "| --- | --- |"]
        lines += [f"| `{keys}` | {what} |".replace("`|`", "`\\|`") for keys, what in rows]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(key_reference_markdown(), end="")
