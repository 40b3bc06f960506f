"""memtui leaks: live memory by call site and what grew over the run."""

from __future__ import annotations

from memtui.analysis.leaks import LeakReport, find_leaks
from memtui.commands._common import add_json_flag, add_snapshot_argument, device_or_error, load, print_json
from memtui.commands._report import add_depth_option, add_device_option, check_depth, signed_bytes
from memtui.units import format_bytes

NAME = "leaks"
HELP = ("Group live allocations by call site; a verdict (leak, growth that plateaus or is given back) with its"
        " evidence, and the sites whose kept memory grows all through the run.")
SPARK = " ▁▂▃▄▅▆▇█"


def add_arguments(parser) -> None:
    add_snapshot_argument(parser)
    add_device_option(parser)
    add_depth_option(parser)
    parser.add_argument("--windows", type=int, default=10,
                        help="time windows to sample when no step annotations mark iterations (default 10)")
    parser.add_argument("--points", type=int, default=24, help="at most this many sample points (default 24)")
    parser.add_argument("--top", type=int, default=20, help="call sites to list besides growing ones (default 20)")
    add_json_flag(parser)


def run(args) -> int:
    snapshot = load(args.snapshot, args.model_cache)
    dev = snapshot.devices[device_or_error(snapshot, args.device)]
    report = find_leaks(snapshot, dev, check_depth(args.depth), max(args.points, 2), max(args.windows, 2),
                        max(args.top, 0))
    if args.json:
        print_json(report.to_json())
    else:
        print("\n".join(render(report)))
    return 0


def describe_points(report: LeakReport) -> str:
    p = report.points
    if p.kind == "annotation":
        return f"{len(p)} samples over {p.steps} steps (end of each '{p.name}')"
    if p.kind == "iterations":
        return f"{len(p)} samples over {p.steps} executions of the most repeated allocation ({p.name})"
    if p.kind == "time":
        return f"{len(p)} samples, one per time window (no step annotations)"
    return f"{len(p)} samples, one per event window (no times or step annotations)"


def headline(report: LeakReport) -> str:
    words = {"leak": "a leak", "no leak": "no leak", "cannot tell": "cannot tell whether memory leaks"}
    return f"device {report.device}: {words.get(report.verdict, report.verdict)} ({report.confidence} confidence)"


def because_lines(report: LeakReport) -> list[str]:
    lines = ["because:"] + [f"  - {e.text}" for e in report.evidence] if report.evidence else []
    if report.alternatives:
        lines.append("also considered:")
        lines += [f"  - {a['verdict']}: {a['why']}" for a in report.alternatives]
    return lines


def render(report: LeakReport) -> list[str]:
    lines = [headline(report)] + because_lines(report)
    lines.append(f"{format_bytes(report.live_bytes)} in {report.live_count:,} live allocations at snapshot time;"
                 f" {describe_points(report)}")
    growing = report.growing
    if growing:
        lines.append("")
        lines.append("growing call sites (what they keep rose all through the run):")
        unit = report.points.unit
        for s in growing:
            lines.append(f"  {signed_bytes(s.growth_bytes):>12} ({signed_bytes(s.growth_per_unit)}/{unit}, "
                         f"{s.growth_count:+,} allocations)  {sparkline(s.series_bytes)}  {s.label}")
    rest = [s for s in report.sites if not s.growing]
    if rest:
        lines.append("")
        lines.append(f"{'live bytes':>12} {'count':>7}  over the run  {'growth':<9} call site")
        for s in rest:
            lines.append(f"{format_bytes(s.bytes):>12} {s.count:>7,}  {sparkline(s.series_bytes):<12}  {s.kind:<9}"
                         f" {s.label}")
    return lines


def sparkline(values: list[int], width: int = 12) -> str:
    """A tiny bar chart of ``values`` (resampled to ``width``)."""
    if not values:
        return ""
    if len(values) > width:
        values = [values[int(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    low, high = min(values), max(values)
    if high == low:
        return "─" * len(values)
    return "".join(SPARK[1 + int((v - low) * (len(SPARK) - 2) / (high - low))] for v in values)
