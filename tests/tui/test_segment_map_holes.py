"""The segment map shows every free byte, keeps blocks and rows apart, explains itself, and
at an OOM selects the hole that was too small.

On tests/fixtures/fragmented.py: a 1000 MiB segment half free in eleven 44 MiB holes
(each cell of its bar is part free at any width), a 2 GiB one with a 512 KiB hole (far
less than a cell), a small-pool one with KiB holes, full ones.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pytest

from memtui.model.lifetimes import NONE
from memtui.tui.screens.help import HelpScreen
from memtui.tui.views.segment_rows import (
    FREE_LEVEL,
    FULL_CHAR,
    FULL_LEVEL,
    LEGEND,
    LEVEL_CHARS,
    StateLayout,
)
from memtui.tui.widgets.segment_map import LABEL_WIDTH
from tests.fixtures.fragmented import BASE, LARGE_OOM, SMALL_OOM, segment_address, write_fragmented_snapshot
from tests.tui.helpers import loaded, make_app, ready

SIZES = [(80, 24), (100, 30), (200, 60)]
SOLID = "█" + FULL_CHAR  # what a cell with no free byte may look like


@functools.cache
def fragmented_path() -> Path:
    return write_fragmented_snapshot(Path(tempfile.mkdtemp(prefix="memtui-fragmented-")))


def _oom_events(dev) -> dict[int, int]:
    """requested size -> event index of each OOM."""
    return {int(dev.trace.size[i]): int(i) for i in dev.oom_indices()}


def _state_at_large_oom():
    from memtui.replay import Replayer

    dev = loaded(str(fragmented_path())).devices[0]
    return Replayer(dev).state_at(_oom_events(dev)[LARGE_OOM])


def test_fixture_is_fragmented():
    state = _state_at_large_oom()
    free, largest = state.free_per_segment()
    a = int(list(state.seg_addr).index(BASE))
    assert (int(state.seg_size[a]), int(free[a]), int(largest[a])) == (1000 << 20, 11 * 44 << 20, 44 << 20)


@pytest.mark.parametrize("cells", [1, 2, 3, 6, 11, 12, 13, 45, 72, 97, 173, 250])
def test_any_free_byte_marks_its_cell_at_any_width(cells):
    state = _state_at_large_oom()
    layout = StateLayout(state)
    free, _ = state.free_per_segment()
    for s in range(layout.n_segments):
        level = layout.cells(s, cells).level
        if free[s]:
            assert (level < FULL_LEVEL).any(), (s, cells)
        else:
            assert (level == FULL_LEVEL).all(), (s, cells)
        if free[s] == int(state.seg_size[s]):
            assert (level == FREE_LEVEL).all()


def test_partial_cells_are_shaded_by_their_free_share():
    state = _state_at_large_oom()
    layout = StateLayout(state)
    a = int(list(state.seg_addr).index(BASE))
    # One cell for the whole segment: 51.6% in use.
    assert layout.cells(a, 1).chars() == LEVEL_CHARS[3]
    # Cells of 1 MiB: cells inside a 44 MiB hole are free, inside a 43 MiB block full.
    chars = layout.cells(a, 1000).chars()
    assert chars[:43] == FULL_CHAR * 43 and chars[43:87] == LEVEL_CHARS[FREE_LEVEL] * 44


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_segment_with_free_bytes_draws_a_hole(size):
    app = make_app(fragmented_path())
    async with app.run_test(size=size) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("o")
        smap = screen.segment_map
        state = smap.state
        free, _ = state.free_per_segment()
        width = smap.scrollable_content_region.width
        for s in range(len(state.seg_addr)):
            bar = smap._map_line(s, width).text[LABEL_WIDTH:].strip()
            assert bar, s
            if free[s]:
                assert any(ch not in SOLID for ch in bar), (s, bar)
            else:
                assert set(bar) <= set(SOLID), (s, bar)


async def test_neighbouring_blocks_and_rows_stay_apart():
    """Four 16 MiB blocks side by side: two shades alternate; the full glyph leaves a gap
    above it, so stacked rows do not merge into one shape (in a browser, xterm.js draws
    block glyphs edge to edge)."""
    app = make_app(fragmented_path())
    async with app.run_test(size=(200, 60)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("o")
        smap = screen.segment_map
        f = int(list(smap.state.seg_addr).index(segment_address("F")))
        strip = smap._map_line(f, smap.scrollable_content_region.width)
        cells = [(seg.text, seg.style) for seg in strip if seg.text.strip() and set(seg.text) <= set(SOLID)]
        assert len({style for _, style in cells}) >= 2, cells
        assert all("█" not in text for text, _ in cells)


async def test_at_an_oom_the_map_selects_the_largest_hole_of_the_requests_pool():
    app = make_app(fragmented_path())
    dev = loaded(str(fragmented_path())).devices[0]
    ooms = _oom_events(dev)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        smap = screen.segment_map
        for requested, name in ((SMALL_OOM, "D"), (LARGE_OOM, "A")):
            screen.go_to(ooms[requested])
            await pilot.pause()
            assert smap.selected_block == NONE
            assert int(smap.state.seg_addr[smap.selected_segment]) == segment_address(name), requested


async def test_the_map_and_help_have_a_legend():
    app = make_app(fragmented_path())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(app, pilot)
        smap = screen.segment_map
        legend = smap.render_line(1).text
        assert FULL_CHAR in legend and LEVEL_CHARS[FREE_LEVEL] in legend and "free" in legend and "part" in legend
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = "".join(str(cell) for col in app.screen._table().columns for cell in col._cells)
        assert "Segment map legend" in text
        for chars, _, word, _ in LEGEND:
            assert chars in text and word in text


def test_a_pending_free_block_shows_even_when_it_shares_its_cells():
    """E holds 8 MiB allocated, 4 MiB pending free, 8 MiB allocated: at six cells the pending
    block shares both its cells with allocated ones and must still be drawn."""
    from memtui.tui.views.segment_rows import PENDING_CELL

    state = _state_at_large_oom()
    layout = StateLayout(state)
    e = int(list(state.seg_addr).index(segment_address("E")))
    for cells in (3, 6, 7, 50):
        assert (layout.cells(e, cells).kind == PENDING_CELL).any(), cells



async def test_another_devices_map_starts_afresh_not_at_the_segment_selected_before(tmp_path):
    """The map keeps its selected segment while the cursor moves through one device's events;
    shown another device (d), it kept the segment number selected on the first one."""
    import pickle

    from tests.fixtures.fragmented import fragmented_snapshot

    raw = fragmented_snapshot()
    second = [dict(seg, device=1) for seg in raw["segments"]]  # the same layout on a second device
    raw["segments"] += second
    raw["device_traces"].append([dict(entry) for entry in raw["device_traces"][0]])
    path = tmp_path / "two_devices.pickle"
    path.write_bytes(pickle.dumps(raw, protocol=4))
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        segment_map = screen.segment_map
        first = segment_map.selected_segment
        segment_map.action_move(3)
        await pilot.pause()
        kept = segment_map.selected_segment
        assert kept not in (NONE, first)
        screen.show_event(screen.event_log.cursor_event)  # the cursor moves on the same device
        assert segment_map.selected_segment == kept
        screen.switch_device(1)
        for _ in range(50):
            await pilot.pause()
            if screen.current_view.device.device == 1:
                break
        assert screen.current_view.device.device == 1
        assert segment_map.selected_segment == first  # as the device's first view selects
