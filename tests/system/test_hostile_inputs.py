"""Every hostile input ends in one clear line, exit status 2, within 5 s, under the memory bound.

The cases (memo, length, count, nesting and repeat bombs, in plain and compressed files;
tests/fixtures/hostile_inputs.py) are rebuilt at test time and opened with ``memtui info``
in one subprocess, each under an address-space limit (``RLIMIT_AS``) of
``memory_bound(decompressed size)`` above what the process held before it
(memtui/load/limits.py: 20 times the size plus 256 MiB). A decoder that allocated what
a file declares would fail with MemoryError, and say "not enough memory", or be killed.
Real snapshots, as pickles, JSON and an export, must open under the same bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("hostile")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-m", "tests.fixtures.hostile_inputs", str(folder)], capture_output=True,
                         text=True, timeout=600, cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    found = [json.loads(line) for line in run.stdout.splitlines()]
    return {r["name"]: r for r in found}


def hostile_names() -> list[str]:
    from tests.fixtures.hostile_inputs import TIGHT_EXPORT, cases

    return [*cases(), TIGHT_EXPORT]


@pytest.mark.parametrize("name", hostile_names())
def test_a_hostile_input_ends_in_one_line_under_the_bound(results, name):
    r = results[name]
    lines = r["stderr"].splitlines()
    assert r["status"] == 2, r
    assert len(lines) == 1 and lines[0].startswith("memtui: "), r["stderr"]
    for word in ("Traceback", "SystemError", "not enough memory", "internal error"):
        assert word not in r["stderr"], r["stderr"]
    assert r["cpu"] < 5, f"{name}: {r['cpu']:.1f} s of CPU"


def test_real_snapshots_open_under_the_same_bound(results):
    real = {name: r for name, r in results.items() if name.startswith("real: ")}
    assert len(real) >= 4
    for name, r in real.items():
        assert r["status"] == 0 and r["stderr"] == "", (name, r)
