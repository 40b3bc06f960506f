"""Every view counts segments and blocks the same way and names the pool of a largest-free figure.

At several moments of several snapshots: the summary (snapshot time), the map's title,
its list mode, the inspector's segment lines and the snapshot's own block table agree;
at every OOM the inspector's largest free block is Why OOM's, with its pool named.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from memtui.analysis.oom import diagnose_ooms
from memtui.model.segments import ALLOCATED, INACTIVE, PENDING_FREE
from memtui.services.oom import render
from memtui.state_figures import BlockCounts, count_blocks, pool_free, request_pool, segment_pools
from memtui.tui.views.device_view import build_device_view
from memtui.tui.views.inspector_content import InspectOptions, oom_lines, segment_lines
from memtui.tui.views.segment_rows import SEGMENT_ROW, StateLayout
from memtui.units import format_bytes, plural
from tests.conftest import SAMPLES, SHARED
from tests.tui.helpers import loaded, make_app, ready, tiny_path
from tests.tui.test_segment_map_holes import fragmented_path

COUNTS = re.compile(r"(\d[\d,]*) segments?, (\d[\d,]*) blocks? \((\d[\d,]*) allocated(?:, (\d[\d,]*) pending free)?,"
                    r" (\d[\d,]*) free\)")
BLOCKS = re.compile(r"(\d[\d,]*) blocks? \((\d[\d,]*) allocated(?:, (\d[\d,]*) pending free)?, (\d[\d,]*) free\)")


def _files():
    files = [tiny_path(), fragmented_path(), SAMPLES / "oom_training.pickle.xz", SAMPLES / "multistream.pickle.xz"]
    files += [SHARED / name for name in ("oom_training.pickle", "multistream.pickle", "expandable_segments.pickle")]
    return [pytest.param(p, id=p.name) if p.exists() else pytest.param(p, id=p.name, marks=pytest.mark.skip(
        reason=f"{p} not available")) for p in files]


def _counts(text: str) -> BlockCounts:
    m = COUNTS.search(text)
    assert m, text
    n = [int((g or "0").replace(",", "")) for g in m.groups()]
    counts = BlockCounts(n[0], n[2], n[3], n[4])
    assert counts.blocks == n[1], text
    return counts


def _moments(view) -> list[int]:
    n = view.n_events
    ooms = [int(i) for i in view.device.oom_indices()]
    return sorted({-1, 0, n // 3, n // 2, n - 1, *ooms} & set(range(-1, n)))


def test_plural():
    assert plural(1, "segment") == "1 segment" and plural(2, "segment") == "2 segments"
    assert plural(0, "event") == "0 events" and plural(1234, "event") == "1,234 events"
    assert plural(1, "match", "matches") == "1 match" and plural(3, "match", "matches") == "3 matches"


@pytest.mark.parametrize("path", _files())
def test_counts_agree_across_views_and_with_the_snapshot(path):
    snapshot = loaded(str(path))
    for d in range(len(snapshot.devices)):
        view = build_device_view(snapshot, d)
        dev = view.device
        for i in _moments(view):
            state = view.replayer.state_at(i)
            counts = count_blocks(state)
            assert counts.allocated + counts.pending == len(state.blk_addr)
            layout = StateLayout(state)
            rows = layout.list_rows()
            # List mode shows one row per segment and one per block (allocated, pending or free).
            assert sum(r.kind == SEGMENT_ROW for r in rows) == counts.segments
            assert len(rows) - counts.segments == counts.blocks - int(np.count_nonzero(state.blk_segment < 0))
            # The inspector's per-segment counts add up to the map's.
            per_segment = [_segment_counts(view, state, s) for s in range(counts.segments)]
            inside = state.blk_segment >= 0
            assert sum(c.free for c in per_segment) == counts.free
            assert sum(c.allocated for c in per_segment) == int(np.count_nonzero(state.blk_state[inside] == ALLOCATED))
            assert sum(c.pending for c in per_segment) == int(np.count_nonzero(
                state.blk_state[inside] == PENDING_FREE))
            assert _counts(counts.text()) == counts
        # After the last event: what the snapshot's own tables hold.
        final = count_blocks(view.replayer.state_at(view.n_events - 1))
        states = dev.blocks.state
        assert final == BlockCounts(len(dev.segments), int(np.count_nonzero(states == ALLOCATED)),
                                    int(np.count_nonzero(states == PENDING_FREE)),
                                    int(np.count_nonzero(states == INACTIVE)))


def _segment_counts(view, state, s: int) -> BlockCounts:
    lines = segment_lines(view, state, s, InspectOptions(show_source=False))
    text = next("".join(t for t, _ in line) for line in lines if line and line[0][0].strip() == "blocks")
    m = BLOCKS.search(text)
    assert m, text
    n = [int((g or "0").replace(",", "")) for g in m.groups()]
    assert n[0] == n[1] + n[2] + n[3], text
    return BlockCounts(1, n[1], n[2], n[3])


@pytest.mark.parametrize("path", _files())
def test_oom_largest_free_is_why_ooms_and_names_its_pool(path):
    snapshot = loaded(str(path))
    for diagnosis in diagnose_ooms(snapshot):
        view = build_device_view(snapshot, diagnosis.device)
        i = diagnosis.index
        state = view.replayer.state_at(i)
        trace = view.device.trace
        pool, stream = request_pool(int(trace.size[i])), int(trace.stream[i])
        assert diagnosis.pool == pool
        figures = pool_free(state, segment_pools(state, view.device, snapshot.strings), pool, stream)
        assert (figures.largest, figures.free) == (diagnosis.largest_free_block, diagnosis.usable_free)
        text = "\n".join("".join(t for t, _ in line) for line in oom_lines(view, i, state))
        largest_line = next(line for line in text.splitlines() if "largest free" in line)
        assert f"{pool} pool on stream {stream}: {format_bytes(diagnosis.largest_free_block)}" in largest_line
        other = "small" if pool == "large" else "large"
        assert f"{other} pool: " in largest_line
        report = "\n".join(render(diagnosis))
        assert f"largest free block in the {pool} pool (stream {stream}) {format_bytes(figures.largest)}" in report


@pytest.mark.parametrize("path", [p for p in _files() if "tiny" not in p.id and "fragmented" not in p.id][:1]
                         + [pytest.param(fragmented_path(), id="fragmented")])
async def test_summary_title_and_inspector_agree_in_the_app(path):
    app = make_app(path)
    async with app.run_test(size=(200, 60)) as pilot:
        screen = await ready(app, pilot)
        summary = str(screen.query_one("#summary").render())
        smap = screen.segment_map
        view = screen.current_view
        for i in _moments(view):
            if i < 0:
                continue
            screen.go_to(i)
            await pilot.pause()
            title = _counts(str(smap.border_title))
            assert title == count_blocks(smap.state)
            if i == view.n_events - 1:
                assert _counts(summary) == title  # the summary is at snapshot time: after the last event
            segments = [_segment_counts(view, smap.state, s) for s in range(title.segments)]
            assert sum(c.free for c in segments) == title.free
        await pilot.press("m")  # list mode: one row per segment and block
        assert len(smap._layout.list_rows()) == title.segments + title.blocks
