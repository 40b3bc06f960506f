"""The breakdown pane: allocated bytes per category at one event, and who holds them.

A line-API scroll view of a few dozen lines (memtui/analysis/breakdown.py makes the
figures): one line per category with bytes and share, the reserved bytes that hold no
allocation, then the largest call sites of each category.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.style import Style
from textual.binding import Binding
from textual.message import Message

from memtui.tui.views.stacked_plot import CATEGORY_COLOURS, category_css
from memtui.tui.widgets.styled_lines import StyledLines
from memtui.units import format_bytes

if TYPE_CHECKING:
    from memtui.analysis.breakdown import Breakdown

# A line is a list of (text, style); a style is a component class suffix or ("category", k).
_STYLES = ("title", "muted", "value", "site")


class BreakdownPane(StyledLines, can_focus=True):
    """Shows one :class:`Breakdown`; Enter asks for the call tree at the same event."""

    DEFAULT_CSS = """
    BreakdownPane {
        overflow-y: auto;
        overflow-x: auto;
        border-top: solid $panel-lighten-2;
        border-left: solid $panel-lighten-2;
        border-title-align: left;
        &:focus { border-top: solid $accent; border-left: solid $accent; border-title-color: $accent; }
        & > .breakdown-pane--title { text-style: bold; }
        & > .breakdown-pane--muted { color: $text-muted; }
        & > .breakdown-pane--value { }
        & > .breakdown-pane--site { color: $text-muted; }
    }
    """ + category_css("BreakdownPane", "breakdown-pane--category")
    COMPONENT_CLASSES = {f"breakdown-pane--{s}" for s in _STYLES} | {
        f"breakdown-pane--category-{k}" for k in range(len(CATEGORY_COLOURS))}
    BINDINGS = [
        Binding("enter", "tree", "Call tree"),
        Binding("up,k", "scroll_up", "Scroll up", show=False),
        Binding("down,j", "scroll_down", "Scroll down", show=False),
        Binding("home,g", "scroll_home", "Top", show=False),
        Binding("end,G", "scroll_end", "Bottom", show=False),
    ]

    class TreeRequested(Message):
        """Enter: open the live set as a call tree at the pane's event."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.breakdown: Breakdown | None = None

    def show_message(self, text: str) -> None:
        """A line of its own (while the categories are being worked out, or why there are none)."""
        self.breakdown = None
        self.set_lines([[(text, "muted")]])

    def show(self, result: Breakdown, sites_per_category: int = 2, hint: bool = True) -> None:
        self.breakdown = result
        self.set_lines(breakdown_lines(result, sites_per_category, hint))

    def rich_style_of(self, style: object) -> Style:
        if isinstance(style, tuple):
            k = min(int(style[1]), len(CATEGORY_COLOURS) - 1)
            return self.get_component_rich_style(f"breakdown-pane--category-{k}")
        return self.get_component_rich_style(f"breakdown-pane--{style}")

    def action_tree(self) -> None:
        self.post_message(self.TreeRequested())


Line = list[tuple[str, object]]


def breakdown_lines(result: Breakdown, sites_per_category: int = 2, hint: bool = True) -> list[Line]:
    """The pane's lines for one breakdown (pure: tests read them)."""
    at = f"after event {result.moment.event:,}" if result.moment.event >= 0 else "the snapshot's state"
    lines: list[Line] = [[(f"{format_bytes(result.allocated)} allocated, {at}", "title")]]
    total = max(result.allocated, 1)
    names = list(result.categories)
    for k, name in enumerate(names):
        value = result.categories[name]
        if not value:
            continue
        lines.append([("■ ", ("category", k)), (f"{name:<16}", "value"),
                      (f"{format_bytes(value):>11} {100 * value / total:4.0f}%", "value")])
    if not result.allocated:
        lines.append([("nothing allocated", "muted")])
    lines.append([("  ", "muted"), (f"{'cached free':<16}{format_bytes(result.cached_free):>11}", "muted"),
                  ("  reserved, not allocated", "muted")])
    if result.pending_free:
        lines.append([("  ", "muted"), (f"{'pending free':<16}{format_bytes(result.pending_free):>11}", "muted")])
    if sites_per_category:
        lines.append([])
        lines.append([("largest call sites", "title")])
        for k, name in enumerate(names):
            for site in result.top_sites.get(name, [])[:sites_per_category]:
                lines.append([("■ ", ("category", k)), (f"{format_bytes(site.bytes):>11} ", "value"),
                              (site.short or site.label, "site")])
    if hint:
        lines.append([])
        lines.append([("Enter: the live set as a call tree", "muted")])
    return lines
