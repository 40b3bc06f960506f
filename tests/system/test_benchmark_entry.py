"""The benchmarks start memtui as its installed script does (benchmarks/entry.py): the same
command line, the same answers and exit statuses as ``python -m memtui``."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT, SAMPLES

sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    from entry import editable_hook, install_note, memtui_argv
finally:
    sys.path.remove(str(ROOT / "benchmarks"))


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


def test_the_script_way_answers_as_python_m_does():
    sample = str(SAMPLES / "oom_training.pickle.xz")
    for args in (["info", "--no-cache", "--json", sample], ["info", "--no-cache", "no-such-file.pickle"]):
        script, module = _run(memtui_argv(*args)), _run([sys.executable, "-m", "memtui", *args])
        assert (script.returncode, script.stdout, script.stderr) == (module.returncode, module.stdout, module.stderr)
    assert _run(memtui_argv("info", "--no-cache", sample)).returncode == 0


def test_the_note_names_an_editable_install_only_where_there_is_one():
    hook = editable_hook()
    assert ("editable" in install_note()) == (hook is not None)
