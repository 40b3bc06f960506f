"""The explorer's filter bar (`\\`) and export dialog (`x`), driven by keys."""

from __future__ import annotations

import numpy as np
import pytest

from memtui.export.place import EXPORTS_OFF, ExportPlace
from memtui.open import open_snapshot
from memtui.query import compile_filter
from memtui.tui.screens.export_dialog import ExportDialog
from memtui.tui.screens.help import HelpScreen
from memtui.tui.widgets.filter_bar import FilterBar
from memtui.tui.widgets.timeline import MATCH_MARK, Timeline
from tests.tui.helpers import loaded, make_app, ready, settle, tiny_path


async def apply_filter(app, pilot, text: str, typed: bool = False) -> None:
    if typed:
        await pilot.press("backslash", *text, "enter")
    else:
        await pilot.press("backslash")
        app.screen.query_one(FilterBar).value = text
        await pilot.press("enter")
    await settle(app, pilot)


async def export_dialog(app, pilot) -> ExportDialog:
    """x, and the export dialog it opens."""
    await pilot.press("x")
    await pilot.pause()
    assert isinstance(app.screen, ExportDialog)
    return app.screen


async def test_filter_narrows_the_log_and_esc_clears_it():
    snapshot = loaded(str(tiny_path()))
    expected = compile_filter("action:alloc size>=2MiB").indices(snapshot, 0)
    app = make_app(tiny_path())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        total = screen.current_view.n_events
        await apply_filter(app, pilot, "action:alloc size>=2MiB", typed=True)
        log = screen.event_log
        assert np.array_equal(log.visible_rows(), expected)
        assert log.border_title == f"Events: {len(expected):,} of {total:,} · action:alloc size>=2MiB"
        assert log.cursor_event in expected.tolist()
        # The timeline still spans the whole trace and marks the matches.
        timeline = screen.query_one(Timeline)
        assert timeline._view.n_events == total
        assert MATCH_MARK in timeline._axis(100).text
        # The map shows the state at the cursor and draws the matching allocations apart.
        segment_map = screen.segment_map
        layout = segment_map._layout
        matched = [b for b in range(len(layout.state.blk_addr))
                   if layout.is_matched(b, segment_map._matched_lives)]
        assert matched and all(int(layout.state.blk_size[b]) >= 2 << 20 for b in matched)
        # Esc (outside the bar) clears: every event again, no marks.
        await pilot.press("escape")
        await settle(app, pilot)
        assert log.row_count == total and log.border_title == "Events"
        assert MATCH_MARK not in timeline._axis(100).text and segment_map._matched_lives is None
        # A filter nothing matches leaves an empty log and a usable explorer.
        await apply_filter(app, pilot, "size>1TiB")
        assert log.row_count == 0
        assert "no event matches" in str(screen.status.render())
        await pilot.press("down", "up", "o", "f")
        await pilot.press("escape")
        await settle(app, pilot)
        assert log.row_count == total


async def test_bar_reopens_with_the_filter_reports_errors_and_help_has_examples():
    app = make_app(tiny_path())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await apply_filter(app, pilot, "leaked")
        await pilot.press("backslash")
        bar = screen.query_one(FilterBar)
        assert bar.value == "leaked" and bar.has_focus
        bar.value = "size>"
        await pilot.pause()
        assert "column 6" in str(screen.status.render()) and bar.has_class("-invalid")
        await pilot.press("enter")  # refused: the bar stays open on the mistake
        await pilot.pause()
        assert bar.has_class("-open")
        await pilot.press("escape")  # Esc in the bar clears the filter too
        await settle(app, pilot)
        assert not bar.has_class("-open") and screen.event_log.row_count == screen.current_view.n_events
        # The help screen teaches the language by example.
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = "".join(str(cell) for col in app.screen._table().columns for cell in col._cells)
        assert "size>1MiB file:train.py leaked" in text and "Filter examples" in text


async def test_export_dialog_writes_the_filtered_view(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(tiny_path())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await apply_filter(app, pilot, "action:alloc")
        rows = screen.event_log.visible_rows().copy()
        dialog = await export_dialog(app, pilot)
        assert "matching action:alloc" in str(dialog.query_one("#export-what").render())
        written = tmp_path / dialog.query_one("#export-path").value
        assert written.name == "tiny_oom.dev0.filtered.msgpack"
        await pilot.press("enter")
        await settle(app, pilot)
        await pilot.pause()
        assert not isinstance(app.screen, ExportDialog)
        assert written.exists() and "wrote" in str(screen.status.render())
    reopened = open_snapshot(written)
    assert reopened.header["filter"] == "action:alloc" and reopened.header["device"] == 0
    assert len(reopened.devices[0].trace) == len(rows)


async def test_export_dialog_confirms_overwrite_and_escape_cancels(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(tiny_path())
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        dialog = await export_dialog(app, pilot)
        path_input = dialog.query_one("#export-path")
        target = tmp_path / "taken.msgpack"
        target.write_bytes(b"keep")
        path_input.value = str(target)
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.screen is dialog and "exists" in str(dialog.query_one("#export-message").render())
        assert target.read_bytes() == b"keep"
        await pilot.press("enter")  # the second time is the confirmation
        await settle(app, pilot)
        await pilot.pause()
        assert app.screen is not dialog
        assert target.read_bytes()[1:].startswith(b"\xa6format\xa6memtui")  # a msgpack map, format first
        # Escape cancels without writing anything.
        await export_dialog(app, pilot)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ExportDialog)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.msgpack"]


@pytest.mark.parametrize("key", ["backslash", "x"])
def test_keys_are_bound_with_descriptions(key):
    from memtui.tui.screens.main import MainScreen

    binding = next(b for b in MainScreen.BINDINGS if b.key == key)
    assert binding.description and binding.show


async def test_an_export_opens_with_its_filter_in_the_summary(tmp_path):
    from memtui.export.writer import export_snapshot
    from memtui.tui.widgets.summary_bar import SummaryBar

    out = tmp_path / "cut.msgpack"
    export_snapshot(loaded(str(tiny_path())), out, "action:alloc", device=0)
    app = make_app(out)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await ready(app, pilot)
        summary = str(screen.query_one(SummaryBar).render())
        assert "cut.msgpack" in summary and "[export of tiny_oom.pickle: action:alloc]" in summary
        assert screen.current_view.n_events == len(compile_filter("action:alloc").indices(loaded(str(tiny_path())), 0))


async def test_a_reopened_filtered_export_speaks_the_sources_numbers(tmp_path):
    """Event numbers, address_n and the map come from the source: a filtered trace is not
    replayed, so no figure contradicts the source (allocated never exceeds reserved)."""
    from memtui.export.writer import export_snapshot
    from memtui.tui.widgets.summary_bar import SummaryBar
    from tests.conftest import SAMPLES

    source_path = SAMPLES / "oom_training.pickle.xz"
    source = loaded(str(source_path))
    out = tmp_path / "big.msgpack"
    export_snapshot(source, out, "size>1MiB action:alloc", device=0)
    rows = compile_filter("size>1MiB action:alloc").indices(source, 0)
    app = make_app(out)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("end")
        await settle(app, pilot)
        view = screen.current_view
        last = view.n_events - 1
        assert view.device.shown_index(last) == int(rows[-1])
        assert view.device.event_address_n(last) == source.devices[0].event_address_n(int(rows[-1]))
        cells, _ = screen.event_log._columns.cells(last, screen.event_log._columns.layout(150))
        assert cells[0].strip() == f"{int(rows[-1]):,}"
        state = screen.segment_map.state
        assert state.allocated <= state.reserved == source.devices[0].reserved
        assert "filtered export is not replayed" in screen.segment_map.title(200)
        assert "free -" not in str(screen.query_one(SummaryBar).render())


async def test_a_served_session_exports_only_inside_its_folder(tmp_path, monkeypatch):
    folder = tmp_path / "exports"
    folder.mkdir()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outside").symlink_to(tmp_path)
    app = make_app(tiny_path(), export_place=ExportPlace.inside(str(folder)))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        dialog = await export_dialog(app, pilot)
        path_input = dialog.query_one("#export-path")
        assert path_input.value == str(folder / "tiny_oom.dev0.msgpack")
        for escape in ("../x.msgpack", str(tmp_path / "x.msgpack"), "../outside/x.msgpack"):
            path_input.value = escape
            await pilot.press("enter")
            await settle(app, pilot)
            assert app.screen is dialog
            assert "stay inside" in str(dialog.query_one("#export-message").render())
        path_input.value = "mine.msgpack"  # a bare name lands in the folder
        await pilot.press("enter")
        await settle(app, pilot)
        await pilot.pause()
        assert app.screen is not dialog
    assert sorted(p.name for p in folder.iterdir()) == ["mine.msgpack"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exports", "outside"]


async def test_export_turned_off_says_how_to_turn_it_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(tiny_path(), export_place=ExportPlace(off=EXPORTS_OFF))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("x")
        await pilot.pause()
        assert not isinstance(app.screen, ExportDialog)
        assert "--export-dir DIR" in str(screen.status.render())
    assert list(tmp_path.iterdir()) == []


async def test_the_export_dialogs_words_wrap_at_80_columns(tmp_path, monkeypatch):
    from textual.widgets import Label

    monkeypatch.chdir(tmp_path)
    app = make_app(tiny_path())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(app, pilot)
        dialog = await export_dialog(app, pilot)
        box = dialog.query_one("#export-box").content_region
        for label in (dialog.query_one("#export-what", Label), dialog.query_one("#export-message", Label)):
            # every label inside the box, its whole text on the lines it takes
            assert label.region.right <= box.right, (label.id, label.region, box)
            words = str(label.render()).split()
            assert label.region.height * label.region.width >= sum(len(w) + 1 for w in words) - 1, label.id
