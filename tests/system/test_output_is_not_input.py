"""A file is never written over the snapshot it is made from, --force or not: export and
convert refuse in one line, whatever name reaches the file (another spelling, a link), and
the explorer's export (the same writer) does too."""

from __future__ import annotations

import lzma
import os
import shutil

import pytest

from memtui.cli import main
from memtui.errors import UsageError
from memtui.export.writer import export_snapshot
from memtui.open import open_snapshot
from tests.conftest import sample_files


@pytest.fixture
def snapshot_copy(tmp_path):
    source = next(p for p in sample_files() if p.name.endswith(".pickle.xz"))
    path = tmp_path / "snap.pickle"
    with lzma.open(source) as fh, open(path, "wb") as out:
        shutil.copyfileobj(fh, out)
    return path


def test_export_and_convert_refuse_to_write_over_their_input(snapshot_copy, tmp_path, capsys):
    before = snapshot_copy.read_bytes()
    link = tmp_path / "link.pickle"
    os.symlink(snapshot_copy, link)
    spellings = [str(snapshot_copy), str(tmp_path / "." / "snap.pickle"), str(link)]
    for out in spellings:
        for argv in (["export", str(snapshot_copy), "-f", "size>100GiB", "-o", out, "--force"],
                     ["convert", str(snapshot_copy), "-o", out, "--force"]):
            capsys.readouterr()
            assert main(["--no-cache", *argv]) == 2, argv
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "is the file it would be made from" in err, err
    assert snapshot_copy.read_bytes() == before


def test_the_writer_refuses_the_snapshot_it_was_opened_from(snapshot_copy):
    before = snapshot_copy.read_bytes()
    snapshot = open_snapshot(snapshot_copy, cache=None)
    with pytest.raises(UsageError, match="is the file it would be made from"):
        export_snapshot(snapshot, str(snapshot_copy), "size>100GiB", force=True)
    assert snapshot_copy.read_bytes() == before
