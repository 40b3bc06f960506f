"""info's figures against plain numpy on every small file the tests see, whole and cut into
slices anywhere, on one thread and on several, and their edge cases."""

import numpy as np
import pytest

import memtui.model.slices as slices
from memtui.model import actions as act
from memtui.model import trace_figures
from memtui.open import open_snapshot
from memtui.services.info import summarize
from tests.conftest import sample_files, scenario_files
from tests.fixtures.opened import cached


def plain_figures(dev, names):
    """What the figures are, one plain numpy expression each over the whole columns."""
    action, times = dev.trace.action, dev.trace.time_us
    counts = np.bincount(action.astype(np.int64), minlength=len(names)) if len(action) else []
    finite = times[np.isfinite(times)]
    lives = dev.lives
    return {
        "actions": {names[c]: int(n) for c, n in enumerate(counts) if n},
        "ooms": np.nonzero(action == act.OOM)[0].tolist(),
        "span": (float(finite.min()), float(finite.max())) if len(finite) else (None, None),
        "forward": int(np.count_nonzero(dev.trace.fwd >= 0)),
        "live_at_end": int(np.count_nonzero(dev.block_version != -1)) if dev.partial_trace
        else int(np.count_nonzero((lives.start != -1) & (lives.end == -1))),
    }


def summary_figures(summary_device):
    trace = summary_device["trace"]
    return {"actions": trace["actions"], "ooms": [o["index"] for o in trace["ooms"]],
            "span": (trace["first_time_us"], trace["last_time_us"]), "forward": trace["forward_frames"],
            "live_at_end": trace["live_at_end"]}


def assert_info_figures_are_plain(path, opened=open_snapshot):
    snapshot = opened(path)
    summary = summarize(snapshot)
    for dev, shown in zip(snapshot.present_devices, summary["devices"]):
        assert summary_figures(shown) == plain_figures(dev, snapshot.actions.names)


@pytest.mark.parametrize("path", sample_files() + scenario_files()[:20], ids=lambda p: p.name)
def test_info_figures_equal_plain_numpy(path):
    # The model opened once per process (tests/fixtures/opened.py); the slice cases below
    # open their own, under the slicing they set.
    assert_info_figures_are_plain(path, lambda p: cached(str(p)))


@pytest.mark.parametrize("rows", [1, 7, 1 << 10])
def test_figures_of_slices_on_threads_equal_plain_numpy(monkeypatch, rows):
    monkeypatch.setattr(slices, "SLICE_ROWS", rows)  # slices that cut the columns anywhere
    monkeypatch.setattr(slices, "usable_cores", lambda: 4)  # and more than one thread
    # an OOM among them (times missing in some slices: the synthetic time-span test below)
    for path in [p for p in sample_files() if p.name.startswith(("oom_training", "annotate", "ring_wrapped"))]:
        assert_info_figures_are_plain(path)


@pytest.mark.parametrize("rows", [1, 2, 1 << 18])
def test_time_span_skips_entries_without_a_time_in_any_slice(monkeypatch, rows):
    monkeypatch.setattr(slices, "SLICE_ROWS", rows)
    monkeypatch.setattr(slices, "usable_cores", lambda: 3)

    def span(times):
        return trace_figures.time_span(np.array(times, float))

    assert span([np.nan, 5.0, 2.0, np.nan]) == (2.0, 5.0)
    assert span([np.nan, np.nan, np.nan, 7.0]) == (7.0, 7.0)
    assert span([np.nan, np.nan]) is None
    assert span([]) is None


def test_an_empty_trace_has_empty_figures():
    none = np.zeros(0, np.int8)
    assert len(trace_figures.action_counts(none)) == len(trace_figures.oom_indices(none)) == 0
    assert (trace_figures.time_span(np.zeros(0)), trace_figures.forward_frames(none)) == (None, 0)
