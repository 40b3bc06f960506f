"""Two memtui processes opening one snapshot with one cache folder, at the same time.

Each decodes the file (the cache is cold), prints the same summary and writes the same
cache entry; the writes replace each other atomically, so whichever lands last leaves a
complete, verified entry that equals a fresh decode, and no temporary file stays behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memtui.cache.store import ModelCache
from memtui.open import open_snapshot
from tests.conftest import ROOT, SHARED
from tests.fixtures.model_equality import assert_same_model

PROCESSES = 2


def test_processes_share_one_cache_safely(tmp_path):
    source = SHARED / "expandable_segments.pickle"
    if not source.exists():
        pytest.skip(f"no real snapshot at {source}")
    cache_dir = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "memtui", "info", "--json", "--cache-dir", str(cache_dir), str(source)]
    running = [subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(PROCESSES)]
    results = [p.communicate(timeout=120) for p in running]
    assert [p.returncode for p in running] == [0] * PROCESSES, [err for _, err in results]
    summaries = [json.loads(out) for out, _ in results]
    assert all(s == summaries[0] for s in summaries)

    cache = ModelCache(str(cache_dir))
    folder = Path(cache.folder)
    assert len(list(folder.glob("*.mtc"))) == 1
    assert not [p for p in folder.iterdir() if p.name.endswith(".partial")]
    cached = cache.load(source)
    assert cached is not None
    assert_same_model(cached, open_snapshot(source, cache=None))
