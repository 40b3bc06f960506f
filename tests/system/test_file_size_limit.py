"""A file-size limit (``ulimit -f``) below what the model cache needs turns the cache off with
the one warning every other write failure gives, and the command still answers.

Python ignores SIGXFSZ, so a write past the limit fails with EFBIG ("File too large"),
which must be taken like a full disk, never reported as an internal error.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

from tests.conftest import ROOT
from tests.fixtures.tiny_snapshot import write_tiny_snapshot


def test_a_file_size_limit_turns_the_cache_off_in_one_line(tmp_path):
    snapshot = write_tiny_snapshot(tmp_path)
    limit = 64 << 10  # the tiny snapshot's cache file is larger

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run([sys.executable, "-m", "memtui", "info", "--cache-dir", str(tmp_path / "cache"),
                           str(snapshot)], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                          text=True, timeout=60, preexec_fn=limited)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memtui: model cache off: cannot write to "), lines
    assert "File too large" in lines[0] and "internal error" not in done.stderr
    assert not list((tmp_path / "cache").rglob("*.partial"))
    assert "device 0" in done.stdout
