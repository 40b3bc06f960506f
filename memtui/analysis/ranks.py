"""Comparing ranks: one small summary per rank file, then the comparison of summaries.

:func:`summarize_snapshot` turns one open snapshot into a plain dict of numbers, strings
and lists (a few kilobytes) that pickles, JSON- and msgpack-encodes as is, so it can be
computed in a worker process or on another machine and be cached (opening the file and
spreading the work is :mod:`memtui.fleet`'s). :func:`compare_ranks` needs nothing but
those dicts.

The reference rank is the one with the median peak (the lower median for an even
count, so of two ranks the one that used more memory is the one compared). A rank is
an outlier when its peak is far from the reference's, or it ran out of memory and the
reference did not, or (with three ranks or more) call sites hold memory on it that they
do not on the others.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

import numpy as np

from memtui.analysis.callsites import CallSites, group_by_site
from memtui.analysis.live import allocated_curve, life_spans, reserved_curve
from memtui.model import DeviceModel, Snapshot
from memtui.units import plural

SUMMARY_VERSION = 2  # 2: a filtered export's peak is its own state, its OOMs by the source's numbers
SUMMARY_SITES = 50  # call sites kept per summary, largest first
PEAK_SHARE = 0.10  # a peak this far from the reference's is an outlier...
MIN_DIFFERENCE = 1 << 20  # ...and so is a site difference, if at least this many bytes
SITE_SHARE = 0.10  # a site differs when it moves this share of the reference peak
_RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)
_TRAILING_NUMBER = re.compile(r"(\d+)(?:\.[A-Za-z0-9]+)*$")


def summarize_snapshot(snapshot: Snapshot, depth: int = 1) -> dict[str, Any]:
    """The summary fields of an open snapshot (its busiest device)."""
    dev = busiest_device(snapshot)
    sites = CallSites(snapshot.stacks, depth)
    spans = life_spans(dev)
    curve = allocated_curve(dev, spans)
    reserved = reserved_curve(dev)
    at_end = spans.stop >= spans.n_events
    if len(curve) and not dev.partial_trace:
        peak_index = int(np.argmax(curve))
        peak_allocated = int(curve[peak_index])
        at_peak = (spans.start <= peak_index) & (spans.stop > peak_index)
    else:  # no trace, or a filtered export's (NOT_REPLAYED): the snapshot's own state is all there is
        peak_index, peak_allocated, at_peak = -1, dev.allocated, at_end
    site_of_life = sites.of_stacks(spans.stack)
    trace = dev.trace
    return {
        "device": dev.device,
        "events": len(trace),
        "peak_allocated": peak_allocated,
        "peak_index": peak_index,
        "peak_time_us": _finite(trace.time_us[peak_index]) if peak_index >= 0 else None,
        "peak_reserved": int(reserved.max()) if len(reserved) else dev.reserved,
        "allocated": dev.allocated,
        "reserved": dev.reserved,
        "active": dev.active,
        "ooms": [{"index": dev.shown_index(int(i)), "requested": int(trace.size[i]),
                  "device_free": int(trace.device_free[i])}
                 for i in dev.oom_indices()],
        "sites_at_peak": _top_sites(sites, site_of_life[at_peak], spans.size[at_peak]),
        "sites_at_end": _top_sites(sites, site_of_life[at_end], spans.size[at_end]),
        "allocator_settings": _plain(snapshot.allocator_settings),
    }


def busiest_device(snapshot: Snapshot) -> DeviceModel:
    """The device a rank's file is about: the one with most events, then most memory."""
    return max(snapshot.devices, key=lambda d: (len(d.trace), d.reserved, -d.device))


def rank_from_name(path: str) -> int | None:
    name = os.path.basename(path)
    m = _RANK_IN_NAME.search(name) or _TRAILING_NUMBER.search(name.split(".pickle")[0])
    return int(m.group(1)) if m else None


def _top_sites(sites: CallSites, site_ids: np.ndarray, sizes: np.ndarray) -> dict[str, int]:
    total, _count = group_by_site(site_ids, sizes, len(sites))
    out: dict[str, int] = {}
    for site in np.argsort(-total, kind="stable")[:SUMMARY_SITES]:
        if total[site] <= 0:
            break
        label = sites.label(int(site))
        out[label] = out.get(label, 0) + int(total[site])
    return out


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)


def compare_ranks(summaries: list[dict[str, Any]], moment: str = "peak") -> dict[str, Any]:
    """Outliers and diverging call sites among the summaries that did not fail."""
    good = [s for s in summaries if not s.get("error")]
    failed = [{"file": s["file"], "error": s["error"]} for s in summaries if s.get("error")]
    ranks = _assign_ranks(good)
    rows = [_row(s, r) for s, r in zip(good, ranks)]
    result: dict[str, Any] = {"ranks": rows, "failed": failed, "reference_rank": None, "median_peak_allocated": None,
              "outliers": [], "divergent_sites": []}
    if not good:
        return result
    peaks = np.array([s["peak_allocated"] for s in good], np.float64)
    ref = int(np.argsort(peaks, kind="stable")[(len(peaks) - 1) // 2])
    result["reference_rank"] = ranks[ref]
    result["median_peak_allocated"] = int(peaks[ref])
    key = "sites_at_peak" if moment == "peak" else "sites_at_end"
    divergent = _divergent_sites(good, ranks, key, ref)
    result["divergent_sites"] = divergent
    for i, s in enumerate(good):
        # With two ranks there is no majority: a site that differs says how they differ, not which is odd.
        own_sites = [d for d in divergent if d["rank"] == ranks[i]] if len(good) >= 3 else []
        reasons = _outlier_reasons(s, good[ref], own_sites)
        rows[i]["outlier"] = bool(reasons)
        if reasons:
            result["outliers"].append({"rank": ranks[i], "file": s["file"], "reasons": reasons})
    return result


def _assign_ranks(summaries: list[dict[str, Any]]) -> list[int]:
    """Ranks from file names when every file has a distinct one, else positions."""
    named: list[Any] = [s.get("rank") for s in summaries]
    if all(r is not None for r in named) and len(set(named)) == len(named):
        return [int(r) for r in named]
    return list(range(len(summaries)))


def _row(s: dict[str, Any], rank: int) -> dict[str, Any]:
    return {"rank": rank, "file": s["file"], "device": s["device"], "events": s["events"],
            "peak_allocated": s["peak_allocated"], "peak_reserved": s["peak_reserved"],
            "allocated": s["allocated"], "reserved": s["reserved"], "ooms": len(s["ooms"]), "outlier": False}


def _divergent_sites(good: list[dict[str, Any]], ranks: list[int], key: str, ref: int) -> list[dict[str, Any]]:
    labels = sorted({label for s in good for label in s[key]})
    if not labels or len(good) < 2:
        return []
    table = np.array([[s[key].get(label, 0) for s in good] for label in labels], np.float64)
    typical = np.sort(table, axis=1)[:, (len(good) - 1) // 2]
    threshold = max(MIN_DIFFERENCE, SITE_SHARE * good[ref]["peak_allocated"])
    out = []
    for row, label in enumerate(labels):
        for col in np.nonzero(np.abs(table[row] - typical[row]) >= threshold)[0]:
            out.append({"site": label, "rank": ranks[col], "bytes": int(table[row, col]),
                        "typical": int(typical[row]), "delta": int(table[row, col] - typical[row])})
    out.sort(key=lambda d: -abs(d["delta"]))
    return out


def _outlier_reasons(s: dict[str, Any], ref: dict[str, Any], divergent: list[dict[str, Any]]) -> list[str]:
    reasons = []
    peak, ref_peak = s["peak_allocated"], ref["peak_allocated"]
    if abs(peak - ref_peak) > max(MIN_DIFFERENCE, PEAK_SHARE * ref_peak):
        share = (peak - ref_peak) / ref_peak * 100 if ref_peak else float("inf")
        reasons.append(f"peak allocated {'+' if peak >= ref_peak else ''}{share:.0f}% vs the median rank")
    if s["ooms"] and not ref["ooms"]:
        reasons.append(f"{len(s['ooms'])} OOM{'s' if len(s['ooms']) > 1 else ''}")
    if divergent:
        # Each site's median over the ranks (not the median rank's own bytes, which may differ too).
        reasons.append(f"{plural(len(divergent), 'call site')} {'differs' if len(divergent) == 1 else 'differ'}"
                       " from the ranks' median")
    return reasons
