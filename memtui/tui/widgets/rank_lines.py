"""Several ranks of one job side by side: a line each, the one closest to its limit first."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from memtui.live.state import DeviceCounters
from memtui.units import format_bytes

BAR = 12


class RankLines(Static):
    DEFAULT_CSS = """
    RankLines {
        height: auto;
        max-height: 9;
        padding: 0 1;
    }
    """

    def show(self, rows: list[tuple[str, DeviceCounters | None, bool, bool]]) -> None:
        """``rows``: (name, its counters, selected, ended), already in the order to show."""
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, (name, counters, selected, ended) in enumerate(rows):
            if i:
                text.append("\n")
            text.append("▶ " if selected else "  ", "bold")
            text.append(f"{name:<14}", "bold" if selected else "")
            if counters is None:
                text.append(" ended" if ended else " waiting for counters", "italic")
                continue
            text.append(f" alloc {format_bytes(counters.allocated):>10}  res {format_bytes(counters.reserved):>10}")
            headroom = counters.headroom
            if headroom is None:
                text.append("  headroom ?")
            else:
                share = counters.used_share
                filled = min(BAR, max(0, round(share * BAR)))
                style = "bold red" if share >= 0.9 else ("yellow" if share >= 0.75 else "green")
                text.append(f"  headroom {format_bytes(headroom):>10} ")
                text.append("█" * filled, style)
                text.append("░" * (BAR - filled), "dim")
                text.append(f" {share:4.0%}")
            if counters.ooms:
                text.append(f"  {counters.ooms} OOM", "bold red")
            if ended:
                text.append("  (ended)", "italic")
        self.update(text)
