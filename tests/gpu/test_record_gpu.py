"""``memtui run`` on a real CUDA GPU: a training loop, OOMs, a step range, torchrun ranks.

Run on a GPU machine with ``pytest -m gpu tests/gpu -v``. Elsewhere every test here skips
and says why (no torch, or no CUDA device).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memtui.load.read import read_snapshot
from memtui.open import open_snapshot

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"


@functools.lru_cache(maxsize=1)
def cuda_devices() -> tuple[int, str]:
    """(number of CUDA devices, why none) -- asked in a subprocess so this process never imports torch."""
    if importlib.util.find_spec("torch") is None:
        return 0, "torch is not installed (pip install 'memtui[record]')"
    probe = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    count = int(done.stdout.strip() or 0) if done.returncode == 0 else 0
    return count, "" if count else "CUDA is not available on this machine"


@pytest.fixture
def gpus() -> int:
    count, why = cuda_devices()
    if not count:
        pytest.skip(why)
    return count


def memtui_run(*args: str, cwd: Path | None = None, launcher: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [*(launcher or [sys.executable]), "-m", "memtui", "run", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    print(" ".join(cmd), "->", done.returncode, "\n", done.stdout, done.stderr)
    return done


def device0_actions(path: Path) -> list[str]:
    raw = read_snapshot(path)
    return [e["action"] for e in raw["device_traces"][0]]


def assert_ends_with_oom(path: Path) -> None:
    # torch adds a dump's `snapshot` entry after taking the copy, so the OOM is the very
    # last entry of the snapshot written at the OOM.
    actions = device0_actions(path)
    assert actions and actions[-1] == "oom", actions[-5:]
    ooms = open_snapshot(path).devices[0].oom_indices()
    assert [int(i) for i in ooms] == [len(actions) - 1]


def test_training_loop(gpus, tmp_path):
    marker = tmp_path / "argv.json"
    done = memtui_run("--out", str(tmp_path), str(SCRIPTS / "train_loop.py"), str(marker), "--", "0")
    assert done.returncode == 0, done.stderr
    snapshot = tmp_path / "train_loop.pickle"
    assert snapshot.exists()
    seen = json.loads(marker.read_text())
    assert seen["name"] == "__main__"
    assert seen["argv"] == [str(SCRIPTS / "train_loop.py"), str(marker), "--", "0"]
    model = open_snapshot(snapshot)
    names = {a.name for a in model.annotations}
    assert {"memtui.step#1", "memtui.step#4"} <= names
    assert "alloc" in device0_actions(snapshot)
    assert f"memtui {os.path.relpath(snapshot)}" in done.stderr or f"memtui {snapshot}" in done.stderr


def test_exit_status_is_the_scripts(gpus, tmp_path):
    done = memtui_run("--out", str(tmp_path), str(SCRIPTS / "train_loop.py"), str(tmp_path / "a.json"), "3")
    assert done.returncode == 3
    assert (tmp_path / "train_loop.pickle").exists()


def test_uncaught_oom(gpus, tmp_path):
    done = memtui_run("--out", str(tmp_path), str(SCRIPTS / "oom_uncaught.py"))
    assert done.returncode == 1
    assert "OutOfMemoryError" in done.stderr
    assert_ends_with_oom(tmp_path / "oom_uncaught.oom.pickle")
    assert (tmp_path / "oom_uncaught.pickle").exists()  # the at-exit snapshot too


def test_caught_oom_is_still_dumped(gpus, tmp_path):
    done = memtui_run("--out", str(tmp_path), "--on-oom-only", str(SCRIPTS / "oom_caught.py"))
    assert done.returncode == 0, done.stderr
    assert "caught the OOM" in done.stdout
    assert_ends_with_oom(tmp_path / "oom_caught.oom.pickle")
    assert not (tmp_path / "oom_caught.pickle").exists()


def test_step_range(gpus, tmp_path):
    script = str(SCRIPTS / "train_loop.py")
    done = memtui_run("--out", str(tmp_path), "--steps", "2:4", script, str(tmp_path / "a.json"))
    assert done.returncode == 0, done.stderr
    snapshot = tmp_path / "train_loop.steps2-4.pickle"
    names = {a.name for a in open_snapshot(snapshot).annotations if a.name.startswith("memtui.step#")}
    assert names == {"memtui.step#2", "memtui.step#3"}
    assert not (tmp_path / "train_loop.pickle").exists()


def test_torchrun_writes_one_file_per_rank(gpus, tmp_path):
    if gpus < 2:
        pytest.skip(f"needs 2 CUDA devices, found {gpus}")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    done = memtui_run("--out", str(tmp_path), str(ROOT / "sample_snapshots" / "ddp_train.py"), launcher=launcher)
    assert done.returncode == 0, done.stderr
    for rank in (0, 1):
        path = tmp_path / f"ddp_train.rank{rank}.pickle"
        snap = open_snapshot(path)
        assert len(snap.devices[rank].trace) > 0
