"""The one-line summary at the top: file, device and its figures at snapshot time."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from memtui.state_figures import count_blocks
from memtui.tui.views.device_view import DeviceView
from memtui.units import format_bytes, plural


class SummaryBar(Static):
    """File name (never its directory, which differs between machines), device and totals.

    Memory figures are at snapshot time; the map's header has them at the cursor. The
    counts come from :func:`memtui.state_figures.count_blocks` over the state after the
    last event, so they read the same as the map's title there.
    """

    DEFAULT_CSS = """
    SummaryBar {
        height: 1;
        background: $panel;
        color: $foreground;
        padding: 0 1;
    }
    """

    def show_view(self, view: DeviceView, n_devices: int) -> None:
        dev = view.device
        snap = view.snapshot
        ooms = len(dev.oom_indices())
        text = Text()
        text.append(snap.name, "bold")
        text.append(f" ({format_bytes(snap.source_size)})" if snap.source_size else "")
        if snap.header:  # a memtui export: say what it was cut from
            what = snap.header.get("filter") or snap.header.get("selection") or "every event"
            text.append(f" [export of {snap.header.get('source_name', '?')}: {what}]", "italic")
        text.append(f" · device {dev.device}" + (f" (of {n_devices})" if n_devices > 1 else ""))
        if ooms:
            text.append(f" · {plural(ooms, 'OOM')}", "bold red")
        text.append(f" · {plural(view.n_events, 'event')}")
        if snap.trace_overflowed:  # torch says the ring buffer wrapped: the trace starts mid-run
            text.append(" (ring buffer overflowed: starts mid-run)", "bold yellow")
        text.append(f" · reserved {format_bytes(dev.reserved)}"
                    f" · allocated {format_bytes(dev.allocated)} · active {format_bytes(dev.active)}"
                    f" · peak {format_bytes(view.peak_allocated)}")
        text.append(f" · {count_blocks(view.replayer.state_at(view.n_events - 1)).text()}")
        self.update(text)
