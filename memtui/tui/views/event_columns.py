"""The event log's columns: widths that fit the device's data and the text of each cell.

Pure (no textual). The widths depend on the data (largest index, address, version,
stream) and on the terminal width: narrow terminals drop the stream and time columns
before the frame gets too narrow for ``file.py:line function``; the frame is then cut
by the one rule of memtui/tui/views/locations.py (the function first, never the line number).
"""

from __future__ import annotations

from dataclasses import dataclass

from memtui.model import actions as act
from memtui.model import metadata
from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.locations import Location, fit_location, table_location
from memtui.units import format_bytes, format_seconds

ACTION_WIDTH = 14  # "free_requested"
SIZE_WIDTH = 10  # "1023.99 MiB"
FRAME_MIN = 24  # ``gen_snapshots.py:213 w_oom…``: below this the time column gives way


@dataclass
class ColumnLayout:
    index: int
    time: int  # 0 when hidden
    action: int
    address: int
    size: int
    stream: int  # 0 when hidden
    frame: int


def format_stream(stream: int) -> str:
    # Streams are CUDA stream handles: small ones read best as numbers, pointers as hex.
    return str(stream) if 0 <= stream < 10_000 else f"{stream:#x}"


def short_frame(view: DeviceView, sid: int) -> Location:
    """The location of the stack's label frame: ``file.py:12 function``, without the directory."""
    if sid < 0:
        return Location("", "")
    stacks = view.snapshot.stacks
    return table_location(stacks.frames, int(stacks.label[sid]))


class EventColumns:
    """Cell texts for one device's events, with per-stack caches (never per event)."""

    def __init__(self, view: DeviceView) -> None:
        self.view = view
        trace = view.device.trace
        n = len(trace)
        self._frame_text: dict[int, Location] = {}
        self.index_width = max(5, len(f"{view.device.shown_index(n - 1) if n else 0:,}"))
        last = view.relative_seconds(n - 1) if n else 0.0
        self.time_width = max(9, len(format_seconds(last)))
        self.address_width = _address_width(view)
        # min/max, not np.unique: sorting ten million streams would stall the screen.
        lo, hi = (int(trace.stream.min()), int(trace.stream.max())) if n else (0, 0)
        self.stream_width = max(6, len(format_stream(lo)), len(format_stream(hi)))
        self.single_stream = lo == hi

    def layout(self, width: int) -> ColumnLayout:
        fixed = self.index_width + ACTION_WIDTH + self.address_width + SIZE_WIDTH + 4
        # One stream everywhere says nothing per row; the inspector still shows it.
        time, stream = self.time_width, 0 if self.single_stream else self.stream_width
        if width - fixed - time - stream - 2 < FRAME_MIN:
            stream = 0
        if width - fixed - time - (stream + 1 if stream else 0) - 1 < FRAME_MIN:
            time = 0
        used = fixed + (time + 1 if time else 0) + (stream + 1 if stream else 0)
        return ColumnLayout(self.index_width, time, ACTION_WIDTH, self.address_width, SIZE_WIDTH, stream,
                            max(0, width - used - 1))

    def header(self, layout: ColumnLayout) -> list[str]:
        cells = [f"{'event':>{layout.index}}"]
        if layout.time:
            cells.append(f"{'time':>{layout.time}}")
        cells += [f"{'action':<{layout.action}}", f"{'address_n':<{layout.address}}", f"{'size':>{layout.size}}"]
        if layout.stream:
            cells.append(f"{'stream':>{layout.stream}}")
        cells.append("frame")
        return cells

    def cells(self, i: int, layout: ColumnLayout) -> tuple[list[str], int]:
        """The cell texts of event ``i`` and its action code (for the colour)."""
        view = self.view
        trace = view.device.trace
        code = int(trace.action[i])
        cells = [f"{view.device.shown_index(i):>{layout.index},}"]
        if layout.time:
            cells.append(f"{format_seconds(view.relative_seconds(i)):>{layout.time}}")
        name = view.snapshot.actions.name(code)
        size = int(trace.size[i])
        size_text = format_bytes(size) if size or code not in (act.SNAPSHOT,) else ""
        cells += [
            f"{(name.upper() if code == act.OOM else name)[:layout.action]:<{layout.action}}",
            f"{view.device.event_address_n(i):<{layout.address}}",
            f"{size_text:>{layout.size}}",
        ]
        if layout.stream:
            cells.append(f"{format_stream(int(trace.stream[i])):>{layout.stream}}")
        sid = int(view.device.site_stack[i])
        if code == act.ANNOTATE:  # the label is what an annotation says; its site is in the inspector
            label = metadata.display(view.snapshot.strings[int(trace.meta[i])])
            frame = fit_location(f"label: {label}", layout.frame)
        elif sid >= 0:
            frame = self.frame_text(sid).fit(layout.frame)
        else:
            frame = fit_location(view.snapshot.event_top_frame(view.device.device, i, short=True), layout.frame)
        if view.snapshot.trace_overflowed and view.device.shown_index(i) == 0:
            frame = fit_location("⚠ ring buffer overflowed: the trace starts mid-run · " + frame, layout.frame)
        cells.append(frame)
        return cells, code

    def frame_text(self, sid: int) -> Location:
        text = self._frame_text.get(sid)
        if text is None:
            text = short_frame(self.view, sid)
            self._frame_text[sid] = text
        return text


def _address_width(view: DeviceView) -> int:
    widths = [9]
    for lives, prefix in ((view.device.lives, 0), (view.device.segment_lives, 1)):
        if len(lives):
            top = int(max(int(a) for a in (lives.addr.min(), lives.addr.max())))
            widths.append(prefix + len(f"{top:x}") + 1 + len(str(int(lives.version.max()))))
    return max(widths)
