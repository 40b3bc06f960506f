"""Fidelity: replayed under its own settings, every recording's segment events come back.

Checked on every snapshot the tests can see whose trace holds segment events (the samples,
the recorded scenarios, the what-if re-runs and ../shared/snapshots): none is skipped, and
at least 90% must match exactly (today all of them do; a file that does not is printed
with its first difference).
"""

from pathlib import Path

import numpy as np

from memtui.allocator.settings import settings_of_snapshot
from memtui.analysis.whatif import check_fidelity
from memtui.analysis.whatif_requests import build_requests
from memtui.model import actions as act
from memtui.open import open_snapshot
from tests.conftest import SAMPLES, shared_files


def every_file() -> list[Path]:
    return sorted(SAMPLES.rglob("*.pickle*")) + [p for p in shared_files() if p.name != "big_trace.pickle.xz"]


def test_fidelity_on_every_recording_with_segment_events():
    checked, exact, misses = 0, 0, []
    for path in every_file():
        snapshot = open_snapshot(path)
        _, settings = settings_of_snapshot(snapshot.allocator_settings)
        for dev in snapshot.devices:
            if not np.isin(dev.trace.action, act.SEGMENT_ACTIONS).any():
                continue
            fidelity = check_fidelity(dev, build_requests(dev), settings)
            assert fidelity.checked
            checked += 1
            if fidelity.exact:
                exact += 1
                assert fidelity.matched == fidelity.segment_events and fidelity.first_difference is None
            else:
                misses.append(f"{path.name} device {dev.device}: {fidelity.first_difference}")
    assert checked >= 80, checked
    assert exact >= 0.9 * checked, "\n".join(misses)
