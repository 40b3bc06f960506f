"""A command's answer comes before its model cache write: the write never delays what the
user waits for. The write's start is marked on stderr, which shares stdout's pipe here, so
the order the user would see is the order in the pipe."""

from __future__ import annotations

import os
import subprocess
import sys

from memtui.cache.store import ModelCache
from tests.conftest import ROOT
from tests.fixtures.tiny_snapshot import write_tiny_snapshot

MARKED_WRITE = """
import sys
import memtui.cache.fileformat as fileformat

real_write = fileformat.write_cache_file

def marked(*args, **kwargs):
    sys.stderr.write("CACHE-WRITE-BEGINS\\n")
    sys.stderr.flush()
    return real_write(*args, **kwargs)

fileformat.write_cache_file = marked  # the cache imports it where it writes
from memtui.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_info_prints_before_the_cache_is_written(tmp_path):
    snapshot = write_tiny_snapshot(tmp_path)
    cache_dir = tmp_path / "cache"
    done = subprocess.run([sys.executable, "-c", MARKED_WRITE, "info", "--cache-dir", str(cache_dir), str(snapshot)],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=120)
    assert done.returncode == 0, done.stdout
    lines = done.stdout.decode().splitlines()
    assert lines[-1] == "CACHE-WRITE-BEGINS", lines  # after every line of the answer
    assert len(lines) > 3
    assert ModelCache(str(cache_dir)).load(snapshot) is not None  # and still written before the exit
