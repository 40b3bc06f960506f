"""Accuracy of memtui whatif against GPU re-runs (sample_snapshots/whatif/*.truth.json).

For each workload of one split (``--split build`` or ``heldout``) and each setting re-run:

- reserved peak: the recording replayed uncapped under the setting, against
  ``reserved_bytes.all.peak`` of the re-run (right within 5%);
- smallest cap: the model's ``min_cap_bytes`` against the re-run's bisection bracket
  ``[fails, passes]`` (right inside it, with 3% slack either side);
- passes_recorded_oom: the OOM recording replayed under the setting with the cap it ran out
  at, against ``served_default_failed_request`` of the re-run under that cap (the cap given,
  as ``--cap`` would, and the cap inferred from the recording alone).

Prints one Markdown table per measure and the share right. Rules are tuned on ``build``
only; ``heldout`` is reported as it comes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memtui.allocator.settings import parse_conf, settings_of_snapshot  # noqa: E402
from memtui.analysis.whatif import Limit, derive_limit, run_scenario  # noqa: E402
from memtui.analysis.whatif_requests import build_requests  # noqa: E402
from memtui.open import open_snapshot  # noqa: E402
from memtui.units import format_bytes  # noqa: E402

FOLDER = ROOT / "sample_snapshots" / "whatif"
SHORT = {"": "default", "expandable_segments:True": "expandable", "max_split_size_mb:64": "split64",
         "max_split_size_mb:256": "split256", "roundup_power2_divisions:4": "pow2/4",
         "garbage_collection_threshold:0.8": "gc0.8"}


def short(conf: str) -> str:
    return SHORT.get(conf, "combo")


def evaluate(name: str, truth: dict, folder: Path = FOLDER) -> list[dict]:
    full = open_snapshot(folder / f"{name}.pickle.xz")
    dev = full.devices[full.default_device()]
    requests = build_requests(dev)
    oom = open_snapshot(folder / f"{name}.oom.pickle.xz")
    oom_dev = oom.devices[oom.default_device()]
    oom_requests = build_requests(oom_dev)
    cap = truth["oom_recording"]["cap_bytes"]
    inferred = derive_limit(oom_dev, oom_requests, None, settings_of_snapshot(oom.allocator_settings)[1])
    rows = []
    for entry in truth["settings"]:
        if entry.get("missing"):
            continue  # the re-runs under this setting did not finish before the run's deadline
        conf = entry["settings"]
        settings = parse_conf(conf)
        uncapped = run_scenario(requests, conf, settings, Limit(None, False, "none"), False)
        given = run_scenario(oom_requests, conf, settings, Limit(cap, True, "given"), False, min_cap=False)
        guessed = run_scenario(oom_requests, conf, settings, inferred, False, min_cap=False)
        fails, passes = entry.get("min_cap_bracket") or (None, None)  # None: the re-run's bisection did not finish
        # None where the re-run under the OOM's cap was not measured.
        want = (entry.get("at_default_oom_cap") or {}).get("served_default_failed_request")
        rows.append({
            "workload": name, "setting": short(conf),
            "peak_true": entry["reserved_peak"], "peak_model": uncapped.reserved_peak,
            "peak_ok": abs(uncapped.reserved_peak - entry["reserved_peak"]) <= 0.05 * entry["reserved_peak"],
            "bracket": (fails, passes), "cap_model": uncapped.min_cap_bytes,
            "cap_ok": None if fails is None else (uncapped.min_cap_bytes is not None
                                                  and fails * 0.97 <= uncapped.min_cap_bytes <= passes * 1.03),
            "passes_true": want, "passes_given": given.passes_recorded_oom,
            "passes_inferred": guessed.passes_recorded_oom,
            "passes_given_ok": None if want is None else given.passes_recorded_oom == want,
            "passes_inferred_ok": None if want is None else guessed.passes_recorded_oom == want,
            "inferred_certain": guessed.passes_certain,
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("build", "heldout", "heldout2"), required=True,
                        help="heldout2: the second set's workloads (sample_snapshots/whatif2)")
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args()
    rows = []
    folder = FOLDER.parent / "whatif2" if args.split == "heldout2" else FOLDER
    for path in sorted(folder.glob("*.truth.json")):
        truth = json.loads(path.read_text())
        if truth.get("split") == args.split:
            rows += evaluate(path.name.split(".truth.json")[0], truth, folder)
    print(f"## {args.split}: {len({r['workload'] for r in rows})} workloads, {len(rows)} workload x setting\n")
    print("| workload | setting | reserved peak: re-run / model | smallest cap: bracket / model |"
          " served the default's failed request: re-run / model (cap given) / model (cap inferred) |")
    print("| --- | --- | --- | --- | --- |")
    mark = {True: "", False: " ✗"}
    for r in rows:
        f, p = r["bracket"]
        cap = format_bytes(r["cap_model"]) if r["cap_model"] is not None else "?"
        bracket = f"{format_bytes(f)}..{format_bytes(p)}" if f is not None else "not measured"
        print(f"| {r['workload']} | {r['setting']} | {format_bytes(r['peak_true'])} / {format_bytes(r['peak_model'])}"
              f"{mark[r['peak_ok']]} | {bracket} / {cap}{mark.get(r['cap_ok'], '')} |"
              f" {r['passes_true']} / {r['passes_given']}{mark.get(r['passes_given_ok'], '')} /"
              f" {r['passes_inferred']}{'' if r['inferred_certain'] else '*'}{mark.get(r['passes_inferred_ok'], '')} |")
    print()
    for key, label in (("peak_ok", "reserved peak within 5%"), ("cap_ok", "smallest cap inside the bracket (3% slack)"),
                       ("passes_given_ok", "passes_recorded_oom right, cap given"),
                       ("passes_inferred_ok", "passes_recorded_oom right, cap inferred")):
        measured = [r for r in rows if r[key] is not None]
        right = sum(r[key] for r in measured)
        print(f"- {label}: {right} of {len(measured)} ({100 * right / (len(measured) or 1):.0f}%)")
    certain = [r for r in rows if r["inferred_certain"] and r["passes_inferred_ok"] is not None]
    right = sum(r["passes_inferred_ok"] for r in certain)
    print(f"- of those, the answers the model marks certain (the same at both ends of the cap the recording allows):"
          f" {right} of {len(certain)} right ({100 * right / (len(certain) or 1):.0f}%); * marks the others")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
