"""One answer per file: ``oom``, ``leaks``, ``cycles`` and ``breakdown`` read the same
evidence (memtui/analysis/trace_evidence.py: whether there is a trace, its steps, its
bursts of frees and their causes), so on every file the tests see they never tell two
stories: the same memory is not a leak to one and an exception's traceback let go, or the
collector's, to another; a file with no trace is "cannot tell" to every question about
time; the collector is named by ``oom`` only when ``cycles`` suspects it; and the steps
``leaks`` samples by are the steps ``breakdown`` cuts at."""

from __future__ import annotations

import numpy as np
import pytest

from memtui.analysis import bursts as bu
from memtui.analysis.breakdown import step_peaks
from memtui.analysis.categories import categorize
from memtui.analysis.live import allocated_curve
from memtui.analysis.trace_evidence import trace_evidence
from tests.conftest import heldout_files, sample_files, scenario_files, shared_files, whatif_files
from tests.fixtures.opened import verdicts


def every_file() -> list:
    # big_trace is left to the timing and invariant tests: a million events, 4 s to open.
    files = scenario_files() + sample_files() + heldout_files()
    files += [p for p in shared_files() if "big_trace" not in p.name]
    # The what-if recordings are long OOM traces (several seconds each): a slow case.
    return [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in files] + [
        pytest.param(p, id=f"{p.parent.name}/{p.name}", marks=pytest.mark.slow) for p in whatif_files()]


def answers(path: str):
    return verdicts(path)


@pytest.mark.parametrize("path", every_file())
def test_the_analyses_agree(path):
    snap, dev, leaks, cycles, ooms = answers(str(path))
    seen = trace_evidence(snap, dev)
    if not seen.traced:
        assert leaks.verdict == cycles.verdict == "cannot tell"
        assert cycles.to_json()["cycles_suspected"] is None and not ooms
        assert any("no trace" in e.text for e in leaks.evidence + cycles.evidence)
        return
    # Memory a burst let go for a reason (a traceback, the collector) is not a site's leak.
    growing = {s.label for s in leaks.growing}
    for b in seen.bursts:
        for g in b.groups:
            if g.cause in (bu.EXCEPTION, bu.CYCLE) and g.confidence != "low":
                assert seen.sites.label(g.site) not in growing, (g.cause, seen.sites.label(g.site))
    for d in ooms:
        if d.freed_after and d.freed_after["cause"] == bu.EXCEPTION:
            assert not any(s.released_at_end and s.growing for s in leaks.sites if s.label in growing
                           and s.label in {seen.sites.label(g.site) for b in seen.bursts for g in b.groups
                                           if b.index == d.freed_after["index"]})
        # The collector is named only when `cycles` says so for the same device.
        if not cycles.suspected:
            assert d.held_by_cycles == 0 and not any("garbage collector" in e.text for e in d.evidence)
    # A cycles verdict and a no-leak verdict about the same burst agree on its cause.
    for b in cycles.bursts:
        assert b.cause == bu.CYCLE
    # The steps: leaks samples by the annotations breakdown cuts at.
    if leaks.points.kind == "annotation" and leaks.points.steps >= 3:
        assert seen.steps is not None and seen.steps[0] == leaks.points.name
        assert len(seen.steps[1]) == leaks.points.steps
        table = categorize(snap, dev)
        cut = step_peaks(snap, dev, allocated_curve(dev, table.spans))
        assert cut is not None and cut[0] == leaks.points.name
    # What is live at the end is the same memory to leaks and to breakdown.
    table = categorize(snap, dev)
    assert leaks.live_bytes == int(np.sum(table.spans.size[table.spans.stop >= len(dev.trace)])) or \
        leaks.live_bytes == dev.allocated


def test_memory_a_caught_oom_let_go_is_not_a_leak(tmp_path):
    # Each of 12 steps keeps 64 MiB in a list local to the failing call; the 13th request
    # fails, the OOM is caught, and the traceback (holding that call's frames, and so the
    # list) is released: the frees' C++ stacks show tb_dealloc. Not a leak, to every command.
    from tests.fixtures.opened import frame, write_snapshot

    mib, base = 1 << 20, 0x7F0000000000
    cpp = [{"filename": "??", "line": 0, "name": "torch::unwind::unwind()"}]
    make = cpp + [{"filename": "??", "line": 0, "name": "_PyEval_EvalFrameDefault"}, frame(20, "run"),
                  frame(5, "<module>")]
    let_go = cpp + [{"filename": "??", "line": 0, "name": "tb_dealloc"},
                    {"filename": "??", "line": 0, "name": "_PyEval_EvalFrameDefault"}, frame(7, "<module>")]
    trace, notes, t = [], [], 1_000_000
    for k in range(12):
        t += 100
        trace.append({"action": "alloc", "addr": base + k * 64 * mib, "size": 64 * mib, "frames": make, "time_us": t})
        for j in range(3):  # the step's temporaries
            t += 10
            trace.append({"action": "alloc", "addr": base + (100 + j) * 64 * mib, "size": mib, "frames": make,
                          "time_us": t})
            t += 10
            for action in ("free_requested", "free_completed"):
                trace.append({"action": action, "addr": base + (100 + j) * 64 * mib, "size": mib,
                              "frames": make, "time_us": t})
        notes.append({"stage": "END", "name": f"memtui.step#{k}", "device": 0, "time_us": t + 1})
    t += 100
    trace.append({"action": "oom", "addr": 0, "size": 64 * mib, "device_free": 0, "frames": make, "time_us": t})
    for k in range(12):
        t += 5
        for action in ("free_requested", "free_completed"):
            trace.append({"action": action, "addr": base + k * 64 * mib, "size": 64 * mib, "frames": let_go,
                          "time_us": t})
    path = write_snapshot(tmp_path / "caught.pickle", [], trace, notes)
    leaks_report = answers(str(path))[2]
    assert leaks_report.verdict != "leak", [e.text for e in leaks_report.evidence]
    assert any("traceback" in e.text for e in leaks_report.evidence)
    test_the_analyses_agree(path)
