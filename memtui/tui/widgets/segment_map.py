"""The segment/block map: the allocator's state at the selected event.

Map mode draws one bar per segment, scaled to its size, with blocks by state and every
free byte visible (see :mod:`memtui.tui.views.segment_rows`; the legend is the border's
subtitle); list mode lists every block and free gap with exact addresses and sizes.
Segments are grouped by memory pool (the default pool first, then CUDA graphs' and
MemPools', each tagged in the label column: ``g1`` graph pool 1, ``m2`` mempool 2);
blocks the trace never saw are ghosts; a block an ``annotate`` entry labelled shows it.
Blocks whose allocation a filter matched are drawn apart (``set_highlight``). The event
cursor moves the state (time travel); inside the map the keys select segments and
blocks. At an OOM the map selects the segment with the largest free block in the
failing request's pool: the hole that was not big enough.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memtui.model import actions as act
from memtui.model import metadata
from memtui.model.lifetimes import NONE
from memtui.model.snapshot import SOURCE_END
from memtui.replay import AllocatorState
from memtui.state_figures import SegmentPools, count_blocks, pool_free, request_pool, segment_pools
from memtui.tui.messages import Latest
from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.segment_rows import (
    ALLOCATED_CELL,
    BLOCK_ROW,
    FREE_CELL,
    GAP_ROW,
    GHOST_CELL,
    LEGEND,
    LEVEL_CHARS,
    MATCHED_CELL,
    PENDING_CELL,
    SEGMENT_ROW,
    SELECTED_CELL,
    BarCells,
    StateLayout,
    state_name,
)
from memtui.tui.widgets.changed_lines import ChangedLines, retitle
from memtui.units import format_bytes

HEADER_LINES = 3  # figures at the cursor, the legend, the selected segment
LABEL_WIDTH = 29  # marker, address (12 hex digits), size ("1000.00 MiB"), tags: see _label
ROW_STRIPS_KEPT = 4096  # map rows' strips kept by what they draw
MIN_BAR = 6  # small segments still show their blocks; the size column has the exact figure
_CELL_CLASS = {FREE_CELL: "segment-map--free", PENDING_CELL: "segment-map--pending",
               ALLOCATED_CELL: "segment-map--allocated", MATCHED_CELL: "segment-map--matched",
               SELECTED_CELL: "segment-map--selected", GHOST_CELL: "segment-map--ghost"}
# The second shade, for every other block of a segment (so neighbours stay apart).
_ALT_CLASS = {PENDING_CELL: "segment-map--pending-alt", ALLOCATED_CELL: "segment-map--allocated-alt"}
_SHORT_WORDS = {"allocated": "alloc", "pending free": "pending", "part free": "part"}


class SegmentMap(ChangedLines, ScrollView, can_focus=True):
    """Segments and blocks after the selected event."""

    DEFAULT_CSS = """
    SegmentMap {
        overflow-x: hidden;
        overflow-y: auto;
        & > .segment-map--header { text-style: bold; }
        & > .segment-map--muted { color: $text-muted; }
        & > .segment-map--allocated { color: $success; }
        & > .segment-map--allocated-alt { color: $success-darken-3; }
        & > .segment-map--pending { color: $warning; }
        & > .segment-map--pending-alt { color: $warning-darken-3; }
        & > .segment-map--free { color: $text-muted; }
        & > .segment-map--selected { color: $error; text-style: bold; }
        & > .segment-map--ghost { color: $secondary; }
        & > .segment-map--matched { color: $primary-lighten-2; text-style: bold; }
        & > .segment-map--cursor { background: $block-cursor-blurred-background; }
        &:focus > .segment-map--cursor { background: $block-cursor-background; }
    }
    """
    COMPONENT_CLASSES = {"segment-map--header", "segment-map--muted", "segment-map--allocated",
                         "segment-map--allocated-alt", "segment-map--pending-alt",
                         "segment-map--pending", "segment-map--free", "segment-map--selected",
                         "segment-map--matched", "segment-map--ghost",
                         "segment-map--cursor"}
    BINDINGS = [
        Binding("up,k", "move(-1)", "Previous segment", show=False),
        Binding("down,j", "move(1)", "Next segment", show=False),
        Binding("left,h", "block(-1)", "Previous block", show=False),
        Binding("right,l", "block(1)", "Next block", show=False),
        Binding("pageup", "move(-10)", "Page up", show=False),
        Binding("pagedown", "move(10)", "Page down", show=False),
        Binding("home,g", "move(-1000000000)", "First", show=False),
        Binding("end,G", "move(1000000000)", "Last", show=False),
        Binding("m", "toggle_mode", "Map/list"),
        Binding("enter", "jump", "Go to alloc"),
    ]

    @dataclass
    class BlockSelected(Latest):
        """The user picked a block (``block`` NONE: the whole segment) in the current state; a
        newer pick queued behind it replaces it (a held arrow key)."""

        state: AllocatorState
        segment: int
        block: int

    class ModeChanged(Message):
        """Switched between map and list mode."""

    @dataclass
    class JumpToEvent(Message):
        """Enter on a block: go to the event that allocated it; on a segment's row, to the
        event that made the segment."""

        event: int

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._view: DeviceView | None = None
        self._layout: StateLayout | None = None
        self.list_mode = False
        self._segment = NONE  # selected segment (map mode)
        self._block = NONE  # selected block, index into the state's blocks
        self._row = 0  # cursor row (list mode)
        self._matched_lives: np.ndarray | None = None  # block lives a filter matched
        self._pools: SegmentPools | None = None
        # A map row's strip by what it draws (label, cells, width), and the legend's: a key that
        # moves the event cursor changes a row or two, and drawing a row's cells one by one is
        # most of its cost.
        self._row_strips: dict[tuple, Strip] = {}

    # -- data --------------------------------------------------------------------
    @property
    def state(self) -> AllocatorState | None:
        return self._layout.state if self._layout else None

    @property
    def selected_block(self) -> int:
        return self._block

    @property
    def selected_segment(self) -> int:
        return self._segment

    def show_state(self, view: DeviceView, state: AllocatorState, focus_address: int | None) -> None:
        """Show ``state``; select the segment (and block) holding ``focus_address``.

        Without an address, at an OOM: the segment with the largest free block in the
        request's pool (and stream).
        """
        if self._view is not None and view.device.device != self._view.device.device:
            # Another device (d): the selection kept while the cursor moves through one device's
            # events is a segment number of the other device's map, so it starts afresh.
            self._segment, self._block, self._row = NONE, NONE, 0
        self._view = view
        self._pools = segment_pools(state, view.device, view.snapshot.strings)
        pools = self._pools
        keys = [(pools.pool_id(s) is not None and tuple(pools.pool_id(s)) != (0, 0), str(pools.pool_id(s)))
                for s in range(len(state.seg_addr))]
        final = state.blk_final
        ghost = (state.blk_life == NONE) & (final != NONE)
        if ghost.any():
            ghost &= view.device.ghost_blocks[np.maximum(final, 0)]
        self._layout = StateLayout(state, keys, ghost)
        segment, block = NONE, NONE
        if focus_address is not None:
            segment = self._layout.segment_of_address(focus_address)
            block = self._layout.block_at_address(focus_address)
        elif self.oom_request() is not None:
            segment = self.oom_segment()
        if segment == NONE and self._layout.n_segments:
            segment = min(max(self._segment, 0), self._layout.n_segments - 1)
        self._segment, self._block = segment, block
        self._sync_row_from_selection()
        self._update_virtual_size()
        self._scroll_to_selection()
        self.call_after_refresh(self._scroll_to_selection)
        self.refresh_title()
        self.refresh_changed()  # one event later, most rows are the ones on screen

    def oom_request(self) -> tuple[str, int] | None:
        """(pool, stream) of the request that failed, when the state is at an OOM."""
        state, view = self.state, self._view
        if state is None or view is None or not 0 <= state.index < view.n_events:
            return None
        trace = view.device.trace
        if int(trace.action[state.index]) != act.OOM:
            return None
        return request_pool(int(trace.size[state.index])), int(trace.stream[state.index])

    def oom_segment(self) -> int:
        """At an OOM, the segment holding the largest free block of the request's pool; NONE if none."""
        request = self.oom_request()
        if request is None or self._pools is None:
            return NONE
        return pool_free(self.state, self._pools, *request).where

    def title(self, width: int | None = None) -> str:
        """The border title: the moment and what the state holds, as long as ``width`` allows."""
        state = self.state
        if state is None:
            return "Segments"
        counts = count_blocks(state)
        mode = ", list" if self.list_mode else ""
        dev = self._view.device if self._view is not None else None
        shown = dev.shown_index(state.index) if dev is not None and state.index >= 0 else state.index
        at = f"after event {shown:,}" if state.index >= 0 else "before the first event"
        short_at = f"@{shown:,}" if state.index >= 0 else "@start"
        if dev is not None and dev.partial_trace:
            # A filtered export cannot be replayed: the map is the source's state at its end.
            at, short_at = f"at {SOURCE_END}", "@end (filtered)"
        choices = [f"Segments {at}: {counts.text()}{mode}", f"{short_at}: {counts.text()}{mode}",
                   f"{short_at}: {counts.text(short=True)}{mode}"]
        width = self.size.width - 4 if width is None else width
        return next((c for c in choices if len(c) <= width), choices[-1])

    def refresh_title(self) -> None:
        retitle(self, self.title())

    def set_highlight(self, matched_lives: np.ndarray | None) -> None:
        """Draw the blocks of these lives (a flag per block life) apart; None stops."""
        self._matched_lives = matched_lives
        self.refresh()

    def _rows_count(self) -> int:
        if self._layout is None:
            return 0
        return len(self._layout.list_rows()) if self.list_mode else self._layout.n_segments

    def _sync_row_from_selection(self) -> None:
        if not self.list_mode or self._layout is None:
            return
        rows = self._layout.list_rows()
        for k, row in enumerate(rows):
            if (self._block != NONE and row.block == self._block) or (
                    self._block == NONE and row.kind == SEGMENT_ROW and row.segment == self._segment):
                self._row = k
                return
        self._row = 0

    def _cursor_line(self) -> int:
        if self.list_mode or self._segment == NONE or self._layout is None:
            return self._row if self.list_mode else self._segment
        return int(self._layout.row_of[self._segment])

    # -- keys --------------------------------------------------------------------
    def action_move(self, delta: int) -> None:
        if self._layout is None or not self._rows_count():
            return
        if self.list_mode:
            self._row = min(max(self._row + delta, 0), self._rows_count() - 1)
            row = self._layout.list_rows()[self._row]
            self._segment, self._block = row.segment, row.block
        else:
            row = min(max(self._cursor_line() + delta, 0), self._rows_count() - 1)
            self._segment = self._layout.segment_at_row(row)
            self._block = NONE
        self._selection_changed()

    def action_block(self, delta: int) -> None:
        if self._layout is None or self._segment == NONE:
            return
        if self.list_mode:
            self.action_move(delta)
            return
        blocks = [int(b) for b in self._layout.blocks_of(self._segment)]
        if not blocks:
            return
        if self._block in blocks:
            k = min(max(blocks.index(self._block) + delta, 0), len(blocks) - 1)
        else:
            k = 0 if delta > 0 else len(blocks) - 1
        self._block = blocks[k]
        self._selection_changed()

    def action_toggle_mode(self) -> None:
        self.list_mode = not self.list_mode
        self._sync_row_from_selection()
        self._update_virtual_size()
        # The new virtual size applies on the next refresh; scroll once it has.
        self.call_after_refresh(self._scroll_to_selection)
        self.refresh_title()
        self.refresh()
        self.post_message(self.ModeChanged())

    def action_jump(self) -> None:
        state = self.state
        if state is None or self._view is None:
            return
        if self._block == NONE:  # a segment's row: the event that made the segment
            if self._segment == NONE:
                return
            made = self._view.device.segment_made_at(int(state.seg_addr[self._segment]), state.index)
            if made == NONE:
                self.notify("this segment was made before the trace starts", severity="warning")
                return
            self.post_message(self.JumpToEvent(made))
            return
        life = int(state.blk_life[self._block])
        start = int(self._view.device.lives.start[life]) if life != NONE else NONE
        if start == NONE:
            self.notify(f"this block was {self._view.device.alloc_not_in_trace()}", severity="warning")
            return
        self.post_message(self.JumpToEvent(start))

    def _selection_changed(self) -> None:
        self._scroll_to_selection()
        self.refresh()
        if self.state is not None:
            self.post_message(self.BlockSelected(self.state, self._segment, self._block))

    def on_click(self, event: events.Click) -> None:
        if self._layout is None or event.y < HEADER_LINES:
            return
        line = round(self.scroll_y) + event.y - HEADER_LINES
        if not 0 <= line < self._rows_count():
            return
        if self.list_mode:
            self.action_move(line - self._row)
            return
        self._segment, self._block = self._layout.segment_at_row(line), NONE
        cells = self._bar_cells(self._segment, self.scrollable_content_region.width)
        cell = event.x - len(self._label(self._segment, True))
        if 0 <= cell < cells:
            self._block = self._layout.block_at_cell(self._segment, cell, cells)
        self._selection_changed()

    # -- scrolling ---------------------------------------------------------------
    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, self._rows_count() + HEADER_LINES)

    def on_resize(self) -> None:
        self._update_virtual_size()
        self._scroll_to_selection()
        self.refresh_title()

    def _scroll_to_selection(self) -> None:
        line = self._cursor_line()
        page = max(1, self.scrollable_content_region.height - HEADER_LINES)
        top = round(self.scroll_y)
        if line < 0 or top <= line < top + page:
            return
        self.scroll_to(y=max(0, line - page // 2), animate=False)

    # -- rendering ---------------------------------------------------------------
    def _style(self, name: str) -> Style:
        return self.component_style(name)

    def draw_line(self, y: int) -> Strip:
        width = self.content_width
        plain = self.base_style
        if self._layout is None or width <= 0:
            return Strip.blank(width, plain)
        if y == 0:
            return self._header_line(width)
        if y == 1:
            return self._legend_line(width)
        if y == 2:
            return self._detail_line(width)
        line = round(self.scroll_y) + y - HEADER_LINES
        if line >= self._rows_count():
            return Strip.blank(width, plain)
        strip = self._list_line(line, width) if self.list_mode else self._map_line(
            self._layout.segment_at_row(line), width)
        if line == self._cursor_line():
            strip = strip.apply_style(self._style("segment-map--cursor"))
        return strip

    def _header_line(self, width: int) -> Strip:
        st = self.state
        labels = ("reserved", "allocated", "active") if width >= 64 else ("res", "alloc", "active")
        text = (f" {labels[0]} {format_bytes(st.reserved)} · {labels[1]} {format_bytes(st.allocated)}"
                f" · {labels[2]} {format_bytes(st.active)}")
        return Strip([Segment(text, self._style("segment-map--header"))]).crop_extend(0, width, self.base_style)

    def _legend_line(self, width: int) -> Strip:
        """What the bars' glyphs and colours mean (all of it is in the help screen)."""
        ghosts = self._layout is not None and self._layout.ghost is not None and bool(self._layout.ghost.any())
        key = ("legend", width, self.list_mode, ghosts)
        strip = self._row_strips.get(key)
        if strip is None:
            strip = self._row_strips[key] = self._draw_legend(width, ghosts)
        return strip

    def _draw_legend(self, width: int, ghosts: bool) -> Strip:
        muted = self._style("segment-map--muted")
        if self.list_mode:
            text = " rows: a segment, then its blocks and free runs by address"
            return Strip([Segment(text, muted)]).crop_extend(0, width, self.base_style)
        items = [(chars, kind, word) for chars, kind, word, _ in LEGEND if kind not in (MATCHED_CELL, SELECTED_CELL)
                 and (kind != GHOST_CELL or ghosts)]
        long = sum(len(chars) + len(word) + 2 for chars, _, word in items) + 1
        short = sum(len(chars) + len(_SHORT_WORDS.get(word, word)) + 2 for chars, _, word in items) + 1
        if ghosts and short > width:  # the ghost entry gives way first; the help screen has it
            items = [item for item in items if item[1] != GHOST_CELL]
        segments = []
        for chars, kind, word in items:
            segments.append(Segment(" ", muted))
            segments.append(Segment(chars, self._style(_CELL_CLASS[kind]) if kind is not None else muted))
            segments.append(Segment(" " + (word if long <= width else _SHORT_WORDS.get(word, word)), muted))
        return Strip(segments).crop_extend(0, width, self.base_style)

    def _detail_line(self, width: int) -> Strip:
        muted = self._style("segment-map--muted")
        s = self._segment
        if s == NONE or s >= self._layout.n_segments:
            return Strip([Segment(" no segments at this point", muted)]).crop_extend(0, width, self.base_style)
        st = self.state
        free, largest = self._layout.free_figures(s)
        frag = f" (fragmentation {100 - 100 * largest // free}%)" if free else ""
        counts = count_blocks(st, s)
        parts = [f" {int(st.seg_addr[s]):x}: free {format_bytes(free)}, largest {format_bytes(largest)}{frag}",
                 counts.blocks_text(short=True), *self._segment_tags(s, long=True), f"stream {int(st.seg_stream[s])}"]
        if self._block != NONE:
            label = self._block_label(self._block)
            parts.append(("ghost block" if self._is_ghost(self._block) else "block")
                         + (f" “{label}”" if label else ""))
        return Strip([Segment(" · ".join(parts), muted)]).crop_extend(0, width, self.base_style)

    def _segment_tags(self, s: int, long: bool = False) -> list[str]:
        st = self.state
        pools = self._pools
        tags = []
        if long and pools is not None:
            tags.append(f"{'small' if pools.small[s] else 'large'} pool")
        if bool(st.seg_expandable[s]):
            tags.append("expandable" if long else "e")
        if pools is not None and pools.private[s]:
            tags.append(pools.pool_label(s) if long else pools.short_tag(s))
        return tags

    def _is_ghost(self, b: int) -> bool:
        ghost = self._layout.ghost if self._layout is not None else None
        return ghost is not None and bool(ghost[b])

    def _block_label(self, b: int) -> str:
        """The latest label an ``annotate`` entry gave block ``b`` up to the state's event."""
        dev = self._view.device
        notes = dev.annotations
        if not len(notes):
            return ""
        st = self.state
        life, final = int(st.blk_life[b]), int(st.blk_final[b])
        found = notes.of_life(life, st.index) if life != NONE else notes.of_block(final, st.index) \
            if final != NONE else []
        if not len(found):
            return ""
        return metadata.display(self._view.snapshot.strings[int(dev.trace.meta[int(found[-1])])])

    def _label(self, s: int, is_cursor: bool) -> str:
        st = self.state
        tags = "".join(self._segment_tags(s))
        marker = "▶" if is_cursor else " "
        return f"{marker}{int(st.seg_addr[s]):>12x} {format_bytes(int(st.seg_size[s])):>11} {tags:<2} ".ljust(
            LABEL_WIDTH)

    def _bar_cells(self, s: int, width: int, label_width: int | None = None) -> int:
        # The label is wider only for addresses past 12 hex digits; never crop the bar.
        avail = max(1, width - (len(self._label(s, False)) if label_width is None else label_width))
        scaled = avail * int(self.state.seg_size[s]) // max(self._layout.max_segment, 1)
        return max(min(MIN_BAR, avail), scaled)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._row_strips.clear()

    def _map_line(self, s: int, width: int) -> Strip:
        label = self._label(s, s == self._segment)
        cells = self._bar_cells(s, width, len(label))
        selected = self._block if s == self._segment else NONE
        bar_key = self._layout.bar_key(s, cells, selected, self._matched_lives)
        key = (label, width, bar_key)
        strip = self._row_strips.get(key) if bar_key is not None else None
        if strip is None:
            strip = self._draw_bar(label, self._layout.cells(s, cells, selected, self._matched_lives), width)
            if bar_key is not None:
                if len(self._row_strips) >= ROW_STRIPS_KEPT:
                    self._row_strips.clear()
                self._row_strips[key] = strip
        return strip

    def _draw_bar(self, label: str, bar: BarCells, width: int) -> Strip:
        segments = [Segment(label, self._style("segment-map--muted"))]
        looks = [(LEVEL_CHARS[int(level)], self._cell_class(int(kind), bool(alt)))
                 for kind, level, alt in zip(bar.kind, bar.level, bar.alt)]
        start = 0
        for c in range(1, len(looks) + 1):
            if c == len(looks) or looks[c][1] != looks[start][1]:
                text = "".join(char for char, _ in looks[start:c])
                segments.append(Segment(text, self._style(looks[start][1])))
                start = c
        return Strip(segments).crop_extend(0, width, self.base_style)

    @staticmethod
    def _cell_class(kind: int, alt: bool) -> str:
        if alt and kind in _ALT_CLASS:
            return _ALT_CLASS[kind]
        return _CELL_CLASS[kind]

    def _list_line(self, line: int, width: int) -> Strip:
        row = self._layout.list_rows()[line]
        st = self.state
        muted = self._style("segment-map--muted")
        if row.kind == SEGMENT_ROW:
            tags = " ".join(self._segment_tags(row.segment, long=True))
            text = f"{'▶' if line == self._row else ' '}segment {row.address:x} {format_bytes(row.size)} {tags}"
            return Strip([Segment(text, self._style("segment-map--header"))]).crop_extend(0, width, self.base_style)
        marker = "▶" if line == self._row else " "
        if row.kind == GAP_ROW:
            text = f"{marker}  {row.address:>12x} {format_bytes(row.size):>10}  free"
            return Strip([Segment(text, muted)]).crop_extend(0, width, self.base_style)
        b = row.block
        code = int(st.blk_state[b])
        life = int(st.blk_life[b])
        name = self._address_n(b, life)
        kind = ALLOCATED_CELL if state_name(code) == "allocated" else PENDING_CELL
        ghost = self._is_ghost(b)
        if ghost and kind == ALLOCATED_CELL:
            kind = GHOST_CELL
        if self._layout.is_matched(b, self._matched_lives):
            kind = MATCHED_CELL
        label = self._block_label(b)
        what = "ghost" if ghost else state_name(code)
        text = (f"{marker}  {row.address:>12x} {format_bytes(row.size):>10}  {what:<12} "
                + (f"“{label}” " if label else "") + name)
        style = self._style(_CELL_CLASS[SELECTED_CELL if b == self._block and row.kind == BLOCK_ROW else kind])
        return Strip([Segment(text, style)]).crop_extend(0, width, self.base_style)

    def _address_n(self, b: int, life: int) -> str:
        dev = self._view.device
        if life != NONE:
            return f"{int(dev.lives.addr[life]):x}_{int(dev.lives.version[life])}"
        final = int(self.state.blk_final[b])
        return dev.block_address_n(final) if final != NONE else ""

