"""Escape sequences hidden in a snapshot never reach the terminal: every rendered line is checked.

The snapshot carries an OSC title change, a screen clear and colour codes in its file
name, frame file and function names, compile context, metadata, an action name, a block
state, the segment type, allocator settings and annotations. The explorer is walked
through the views that show them; each time, every strip of the screen must hold no ESC
character, and the escaped form of the payload must be visible somewhere.
"""

from __future__ import annotations

import pickle

from memtui.open import open_snapshot
from memtui.tui.app import MemtuiApp
from tests.tui.helpers import ready, settle
from tests.unit.test_broken_snapshots import EVIL, hostile_text_snapshot


def screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def test_no_escape_character_is_ever_rendered(tmp_path):
    path = tmp_path / f"{EVIL}snap.pickle"
    path.write_bytes(pickle.dumps(hostile_text_snapshot(), protocol=4))
    snapshot = open_snapshot(path, cache=None)
    app = MemtuiApp(lambda progress: snapshot, show_source=False)
    seen_escaped = False
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(app, pilot)
        steps = [(), ("home",), ("down",), ("down",), ("t",), ("t",), ("tab", "m"), ("m", "tab"), ("end",),
                 ("up",), ("enter",), ("c",), ("escape",), ("question_mark",), ("escape",), ("w",), ("escape",)]
        for keys in steps:
            if keys:
                await pilot.press(*keys)
            await settle(app, pilot)
            lines = screen_lines(app)
            assert not any("\x1b" in line or "\x07" in line for line in lines), (keys, lines)
            seen_escaped = seen_escaped or any("\\x1b" in line for line in lines)
    assert seen_escaped
