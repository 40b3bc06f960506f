"""The one-line summary at the top: file, device and its figures at snapshot time."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from memtui.state_figures import count_blocks
from memtui.tui.views.device_view import DeviceView
from memtui.units import format_bytes, plural

# What goes first when the line is too narrow for all of it: the higher the rank, the sooner
# an item is left out (whole, never cut after its label); the file's name always stays. The
# event count and the peak are in the timeline's legend too, so the memory figures outrank them.
NAME, PLACE, MEMORY, COUNT, PEAK, BLOCKS, ACTIVE = range(7)
SEPARATOR = " · "


class SummaryBar(Widget):
    """File name (never its directory, which differs between machines), device and totals.

    Memory figures are at snapshot time; the map's header has them at the cursor. The
    counts come from :func:`memtui.state_figures.count_blocks` over the state after the
    last event, so they read the same as the map's title there. Where the line is narrower
    than all of it, whole items are left out, the least telling first (see the ranks above).
    """

    DEFAULT_CSS = """
    SummaryBar {
        height: 1;
        background: $panel;
        color: $foreground;
        padding: 0 1;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._items: list[tuple[int, Text]] = []  # (rank, text), in the order shown

    def show_view(self, view: DeviceView, n_devices: int) -> None:
        dev = view.device
        snap = view.snapshot
        ooms = len(dev.oom_indices())
        name = Text()
        name.append(snap.name, "bold")
        name.append(f" ({format_bytes(snap.source_size)})" if snap.source_size else "")
        if snap.header:  # a memtui export: say what it was cut from
            what = snap.header.get("filter") or snap.header.get("selection") or "every event"
            name.append(f" [export of {snap.header.get('source_name', '?')}: {what}]", "italic")
        items = [(NAME, name), (PLACE, Text(f"device {dev.device}" + (f" (of {n_devices})" if n_devices > 1 else "")))]
        if ooms:
            items.append((PLACE, Text(plural(ooms, "OOM"), "bold red")))
        events = Text(plural(view.n_events, "event"))
        if snap.trace_overflowed:  # torch says the ring buffer wrapped: the trace starts mid-run
            events.append(" (ring buffer overflowed: starts mid-run)", "bold yellow")
        items += [(PLACE if snap.trace_overflowed else COUNT, events),
                  (MEMORY, Text(f"reserved {format_bytes(dev.reserved)}")),
                  (MEMORY, Text(f"allocated {format_bytes(dev.allocated)}")),
                  (ACTIVE, Text(f"active {format_bytes(dev.active)}")),
                  (PEAK, Text(f"peak {format_bytes(view.peak_allocated)}")),
                  (BLOCKS, Text(count_blocks(view.replayer.state_at(view.n_events - 1)).text()))]
        self._items = items
        self.refresh()  # one line, drawn again: nothing to lay out

    def render(self) -> Text:
        """The items that fit the line's width (all of them before the first layout)."""
        width = self.content_size.width
        kept = list(self._items)
        while width > 0 and len(kept) > 1 and _length(kept) > width:
            least = max(range(1, len(kept)), key=lambda k: (kept[k][0], k))
            del kept[least]
        text = Text(SEPARATOR).join(t for _, t in kept)
        text.no_wrap, text.overflow = True, "ellipsis"  # a name wider than the line ends in …
        return text


def _length(items: list[tuple[int, Text]]) -> int:
    return sum(t.cell_len for _, t in items) + len(SEPARATOR) * (len(items) - 1)
