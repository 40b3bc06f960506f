"""The MCP tool ``live_status``: a running job's memory now, from a server started like an agent's."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile

import pytest

from memtui.live.replay_source import serve_replay
from tests.conftest import ROOT, SAMPLES

mcp = pytest.importorskip("mcp")


async def call_live_status(env: dict, arguments: dict):
    params = mcp.StdioServerParameters(command=sys.executable, args=["-m", "memtui", "mcp", "--root", str(SAMPLES)],
                                       cwd=str(ROOT), env=env)
    with open(os.devnull, "w") as errlog:
        async with mcp.stdio_client(params, errlog=errlog) as (read, write):
            async with mcp.ClientSession(read, write) as session:
                await session.initialize()
                return [await session.call_tool("live_status", a) for a in arguments]


def test_the_tool_function_reports_each_rank_now(monkeypatch):
    from memtui.errors import UsageError
    from memtui.mcp.tools import live_status

    folder = tempfile.mkdtemp(prefix="mtm", dir="/tmp")
    monkeypatch.setenv("MEMTUI_RUNTIME_DIR", folder)
    assert "no live jobs" in live_status(None).summary
    servers = [serve_replay(str(SAMPLES / "oom_training.pickle.xz"), rate=100_000, rank=r, job="j") for r in (0, 1)]
    try:
        answer = live_status(None)
        assert sorted(j["rank"] for j in answer.data["jobs"]) == [0, 1] and not answer.data["truncated"]
        assert live_status(None, limit=1).data["truncated"]
        with pytest.raises(UsageError, match="no live job matches"):
            live_status(None, "zz")
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


# Its own MCP server process (the live folder is read from the server's environment): about
# 9 s on a shared 2-core machine, so a slow case; the function itself is tested above.
@pytest.mark.slow
def test_live_status_reports_each_rank_now(monkeypatch):
    folder = tempfile.mkdtemp(prefix="mtm", dir="/tmp")
    monkeypatch.setenv("MEMTUI_RUNTIME_DIR", folder)
    servers = [serve_replay(str(SAMPLES / "oom_training.pickle.xz"), rate=100_000, rank=r, job="j") for r in (0, 1)]
    try:
        env = {**os.environ, "MEMTUI_RUNTIME_DIR": folder, "PYTHONPATH": str(ROOT)}
        every, one, none = asyncio.run(call_live_status(env, [{}, {"target": f"{os.getpid()}:1"}, {"target": "zz"}]))
        assert not every.is_error
        jobs = every.structured_content["jobs"]
        assert sorted(j["rank"] for j in jobs) == [0, 1]
        assert jobs[0]["devices"][0]["allocated"] > 0
        assert "2 live jobs" in every.content[0].text and "rank 1 device 0: allocated" in every.content[0].text
        assert [j["rank"] for j in one.structured_content["jobs"]] == [1]
        assert none.is_error and "no live job matches 'zz'" in none.content[0].text
        assert all(s.stats.trace_reads == 0 for s in servers)  # a status never makes a job read its trace
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
