"""Without steps, the leaks text counts what it sampled as it was sampled.

A trace with no step annotations and no repeated statement is sampled at the end of each
time window that holds events; windows without one share the sample before them. The
evidence said "kept more in 8 of 9 time windows" and "the run's 4 time windows" where it
meant the parts between its samples, of ten windows asked; the line under it said "5
points, one per time window". Now the evidence names its samples and the parts between
them, and the line its points, with the same count.
"""

from __future__ import annotations

import re

from memtui.analysis.leaks import PARTS, find_leaks
from memtui.analysis.steps import iteration_marks
from memtui.report.leaks import describe_points
from tests.conftest import sample_files, scenario_files
from tests.fixtures.opened import cached


def _time_sampled() -> list[tuple[str, int]]:
    """Every device of the samples and scenarios sampled by time windows."""
    found = []
    for path in [*sample_files(), *scenario_files()]:
        snapshot = cached(str(path))
        for device in snapshot.present_devices:
            if len(device.trace) > 1 and iteration_marks(snapshot, device) is None:
                found.append((str(path), device.device))
    return found


def test_the_evidence_counts_its_samples_and_parts_as_the_points_line_does():
    checked = 0
    for path, device in _time_sampled():
        snapshot = cached(path)
        report = find_leaks(snapshot, snapshot.devices[device])
        if report.points.kind != "time":
            continue  # no times either: windows of events
        checked += 1
        points = len(report.points)
        text = " ".join(e.text for e in report.evidence)
        assert describe_points(report).startswith(f"{points} point"), path
        said = re.search(r"(\d+) samples?[,)]", text)
        assert said is not None and int(said.group(1)) == points, (path, text)
        parts = re.search(r"of the run's (\d+) parts|all through the run's (\d+) parts", text)
        if points >= 4:  # fewer: "too few to tell", no parts
            assert parts is not None, (path, text)
            assert int(parts.group(1) or parts.group(2)) == min(PARTS, points - 1), (path, text)
    assert checked >= 5  # the scenarios without steps
