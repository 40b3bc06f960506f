"""A bug in a headless command: one line naming a short report, exit status 70, no traceback."""

from __future__ import annotations

import os

from memtui.cli import main
from memtui.crash import CRASH_EXIT, KEEP_REPORTS, write_crash_report
from tests.fixtures.tiny_snapshot import write_tiny_snapshot


def test_a_command_that_fails_unexpectedly(tmp_path, capsys, monkeypatch):
    import memtui.services.info as info

    def broken(snapshot):
        raise KeyError("\x1b[2Jsomething the code did not expect")

    monkeypatch.setattr(info, "summarize", broken)
    snapshot = write_tiny_snapshot(tmp_path)
    code = main(["info", "--cache-dir", str(tmp_path / "cache"), str(snapshot)])
    out, err = capsys.readouterr()
    assert code == CRASH_EXIT and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memtui: internal error (KeyError: ") and "\x1b" not in err
    report = lines[0].rsplit(" ", 1)[-1]
    assert report.startswith(str(tmp_path / "cache" / "crashes"))
    text = open(report).read()
    assert "in broken" in text and "KeyError" in text and "memtui " in text.splitlines()[1]


def test_old_reports_are_pruned(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tmp_path / "memtui" / "crashes"
    folder.mkdir(parents=True)
    for k in range(KEEP_REPORTS + 5):
        (folder / f"crash-20200101-0000{k:02d}-1.txt").write_text("old")
    write_crash_report(RuntimeError("new"))
    names = sorted(os.listdir(folder))
    assert len(names) == KEEP_REPORTS and not any(n.endswith("000000-1.txt") for n in names)
