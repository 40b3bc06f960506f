"""The explorer places annotations among events only where every time is finite and
ordered: one pass that agrees with the two checks it stands for."""

from __future__ import annotations

import numpy as np
import pytest

from memtui.tui.views.device_view import _finite_and_ordered

INF, NAN = float("inf"), float("nan")


def reference(times: np.ndarray) -> bool:
    return bool(np.isfinite(times).all() and not np.less(times[1:], times[:-1]).any())


@pytest.mark.parametrize("times", [[1.0], [NAN], [INF], [-INF], [1, NAN, 2], [1, INF], [-INF, 1], [1, 2, 2, 3],
                                   [3, 2], [1, INF, INF], [-INF, -INF, 1], [NAN, NAN], [1, 2, NAN], [0, 0, 0]])
def test_the_edges(times):
    column = np.asarray(times, float)
    assert _finite_and_ordered(column) == reference(column)


def test_random_columns_of_times():
    rng = np.random.default_rng(7)
    for _ in range(2000):
        column = np.sort(rng.integers(0, 5, rng.integers(1, 8)).astype(float))
        if rng.random() < 0.5:
            column[rng.integers(0, len(column))] = rng.choice([NAN, INF, -INF, -1.0, 9.0])
        assert _finite_and_ordered(column) == reference(column), column
