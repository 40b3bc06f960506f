"""info's figures against plain numpy on every small file the tests see, and its edge cases."""

import numpy as np
import pytest

from memtui.open import open_snapshot
from memtui.services.info import _time_span
from tests.conftest import sample_files, scenario_files


@pytest.mark.parametrize("path", sample_files() + scenario_files()[:20], ids=lambda p: p.name)
def test_action_counts_and_time_span_equal_plain_numpy(path):
    snapshot = open_snapshot(path)
    names = snapshot.actions.names
    for dev in snapshot.devices:
        action, times = dev.trace.action, dev.trace.time_us
        counts = np.bincount(action.astype(np.int64), minlength=len(names)) if len(action) else []
        assert dev.action_counts(names) == {names[c]: int(n) for c, n in enumerate(counts) if n}
        finite = times[np.isfinite(times)]
        expected = (float(finite.min()), float(finite.max())) if len(finite) else (None, None)
        assert _time_span(times) == expected


def test_time_span_skips_entries_without_a_time():
    assert _time_span(np.array([np.nan, 5.0, 2.0, np.nan])) == (2.0, 5.0)
    assert _time_span(np.array([np.nan, np.nan])) == (None, None)
    assert _time_span(np.zeros(0)) == (None, None)


@pytest.mark.parametrize("rows", [1, 7, 1 << 10])
def test_action_counts_a_piece_at_a_time_equal_plain_numpy(monkeypatch, rows):
    import memtui.model.snapshot as model

    monkeypatch.setattr(model, "COUNT_ROWS", rows)  # pieces that cut the column anywhere
    snapshot = open_snapshot(sample_files()[0])
    names = snapshot.actions.names
    for dev in snapshot.devices:
        counts = np.bincount(dev.trace.action.astype(np.int64), minlength=len(names))
        assert dev.action_counts(names) == {names[c]: int(n) for c, n in enumerate(counts) if n}
