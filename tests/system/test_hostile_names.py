"""File names holding terminal escape sequences are printed escaped, wherever memtui prints them.

A name comes from the user or from a glob over someone else's files (``ranks``): a name
with ESC or BEL in it must not recolour, retitle or ring the terminal that shows it.
"""

from __future__ import annotations

import shutil

import pytest

from memtui.cli import main
from tests.fixtures.tiny_snapshot import write_tiny_snapshot

HOSTILE = "evil\x1b]0;pwned\x07\x1b[31m"
ESCAPED = "evil\\x1b]0;pwned\\x07\\x1b[31m"


@pytest.mark.parametrize("command, suffix", [("export", ".msgpack"), ("convert", ".json"), ("convert", ".pickle")])
def test_the_written_name_is_escaped(tmp_path, capsys, command, suffix):
    snapshot = write_tiny_snapshot(tmp_path)
    target = tmp_path / (HOSTILE + suffix)
    cache = ["--no-cache"] if command == "export" else []
    assert main([command, *cache, str(snapshot), "-o", str(target)]) == 0
    out = capsys.readouterr().out
    assert target.exists()
    assert "\x1b" not in out and "\x07" not in out and ESCAPED + suffix in out, out


def test_rank_file_names_are_escaped(tmp_path, capsys):
    snapshot = write_tiny_snapshot(tmp_path)
    shutil.copy(snapshot, tmp_path / (HOSTILE + ".pickle"))
    assert main(["ranks", "--no-cache", "--workers", "1", str(tmp_path / (HOSTILE + ".pickle")), str(snapshot)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and ESCAPED + ".pickle" in out, out
