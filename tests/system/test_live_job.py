"""The job side of live watching without a GPU: `memtui run --live`, MEMTUI_LIVE=1 and the .pth
hook, against the stand-in torch of test_record.py with the allocator counters added."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_record import FAKE_TORCH

from memtui.live.client import LiveClient
from memtui.live.runtime import list_jobs

ROOT = Path(__file__).resolve().parents[2]

COUNTERS = '''

def _allocated():
    return sum(e["size"] for e in _state["trace"] if e["action"] == "alloc")


def memory_stats(device=None):
    return {"allocated_bytes.all.current": _allocated(), "reserved_bytes.all.current": 2 * _allocated(),
            "active_bytes.all.current": _allocated(), "allocated_bytes.all.peak": _allocated(), "num_ooms": 0}


_queued = []


def _lazy_call(fn):
    if _state["initialized"]:
        fn()
    else:
        _queued.append(fn)


def _init():
    first = not _state["initialized"]
    _state["initialized"] = _state["allocator"] = True
    while first and _queued:
        _queued.pop(0)()


cuda.memory_stats = memory_stats
cuda.mem_get_info = lambda device=None: (1 << 30, 4 << 30)
cuda.device_count = lambda: 1
cuda.memory_reserved = lambda device=None: 2 * _allocated()
cuda.current_device = lambda: 0
cuda._lazy_call = _lazy_call
cuda.init = _init
'''

JOB = """
import os, sys, time
import torch
import memtui.record
torch.empty(1000)
memtui.record.step()
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
torch.empty(2000)
memtui.record.step()
try:
    torch.fake_oom(1 << 30)
except torch.cuda.OutOfMemoryError:
    pass
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
"""


@pytest.fixture
def job_env(tmp_path):
    package = tmp_path / "faketorch" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_TORCH + COUNTERS)
    folder = tempfile.mkdtemp(prefix="mtj", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "MEMTUI_LIVE")}
    env.update(PYTHONPATH=os.pathsep.join([str(package.parent), str(ROOT)]), MEMTUI_RUNTIME_DIR=folder)
    (tmp_path / "job.py").write_text(JOB)
    yield env, folder
    shutil.rmtree(folder, ignore_errors=True)


def watch_a_job(command: list[str], env: dict, folder: str, tmp_path: Path) -> None:
    go, done = tmp_path / "go", tmp_path / "done"
    job = subprocess.Popen([*command, str(go), str(done)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env, cwd=tmp_path)
    try:
        assert job.stdout.readline().strip() == "ready", job.stderr.read()
        found = list_jobs(folder)
        assert [j.pid for j in found] == [job.pid]
        client = LiveClient(found[0]).connect()
        assert client.wait_for(lambda s: s.has_state and s.samples, 10)
        assert client.state.latest().devices[0].allocated == 1000
        assert client.state.latest().devices[0].limit == 2000 + (1 << 30)
        go.touch()
        assert client.wait_for(lambda s: s.ooms and s.steps and s.events() >= 3, 10)
        assert client.state.ooms[0]["requested"] == 1 << 30
        assert [n for n, _ in client.state.steps] == [2]
        actions = [e["action"] for e in client.state.traces[0]]
        assert actions.count("alloc") == 2 and "oom" in actions
        assert client.wait_for(lambda s: s.latest().devices[0].allocated == 3000, 5)
        frozen = client.freeze(10)
        assert [e["action"] for e in frozen["device_traces"][0]][:4] == actions[:4]
        done.touch()
        assert client.wait_for(lambda s: s.ended, 10)
        assert client.state.bye["reason"] == "exit" and client.state.events() >= 3  # the last state stays
        client.close()
        assert job.wait(10) == 0, job.stderr.read()
    finally:
        job.kill()
        job.wait()
    assert list_jobs(folder) == []


def test_memtui_run_live_serves_the_script(job_env, tmp_path):
    env, folder = job_env
    watch_a_job([sys.executable, "-m", "memtui", "run", "--live", "--out", str(tmp_path), "job.py"], env, folder,
                tmp_path)


def test_the_environment_variable_serves_a_job_without_a_change_to_it(job_env, tmp_path):
    env, folder = job_env
    # What the installed memtui-live.pth does at interpreter start, then the unchanged script.
    hook = (ROOT / "src" / "live_hook" / "memtui-live.pth").read_text()
    runner = f"import runpy, sys\n{hook}\nsys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')"
    watch_a_job([sys.executable, "-c", runner, "job.py"], {**env, "MEMTUI_LIVE": "1"}, folder, tmp_path)


def test_without_the_variable_the_hook_does_nothing(job_env, tmp_path):
    env, folder = job_env
    hook = (ROOT / "src" / "live_hook" / "memtui-live.pth").read_text()
    code = (f"{hook}\nimport sys\nimport torch\ntorch.empty(10)\n"
            "print(any(m.startswith('memtui.') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.strip() == "False" and list_jobs(folder) == []


def test_a_launcher_that_never_touches_cuda_serves_nothing(job_env, tmp_path):
    env, folder = job_env
    hook = (ROOT / "src" / "live_hook" / "memtui-live.pth").read_text()
    code = f"{hook}\nimport time\nimport torch\ntime.sleep(0.3)\nprint('up')"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**env, "MEMTUI_LIVE": "1"}, timeout=60)
    assert done.stdout.strip() == "up" and done.stderr == ""
    assert time.monotonic() - started < 30 and list_jobs(folder) == []
