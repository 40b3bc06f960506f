"""The per-process cap a recorded OOM implies (memtui/analysis/whatif.py derive_limit): at
least the most the process reserved, and below what it asked for at the OOM and at every
request torch served only after releasing its cache (a try refused first).

Two invariants, on every OOM recording the tests see: the cap measured on the GPU lies in the
bracket (sample_snapshots/whatif*: ``oom_recording.cap_bytes``), and under the cap the replay
uses, the recorded settings reach the recorded reserved peak, so the ``whatif`` row of the
recorded settings says what the recording did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtui.allocator.settings import settings_of_snapshot
from memtui.analysis.whatif import derive_limit, what_if
from memtui.analysis.whatif_requests import build_requests
from tests.conftest import SAMPLES, scenario_files, whatif_files
from tests.fixtures.opened import cached


def oom_recordings() -> list[Path]:
    return [p for p in whatif_files() if ".oom." in p.name] + [SAMPLES / "oom_training.pickle.xz"] + \
        [p for p in scenario_files() if p.name.startswith("oom")]


def test_the_bracket_holds_the_cap_measured_on_the_gpu_and_retries_narrow_it():
    narrowed = 0
    for path in [p for p in whatif_files() if ".oom." in p.name]:
        truth = json.loads(path.with_name(path.name.replace(".oom.pickle.xz", ".truth.json")).read_text())
        cap = truth["oom_recording"]["cap_bytes"]
        snapshot = cached(str(path))
        dev = snapshot.devices[0]
        requests = build_requests(dev)
        _, recorded = settings_of_snapshot(snapshot.allocator_settings)
        limit = derive_limit(dev, requests, None, recorded)
        assert limit.per_process and limit.low <= cap <= limit.high, (path.name, limit, cap)
        without_retries = derive_limit(dev, requests, None)
        assert without_retries.low == limit.low and without_retries.high >= limit.high
        narrowed += without_retries.high > limit.high
    assert narrowed >= 5  # requests served after a release are common: most recordings have one


@pytest.mark.parametrize("path", oom_recordings(), ids=lambda p: p.name)
def test_the_recorded_settings_replay_to_the_recorded_peak_under_the_derived_cap(path):
    snapshot = cached(str(path))
    result = what_if(snapshot, 0, min_cap=False, workers=1)
    (recorded,) = [s for s in result.scenarios if s.recorded]
    assert recorded.reserved_peak == result.recorded_peak, (path.name, result.limit)


@pytest.mark.parametrize("path", oom_recordings(), ids=lambda p: p.name)
def test_oom_and_whatif_give_one_bracket_for_the_cap(path):
    """`memtui oom` says the cap is at least X and below Y; `memtui whatif` says between X and
    Y: the same X and Y, the one derivation (derive_limit)."""
    from memtui.analysis.oom import diagnose_ooms

    snapshot = cached(str(path))
    first = diagnose_ooms(snapshot, 0)[0]
    limit = what_if(snapshot, 0, confs=["default"], min_cap=False, workers=1).limit
    if not (first.process_limit and limit.per_process and limit.low is not None):
        pytest.skip("the device refused, not a per-process cap")
    assert (first.cap_at_least, first.cap_below) == (limit.low, limit.high + 1), path.name
