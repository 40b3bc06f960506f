"""The live timeline: allocated (area) and reserved (line) memory at every tick, newest at the
right edge, with the steps and OOMs marked under it.

The same braille raster as the explorer's timeline (memtui/tui/views/plot.py); its x axis is
time, not events, since the counters arrive ten times a second whatever the trace does.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.widget import Widget

from memtui.tui.views.plot import BAND, FILL, LINE, raster
from memtui.units import format_bytes

LABEL_WIDTH = 11
STEP_MARK = "╵"
OOM_MARK = "✗"


class CounterPlot(Widget):
    DEFAULT_CSS = """
    CounterPlot {
        height: 7;
        & > .counterplot--allocated { color: $success; }
        & > .counterplot--reserved { color: $primary; }
        & > .counterplot--muted { color: $text-muted; }
        & > .counterplot--oom { color: $error; text-style: bold; }
    }
    """
    COMPONENT_CLASSES = {"counterplot--allocated", "counterplot--reserved", "counterplot--muted",
                         "counterplot--oom"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._times = np.zeros(0)
        self._allocated = np.zeros(0, np.int64)
        self._reserved = np.zeros(0, np.int64)
        self._steps: list[float] = []
        self._ooms: list[float] = []
        self._limit: int | None = None

    def show(self, curve: list[tuple[float, int, int]], steps: list[float], ooms: list[float],
             limit: int | None) -> None:
        """``curve``: (time, allocated, reserved) per tick, oldest first."""
        if curve:
            arr = np.asarray(curve, np.float64)
            self._times, self._allocated, self._reserved = arr[:, 0], arr[:, 1], arr[:, 2]
        else:
            self._times = np.zeros(0)
            self._allocated = self._reserved = np.zeros(0)
        self._steps, self._ooms, self._limit = steps, ooms, limit
        self.refresh()

    def render(self) -> Text:
        width = max(self.size.width - LABEL_WIDTH, 1)
        rows = max(self.size.height - 1, 1)
        n = len(self._times)
        # One braille column holds two ticks: the newest 2*width ticks fill the plot, so it grows
        # at the right edge until full, then scrolls.
        keep = min(n, 2 * width)
        allocated = self._allocated[n - keep:]
        reserved = self._reserved[n - keep:]
        top = int(max(reserved.max() if keep else 1, allocated.max() if keep else 1, 1))
        cols = max(1, (keep + 1) // 2)
        picture = raster(allocated, reserved, cols, rows, top)
        styles = {BAND: self.get_component_rich_style("counterplot--allocated"),
                  FILL: self.get_component_rich_style("counterplot--allocated"),
                  LINE: self.get_component_rich_style("counterplot--reserved")}
        muted = self.get_component_rich_style("counterplot--muted")
        text = Text(no_wrap=True, overflow="crop")
        for r, chars in enumerate(picture.chars):
            label = format_bytes(top) if r == 0 else ("0 B" if r == rows - 1 else "")
            text.append(f"{label:>{LABEL_WIDTH - 2}} ┤" if label else " " * (LABEL_WIDTH - 1) + "│", muted)
            for c, ch in enumerate(chars):
                text.append(ch, styles.get(int(picture.kind[r, c]), muted))
            text.append("\n")
        text.append(" " * (LABEL_WIDTH - 1) + "└", muted)
        axis = ["─"] * cols
        if keep:
            t0, t1 = self._times[n - keep], self._times[-1]
            span = max(t1 - t0, 1e-9)
            for mark, at in [(STEP_MARK, t) for t in self._steps] + [(OOM_MARK, t) for t in self._ooms]:
                if t0 <= at <= t1 + 0.5:
                    axis[min(cols - 1, int((at - t0) / span * (cols - 1)))] = mark
        for ch in axis:
            text.append(ch, self.get_component_rich_style("counterplot--oom") if ch == OOM_MARK else muted)
        return text
