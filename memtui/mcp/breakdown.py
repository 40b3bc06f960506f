"""The ``memory_breakdown`` tool: allocated memory by category, as ``memtui breakdown --json`` prints it.

Kept apart from :mod:`memtui.mcp.tools` because it builds on :mod:`memtui.commands.breakdown`:
where that command is absent, the server lists the other tools without this one.
"""

from __future__ import annotations

from memtui.analysis.breakdown import resolve_moment
from memtui.analysis.category_rules import load_rules
from memtui.commands.breakdown import BreakdownReport, steps_json
from memtui.errors import UsageError
from memtui.mcp.store import SnapshotStore
from memtui.mcp.tools import MAX_LIMIT, Answer, Progress, bounded, cut, valid_depth
from memtui.units import format_bytes


def memory_breakdown(store: SnapshotStore, path: str, at: str = "peak", device: int | None = None,
                     by: str = "category", top: int = 3, steps: bool = False, depth: int = 1,
                     progress: Progress = None) -> Answer:
    if by not in ("category", "site"):
        raise UsageError(f"by: {by!r} is neither 'category' nor 'site'")
    top, depth = min(max(top, 0), MAX_LIMIT), valid_depth(depth)
    rules = load_rules(None)  # the user's own rules file, as the command line reads it
    snapshot = store.open(path, progress)
    dev = snapshot.devices[snapshot.device_or_default(device)]
    report = BreakdownReport(snapshot, dev, rules, depth)
    moment = resolve_moment(snapshot, dev, at, report.curve)
    result = report.at(moment, top)
    data = result.to_json(by=by)
    data["rules"] = rules.source or None
    if steps:
        found = report.steps(top)
        if found is not None:
            data["steps"] = steps_json(found)
    omitted: dict = {}
    cut(data, "sites", MAX_LIMIT, omitted)
    if "steps" in data:
        cut(data["steps"], "steps", MAX_LIMIT, omitted, "steps.steps")
    where = f"after event {dev.shown_index(moment.event):,}" if moment.event >= 0 else "at snapshot time"
    total = max(result.allocated, 1)
    lines = [f"device {dev.device}, {moment.name} ({where}): allocated {format_bytes(result.allocated)} of"
             f" {format_bytes(result.reserved)} reserved, {format_bytes(result.cached_free)} cached free"]
    shares = sorted(((v, k) for k, v in result.categories.items() if v), reverse=True)
    lines.append(", ".join(f"{k} {format_bytes(v)} ({100 * v / total:.0f}%)" for v, k in shares) or "nothing allocated")
    biggest = result.top_sites.get(shares[0][1], []) if shares else []
    if biggest:
        lines.append(f"largest {shares[0][1]} call site: {biggest[0].label} ({format_bytes(biggest[0].bytes)})")
    return bounded(lines, data, omitted, f"only the first {MAX_LIMIT} are listed")
