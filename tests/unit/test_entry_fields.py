"""One list of trace-entry fields (memtui.model.trace.ENTRY_FIELDS) and the readers held to it.

The compiled scanner's key table, the fast path's columns, the columns the fast path leaves to
the streaming decoder and the keys the model's TraceBuilder reads are each checked against the
list; and a big file the fast path hands on because of a field it does not know is said in one
line.
"""

from __future__ import annotations

import dataclasses
import pickle
import re

import pytest

from memtui import open as opening
from memtui.cli import main
from memtui.load import fast
from memtui.model.trace import _MAIN_KEYS, ENTRY_FIELDS, TraceColumns
from tests.conftest import ROOT
from tests.fixtures.tiny_snapshot import tiny_snapshot

NATIVE = ROOT / "src" / "memtui_native"


def scanner_entry_keys() -> set[str]:
    """The trace-entry keys of the compiled scanner: its enum's K_ACTION up to ENTRY_KEYS_END,
    named by its KEY_NAMES table."""
    header = (NATIVE / "native.h").read_text()
    enum = re.search(r"enum \{(.*?)K_COUNT", header, re.S).group(1)
    order = re.findall(r"\bK_[A-Z_]+\b", re.sub(r"/\*.*?\*/", "", enum, flags=re.S))
    end = re.search(r"#define ENTRY_KEYS_END (K_[A-Z_]+)", header).group(1)
    entry = order[order.index("K_ACTION"):order.index(end)]
    names = dict(re.findall(r"\[(K_[A-Z_]+)\] = \"([^\"]+)\"", (NATIVE / "tables.c").read_text()))
    assert set(entry) <= set(names), "a key of the scanner's enum has no name in tables.c"
    return {names[k] for k in entry}


def test_the_scanner_reads_only_listed_fields():
    assert scanner_entry_keys() <= set(ENTRY_FIELDS)


def test_the_fast_path_columns_are_those_of_the_fields_it_reads():
    scanned = {ENTRY_FIELDS[k] for k in scanner_entry_keys()}
    assert scanned == set(fast.INT_COLUMNS) | {"time_us"}


def test_every_trace_column_comes_from_a_listed_field():
    columns = {f.name for f in dataclasses.fields(TraceColumns)}
    # pools is the table the pool column indexes: it is made from pool_id too.
    assert set(ENTRY_FIELDS.values()) | {"pools"} == columns


def test_the_columns_left_to_the_streaming_decoder_are_those_of_the_fields_the_scanner_does_not_read():
    unread = {ENTRY_FIELDS[k] for k in set(ENTRY_FIELDS) - scanner_entry_keys()}
    # cpp_frames is a second source of a column the scanner fills (stack): a file with it falls back whole.
    assert unread - {"stack"} | {"pools"} == set(opening._NOT_SCANNED)


def test_the_trace_builder_reads_only_listed_fields():
    source = (ROOT / "memtui" / "model" / "trace.py").read_text()
    read = set(re.findall(r"e\.get\(\"(\w+)\"", source)) | set(re.findall(r"repeat\(\"(\w+)\"\)", source))
    assert read and read | set(_MAIN_KEYS) <= set(ENTRY_FIELDS)


def write_with_extra_field(path, field: str | None):
    snap = tiny_snapshot()
    if field:
        for trace in snap["device_traces"]:
            for entry in trace:
                entry[field] = 7
    path.write_bytes(pickle.dumps(snap, protocol=4))
    return path


@pytest.mark.skipif(not fast.available(), reason="the compiled fast path is not built here")
@pytest.mark.parametrize("field", [None, "a_field_from_a_newer_torch"])
def test_a_big_file_sent_to_the_slower_decoder_for_an_unknown_field_is_said_once(tmp_path, monkeypatch, capsys,
                                                                                 field):
    monkeypatch.setattr(opening, "NOTICE_FROM_BYTES", 0)  # the tiny file counts as big
    path = write_with_extra_field(tmp_path / "snap.pickle", field)
    assert main(["info", "--no-cache", str(path)]) == 0
    err = capsys.readouterr().err
    notices = [line for line in err.splitlines() if "slower decoder" in line]
    assert len(notices) == (1 if field else 0), err
    if field:
        assert notices[0].startswith("memtui: note: snap.pickle was read with the slower decoder")


@pytest.mark.skipif(not fast.available(), reason="the compiled fast path is not built here")
def test_a_small_file_is_not_worth_a_notice(tmp_path, capsys):
    path = write_with_extra_field(tmp_path / "snap.pickle", "a_field_from_a_newer_torch")
    assert main(["info", "--no-cache", str(path)]) == 0
    assert "slower decoder" not in capsys.readouterr().err
