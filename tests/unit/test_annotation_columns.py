"""The compiled scanner reads the external annotations into columns
(src/memtui_native/annotations.c); the model made of them is the one the reference reader's
dicts make, whatever the annotations hold. An annotation the columns do not hold turns those
read before it into dicts and the rest is read as plain data; a file the scanner cannot
read at all goes to the Python decoder."""

from __future__ import annotations

import lzma
import math
import os
import pickle

import pytest

from memtui.load import fast
from memtui.model.snapshot import annotation_row
from memtui.open import open_fast, open_plain, open_snapshot
from tests.fixtures import variants

pytestmark = pytest.mark.skipif(not fast.available(), reason="the compiled scanner is not built")


def _torch_like(i: int) -> dict:
    return {"stage": "START" if i % 2 == 0 else "END", "name": f"step#{i // 2}", "device": 0,
            "time_us": 1_700_000_000_000_000 + 10 * i}


def _write(tmp_path, annotations, before_traces: bool = False, name: str = "a.pickle", **more) -> str:
    snap = variants.modern()
    if before_traces:  # the key ahead of the traces: read in order before the workers
        snap = {"external_annotations": annotations, **{k: v for k, v in snap.items() if k != "external_annotations"}}
    else:
        snap["external_annotations"] = annotations
    snap.update(more)
    path = tmp_path / name
    path.write_bytes(pickle.dumps(snap, protocol=4))
    return str(path)


def _scanned_columns(path: str) -> dict | None:
    from memtui.compiled import native

    scanner = native.Scanner()
    with open(path, "rb") as fh:
        data = fh.read()
    scanner.feed(data, True)
    return scanner.finish(len(data))["annotations"]


def _comparable(rows) -> list[tuple]:
    """Rows with NaN as a word: Python 3.13's dataclasses compare field by field, so an
    Annotation whose time is NaN equals none, not even itself."""
    return [tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row) for row in rows]


def _same_annotations(path: str) -> None:
    scanned, reference = open_fast(path), open_plain(path)
    assert scanned is not None
    assert len(scanned.annotations) == len(reference.annotations)
    made = [annotation_row(a) for a in scanned.annotations]
    assert _comparable(made) == _comparable(annotation_row(a) for a in reference.annotations)
    assert _comparable(scanned.annotations.fields()) == _comparable(reference.annotations.fields())


def test_torch_s_annotations_are_columns_and_the_same_annotations(tmp_path):
    path = _write(tmp_path, [_torch_like(i) for i in range(2500)])  # three APPENDS batches
    columns = _scanned_columns(path)
    assert columns is not None and len(columns["stage"]) == 2500
    _same_annotations(path)


@pytest.mark.parametrize("annotation", [
    {"stage": "START", "name": "x", "device": 0},  # no time: NaN
    {"name": "x", "device": 1, "time_us": 5},  # no stage
    {"stage": "END", "device": 2, "time_us": 5},  # no name
    {"stage": "END", "name": "x", "time_us": 5},  # no device: 0
    {"stage": "END", "name": "x", "device": -1, "time_us": 5},  # devices out of range read as 0
    {"stage": "END", "name": "x", "device": 5000, "time_us": 5},
    {"stage": "END", "name": "x", "device": 2**40, "time_us": 5},
    {"stage": "END", "name": "x", "device": 0, "time_us": 2.5},
    {"stage": "END", "name": "x", "device": 0, "time_us": None},
    {"stage": "END", "name": "x", "device": 0, "time_us": math.inf},
    {"stage": "END", "name": "x", "device": 0, "time_us": -math.inf},
    {"stage": "END", "name": "x", "device": 0, "time_us": math.nan},
    {"stage": "END", "name": "x", "device": 0, "time_us": 2**62 + 1},  # rounded as float() rounds
    {"stage": "END", "name": "x", "device": 0, "time_us": -(2**40)},
    {"stage": "END", "name": "a\x1b[31mred\u202e", "device": 0, "time_us": 1},  # shown escaped
    {"stage": "", "name": "", "device": 0, "time_us": 0},
    {"stage": "s" * 300, "name": "n" * 70_000, "device": 3, "time_us": 1},  # long strings
])
def test_a_value_the_columns_hold_reads_as_the_dict_does(tmp_path, annotation):
    path = _write(tmp_path, [_torch_like(0), annotation, _torch_like(1)])
    assert _scanned_columns(path) is not None
    _same_annotations(path)


@pytest.mark.parametrize("odd", [
    {"stage": "END", "name": "x", "device": True, "time_us": 5},  # a bool is an int to the model
    {"stage": "END", "name": "x", "device": 1.0, "time_us": 5},
    {"stage": "END", "name": "x", "device": None, "time_us": 5},
    {"stage": "END", "name": "x", "device": 2**70, "time_us": 5},
    {"stage": "END", "name": "x", "device": 0, "time_us": 2**70},
    {"stage": "END", "name": "x", "device": 0, "time_us": True},
    {"stage": 7, "name": "x", "device": 0, "time_us": 5},
    {"stage": "END", "name": None, "device": 0, "time_us": 5},
    {"stage": "END", "name": ["a"], "device": 0, "time_us": 5},
    {"stage": "END", "name": "x", "device": 0, "time_us": 5, "extra": {"a": [1, 2]}},
    {},
    {1: "a"},
])
def test_an_annotation_the_columns_do_not_hold_makes_the_list_plain(tmp_path, odd):
    for at in (0, 1, 1200):  # the first; after one; in the second APPENDS batch, after a whole one
        annotations = [_torch_like(i) for i in range(at)] + [odd] + [_torch_like(i) for i in range(100)]
        path = _write(tmp_path, annotations)
        assert _scanned_columns(path) is None
        _same_annotations(path)


def test_annotations_ahead_of_the_traces_and_in_a_compressed_file(tmp_path):
    annotations = [_torch_like(i) for i in range(300)]
    path = _write(tmp_path, annotations, before_traces=True)
    assert _scanned_columns(path) is not None
    _same_annotations(path)
    packed = tmp_path / "a.pickle.xz"
    with open(path, "rb") as fh:
        packed.write_bytes(lzma.compress(fh.read()))
    _same_annotations(str(packed))


def test_a_list_referred_to_elsewhere_holds_its_items(tmp_path):
    annotations = [_torch_like(i) for i in range(1500)]
    path = _write(tmp_path, annotations, again=annotations)  # a memo reference to the list, after it
    assert _scanned_columns(path) is None
    snapshot, reference = open_fast(path), open_plain(path)
    assert snapshot is not None
    assert _comparable(snapshot.annotations.fields()) == _comparable(reference.annotations.fields())


def test_an_annotation_given_twice_goes_to_the_python_decoder(tmp_path):
    one = _torch_like(0)
    path = _write(tmp_path, [one, _torch_like(1), one])  # the same dict: a memo reference to it
    assert open_fast(path) is None  # the scanner hands the file over
    assert (_comparable(open_snapshot(path, cache=None).annotations.fields())
            == _comparable(open_plain(path).annotations.fields()))


def test_a_root_whose_annotations_were_replaced_keeps_the_last(tmp_path):
    """A dict written with the key twice (pickle.dumps never does; a hand-made file can): the
    unpickler keeps the second value, so the first list's columns are not the annotations."""
    path = _write(tmp_path, [_torch_like(i) for i in range(5)])
    with open(path, "rb") as fh:
        data = fh.read()
    # The root dict's last SETITEMS gets one more pair: 'external_annotations' -> [] (the
    # bytes before its closing SETITEMS and STOP).
    assert data.endswith(b"u.")  # SETITEMS, STOP
    extra = pickle.dumps("external_annotations", protocol=4)[2:-1] + b"]"  # the key, then EMPTY_LIST
    frame_free = data[:-2] + extra + b"u."
    path2 = os.path.join(os.path.dirname(path), "twice.pickle")
    with open(path2, "wb") as fh:
        fh.write(frame_free)
    reference = open_plain(path2)
    assert len(reference.annotations) == 0
    snapshot = open_fast(path2)
    assert snapshot is not None and list(snapshot.annotations) == []
