"""A snapshot's external annotations are made Annotation objects when first read, not at
every open: a command that only counts them (info) never makes them."""

from __future__ import annotations

import json
import pickle

from memtui.cli import main
from memtui.model import snapshot as model_snapshot
from memtui.model.snapshot import Annotation, ExternalAnnotations
from memtui.open import open_snapshot
from tests.fixtures import variants


def _counting(monkeypatch) -> list[object]:
    """The annotations made, from a dict (the plain readers) or from a row (the compiled
    scanner's columns, the model cache)."""
    made: list[object] = []
    for name in ("_annotation", "annotation_of_row"):
        real = getattr(model_snapshot, name)

        def counted(item, real=real):
            made.append(item)
            return real(item)
        monkeypatch.setattr(model_snapshot, name, counted)
    return made


def _annotated(tmp_path, n: int):
    path = tmp_path / "annotated.pickle"
    snap = variants.modern()
    snap["external_annotations"] = [{"stage": "START" if i % 2 == 0 else "END", "name": f"step {i // 2}",
                                     "device": 0, "time_us": 1000.0 + i} for i in range(n)]
    path.write_bytes(pickle.dumps(snap, protocol=4))
    return path


def test_info_counts_the_annotations_without_making_them(tmp_path, capsys, monkeypatch):
    made = _counting(monkeypatch)
    path = _annotated(tmp_path, 40)
    assert main(["info", "--json", "--no-cache", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["annotations"] == 40
    assert made == []


def test_the_annotations_are_made_once_when_first_read(tmp_path, monkeypatch):
    made = _counting(monkeypatch)
    notes = open_snapshot(_annotated(tmp_path, 6), cache=None).annotations
    assert len(notes) == 6 and made == []
    assert notes[1] == Annotation(0, "END", "step 0", 1001.0)
    assert [a.name for a in notes][-2:] == ["step 2", "step 2"] and notes[-1:] == [notes[5]]
    assert len(made) == 6  # each made once, however often read


def test_they_equal_the_list_they_stand_for():
    rows = [[0, "START", "a", 1.0], [1, "END", "a", 2.0]]
    notes = ExternalAnnotations(rows, lambda row: Annotation(*row))
    assert notes == [Annotation(*row) for row in rows] and list(reversed(notes))[0].device == 1
    assert notes != [Annotation(*rows[0])]
    assert ExternalAnnotations([], Annotation) != "" and ExternalAnnotations([], Annotation) != ()  # as [] != ""


def test_two_threads_reading_them_first_at_once_both_get_them_all():
    """One thread finishes making them while another, which found none made, is between its
    look and its making: it got an empty list, kept for good (the cache's writer and the
    explorer's worker may read them first at once)."""
    import inspect
    import sys
    import threading

    rows = [[0, "START", f"s{i}", float(i)] for i in range(100)]
    notes = ExternalAnnotations(rows, lambda row: Annotation(*row))
    code = ExternalAnnotations._all.__code__
    lines, first = inspect.getsourcelines(code)
    looked = first + next(i for i, line in enumerate(lines) if "if made is None" in line)
    paused, other_done, seen = threading.Event(), threading.Event(), {}

    def tracer(frame, event, arg):
        if frame.f_code is not code:
            return None

        def step(frame, event, arg):
            if event == "line" and frame.f_lineno > looked and not paused.is_set():
                paused.set()  # found none made: the other thread makes them all now
                other_done.wait(10)
            return step
        return step

    def first_reader():
        sys.settrace(tracer)
        try:
            seen["first"] = len(list(notes))
        finally:
            sys.settrace(None)

    reader = threading.Thread(target=first_reader)
    reader.start()
    assert paused.wait(10)
    seen["second"] = len(list(notes))
    other_done.set()
    reader.join(10)
    assert seen == {"first": 100, "second": 100} and len(list(notes)) == 100
