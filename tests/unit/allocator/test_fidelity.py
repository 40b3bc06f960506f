"""Fidelity: replayed under its own settings, every recording's segment events come back.

Checked on every snapshot the tests can see whose trace holds segment events: none is
skipped, and at least 90% must match exactly (today all of them do; a file that does not is
printed with its first difference). The what-if truth set (sample_snapshots/whatif: 28
recordings, some of 80,000 events) is a slow case of its own; the rest run by default.
"""

from pathlib import Path

import numpy as np
import pytest

from memtui.allocator.settings import settings_of_snapshot
from memtui.analysis.whatif import check_fidelity
from memtui.analysis.whatif_requests import build_requests
from memtui.model import actions as act
from tests.conftest import heldout_files, sample_files, scenario_files, shared_files, whatif_files
from tests.fixtures.opened import cached


def check_all(files: list[Path]) -> tuple[int, int, list[str]]:
    checked, exact, misses = 0, 0, []
    for path in files:
        snapshot = cached(str(path))
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
    return checked, exact, misses


def test_fidelity_on_every_sample_scenario_and_shared_recording():
    files = sample_files() + scenario_files() + heldout_files() + [
        p for p in shared_files() if p.name != "big_trace.pickle.xz"]  # no segment events: nothing to check
    checked, exact, misses = check_all(files)
    assert checked >= 80, checked
    assert exact >= 0.9 * checked, "\n".join(misses)


@pytest.mark.slow
def test_fidelity_on_the_whatif_truth_set():
    checked, exact, misses = check_all(whatif_files())
    assert checked == len(whatif_files())  # each recording has segment events
    assert exact >= 0.9 * checked, "\n".join(misses)
