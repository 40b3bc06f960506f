"""The explorer on what newer torch writes: forward stacks, FX frames, annotations, structured
metadata, ghost blocks, pools and an overflowed ring buffer, driven with Pilot."""

from __future__ import annotations

from pathlib import Path

from memtui.model import actions as act
from memtui.query import compile_filter
from memtui.tui.widgets.filter_bar import FilterBar
from memtui.tui.widgets.summary_bar import SummaryBar
from tests.fixtures.newer_torch import FORMAT
from tests.tui.helpers import loaded, make_app, ready, settle


def path(name: str) -> Path:
    return FORMAT / f"{name}.pickle.xz"


def log_row_text(screen, row: int) -> str:
    """The text of the event log's row ``row`` (line 0 is the header)."""
    return screen.event_log.render_line(row + 1 - round(screen.event_log.scroll_y)).text


def first(snapshot, action: int, where) -> int:
    dev = snapshot.devices[0]
    return next(i for i in range(len(dev.trace)) if int(dev.trace.action[i]) == action and where(dev, i))


async def test_a_backward_allocation_shows_its_forward_stack():
    snapshot = loaded(str(path("backward_anomaly")))
    i = first(snapshot, act.ALLOC, lambda dev, i: dev.trace.fwd[i] >= 0)
    app = make_app(path("backward_anomaly"))
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await ready(app, pilot)
        screen.go_to(i)
        await settle(app, pilot)
        text = screen.inspector.text
        assert "forward stack" in text and "loss = model(x).square().mean()" in text
        assert "backward_anomaly (backward)" in log_row_text(screen, screen.event_log.cursor_row)


async def test_an_fx_frame_shows_its_node_and_the_models_line():
    snapshot = loaded(str(path("fx_module")))
    dev = snapshot.devices[0]
    i = first(snapshot, act.ALLOC, lambda dev, i: snapshot.strings[int(dev.trace.ctx[i])] != "N/A")
    app = make_app(path("fx_module"))
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await ready(app, pilot)
        screen.go_to(i)
        await settle(app, pilot)
        text = screen.inspector.text
        assert "fx node addmm" in text and "a = self.net1(x)" in text and "Torch-Compiled Region" in text
        row = log_row_text(screen, screen.event_log.cursor_row)
        assert "record.py:206 forward" in row and "fx_generated" not in row
        assert dev.event_address_n(i) in row


async def test_annotations_in_the_log_the_inspector_the_filter_and_the_map():
    snapshot = loaded(str(path("annotate")))
    dev = snapshot.devices[0]
    notes = dev.annotations
    app = make_app(path("annotate"))
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await ready(app, pilot)
        screen.go_to(int(notes.event[1]))
        await settle(app, pilot)
        assert "label: layer0.weight" in log_row_text(screen, screen.event_log.cursor_row)
        text = screen.inspector.text
        assert "layer0.weight" in text and "labels" in text and dev.event_address_n(int(notes.event[1])) in text
        # The labelled allocation of the eval output: its alloc shows the annotation.
        screen.go_to(int(dev.lives.start[int(notes.life[0])]))
        await settle(app, pilot)
        assert "annotation" in screen.inspector.text and "role=eval output" in screen.inspector.text
        # The map at the end: the weight is a ghost block, labelled.
        screen.go_to(len(dev.trace) - 1)
        await settle(app, pilot)
        smap = screen.segment_map
        await pilot.press("tab", "m")
        assert smap.list_mode
        width = smap.scrollable_content_region.width
        rows = "\n".join(smap._list_line(k, width).text for k in range(len(smap._layout.list_rows())))
        assert "ghost" in rows and "“layer0.weight”" in rows and "“role=eval output”" in rows
        # meta: narrows the log to the annotate entry and the allocation it labels.
        await pilot.press("backslash")
        app.screen.query_one(FilterBar).value = 'meta:"role=eval output"'
        await pilot.press("enter")
        await settle(app, pilot)
        want = compile_filter('meta:"role=eval output"').indices(snapshot, 0)
        assert list(screen.event_log.visible_rows()) == list(want) and len(want) >= 2


async def test_structured_metadata_reads_as_key_value():
    snapshot = loaded(str(path("metadata")))
    i = int(compile_filter("meta:phase=eval").indices(snapshot, 0)[0])
    app = make_app(path("metadata"))
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await ready(app, pilot)
        screen.go_to(i)
        await settle(app, pilot)
        assert "phase=eval step=1" in screen.inspector.text


async def test_a_ghost_block_says_so_instead_of_no_stack():
    snapshot = loaded(str(path("metadata")))
    dev = snapshot.devices[0]
    app = make_app(path("metadata"))
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await ready(app, pilot)
        screen.go_to(len(dev.trace) - 1)
        await settle(app, pilot)
        smap = screen.segment_map
        state = smap.state
        ghost = next(b for b in range(len(state.blk_addr)) if smap._layout.ghost[b])
        smap._segment, smap._block = int(state.blk_segment[ghost]), ghost
        smap._selection_changed()
        await settle(app, pilot)
        text = screen.inspector.text
        assert "ghost block" in text and "no allocation stack recorded" not in text


async def test_pools_group_and_tag_the_map():
    snapshot = loaded(str(path("private_pools")))
    dev = snapshot.devices[0]
    app = make_app(path("private_pools"))
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await ready(app, pilot)
        screen.go_to(len(dev.trace) - 1)
        await settle(app, pilot)
        smap = screen.segment_map
        layout = smap._layout
        rows = [smap.render_line(3 + r).text for r in range(layout.n_segments)]
        tags = [smap._pools.short_tag(layout.segment_at_row(r)) for r in range(layout.n_segments)]
        # The default pool first, then the graph pool and the MemPool, each tagged in the label.
        assert {"g1", "m1"} <= set(tags) and tags[:tags.count("")] == [""] * tags.count("")
        assert all(tags.index(t) + tags.count(t) - 1 == len(tags) - 1 - tags[::-1].index(t) for t in tags)
        assert any(" g1 " in row for row in rows) and any(" m1 " in row for row in rows)
        await pilot.press("tab")
        for _ in range(layout.n_segments):
            await pilot.press("down")
        assert "mempool 1" in screen.inspector.text or "graph pool 1" in screen.inspector.text


async def test_an_overflowed_ring_buffer_is_said_in_the_summary_and_the_first_row():
    app = make_app(path("ring_overflowed"))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await ready(app, pilot)
        summary = str(screen.query_one(SummaryBar).render())
        assert "ring buffer overflowed" in summary
        await pilot.press("home")
        await settle(app, pilot)
        assert "ring buffer overflowed" in log_row_text(screen, 0)
        assert "ring buffer overflowed" not in log_row_text(screen, 1)


async def test_a_trace_without_free_completed_ends_lives_at_free_requested():
    snapshot = loaded(str(path("skip_free_completed")))
    dev = snapshot.devices[0]
    i = first(snapshot, act.FREE_REQUESTED, lambda dev, i: True)
    app = make_app(path("skip_free_completed"))
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await ready(app, pilot)
        screen.go_to(i)
        await settle(app, pilot)
        text = screen.inspector.text
        life = int(dev.lives.event_life[i])
        assert f"free requested {i:,}" in text and "free completed" not in text
        assert f"alloc {int(dev.lives.start[life]):,}" in text


async def test_an_entrys_own_pool_id_is_shown():
    snapshot = loaded(str(path("pool_ids")))
    i = first(snapshot, act.ALLOC, lambda dev, i: dev.trace.pools[int(dev.trace.pool[i])] == (0, 1))
    app = make_app(path("pool_ids"))
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await ready(app, pilot)
        screen.go_to(i)
        await settle(app, pilot)
        assert "mempool 1" in screen.inspector.text
