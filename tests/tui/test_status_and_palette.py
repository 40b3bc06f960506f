"""The status line answers the last key, the palette lists each action once, and an export
says where it went as an absolute path."""

from __future__ import annotations

import os
from collections import Counter

from memtui.tui.screens.export_dialog import ExportDialog
from tests.tui.helpers import make_app, ready, search, settle, tiny_path


async def test_the_palette_lists_each_action_once():
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        titles = Counter(c.title for c in app.get_system_commands(screen))
        assert titles["Clear filter"] == 1
        assert [t for t, n in titles.items() if n > 1] == []
        helps = [c.help for c in screen.palette_commands()]
        assert any("(key: \\)" in h for h in helps) and any("(key: Esc)" in h for h in helps)


async def test_f_after_a_search_replaces_the_search_message():
    app = make_app(tiny_path())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(app, pilot)
        await search(app, pilot, "7f3a00400000_0")  # allocated at event 2, freed at 7 and 8
        assert screen.event_log.cursor_event == 2
        found = str(screen.status.render())
        await pilot.press("f")
        assert screen.event_log.cursor_event == 7
        said = str(screen.status.render())
        assert said != found
        assert said.startswith("event 7: free_requested")
        await pilot.press("left_square_bracket")  # same address, back to the alloc
        assert "event 2" in str(screen.status.render())


async def test_the_export_path_and_message_are_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(tiny_path())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("x")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ExportDialog)
        shown = dialog.query_one("#export-path").value
        assert os.path.isabs(shown) and shown == str(tmp_path / "tiny_oom.dev0.msgpack")
        dialog.query_one("#export-path").value = "relative.msgpack"  # typed relative: still said in full
        await pilot.press("enter")
        await settle(app, pilot)
        await pilot.pause()
        assert (tmp_path / "relative.msgpack").exists()
        assert f"wrote {tmp_path / 'relative.msgpack'}:" in str(screen.status.render())


async def test_a_file_with_replaced_values_says_so_on_the_first_screen(tmp_path):
    import pickle

    trace = [{"action": "oom", "addr": 0, "size": 2 ** 70, "stream": 0, "time_us": 1, "device_free": 5, "frames": []}]
    path = tmp_path / "huge_request.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace]}))
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(app, pilot)
        assert str(screen.status.content) == "! memtui replaced values in this file (1 warning): see memtui check"
