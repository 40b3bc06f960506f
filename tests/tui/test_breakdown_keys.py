"""The explorer's breakdown at 80x24: `b` (bytes per category at the cursor, following it),
`T` (the timeline stacked by category), `B` (the live set as a call tree), and the cost of
a cursor move with them on the million-event trace."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from memtui.tui.screens.breakdown import BreakdownScreen
from memtui.tui.screens.main import MainScreen
from memtui.tui.views.breakdown_view import build_device_breakdown
from memtui.tui.views.device_view import build_device_view
from memtui.tui.widgets.breakdown_pane import BreakdownPane
from memtui.tui.widgets.call_tree import CallTree
from memtui.tui.widgets.timeline import Timeline
from tests.conftest import SAMPLES, SHARED
from tests.tui.helpers import loaded, make_app, ready, settle

TRAIN = SAMPLES / "scenarios" / "train_mlp_adam_all.pickle.xz"
TRUTH = json.loads((SAMPLES / "scenarios" / "train_mlp_adam_all.truth.json").read_text())
SIZE = (80, 24)


@pytest.fixture(autouse=True)
def no_user_rules(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


async def test_b_shows_the_categories_at_the_cursor_and_follows_it():
    app = make_app(TRAIN)
    async with app.run_test(size=SIZE) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("b")
        await settle(app, pilot)
        pane = screen.query_one(BreakdownPane)
        assert not screen.inspector.display and pane.region.width > 20 and pane.region.height >= 4
        view = screen.current_view
        for keys in (["home"], ["down", "down", "down"], ["end"]):
            await pilot.press(*keys)
            await settle(app, pilot)
            result = pane.breakdown
            assert result.moment.event == screen.cursor
            assert result.allocated == int(view.allocated[screen.cursor])
            assert sum(result.categories.values()) == result.allocated
        screen.action_go_to_peak()
        await settle(app, pilot)
        result = pane.breakdown
        assert result.moment.event == int(np.argmax(view.allocated))
        assert result.categories["parameters"] == TRUTH["parameters_bytes"]
        assert result.categories["optimizer_state"] == TRUTH["optimizer_state_bytes"]
        assert result.categories["gradients"] == TRUTH["gradients_bytes_before_zero_grad"]
        assert "parameters" in pane.text and "cached free" in pane.text
        await pilot.press("b")
        await settle(app, pilot)
        assert not screen.query(BreakdownPane) and screen.inspector.display


async def test_T_draws_the_timeline_stacked_by_category_even_at_80x24():
    app = make_app(TRAIN)
    async with app.run_test(size=SIZE) as pilot:
        screen = await ready(app, pilot)
        timeline = screen.query_one(Timeline)
        assert not timeline.display  # too short for the plot by default
        await pilot.press("T")
        await settle(app, pilot)
        assert timeline.display and timeline.stacked
        lines = [timeline.render_line(y).text for y in range(timeline.size.height)]
        assert "params" in lines[0] and "optim" in lines[0]
        assert any(ch in "".join(lines[1:-1]) for ch in "▁▂▃▄▅▆▇█")
        await pilot.press("T")
        await settle(app, pilot)
        assert not timeline.stacked and "allocated" in timeline.render_line(0).text


async def test_B_opens_the_live_set_as_a_call_tree():
    app = make_app(TRAIN)
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(app, pilot)
        main.action_go_to_peak()
        await settle(app, pilot)
        peak = main.cursor
        await pilot.press("B")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, BreakdownScreen) and screen.event == peak
        tree = screen.query_one(CallTree)
        assert tree.has_focus and tree.region.height >= 5
        assert "(all allocations)" in tree.text and "_train" in tree.text
        root = tree.root
        assert root.bytes == int(main.current_view.allocated[peak])
        # Search opens the path to the node; focus makes it the root; u gives the tree back.
        await pilot.press("slash", *"_init_group", "enter")
        await settle(app, pilot)
        assert "_init_group" in tree.selected.label
        await pilot.press("f")
        assert tree.text.splitlines()[0].endswith(tree.selected.label)
        await pilot.press("u")
        assert "(all allocations)" in tree.text.splitlines()[0]
        # Internal frames: the C++ frames of this stacks="all" recording appear.
        assert "[C++]" not in tree.text
        await pilot.press("i", "e")
        await settle(app, pilot)
        assert "[C++]" in tree.text
        # The screen's own cursor moves, and the explorer follows when it closes.
        await pilot.press("full_stop", "full_stop", "comma")
        await settle(app, pilot)
        assert screen.event == peak + 1
        assert screen.pane.breakdown.moment.event == peak + 1
        await pilot.press("escape")
        await settle(app, pilot)
        assert isinstance(app.screen, MainScreen) and main.cursor == peak + 1


async def test_step_keys_visit_each_steps_peak():
    app = make_app(TRAIN)
    async with app.run_test(size=(100, 30)) as pilot:
        main = await ready(app, pilot)
        await pilot.press("home", "B")
        await settle(app, pilot)
        screen = app.screen
        seen = []
        for _ in range(3):
            await pilot.press("greater_than_sign")
            seen.append(screen.event)
        assert seen == sorted(set(seen)) and len(seen) == 3
        assert main.current_view.allocated[seen[0]] == max(main.current_view.allocated[:seen[1]])


def test_a_cursor_move_costs_one_sum_over_the_live_set_on_the_million_event_trace():
    path = SHARED / "big_trace.pickle.xz"
    if not path.exists():
        pytest.skip(f"1M-event snapshot not available at {path}")
    snapshot = loaded(str(path))
    view = build_device_view(snapshot, snapshot.default_device())
    start = time.perf_counter()
    model = build_device_breakdown(view)
    assert time.perf_counter() - start < 5  # once per device, in a worker
    events = np.random.default_rng(1).integers(0, view.n_events, 200)
    states = [view.replayer.state_at(int(i)) for i in events]
    start = time.perf_counter()
    for i, state in zip(events, states):
        result = model.at(int(i), state)
        assert result.allocated == int(view.allocated[int(i)])
    per_move = (time.perf_counter() - start) / len(events)
    assert per_move < 0.01, f"{per_move * 1000:.1f} ms per cursor move"
    start = time.perf_counter()
    model.values_at(np.sort(events))
    assert time.perf_counter() - start < 1  # the stacked timeline's columns, once per redraw


async def test_b_and_T_on_the_million_event_trace_at_80x24():
    path = SHARED / "big_trace.pickle.xz"
    if not path.exists():
        pytest.skip(f"1M-event snapshot not available at {path}")
    app = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("b", "T")
        await settle(app, pilot)
        pane = screen.query_one(BreakdownPane)
        assert screen.query_one(Timeline).stacked
        await pilot.press("pagedown", "pagedown", "down")
        await settle(app, pilot)
        assert pane.breakdown.moment.event == screen.cursor
        assert sum(pane.breakdown.categories.values()) == int(screen.current_view.allocated[screen.cursor])


async def test_the_breakdown_follows_a_change_of_device():
    app = make_app(SAMPLES / "train_linear_adam.pickle.xz")
    async with app.run_test(size=SIZE) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("b", "T")
        await settle(app, pilot)
        timeline = screen.query_one(Timeline)
        pane = screen.query_one(BreakdownPane)
        first = screen.current_view.device.device
        assert pane.breakdown.device == first and pane.breakdown.allocated > 0
        await pilot.press("d")
        await settle(app, pilot)
        await settle(app, pilot)
        assert screen.current_view.device.device != first
        assert pane.breakdown.device == screen.current_view.device.device
        assert timeline.stacked and timeline.render_line(1).text  # drawn for the other device
        await pilot.press("d")
        await settle(app, pilot)
        await settle(app, pilot)
        assert pane.breakdown.device == first and timeline.stacked


async def test_the_selected_node_says_which_rule_placed_its_memory():
    app = make_app(SAMPLES / "scenarios" / "train_mlp_adam_py.pickle.xz")
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(app, pilot)
        main.action_go_to_peak()
        await settle(app, pilot)
        await pilot.press("B")
        await settle(app, pilot)
        await pilot.press("slash", *"_init_group", "enter")
        await settle(app, pilot)
        await pilot.press("down", "up")
        await settle(app, pilot)
        status = str(app.screen.query_one("#breakdown-status").render())
        assert "optimizer_state" in status and "kept after that step" in status


async def test_the_sorting_message_goes_once_the_categories_are_ready():
    """B sorts the allocations into categories first ("sorting allocations into categories…");
    once the call tree is shown, closing it leaves no such message behind."""
    app = make_app(TRAIN)
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(app, pilot)
        await pilot.press("B")
        await settle(app, pilot)
        assert isinstance(app.screen, BreakdownScreen)
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.screen is main and "sorting" not in str(main.status.content)
