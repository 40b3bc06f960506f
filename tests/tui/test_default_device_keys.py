"""The explorer opens on the device with the OOM, and `o` finds an OOM on another device."""

from __future__ import annotations

import numpy as np

from memtui.model import actions as act
from memtui.tui.app import MemtuiApp
from memtui.tui.widgets.timeline import Timeline
from tests.conftest import SAMPLES
from tests.fixtures.multi_device import combine
from tests.tui.helpers import loaded, ready, settle

HEALTHY = SAMPLES / "train_linear_adam.pickle.xz"
OOM = SAMPLES / "scenarios" / "oom_capacity_py.pickle.xz"  # its OOM, event 14 of 29, is not its last event


async def test_opens_on_the_oom_device_and_o_crosses_devices(tmp_path):
    path = combine([HEALTHY, OOM], tmp_path / "two.pickle")
    snapshot = loaded(str(path))
    oom_event = int(snapshot.devices[1].oom_indices()[0])

    app = MemtuiApp(lambda progress: snapshot, show_source=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        assert screen.current_view.device.device == 1

    app = MemtuiApp(lambda progress: snapshot, show_source=False, device=0)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        assert screen.current_view.device.device == 0
        await pilot.press("o")
        await settle(app, pilot)
        assert screen.current_view.device.device == 1
        assert screen.event_log.cursor_event == oom_event
        assert "device 0 has no OOM" in str(screen.status.content)
        # every pane at the OOM, not at the last event the device was first shown at
        assert screen.segment_map.state.index == oom_event
        assert screen.query_one(Timeline)._cursor == oom_event


async def test_a_search_found_on_another_device_says_which(tmp_path):
    from tests.tui.helpers import search

    path = combine([HEALTHY, OOM], tmp_path / "two.pickle")
    snapshot = loaded(str(path))
    dev1 = snapshot.devices[1]
    name = dev1.event_address_n(int(np.flatnonzero(dev1.trace.action == act.ALLOC)[0]))
    app = MemtuiApp(lambda progress: snapshot, show_source=False, device=0)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await search(app, pilot, name)
        await settle(app, pilot)
        assert screen.current_view.device.device == 1
        assert str(screen.status.content).startswith("device 1, not 0: ")
