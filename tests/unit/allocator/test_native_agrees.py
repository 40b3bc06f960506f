"""The compiled replay loop gives exactly what the Python model gives, on every recording.

Every output is compared: segment events with their addresses, peaks, where it ran out,
the recorded OOMs, retries and the reserved/allocated series; under settings that take
each path of the model (splitting, expandable segments, oversize blocks, rounding, the
garbage collector) with a per-process cap, a device limit and the recorded refusals.
"""

import numpy as np
import pytest

from memtui.allocator import native_replay
from memtui.allocator.replay import replay
from memtui.allocator.settings import parse_conf
from memtui.analysis.whatif_requests import build_requests
from tests.conftest import SAMPLES, sample_files, scenario_files, whatif_files
from tests.fixtures.opened import cached

pytestmark = pytest.mark.skipif(not native_replay.available, reason="memtui built without its compiled part")

CONFS = ("", "expandable_segments:True", "roundup_power2_divisions:[64:8,>:2]",
         "garbage_collection_threshold:0.6,max_split_size_mb:64")


def outcome(o):
    return (o.events, o.reserved_peak, o.peak_event, o.active_at_peak, o.allocated_at_peak, o.oom_event,
            o.oom_size, o.recorded_ooms, o.stopped_at, o.retries, o.series_reserved.tolist(),
            o.series_allocated.tolist())


def compare_on(files) -> int:
    compared = 0
    for path in files:
        snapshot = cached(str(path))
        for dev in snapshot.devices:
            if not len(dev.trace):
                continue
            requests = build_requests(dev)
            peak = replay(requests, parse_conf(""), native=False).reserved_peak
            for conf in CONFS:
                for limit, per_process, hints in ((None, False, True), (int(peak * 0.8), True, False),
                                                  (int(peak * 0.9), False, False)):
                    kw = dict(limit=limit, per_process=per_process, use_hints=hints,
                              hints_per_process=requests.process_cap, series=True)
                    python = replay(requests, parse_conf(conf), native=False, **kw)
                    compiled = replay(requests, parse_conf(conf), native=True, **kw)
                    assert outcome(compiled) == outcome(python), (path.name, conf, limit, per_process)
                    compared += 1
    return compared


def test_compiled_and_python_replays_agree_on_every_sample():
    # A scenario recorded with C++ stacks (_all) makes the same requests as its Python twin (_py).
    files = sample_files() + [p for p in scenario_files() if not p.name.endswith("_all.pickle.xz")]
    assert compare_on(files) > 600


@pytest.mark.slow
def test_compiled_and_python_replays_agree_on_the_whatif_truth_set():
    assert compare_on(whatif_files()) > 300


def test_a_trace_that_starts_mid_run_agrees_too():
    path = SAMPLES / "recorded" / "ring_wrapped.pickle.xz"
    snapshot = cached(str(path))
    dev = snapshot.devices[snapshot.default_device()]
    requests = build_requests(dev)
    assert requests.initial, "the ring buffer wrapped: the replay starts from the reconstructed state"
    for conf in CONFS:
        python = replay(requests, parse_conf(conf), native=False, series=True)
        compiled = replay(requests, parse_conf(conf), native=True, series=True)
        assert outcome(compiled) == outcome(python)
        assert np.all(python.series_reserved >= python.series_allocated)


def test_the_simulated_state_is_the_same_from_both_loops():
    from memtui.allocator.replay import Stepper
    from memtui.analysis.whatif_state import SimulatedRun, state_of

    for name in ("scenarios/oom_growing_batch_expandable_py", "multistream", "recorded/ring_wrapped"):
        snapshot = cached(str(SAMPLES / f"{name}.pickle.xz"))
        dev = snapshot.devices[snapshot.default_device()]
        requests = build_requests(dev)
        for conf in ("", "expandable_segments:True"):
            run = SimulatedRun(requests, parse_conf(conf))
            for event in range(0, len(dev.trace), max(1, len(dev.trace) // 7)):
                stepper = Stepper(requests, parse_conf(conf))
                stepper.run(event)
                python, compiled = state_of(stepper, event), run.state_at(event)
                for field in ("seg_addr", "seg_size", "seg_stream", "seg_expandable", "blk_addr", "blk_size",
                              "blk_state", "blk_life", "blk_segment"):
                    assert getattr(python, field).tolist() == getattr(compiled, field).tolist(), (name, conf, field)
