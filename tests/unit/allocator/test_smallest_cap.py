"""The smallest cap, where completing under a cap is not monotonic in the cap.

whisper_growing_batch (sample_snapshots/whatif2) under torch's defaults completes under a
1.91 GB cap and runs out under 1.99 GB, as GPU runs at those caps showed (docs/whatif.md):
a bisection alone can stop below a cap that runs out."""

from __future__ import annotations

from memtui.allocator.replay import replay
from memtui.allocator.settings import AllocatorSettings
from memtui.analysis.whatif import smallest_cap
from memtui.analysis.whatif_requests import build_requests
from tests.conftest import SAMPLES
from tests.fixtures.opened import cached


def _fits(requests, settings, cap: int) -> bool:
    return replay(requests, settings, limit=cap, per_process=True).oom_event is None


def test_the_answer_is_above_every_cap_found_to_run_out_and_the_lower_window_is_said():
    snapshot = cached(str(SAMPLES / "whatif2" / "whisper_growing_batch.pickle.xz"))
    requests = build_requests(snapshot.devices[snapshot.default_device()])
    settings = AllocatorSettings()
    cap, lowest = smallest_cap(requests, settings, replay(requests, settings))
    assert cap is not None and lowest is not None and lowest < cap
    assert _fits(requests, settings, cap) and _fits(requests, settings, lowest)
    assert _fits(requests, settings, 1_910_000_000) and not _fits(requests, settings, 1_990_000_000)  # as on the GPU
    assert lowest < 1_990_000_000 < cap
    step = (cap - lowest) // 8
    assert not all(_fits(requests, settings, lowest + step * k) for k in range(1, 8))  # between them, one runs out


def test_where_completing_is_monotonic_there_is_no_lower_window():
    snapshot = cached(str(SAMPLES / "whatif2" / "alternating_big_buffers.pickle.xz"))
    requests = build_requests(snapshot.devices[snapshot.default_device()])
    settings = AllocatorSettings()
    cap, lowest = smallest_cap(requests, settings, replay(requests, settings))
    assert cap is not None and lowest is None
    assert _fits(requests, settings, cap) and not _fits(requests, settings, int(cap * 0.97))


def test_every_view_words_the_lower_cap_alike():
    from memtui.analysis.whatif import Scenario
    from memtui.services.whatif import fits_in

    base = dict(settings="", reserved_peak=1, peak_event=0, fragmentation_at_peak=0, oom_event=None,
                passes_recorded_oom=None, stopped_at=None, retries=0)
    assert fits_in(Scenario(**base, min_cap_bytes=None)) == "?"
    assert fits_in(Scenario(**base, min_cap_bytes=2 << 30)) == "2.00 GiB"
    assert fits_in(Scenario(**base, min_cap_bytes=2 << 30, min_cap_lowest_bytes=1 << 30)) == \
        "2.00 GiB (also 1.00 GiB, not between)"


def test_a_trace_that_starts_mid_run_never_fits_in_less_than_it_allocated():
    """The replay of a trace that starts mid-run starts from the recorded layout; a cap below
    it is no answer (it once reported 140 MiB for a run that allocated 187 MiB): the smallest
    cap is at least the allocated peak, on every bundled recording that starts mid-run."""
    from memtui.analysis.live import allocated_curve
    from memtui.analysis.whatif import what_if
    from memtui.analysis.whatif_requests import build_requests
    from tests.conftest import sample_files
    from tests.fixtures.opened import cached

    checked = 0
    for path in sample_files():
        snapshot = cached(str(path))
        for dev in snapshot.devices:
            if not len(dev.trace) or dev.partial_trace or not build_requests(dev).initial:
                continue
            (scenario,) = what_if(snapshot, dev.device, confs=["default"], workers=1).scenarios
            assert scenario.min_cap_bytes is None or scenario.min_cap_bytes >= int(allocated_curve(dev).max()), path
            checked += 1
    assert checked >= 3
