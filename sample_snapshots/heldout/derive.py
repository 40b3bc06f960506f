"""Figures a truth file takes from its own snapshot once the program has run.

    python sample_snapshots/heldout/derive.py DIR
    python sample_snapshots/heldout/derive.py --table DIR     # the README's table

For each ``NAME.truth.json`` in DIR (``NAME.pickle`` or ``NAME.pickle.xz`` beside it):

- ``has_trace``: the trace holds at least one ``alloc`` (``enabled='state'`` leaves a stray
  ``snapshot`` or ``free_completed`` entry in an otherwise empty trace); without one, no step
  is in the trace;
- for an OOM, the free bytes by pool where the harness did not record them: from the
  snapshot's segments when it was taken at the OOM (the OOM observer's moment), otherwise the
  observer's total less the small pool's free bytes at the dump; then the cause by the rule
  in ``programs/_harness.py`` (``cause_rule``), and whether the expandable re-run reached the
  request at all (``NAME.rerun.json``);
- ``split``: the sorted names shuffled by ``random.Random(27)``, first half ``build``.

Needs no GPU and no torch.
"""

from __future__ import annotations

import glob
import json
import lzma
import os
import pickle
import random
import sys

MiB = 1 << 20
SPLIT_SEED = 27
CAUSE_RULE = ("capacity when the request exceeds the free bytes of its pool plus the cap's headroom in "
              "whole 2 MiB pages (what a defragmented cache could give it); fragmentation otherwise, "
              "since no single block was large enough")


def load(path: str) -> dict:
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rb") as f:
        return pickle.load(f)


def pools(snapshot: dict) -> tuple[dict, dict]:
    free = {"large": 0, "small": 0}
    largest = {"large": 0, "small": 0}
    for seg in snapshot.get("segments", []):
        pool = "small" if seg.get("segment_type") == "small" else "large"
        for block in seg.get("blocks", []):
            if block.get("state") == "inactive":
                free[pool] += block["size"]
                largest[pool] = max(largest[pool], block["size"])
    return free, largest


def derive_oom(oom: dict, snapshot: dict, at_oom: bool, rerun: dict | None) -> None:
    if "free_usable_by_request" not in oom:
        free, largest = pools(snapshot)
        if at_oom:
            oom["pool_split_from"] = "the snapshot, taken at the OOM"
        else:
            small = min(free["small"], oom["cached_free"])
            free = {"large": oom["cached_free"] - small, "small": small}
            largest = {"large": None, "small": None}
            oom["pool_split_from"] = ("the OOM observer's free total less the small pool's free bytes "
                                      "at the dump (taken after the OOM)")
        pool = "small" if oom["requested"] <= MiB else "large"
        pages = oom["headroom_under_limit"] // (2 * MiB) * (2 * MiB)
        usable = free[pool] + pages
        oom.update(pool=pool, cached_free_by_pool=free, free_usable_by_request=usable, cause_rule=CAUSE_RULE,
                   cause="capacity" if oom["requested"] > usable else "fragmentation")
        if largest[pool] is not None:
            oom["largest_free_block"] = max(largest[pool], pages)
    if rerun is not None:
        first = rerun["ooms"][0] if rerun["ooms"] else None
        served = oom["served_before"]
        oom["expandable_rerun_passes"] = first is None or first["served_before"] > served
        oom["expandable_rerun_reached_request"] = first is None or first["served_before"] >= served
        oom["expandable_rerun_first_oom"] = first


def split_of(names) -> dict[str, str]:
    order = sorted(names)
    random.Random(SPLIT_SEED).shuffle(order)
    half = len(order) // 2
    return {n: ("build" if i < half else "heldout") for i, n in enumerate(order)}


def table(folder: str) -> str:
    """The README's table: one row per truth file."""
    rows = ["| recording | split | leak (bytes/step) | cycles | OOM | trace entries | stacks / context | "
            "steps ran (in trace + partly) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for path in sorted(glob.glob(os.path.join(folder, "*.truth.json"))):
        with open(path) as f:
            t = json.load(f)
        leak = f"yes ({t['leak_bytes_per_step']:,})" if t["leak"] else "no"
        oom = "-"
        if t.get("oom"):
            o = t["oom"]
            oom = f"{o['cause']}, expandable {'passes' if o['expandable_rerun_passes'] else 'fails'}"
            if not o.get("expandable_rerun_reached_request", True):
                oom = f"{o['cause']}, expandable re-run failed earlier"
        trace = f"{t['trace_entries']:,}" if t["has_trace"] else "none"
        if t["ring_buffer_cut"]:
            trace += " (ring cut)"
        hist = t.get("history") or {}
        rec = "no history" if not hist else f"{hist.get('stacks')} / {hist.get('context')}"
        if hist.get("enabled") == "state":
            rec += " (state only)"
        s = t["steps"]
        rows.append(f"| `{t['name']}` | {t['split']} | {leak} | {'yes' if t['reference_cycles'] else 'no'} | {oom} "
                    f"| {trace} | {rec} | {s['ran']} ({s['in_trace']} + {s['partly_in_trace']}) |")
    return "\n".join(rows)


def main(folder: str, label: str | None = None) -> int:
    """Derive the file-based figures of every truth file in ``folder``; ``label`` is the split
    of all of them, or None to halve them into build and heldout."""
    paths = sorted(glob.glob(os.path.join(folder, "*.truth.json")))
    names = [os.path.basename(p)[: -len(".truth.json")] for p in paths]
    split = {n: label for n in names} if label else split_of(names)
    for path, name in zip(paths, names):
        with open(path) as f:
            truth = json.load(f)
        pickles = [p for p in (os.path.join(folder, name + ".pickle.xz"), os.path.join(folder, name + ".pickle"))
                   if os.path.exists(p)]
        snapshot = load(pickles[0])
        traces = snapshot.get("device_traces") or [[]]
        trace = traces[0] if traces else []
        truth["name"] = name
        truth["has_trace"] = any(e["action"] == "alloc" for e in trace)
        if not truth["has_trace"]:
            truth["steps"].update(in_trace=0, partly_in_trace=0)
        truth["trace_entries"] = len(trace)
        if truth.get("oom"):
            rerun_path = os.path.join(folder, name + ".rerun.json")
            rerun = None
            if os.path.exists(rerun_path):
                with open(rerun_path) as f:
                    rerun = json.load(f)
            derive_oom(truth["oom"], snapshot, truth.get("dumped", "").startswith("at the OOM"), rerun)
        truth["split"] = split[name]
        with open(path + ".part", "w") as f:
            json.dump(truth, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(path + ".part", path)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        print(table(sys.argv[2]))
        sys.exit(0)
    sys.exit(main(sys.argv[1]))
