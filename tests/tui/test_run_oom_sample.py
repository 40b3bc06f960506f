"""The snapshot that `memtui run` wrote on a GPU when a script ran out of memory: its
last entry is the `oom`, and the explorer's OOM view opens on it."""

from __future__ import annotations

from memtui.model import actions as act
from memtui.open import open_snapshot
from memtui.units import format_bytes
from tests.conftest import SAMPLES
from tests.tui.helpers import make_app, ready
from tests.tui.test_analysis_screens import open_analysis, report_text

RUN_OOM = SAMPLES / "run" / "oom_uncaught.oom.pickle.xz"


def test_last_entry_is_the_oom():
    trace = open_snapshot(RUN_OOM).devices[0].trace
    assert int(trace.action[-1]) == act.OOM
    assert int(trace.size[-1]) == 256 << 20


async def test_oom_view_opens_on_it():
    app = make_app(RUN_OOM)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await pilot.press("home", "o")
        last = len(screen.current_view.device.trace) - 1
        assert screen.event_log.cursor_event == last
        assert "requested" in screen.inspector.text and format_bytes(256 << 20) in screen.inspector.text
        # The "why OOM" screen explains it: a per-process cap, not a full device.
        screen = await open_analysis(app, pilot, "w")
        text = report_text(screen)
        assert "capacity" in text and "per-process" in text
