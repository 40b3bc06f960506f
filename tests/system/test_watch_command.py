"""memtui watch's headless forms: --list and --status, and its one-line refusals."""

from __future__ import annotations

import json
import os
import subprocess

from memtui.cli import main
from memtui.live.replay_source import serve_replay
from tests.conftest import SAMPLES


def test_list_status_and_refusals(live_dir, capsys):
    def watch(*args: str, folder: str) -> subprocess.CompletedProcess:
        code = main(["watch", *args])  # in this process: the live folder is the fixture's
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out.out, out.err)

    done = watch(folder=live_dir)
    assert done.returncode == 2 and done.stderr.startswith("memtui: no live jobs in") and done.stdout == ""
    servers = [serve_replay(str(SAMPLES / "oom_training.pickle.xz"), rate=100_000, rank=r, job="j") for r in (0, 1)]
    try:
        listed = json.loads(watch("--list", "--json", folder=live_dir).stdout)
        assert [(j["pid"], j["rank"]) for j in listed] == [(os.getpid(), 0), (os.getpid(), 1)]
        text = watch("--list", folder=live_dir).stdout
        assert "PID RANK DEVICE  RUNNING  COMMAND" in text and "oom_training.pickle.xz" in text
        status = json.loads(watch("--status", "--json", f"{os.getpid()}:1", folder=live_dir).stdout)
        assert [s["rank"] for s in status] == [1] and status[0]["devices"][0]["allocated"] > 0
        missing = watch("nothing-like-this", folder=live_dir)
        assert missing.returncode == 2 and "no live job matches 'nothing-like-this'" in missing.stderr
    finally:
        for server in servers:
            server.stop()
