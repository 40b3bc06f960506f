"""breakdown: where the memory goes at one moment, in the model's terms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memtui.analysis.breakdown import (
    Breakdown,
    StepPeak,
    breakdown,
    category_values_at,
    live_from_spans,
    step_peaks,
    unknown_note,
)
from memtui.analysis.callsites import CallSites
from memtui.analysis.categories import CategoryTable, categorize
from memtui.analysis.category_rules import CategoryRules, load_rules
from memtui.analysis.live import allocated_curve, reserved_curve
from memtui.analysis.live_tree import TreeNode, format_tree, live_tree
from memtui.analysis.moments import Moment, resolve_moment
from memtui.model import DeviceModel, Snapshot
from memtui.model.snapshot import SOURCE_END
from memtui.report.sections import Lines, Report
from memtui.services.common import depth_option, device_index, device_option, over_time, top_option
from memtui.services.options import option
from memtui.units import format_bytes

SHORT = {"parameters": "params", "gradients": "grads", "optimizer_state": "optim", "activations": "activ",
         "temporaries": "temp", "other": "other", "unknown": "unknown"}
BY = ("category", "site", "both", "tree")
# The marker that ends a step, and each step's peak with the bytes per category there.
Steps = tuple[str, list[tuple[StepPeak, "StepBreakdown"]]]


@dataclass(frozen=True)
class BreakdownOptions:
    at: str = option("peak", "the moment: peak (allocated, the default), end, oom (oom:N), step:N (step:last) or a "
                             "trace event number", kind="moment", metavar="WHEN")
    device: int | None = device_option()
    by: str = option("category", "category: each category with its top call sites (default); site: the top call "
                                 "sites with their category mix; both; tree: the live set as a call tree",
                     kind="choice", choices=BY)
    # A rules file is read from anywhere: the command line's alone (the MCP server reads only under its roots).
    categories: str | None = option(None, "your category rules (TOML), tried before the built-in ones (default: "
                                          "$XDG_CONFIG_HOME/memtui/categories.toml when it exists)", kind="str",
                                    optional=True, metavar="FILE", front_ends=("cli",), check=load_rules)
    steps: bool = option(False, "also the breakdown at each step's peak (step markers or optimizer annotations)",
                         kind="bool")
    top: int = top_option(3, "call sites per category (default 3)")
    min_share: float = option(1.0, "--by tree: fold nodes under this share of the total (default 1 percent)",
                              kind="float", low=0, high=100, metavar="PCT")
    depth: int = depth_option()


@dataclass
class BreakdownResult:
    snapshot: Snapshot
    dev: DeviceModel
    options: BreakdownOptions
    rules: CategoryRules
    calculator: BreakdownReport
    moment: Moment
    result: Breakdown
    steps: Steps | None

    def to_json(self) -> dict[str, Any]:
        out = self.result.to_json(by="site" if self.options.by == "site" else "category")
        out["rules"] = self.rules.source or None
        if self.options.by == "tree":
            root = self.calculator.tree(self.moment)
            out["tree"] = root.to_json(self.calculator.table.names, int(root.bytes * self.options.min_share / 100))
        if self.steps is not None:
            out["steps"] = steps_json(self.steps)
        return out

    def report(self) -> Report:
        by, result, names = self.options.by, self.result, self.calculator.table.names
        lines = header(self.snapshot, self.dev, result, self.rules)
        if by in ("category", "both"):
            lines += [""] + category_lines(result, self.options.top)
        if by in ("site", "both"):
            lines += [""] + site_lines(result, names)
        if by == "tree":
            root = self.calculator.tree(self.moment)
            lines += [""] + format_tree(root, names, self.options.min_share / 100, short_names=SHORT)
        if self.steps is not None:
            lines += [""] + step_lines(self.steps)
        note = unknown_note(result)
        if note:
            lines += ["", note]
        return Report("Breakdown", [Lines("breakdown", lines=lines)])


def breakdown_at(snapshot: Snapshot, options: BreakdownOptions) -> BreakdownResult:
    rules = load_rules(options.categories)
    dev = snapshot.devices[device_index(snapshot, options.device)]
    calculator = BreakdownReport(snapshot, dev, rules, options.depth)
    moment = resolve_moment(snapshot, dev, options.at, lambda: calculator.curve)
    result = calculator.at(moment, options.top)
    if options.steps:
        over_time(dev, "--steps")
    steps = calculator.steps() if options.steps else None
    return BreakdownResult(snapshot, dev, options, rules, calculator, moment, result, steps)


class BreakdownReport:
    """One device's categories, curves and call sites, computed once for any number of moments."""

    def __init__(self, snapshot: Snapshot, dev: DeviceModel, rules: CategoryRules | None = None,
                 depth: int = 1) -> None:
        self.snapshot, self.dev = snapshot, dev
        self.table: CategoryTable = categorize(snapshot, dev, rules)
        self.curve = allocated_curve(dev, self.table.spans)
        self.reserved = reserved_curve(dev)
        self.sites = CallSites(snapshot.stacks, depth)

    def at(self, moment: Moment, top: int) -> Breakdown:
        live = live_from_spans(self.table, self.dev, moment.event)
        # reserved_curve is the snapshot's own figure throughout for a filtered export (partial trace).
        reserved = int(self.reserved[moment.event]) if moment.event >= 0 and len(self.reserved) else \
            self.dev.reserved
        return breakdown(self.snapshot, self.dev, self.table, live, moment, reserved, self.sites, top)

    def tree(self, moment: Moment) -> TreeNode:
        live = live_from_spans(self.table, self.dev, moment.event)
        return live_tree(self.snapshot, live, len(self.table.names))

    def steps(self, top: int = 0) -> tuple[str, list[tuple[StepPeak, StepBreakdown]]] | None:
        """Bytes per category at each step's peak: one pass over the lives for all the steps
        (a long run has thousands). ``top`` is kept for callers; steps list no call sites.
        None for a filtered export, which has no peaks of its own (NOT_REPLAYED)."""
        if self.dev.partial_trace:
            return None
        found = step_peaks(self.snapshot, self.dev, self.curve)
        if found is None:
            return None
        name, peaks = found
        events = np.array([p.peak for p in peaks], np.int64)
        values = category_values_at(self.table, self.dev, events) if len(events) else np.zeros((0, 0), np.int64)
        names = self.table.names
        rows = []
        for k, p in enumerate(peaks):
            categories = {n: int(values[c, k]) for c, n in enumerate(names)}
            rows.append((p, StepBreakdown(Moment(p.peak, f"step {p.step} peak"), int(sum(categories.values())),
                                          categories)))
        return name, rows


@dataclass
class StepBreakdown:
    """Bytes per category at one step's peak."""

    moment: Moment
    allocated: int
    categories: dict[str, int]


def header(snapshot: Snapshot, dev: DeviceModel, result: Breakdown, rules: CategoryRules) -> list[str]:
    n = len(dev.trace)
    i = result.moment.event
    what = {"peak": "the allocated peak", "end": "the end of the trace", "event": "event"}.get(
        result.moment.name, result.moment.name)
    where = f"{what}, after event {dev.shown_index(i):,} of {n:,}" if i >= 0 else "the snapshot's own state"
    if result.moment.name == "event" and i >= 0:
        where = f"after event {dev.shown_index(i):,} of {n:,}"
    if dev.partial_trace:
        where = SOURCE_END
    lines = [f"{snapshot.name} · device {dev.device} · {where}",
             f"allocated {format_bytes(result.allocated)} of {format_bytes(result.reserved)} reserved; "
             f"{format_bytes(result.cached_free)} cached free"
             + (f", {format_bytes(result.pending_free)} pending free" if result.pending_free else "")]
    if rules.source:
        lines.append(f"rules: {rules.source} ({len(rules)} rule{'s' if len(rules) != 1 else ''}, tried first)")
    return lines


def category_lines(result: Breakdown, top: int) -> list[str]:
    total = max(result.allocated, 1)
    sites = "  largest call sites" if top else ""
    lines = [f"{'category':<16} {'bytes':>11} {'share':>6} {'allocations':>12}{sites}"]
    for name, value in result.categories.items():
        if not value:
            continue
        count = result.counts[name]
        lines.append(f"{name:<16} {format_bytes(value):>11} {100 * value / total:5.1f}% {count:>12,}")
        for site in result.top_sites.get(name, [])[:top]:
            lines.append(f"{'':<16} {format_bytes(site.bytes):>11} {'':>6} {site.count:>12,}  {site.label}")
    if not any(result.categories.values()):
        lines.append("(nothing allocated)")
    lines.append(f"{'cached free':<16} {format_bytes(result.cached_free):>11}   reserved, not allocated")
    return lines


def site_lines(result: Breakdown, names: list[str]) -> list[str]:
    lines = [f"{'bytes':>11} {'count':>6}  {'categories':<28} call site"]
    for site in result.sites:
        mix = ", ".join(f"{SHORT.get(k, k)} {100 * v / max(site.bytes, 1):.0f}%"
                        for k, v in sorted(site.categories.items(), key=lambda kv: -kv[1]))
        lines.append(f"{format_bytes(site.bytes):>11} {site.count:>6,}  {mix:<28} {site.label}")
    return lines


MAX_STEP_LINES = 24


def step_lines(steps: Steps) -> list[str]:
    name, rows = steps
    if not rows:
        return [f"steps ('{name}'): none"]
    shown_rows = rows
    if len(rows) > MAX_STEP_LINES:  # evenly spread, first and last kept; --json has every step
        picked = np.unique(np.rint(np.linspace(0, len(rows) - 1, MAX_STEP_LINES)).astype(np.int64))
        shown_rows = [rows[int(k)] for k in picked]
    names = [n for n in rows[0][1].categories]
    shown = [n for n in names if any(b.categories[n] for _, b in rows)]
    more = f"; {len(shown_rows)} of {len(rows):,} steps shown, --json has all" if len(shown_rows) < len(rows) else ""
    lines = [f"at each step's peak (steps end at '{name}'{more}):",
             f"{'step':>4} {'event':>9} {'allocated':>11} " + " ".join(f"{SHORT.get(n, n)[:9]:>9}" for n in shown)]
    for peak, b in shown_rows:
        lines.append(f"{peak.step:>4} {b.moment.event:>9,} {format_bytes(b.allocated):>11} "
                     + " ".join(f"{_short_bytes(b.categories[n]):>9}" for n in shown))
    return lines


def steps_json(steps: Steps) -> dict[str, Any]:
    name, rows = steps
    return {"marker": name, "steps": [
        {"step": p.step, "first": p.first, "last": p.last, "event": p.peak, "allocated": b.allocated,
         "categories": b.categories} for p, b in rows]}


def _short_bytes(n: int) -> str:
    text = format_bytes(n)
    number, _, unit = text.partition(" ")
    if "." in number and len(text) > 9:
        number = f"{float(number):.0f}"
    return f"{number} {unit.replace('iB', '')}".strip() if n else "0"


def categories_at(snapshot: Snapshot, dev: DeviceModel, event: int,
                  rules: CategoryRules | None = None) -> dict[str, int]:
    """Bytes per category after ``event`` (a convenience for scripts and tests)."""
    report = BreakdownReport(snapshot, dev, rules)
    return report.at(Moment(int(np.clip(event, -1, max(len(dev.trace) - 1, -1))), "event"), 0).categories
