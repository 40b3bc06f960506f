"""Counts of one read as one: ``1 sample``, ``1 call site differs``, ``over 1 rank``, and an
``--at oom:2`` on a file with one OOM says there is only one."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from memtui.analysis.moments import _ordinal
from memtui.analysis.ranks import _outlier_reasons
from memtui.analysis.steps import StepPoints
from memtui.errors import UsageError
from memtui.report.leaks import describe_points
from memtui.report.ranks import histogram_lines


def test_one_of_each_is_singular():
    with pytest.raises(UsageError, match=r"--at oom:2: there is only 1$"):
        _ordinal("2", 1, "--at oom:2")
    with pytest.raises(UsageError, match=r"there are 3 \(1 to 3\)"):
        _ordinal("4", 3, "--at oom:4")
    rank = {"peak_allocated": 100, "ooms": []}
    assert _outlier_reasons(rank, rank, [{"site": "a"}]) == ["1 call site differs from the ranks' median"]
    two = _outlier_reasons(rank, rank, [{"site": "a"}, {"site": "b"}])
    assert two == ["2 call sites differ from the ranks' median"]
    one = SimpleNamespace(points=StepPoints("annotation", "step", np.array([3]), 1))
    assert describe_points(one) == "1 point over 1 step (end of each 'step')"
    assert histogram_lines([{"low": 0, "high": 1, "count": 1, "outliers": []}], 1)[0] == "peak allocated over 1 rank:"
