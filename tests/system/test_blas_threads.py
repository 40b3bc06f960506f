"""numpy's OpenBLAS starts no thread pool in memtui's commands; `run`, which executes the
user's script in its process, leaves the script's setting alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memtui import cli

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_snapshots" / "context_none.pickle.xz"

# What OPENBLAS_NUM_THREADS said at the moment numpy was first imported, then the command.
WATCHED = """
import importlib.abc, os, sys
seen = []
class FirstNumpy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "numpy" and not seen:
            seen.append(os.environ.get("OPENBLAS_NUM_THREADS"))
        return None
sys.meta_path.insert(0, FirstNumpy())
from memtui.cli import main
code = main(sys.argv[1:])
print("numpy imported under", seen, file=sys.stderr)
sys.exit(code)
"""


def _numpy_imported_under(argv: list[str], **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | env
    result = subprocess.run([sys.executable, "-c", WATCHED, *argv], cwd=ROOT, env=environ, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stderr.strip().splitlines()[-1]


def test_a_command_imports_numpy_with_one_blas_thread(tmp_path):
    assert _numpy_imported_under(["info", "--cache-dir", str(tmp_path), str(SAMPLE)]) == "numpy imported under ['1']"


def test_the_users_own_setting_is_kept(tmp_path):
    said = _numpy_imported_under(["--no-cache", "info", str(SAMPLE)], OPENBLAS_NUM_THREADS="6")
    assert said == "numpy imported under ['6']"


@pytest.mark.parametrize("argv, spared", [
    (["info", "x.pickle"], "1"),
    (["--no-cache", "oom", "x.pickle"], "1"),
    (["x.pickle"], "1"),  # the explorer
    ([], "1"),
    (["run", "train.py"], None),
    (["--cache-dir", "/tmp/c", "run", "train.py", "--no-cache"], None),
])
def test_run_leaves_the_scripts_blas_threads_alone(monkeypatch, argv, spared):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "unset")  # so that the test's end puts back what was there
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    cli._spare_blas_threads(argv)
    assert os.environ.get("OPENBLAS_NUM_THREADS") == spared
