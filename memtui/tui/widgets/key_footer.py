"""The keys of the screen shown, on the bottom line: one widget that draws them all.

Textual's footer makes a widget for every key it shows and builds them all again whenever
the screen's bindings may have changed: as a screen replaces another, as the focus moves
(Tab between the explorer's panes), after a refresh. Each build took 35-80 ms of the thread
that draws at ten million events: three in a row as the explorer's first screen showed,
which the first keys typed waited behind, and one on every Tab (50-110 ms a Tab in tmux).
This footer keeps the keys as a list of items and draws them as one line, so a change of
keys costs a list and a repaint. It looks as Textual's does (the same theme colours, the
command palette's key on the right, a key highlighted under the mouse), a click on a key
presses it, and where the keys do not fit the mouse wheel over it moves them sideways, a key
at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

from memtui.tui.widgets.pass_style import PassStyle

DIM = Style(dim=True)


@dataclass(frozen=True)
class FooterItem:
    """One key as the footer shows it."""

    key: str  # the key pressed when it is clicked
    shown_as: str  # the key as the app displays it (⏎, ^p)
    description: str
    enabled: bool


class KeyFooter(PassStyle, Widget):
    """The active bindings of the screen that have ``show`` set, then the command palette's key."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"key-footer--key", "key-footer--description", "key-footer--separator", "key-footer--hover"}
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        & > .key-footer--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        & > .key-footer--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        & > .key-footer--separator { color: $foreground 20%; }
        & > .key-footer--hover { background: $block-hover-background; }
        &:hover { pointer: pointer; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: list[FooterItem] = []
        self.palette: FooterItem | None = None
        self._spans: list[tuple[int, int, FooterItem]] = []  # (first cell, end, item) as last drawn
        self._hovered: FooterItem | None = None  # the key under the mouse, drawn highlighted
        self._first = 0  # the first of the keys drawn: the wheel moves the keys sideways where they do not fit
        self._cut = False  # as last drawn, a key did not fit: the wheel may move the keys on

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen) -> None:
        if screen is not self.screen:
            return
        items, palette = self._items_of(screen)
        if (items, palette) != (self.items, self.palette):
            self.items, self.palette = items, palette
            self._first = 0  # another screen's or pane's keys: from their first
            self.refresh()

    def _items_of(self, screen: Screen) -> tuple[list[FooterItem], FooterItem | None]:
        """As Textual's footer lists them: the first key of each action shown, in order."""
        app = self.app
        palette_key = app.COMMAND_PALETTE_BINDING
        items: dict[str, FooterItem] = {}
        palette = None
        for key, (_, binding, enabled, _tooltip) in screen.active_bindings.items():
            if key == palette_key and app.ENABLE_COMMAND_PALETTE:
                palette = FooterItem(binding.key, app.get_key_display(binding), binding.description, enabled)
            elif binding.show and binding.action not in items:
                items[binding.action] = FooterItem(binding.key, app.get_key_display(binding), binding.description,
                                                   enabled)
        return list(items.values()), palette

    # -- drawing ------------------------------------------------------------------------------
    def _parts(self, item: FooterItem, compact: bool = False) -> list[Segment]:
        """The key and its description; ``compact`` (as Textual draws the palette's key): no
        space around the key, one before the description."""
        key = self.get_component_rich_style("key-footer--key")
        description = self.get_component_rich_style("key-footer--description")
        if item is self._hovered:
            hover = Style(bgcolor=self.get_component_rich_style("key-footer--hover").bgcolor)
            key, description = key + hover, description + hover
        if not item.enabled:  # dimmed, in its own colours
            key, description = key + DIM, description + DIM
        if not item.description:
            return [Segment(item.shown_as, key)]
        if compact:
            return [Segment(item.shown_as, key), Segment(f" {item.description}", description)]
        return [Segment(f" {item.shown_as} ", key), Segment(f"{item.description} ", description)]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        plain = self.base_style
        if y != 0 or width <= 0:
            return Strip.blank(width, plain)
        right: list[Segment] = []
        if self.palette is not None:
            separator = self.get_component_rich_style("key-footer--separator")
            right = [Segment("▏", plain + Style(color=separator.color)), *self._parts(self.palette, compact=True),
                     Segment(" ", plain)]
        right_width = sum(segment.cell_length for segment in right)
        if right_width > width // 2:  # too narrow for both: the screen's own keys first
            right, right_width = [], 0
        room = width - right_width
        left: list[Segment] = []
        spans: list[tuple[int, int, FooterItem]] = []
        at = 0
        self._first = min(self._first, max(len(self.items) - 1, 0))
        self._cut = False
        for item in self.items[self._first:]:
            parts = self._parts(item)
            cells = sum(segment.cell_length for segment in parts)
            if at >= room:
                self._cut = True
                break
            self._cut = at + cells > room
            spans.append((at, min(at + cells, room), item))
            left.extend(parts)
            at += cells
        line = Strip(left).crop_extend(0, room, plain)
        if right_width:
            spans.append((room + 1, width, self.palette))  # type: ignore[arg-type]
            line = Strip.join([line, Strip(right)])
        self._spans = spans
        return line.crop_extend(0, width, plain)

    def cells_of(self, key: str) -> tuple[int, int] | None:
        """(first cell, end) of ``key`` as last drawn, None where it was not shown."""
        return next(((first, end) for first, end, item in self._spans if item.key == key), None)

    def _item_at(self, x: int) -> FooterItem | None:
        return next((item for first, end, item in self._spans if first <= x < end), None)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._hover(self._item_at(event.x))

    def on_leave(self) -> None:
        self._hover(None)

    def _hover(self, item: FooterItem | None) -> None:
        if item is not self._hovered:
            self._hovered = item
            self.refresh()

    # The wheel, down or to the right, brings in the keys cut at the right, a key at a time;
    # up or to the left, the keys before them back.
    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._move(1, event)

    def on_mouse_scroll_right(self, event: events.MouseScrollRight) -> None:
        self._move(1, event)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._move(-1, event)

    def on_mouse_scroll_left(self, event: events.MouseScrollLeft) -> None:
        self._move(-1, event)

    def _move(self, step: int, event: events.MouseEvent) -> None:
        event.stop()
        if (step > 0 and self._cut) or (step < 0 and self._first > 0):
            self._first += step
            self._hovered = None  # the keys moved under the mouse
            self.refresh()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        item = self._item_at(event.x)
        if item is None:
            return
        if item.enabled:
            self.app.simulate_key(item.key)
        else:
            self.app.bell()
