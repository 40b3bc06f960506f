"""memtui breakdown: where the memory goes at one moment, in the model's terms."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.analysis.breakdown import (
    Breakdown,
    Moment,
    StepPeak,
    breakdown,
    category_values_at,
    live_from_spans,
    resolve_moment,
    step_peaks,
    unknown_note,
)
from memtui.analysis.callsites import CallSites
from memtui.analysis.categories import CategoryTable, categorize
from memtui.analysis.category_rules import CategoryRules, load_rules
from memtui.analysis.live import allocated_curve, reserved_curve
from memtui.analysis.live_tree import format_tree, live_tree
from memtui.commands._common import add_json_flag, add_snapshot_argument, device_or_error, load, print_json
from memtui.commands._report import add_depth_option, add_device_option, check_depth
from memtui.errors import UsageError
from memtui.model import DeviceModel, Snapshot
from memtui.units import format_bytes

NAME = "breakdown"
HELP = ("Allocated memory by category (parameters, gradients, optimizer state, activations, ...) at the peak, "
        "the end, an OOM or any event, with the call sites behind each.")
SHORT = {"parameters": "params", "gradients": "grads", "optimizer_state": "optim", "activations": "activ",
         "temporaries": "temp", "other": "other", "unknown": "unknown"}
BY = ("category", "site", "both", "tree")


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    parser.add_argument("--at", default="peak", metavar="WHEN",
                        help="peak (allocated, the default), end, oom (oom:N), step:N (step:last) or an event number")
    add_device_option(parser)
    parser.add_argument("--by", choices=BY, default="category",
                        help="category: each category with its top call sites (default); site: the top call "
                             "sites with their category mix; both; tree: the live set as a call tree")
    parser.add_argument("--categories", metavar="FILE",
                        help="your category rules (TOML), tried before the built-in ones (default: "
                             "$XDG_CONFIG_HOME/memtui/categories.toml when it exists)")
    parser.add_argument("--steps", action="store_true",
                        help="also the breakdown at each step's peak (step markers or optimizer annotations)")
    parser.add_argument("--top", type=int, default=3, help="call sites per category (default 3)")
    parser.add_argument("--min-share", type=float, default=1.0, metavar="PCT",
                        help="--by tree: fold nodes under this share of the total (default 1 percent)")
    add_depth_option(parser)
    add_json_flag(parser)


def run(args) -> int:
    rules = load_rules(args.categories)
    snapshot = load(args.snapshot, args.model_cache)
    dev = snapshot.devices[device_or_error(snapshot, args.device)]
    if args.top < 0:
        raise UsageError("--top must be 0 or more")
    if not 0 <= args.min_share <= 100:
        raise UsageError("--min-share is a percentage, 0 to 100")
    report = BreakdownReport(snapshot, dev, rules, check_depth(args.depth))
    moment = resolve_moment(snapshot, dev, args.at, report.curve)
    result = report.at(moment, max(args.top, 0))
    steps = report.steps() if args.steps else None
    if args.json:
        out = result.to_json(by="site" if args.by == "site" else "category")
        out["rules"] = rules.source or None
        if args.by == "tree":
            root = report.tree(moment)
            out["tree"] = root.to_json(report.table.names, int(root.bytes * args.min_share / 100))
        if steps is not None:
            out["steps"] = steps_json(steps)
        print_json(out)
        return 0
    lines = header(snapshot, dev, result, rules)
    if args.by in ("category", "both"):
        lines += [""] + category_lines(result, args.top)
    if args.by in ("site", "both"):
        lines += [""] + site_lines(result, report.table.names)
    if args.by == "tree":
        root = report.tree(moment)
        lines += [""] + format_tree(root, report.table.names, args.min_share / 100, short_names=SHORT)
    if steps is not None:
        lines += [""] + step_lines(steps)
    note = unknown_note(result)
    if note:
        lines += ["", note]
    print("\n".join(lines))
    return 0


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
        reserved = int(self.reserved[moment.event]) if moment.event >= 0 and len(self.reserved) else \
            self.dev.reserved
        if self.dev.partial_trace:
            reserved = self.dev.reserved
        return breakdown(self.snapshot, self.dev, self.table, live, moment, reserved, self.sites, top)

    def tree(self, moment: Moment):
        live = live_from_spans(self.table, self.dev, moment.event)
        return live_tree(self.snapshot, live, len(self.table.names))

    def steps(self, top: int = 0) -> tuple[str, list[tuple[StepPeak, StepBreakdown]]] | None:
        """Bytes per category at each step's peak: one pass over the lives for all the steps
        (a long run has thousands). ``top`` is kept for callers; steps list no call sites."""
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


def step_lines(steps) -> list[str]:
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


def steps_json(steps) -> dict:
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


def categories_at(snapshot: Snapshot, dev: DeviceModel, event: int, rules: CategoryRules | None = None) -> dict:
    """Bytes per category after ``event`` (a convenience for scripts and tests)."""
    report = BreakdownReport(snapshot, dev, rules)
    return report.at(Moment(int(np.clip(event, -1, max(len(dev.trace) - 1, -1))), "event"), 0).categories
