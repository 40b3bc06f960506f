"""``compare_runs``: two runs side by side at their peaks, in one call.

"Why does run B need more memory than run A?" takes an agent three calls otherwise
(``memory_breakdown`` on each, then ``diff_snapshots`` at the two peak events, found in the
first two answers). This answers it in one: each run's allocated peak (when, how much,
reserved then), its memory by category at that peak, the change per category, and the call
sites whose live memory differs most between the two peaks. It runs the same services as
those tools, and their results are remembered with theirs.
"""

from __future__ import annotations

from memtui.mcp.answers import Answer, Progress, cut
from memtui.mcp.store import SnapshotStore
from memtui.report.format import signed_bytes
from memtui.services.breakdown import BreakdownOptions
from memtui.services.catalog import spec
from memtui.services.diff import DiffOptions
from memtui.units import format_bytes


def compare_runs(store: SnapshotStore, a: str, b: str, device_a: int | None, device_b: int | None, depth: int,
                 top: int, progress: Progress = None) -> Answer:
    from memtui.mcp.tools import remembered  # the tools' cache of service results

    runs = (store.open(a, progress), store.open(b, progress))
    peaks = [remembered(store, spec("breakdown"), (run,), BreakdownOptions(device=device, depth=depth))
             for run, device in zip(runs, (device_a, device_b))]
    sides = [_side(result) for result in peaks]
    at = [p.moment.event if p.moment.event >= 0 else None for p in peaks]
    options = DiffOptions(device_a=peaks[0].dev.device, device_b=peaks[1].dev.device, at_a=at[0], at_b=at[1],
                          top=top, depth=depth)
    found = remembered(store, spec("diff"), runs, options).diff
    diff = found.to_json()
    changed = [s for s in diff["sites"] if s["status"] != "same"]
    omitted: dict = {}
    if len(changed) > top:  # the largest growth and the largest shrink are both worth seeing
        omitted["sites"] = len(changed) - top
        changed = changed[: top - top // 2] + changed[len(changed) - top // 2:]
    names = sorted(set(sides[0]["categories"]) | set(sides[1]["categories"]))
    by_category = {n: sides[1]["categories"].get(n, 0) - sides[0]["categories"].get(n, 0) for n in names}
    data = {"a": sides[0], "b": sides[1],
            "delta_peak_allocated": sides[1]["peak_allocated"] - sides[0]["peak_allocated"],
            "delta_by_category": {n: d for n, d in sorted(by_category.items(), key=lambda kv: -abs(kv[1])) if d},
            "sites": changed, "new_sites": diff["new"], "gone_sites": diff["gone"]}
    for key in ("new_sites", "gone_sites"):
        cut(data, key, top, omitted)
    data["truncated"] = bool(omitted)
    if omitted:
        data["omitted"] = omitted
        data["more"] = "call again with a larger top"
    return Answer("\n".join(_summary(data)), data)


def _side(result) -> dict:
    found, moment = result.result, result.moment
    return {"file": result.snapshot.name, "device": result.dev.device,
            "peak_event": result.dev.shown_index(moment.event) if moment.event >= 0 else None,
            "peak_allocated": found.allocated, "reserved_at_peak": found.reserved,
            "categories": {k: v for k, v in found.categories.items() if v}}


def _summary(data: dict) -> list[str]:
    a, b = data["a"], data["b"]

    def when(side: dict) -> str:
        return f"event {side['peak_event']:,}" if side["peak_event"] is not None else "snapshot time"

    lines = [f"peak allocated: A {format_bytes(a['peak_allocated'])} ({a['file']}, device {a['device']}, "
             f"{when(a)}) -> B {format_bytes(b['peak_allocated'])} ({b['file']}, device {b['device']}, {when(b)}): "
             f"{signed_bytes(data['delta_peak_allocated'])}"]
    moved = list(data["delta_by_category"].items())[:4]
    if moved:
        lines.append("by category at the peaks: " + ", ".join(f"{n} {signed_bytes(d)}" for n, d in moved))
    for s in data["sites"][:3]:
        lines.append(f"  {signed_bytes(s['delta_bytes'])} ({s['status']}) {s['site']}")
    return lines
