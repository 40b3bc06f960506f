"""``memory_by_annotation``: allocated memory over each annotated stage of a run.

torch records ``record_function`` ranges and ``memtui.record.step()`` markers as START/END
annotations (``Optimizer.step#AdamW.step``, ``memtui.step#12``). For each name this says
how often the stage ran and what it did to allocated memory: the most it rose inside one
run of it (peak minus allocated at its start), what it left behind (allocated at its end
minus at its start), and the highest peak reached inside it, with the run where that
happened. A stage name repeats with its number after ``#`` for memtui's steps; those are
one stage. The stages are placed among the trace's events by time, as everywhere else
(:func:`memtui.analysis.categories.annotation_spans`).
"""

from __future__ import annotations

import numpy as np

from memtui.analysis.categories import annotation_spans
from memtui.analysis.live import allocated_curve
from memtui.errors import UsageError
from memtui.mcp.answers import Answer
from memtui.model import Snapshot
from memtui.report.format import signed_bytes
from memtui.services.common import device_index
from memtui.units import format_bytes


def stage_of(name: str) -> tuple[str, str, bool]:
    """(stage, the prefix its runs' names start with, whether the name is the prefix exactly):
    ``memtui.step#12`` is a run of ``memtui.step``; torch's ``Optimizer.step#AdamW.step`` is its own."""
    head, _, tail = name.partition("#")
    return (head, head + "#", False) if tail.isdigit() else (name, name, True)


def memory_by_annotation(snapshot: Snapshot, device: int | None, top: int) -> Answer:
    dev = snapshot.devices[device_index(snapshot, device)]
    names = sorted({a.name for a in snapshot.annotations if a.device == dev.device and a.stage == "START"})
    if not names:
        raise UsageError(f"{snapshot.name} device {dev.device}: no annotations (record_function ranges or "
                         "memtui.record.step() markers) in this snapshot")
    curve = allocated_curve(dev)
    stages: dict[str, dict] = {}
    for name, prefix, exact in sorted({stage_of(n) for n in names}):
        for lo, hi in annotation_spans(snapshot, dev, prefix, exact):
            if lo > hi or not len(curve):
                continue  # no event inside the stage: it did nothing to memory that was recorded
            start = int(curve[lo - 1]) if lo > 0 else 0
            peak_at = lo + int(np.argmax(curve[lo:hi + 1]))
            stage = stages.setdefault(name, {"name": name, "runs": 0, "most_rise": 0, "most_left": None,
                                             "least_left": None, "peak": -1})
            stage["runs"] += 1
            left = int(curve[hi]) - start
            stage["most_rise"] = max(stage["most_rise"], int(curve[peak_at]) - start)
            stage["most_left"] = left if stage["most_left"] is None else max(stage["most_left"], left)
            stage["least_left"] = left if stage["least_left"] is None else min(stage["least_left"], left)
            if int(curve[peak_at]) > stage["peak"]:
                stage.update(peak=int(curve[peak_at]), peak_event=dev.shown_index(peak_at),
                             peak_run=f"events {dev.shown_index(lo):,}..{dev.shown_index(hi):,}")
    rows = sorted(stages.values(), key=lambda s: -s["most_rise"])
    data = {"device": dev.device, "stages": rows[:top], "total": len(rows), "truncated": len(rows) > top}
    if data["truncated"]:
        data["omitted"] = {"stages": len(rows) - top}
        data["more"] = "call again with a larger top"
    lines = [f"device {dev.device}: {len(rows)} annotated stage{'s' if len(rows) != 1 else ''}, the largest rise "
             "of allocated memory inside one run first:"]
    lines += [f"  {s['name']} ({s['runs']:,} runs): rose up to {format_bytes(s['most_rise'])}, left "
              f"{signed_bytes(s['least_left'])} to {signed_bytes(s['most_left'])} behind; peak "
              f"{format_bytes(s['peak'])} at event {s['peak_event']:,}" for s in rows[:5]]
    return Answer("\n".join(lines), data)
