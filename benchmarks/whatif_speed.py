"""How long memtui whatif takes on a big trace, as whole processes, against pickle.load.

``python benchmarks/whatif_speed.py FILE [--repeat N]`` (an uncompressed pickle) times, in
separate processes and alternating, ``pickle.load`` of the file, ``memtui info`` (opening it),
``memtui whatif --conf ''`` (one setting: its replay, the smallest-cap bisection) and
``memtui whatif`` with its candidates, and prints the medians and their ratios to
``pickle.load``. The per-setting figure is (whatif with one setting) - (info).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = {
    "pickle.load": [sys.executable, "-c", "import pickle, sys; pickle.load(open(sys.argv[1], 'rb'))"],
    "memtui info": [sys.executable, "-m", "memtui", "--no-cache", "info"],
    "memtui whatif --conf ''": [sys.executable, "-m", "memtui", "--no-cache", "whatif", "--json", "--conf", ""],
    "memtui whatif --conf expandable_segments:True": [sys.executable, "-m", "memtui", "--no-cache", "whatif", "--json",
                                                      "--conf", "expandable_segments:True"],
    "memtui whatif (the candidates)": [sys.executable, "-m", "memtui", "--no-cache", "whatif", "--json"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeat):
        for name, command in CASES.items():
            start = time.perf_counter()
            subprocess.run([*command, args.file], check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["pickle.load"])
    print("| process | median s | x pickle.load |")
    print("| --- | ---: | ---: |")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| `{name}` | {median:.2f} | {median / base:.2f} |")
    per_setting = statistics.median(times["memtui whatif --conf ''"]) - statistics.median(times["memtui info"])
    print(f"\none setting beyond opening the file: {per_setting:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
