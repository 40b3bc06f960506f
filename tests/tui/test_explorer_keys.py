"""The explorer driven by keys, asserting on state: OOM jump, search, time travel, jumps, resize."""

from __future__ import annotations

import pytest

from memtui.model import actions as act
from memtui.model.address_n import format_address_n
from memtui.replay import Replayer
from memtui.tui.screens.help import HelpScreen
from memtui.tui.screens.search_results import SearchResultsScreen
from memtui.tui.widgets.timeline import Timeline
from memtui.units import format_bytes
from tests.conftest import truth_for
from tests.fixtures.tiny_snapshot import SCHEDULE, STACK_OPTIM
from tests.tui.helpers import OOM_REAL, loaded, make_app, ready, search, settle, tiny_path


def _require(path):
    if not path.exists():
        pytest.skip(f"snapshot not available: {path}")
    return path


async def test_o_lands_on_the_oom_and_shows_its_size():
    path = _require(OOM_REAL)
    oom = truth_for(path)["traces"][0]["ooms"][0]
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("o")
        assert screen.event_log.cursor_event == oom["index"]
        assert screen.segment_map.state.index == oom["index"]
        text = screen.inspector.text
        assert "OOM" in text and format_bytes(oom["size"]) in text
        assert format_bytes(oom["device_free"]) in text


async def test_o_and_O_cycle_on_the_tiny_snapshot():
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("home", "o")
        assert screen.event_log.cursor_event == 19
        await pilot.press("O")
        assert screen.event_log.cursor_event == 19
        assert "requested" in screen.inspector.text and "24.00 MiB" in screen.inspector.text


async def test_search_address_n_lands_on_its_alloc_in_every_spelling():
    snapshot = loaded(str(tiny_path()))
    dev = snapshot.devices[0]
    life = int(dev.lives.event_life[10])  # the second life at 7f3a00400000
    name = format_address_n(dev.lives.addr[life], dev.lives.version[life])
    assert name == "7f3a00400000_1"
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        # memory_viz's spellings: b7f.._1, and today's b'7f.._1 (typed, as a user pastes or types it).
        # The two typed ones press every key b7f.._1 holds too, so that one is put in the bar.
        for form, typed in (("{}", False), ("0x{}", False), ("b{}", False), ("b'{}", True), (" B'0X{}' ", True)):
            await pilot.press("G")
            await search(app, pilot, form.format(name), typed=typed)
            assert screen.event_log.cursor_event == int(dev.lives.start[life]), form
            assert name in screen.inspector.text


async def test_search_address_n_from_the_truth_file():
    path = _require(OOM_REAL)
    snapshot = loaded(str(path))
    dev = snapshot.devices[0]
    # An allocation named by the truth data: the last 4 GiB tensor allocated before the OOM.
    oom_index = truth_for(path)["traces"][0]["ooms"][0]["index"]
    alloc = max(i for i in range(oom_index) if dev.trace.action[i] == act.ALLOC)
    name = dev.event_address_n(alloc)
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("home")
        await search(app, pilot, name)
        assert screen.event_log.cursor_event == alloc


async def test_not_found_and_bare_address_listing():
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        before = screen.event_log.cursor_event
        await search(app, pilot, "7f3a00400000_9")
        assert screen.event_log.cursor_event == before
        assert "not found" in str(screen.status.content)
        await search(app, pilot, "no_such_function_anywhere")
        assert "not found" in str(screen.status.content)
        await search(app, pilot, "7f3a00400000")
        assert isinstance(app.screen, SearchResultsScreen)
        assert len(app.screen.result.matches) == 2
        await pilot.press("enter")  # the first allocation
        assert screen.event_log.cursor_event == 2
        await pilot.press("n")
        assert screen.event_log.cursor_event == 10
        await search(app, pilot, "7f3a00400000")
        await pilot.press("j", "k", "j", "enter")  # j and k pick as the arrows do: the second
        assert screen.event_log.cursor_event == 10


async def test_text_search_and_n_N():
    optim = [i for i, step in enumerate(SCHEDULE) if step[3] is STACK_OPTIM]
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("home")
        await search(app, pilot, "adam")
        assert screen.event_log.cursor_event == optim[0]
        await pilot.press("n")
        assert screen.event_log.cursor_event == optim[1]
        await pilot.press("N", "N")
        assert screen.event_log.cursor_event == optim[-1]  # wrapped


async def test_n_on_a_search_with_one_match_says_it_is_the_only_one():
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        await search(app, pilot, "b0x7f3a00400000_1")  # one allocation, one event
        only = 10
        assert screen.event_log.cursor_event == only
        await pilot.press("n")
        assert screen.event_log.cursor_event == only
        assert str(screen.status.content).endswith("(the only one)"), screen.status.content
        assert "wrapped" not in str(screen.status.content)


async def test_stepping_the_cursor_replays_the_allocator():
    snapshot = loaded(str(tiny_path()))
    replayer = Replayer(snapshot.devices[0])
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("home")
        for expected in range(0, 22):
            assert screen.event_log.cursor_event == expected
            state = screen.segment_map.state
            assert state.index == expected
            assert state.allocated == replayer.state_at(expected).allocated
            assert state.reserved == replayer.state_at(expected).reserved
            await pilot.press("j")


async def test_time_travel_on_a_real_trace_after_page_down():
    path = _require(OOM_REAL)
    replayer = Replayer(loaded(str(path)).devices[0])
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("g", "pagedown", "down", "down")
        i = screen.event_log.cursor_event
        assert i > 2
        assert screen.segment_map.state.allocated == replayer.state_at(i).allocated


async def test_alloc_free_and_same_address_jumps():
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        screen.go_to(3)  # alloc of 7f3a00600000_0
        await pilot.press("f")
        assert screen.event_log.cursor_event == 14  # its free_requested
        await pilot.press("f")
        assert screen.event_log.cursor_event == 15  # free_completed
        await pilot.press("f")
        assert screen.event_log.cursor_event == 15
        assert "last event" in str(screen.status.content)
        await pilot.press("F", "F")
        assert screen.event_log.cursor_event == 3
        await pilot.press("right_square_bracket")
        assert screen.event_log.cursor_event == 14
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert screen.event_log.cursor_event == 16  # the next life at the same address
        await pilot.press("left_square_bracket")
        assert screen.event_log.cursor_event == 15


async def test_another_devices_plot_is_prepared_off_the_thread_that_draws(monkeypatch):
    """The blocks the timeline reads (memtui/analysis/curve_extremes.py) are made for a device
    shown with d as they are for the first: in the worker that prepares its view."""
    import threading

    from memtui.analysis.curve_extremes import CurveExtremes

    made_on: list[str] = []
    make = CurveExtremes.of.__func__

    def recording(cls, curve):
        made_on.append(threading.current_thread().name)
        return make(cls, curve)

    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        monkeypatch.setattr(CurveExtremes, "of", classmethod(recording))
        await pilot.press("d")
        await settle(app, pilot)
        assert len(made_on) == 2  # the allocated and the reserved curve of device 1
        assert threading.main_thread().name not in made_on


async def test_device_timeline_and_native_toggles():
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("d")
        await settle(app, pilot)
        assert screen.current_view.device.device == 1
        assert screen.event_log.row_count == 1
        await pilot.press("d")
        await settle(app, pilot)
        assert screen.current_view.device.device == 0
        timeline = screen.query_one(Timeline)
        await pilot.press("t")
        assert not timeline.display
        await pilot.press("t")
        assert timeline.display
        screen.go_to(2)
        assert "torch::unwind::unwind()" not in screen.inspector.text
        await pilot.press("c")
        assert "torch::unwind::unwind()" in screen.inspector.text
        assert "repeats ×3" in screen.inspector.text  # Block.forward recursion collapsed


async def test_help_palette_detail_and_tab():
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert app.screen is screen
        await pilot.press("ctrl+p", *"next o")
        await pilot.pause(0.2)
        await pilot.press("enter")
        await pilot.pause()
        assert screen.event_log.cursor_event == 19
        await pilot.press("enter")
        assert type(app.screen).__name__ == "DetailScreen"
        await pilot.press("escape")
        assert app.focused is screen.event_log
        await pilot.press("tab")
        assert app.focused is screen.segment_map
        await pilot.press("shift+tab")
        assert app.focused is screen.event_log


async def test_segment_map_keys_select_blocks_and_list_mode():
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        screen.go_to(17)
        await pilot.press("tab")
        smap = screen.segment_map
        assert smap.selected_segment == 0
        await pilot.press("home", "right")
        assert smap.selected_block >= 0
        assert "block 7f3a00000000_0" in screen.inspector.text
        await pilot.press("m")
        assert smap.list_mode
        await pilot.press("down", "enter")
        assert screen.event_log.cursor_event in (10, 1, 16, 17)


async def test_resize_keeps_working():
    app = make_app(tiny_path())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.press("g", "o", "pagedown", "G")
        assert screen.event_log.cursor_event == 22
        await pilot.resize_terminal(40, 12)
        await pilot.pause()
        await pilot.press("k")
        await pilot.resize_terminal(200, 60)
        await pilot.pause()
        assert screen.event_log.cursor_event == 21


async def test_load_error_is_one_line_and_exit_2(tmp_path):
    from memtui.tui.app import MemtuiApp

    bad = tmp_path / "broken.pickle"
    bad.write_bytes(b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94(")  # a truncated pickle
    app = MemtuiApp(bad)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(200):
            if app.load_error:
                break
            await pilot.pause(0.01)
    assert app.return_code == 2
    assert app.load_error and "\n" not in app.load_error and "broken.pickle" in app.load_error


async def test_opening_a_file_shows_progress_then_the_explorer():
    from memtui.tui.app import MemtuiApp

    app = MemtuiApp(tiny_path(), show_source=False)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(app, pilot)
        assert screen.snapshot.name == "tiny_oom.pickle"
        assert screen.event_log.cursor_event == 22


async def test_mouse_selects_rows_and_blocks():
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        log = screen.event_log
        top = round(log.scroll_y)
        await pilot.click("#events", offset=(5, 3))  # line 0 is the column header
        assert log.cursor_event == top + 2
        await pilot.click("#map", offset=(30, 3))  # three header lines, then the first segment
        assert screen.segment_map.selected_segment == 0
        assert screen.segment_map.selected_block >= 0
        assert "block 7f3a00000000_0" in screen.inspector.text


async def test_no_color(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(tiny_path())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(app, pilot)
        assert app.no_color
        await pilot.press("o")
        assert screen.event_log.cursor_event == 19


async def test_the_answer_about_an_event_goes_when_the_cursor_moves_on():
    """A search's answer (``event …: alloc 7f3a…``) is about the event it landed on: g, G or
    j move the cursor on without an answer of their own, and the old one goes; a key that
    does not move the cursor leaves it."""
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("G")
        await search(app, pilot, "7f3a00400000_1")
        answer = str(screen.status.content)
        assert "7f3a00400000_1" in answer
        await pilot.press("tab")  # to the map: the cursor stays
        await pilot.pause()
        assert str(screen.status.content) == answer
        await pilot.press("shift+tab")
        for key in ("g", "G", "k"):
            await pilot.press(key)
            await pilot.pause()
            assert "7f3a00400000_1" not in str(screen.status.content), key
            await search(app, pilot, "7f3a00400000_1")
            assert "7f3a00400000_1" in str(screen.status.content)


async def test_enter_on_a_segment_row_goes_to_the_event_that_made_it():
    """The map's Enter ("Go to alloc") on a segment's own row, no block selected: the event
    that made that segment, as on a block's row the event that allocated the block."""
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        screen.go_to(17)
        await pilot.press("tab", "m", "home")  # the list: its first row is the first segment's own
        smap = screen.segment_map
        assert smap.selected_segment == 0 and smap.selected_block < 0
        dev, state = screen.current_view.device, smap.state
        made = dev.segment_made_at(int(state.seg_addr[0]), state.index)
        assert made >= 0 and int(dev.trace.action[made]) in (act.SEGMENT_ALLOC, act.SEGMENT_MAP)
        await pilot.press("enter")
        await pilot.pause()
        assert screen.event_log.cursor_event == made
