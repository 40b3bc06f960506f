"""The cyclic collector waits while the command's modules are imported and while a snapshot
is decoded and its model built (millions of containers and next to no garbage), and runs
again for the command's own work and once the model is there."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

CHILD = r"""
import gc, json, sys
import memtui.open as opened
from memtui import cli
seen = {}
building = opened._model_from_scan
def model_from_scan(*args):
    seen["model"] = gc.isenabled()
    return building(*args)
opened._model_from_scan = model_from_scan
opening = opened.open_snapshot
def open_snapshot(*args, **kwargs):
    seen["command"] = gc.isenabled()
    try:
        return opening(*args, **kwargs)
    finally:
        seen["after the open"] = gc.isenabled()
opened.open_snapshot = open_snapshot
import memtui.commands._common as common
common.open_snapshot = open_snapshot
finding = cli.find_command
def find_command(name):
    seen["imports"] = gc.isenabled()
    return finding(name)
cli.find_command = find_command
code = cli.main(["info", "--no-cache", sys.argv[1]])
seen["after main"] = gc.isenabled()
seen["set aside"] = gc.get_freeze_count() > 0
frozen = gc.get_freeze_count()
cli.main(["info", "--no-cache", sys.argv[1]])
seen["set aside once"] = gc.get_freeze_count() == frozen
print(json.dumps({"code": code, **seen}))
"""


def test_collections_wait_for_the_model_and_run_for_the_command(tmp_path):
    from tests.fixtures.tiny_snapshot import write_tiny_snapshot

    snapshot = write_tiny_snapshot(tmp_path)
    out = subprocess.run([sys.executable, "-c", CHILD, str(snapshot)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"code": 0, "imports": False, "command": True, "model": False, "after the open": True,
                    "after main": True, "set aside": True, "set aside once": True}
