"""Random filter expressions: the numpy masks equal a slow evaluator over the raw dicts."""

from __future__ import annotations

import copy
import functools
import os
import pickle
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.load.read import read_snapshot
from memtui.model import build_model
from memtui.query import FilterError, compile_filter
from tests.conftest import SHARED
from tests.fixtures.filter_reference import ReferenceDevice
from tests.fixtures.snapshot_strategies import count_case
from tests.fixtures.synthetic import synthetic_snapshot as build_synthetic_snapshot

# The reference walks every event in Python: fewer examples on the larger real files.
# MEMTUI_FUZZ_EXAMPLES raises both for a long run.
EXTRA = int(os.environ.get("MEMTUI_FUZZ_EXAMPLES", "0"))
SYNTHETIC = settings(max_examples=max(80, EXTRA), deadline=None, suppress_health_check=[HealthCheck.too_slow])
REAL = settings(max_examples=max(30, EXTRA // 3), deadline=None, suppress_health_check=[HealthCheck.too_slow])
REAL_FILES = ["multistream.pickle", "train_linear_adam.pickle", "expandable_segments.pickle"]


class Subject:
    """One snapshot as both the model and the reference, plus values worth filtering on."""

    def __init__(self, raw: dict) -> None:
        self.references = [ReferenceDevice(raw, d) for d in range(max(1, len(raw["device_traces"])))]
        self.model = build_model(copy.deepcopy(raw))
        entries = [e for trace in raw["device_traces"] for e in trace]
        self.addresses = sorted({e.get("addr", 0) for e in entries} | {s["address"] for s in raw["segments"]})[:60]
        self.sizes = sorted({e.get("size", 0) for e in entries})[:60] or [0]
        self.streams = sorted({e.get("stream", 0) for e in entries}) or [0]
        self.ids = sorted({(e.get("addr", 0), ref.blocks.version[i]) for ref in self.references
                           for i, e in enumerate(ref.entries) if ref.blocks.version[i] is not None})[:60]
        frames = [f for e in entries for f in (e.get("frames") or [])]
        self.files = sorted({f["filename"] for f in frames}) or ["train.py"]
        self.names = sorted({f["name"] for f in frames}) or ["forward"]
        self.lines = sorted({f["line"] for f in frames}) or [0]
        self.texts = sorted({str(e.get(k, "")) for e in entries for k in ("compile_context", "user_metadata")})
        self.pools = sorted({tuple(s.get("segment_pool_id", (0, 0))) for s in raw["segments"]}) or [(0, 0)]
        self.n_events = max(len(ref.entries) for ref in self.references)


def real_files() -> list:
    found = [pytest.param(str(SHARED / name), id=name) for name in REAL_FILES if (SHARED / name).exists()]
    return found or [pytest.param(None, marks=pytest.mark.skip(reason=f"no real snapshots at {SHARED}"))]


_SUBJECTS: dict = {}
# Built once per seed, not for every case: subject_for keeps the first one's subject, and
# normalize_dict reads the dict through pickle without changing it.
synthetic_snapshot = functools.cache(build_synthetic_snapshot)


def subject_for(source, key: str | None = None) -> Subject:
    key = key or source
    if key not in _SUBJECTS:
        raw = read_snapshot(source) if isinstance(source, str) else normalize_dict(source)
        _SUBJECTS[key] = Subject(raw)
    return _SUBJECTS[key]


def normalize_dict(obj: dict) -> dict:
    # Through pickle and the loader, like a file: the reference sees exactly what a user's file gives.
    import io

    from memtui.load.normalize import normalize
    from memtui.load.safe_pickle import safe_load

    return normalize(safe_load(io.BytesIO(pickle.dumps(obj, protocol=4)), "synthetic"), "synthetic")


def quote(text: str) -> str:
    if text == "" or re.search(r'[\s()"]', text) or text.startswith("-"):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def substring(draw, text: str) -> str:
    if not text:
        return ""
    a = draw(st.integers(0, len(text) - 1))
    b = draw(st.integers(a + 1, min(len(text), a + 12)))
    piece = text[a:b]
    return piece.upper() if draw(st.booleans()) else piece


SIZE_UNITS = [("", 1), ("B", 1), ("KiB", 1024), ("KB", 1000), ("MiB", 1 << 20), ("MB", 10**6), ("GiB", 1 << 30)]


@st.composite
def size_text(draw, subject: Subject) -> str:
    if draw(st.booleans()):
        return str(draw(st.sampled_from(subject.sizes)))
    unit, factor = draw(st.sampled_from(SIZE_UNITS))
    return f"{draw(st.integers(0, 3000))}{unit}"


@st.composite
def term(draw, subject: Subject) -> str:
    kind = draw(st.sampled_from(["action", "size", "event", "time", "stream", "device", "addr", "id", "seg",
                                 "pool", "ctx", "meta", "file", "func", "frame", "bare", "flag"]))
    if kind == "flag":
        return draw(st.sampled_from(["live", "leaked", "freed"]))
    if kind == "action":
        names = st.sampled_from(["alloc", "free", "free_requested", "free_completed", "segment", "segment_alloc",
                                 "segment_free", "segment_map", "oom", "snapshot"])
        return "action:" + ",".join(draw(st.lists(names, min_size=1, max_size=2)))
    if kind == "size":
        op = draw(st.sampled_from([":", "=", "<", "<=", ">", ">=", "range"]))
        if op == "range":
            lo, hi = sorted([draw(size_text(subject)), draw(size_text(subject))], key=parse_size_or_zero)
            return f"size:{lo if draw(st.booleans()) else ''}..{hi}"
        return f"size{op}{draw(size_text(subject))}"
    if kind == "event":
        a, b = sorted(draw(st.integers(0, subject.n_events + 3)) for _ in range(2))
        return draw(st.sampled_from([f"event:{a}..{b}", f"event:{a}..", f"event:..{b}", f"event>{a}",
                                     f"event<={b}", f"event:{a}"]))
    if kind == "time":
        unit = draw(st.sampled_from(["s", "ms", "us", ""]))
        scale = {"s": 1, "ms": 1e3, "us": 1e6, "": 1}[unit]
        a, b = sorted(round(draw(st.floats(0, 12)) * scale, 3) for _ in range(2))
        return draw(st.sampled_from([f"time:{a}{unit}..{b}{unit}", f"time>{a}{unit}", f"time<{b}{unit}",
                                     f"time:..{b}{unit}"]))
    if kind in ("stream", "device"):
        values = subject.streams + [3] if kind == "stream" else [0, 1, 2]
        value = draw(st.sampled_from(values))
        return f"{kind}:{hex(value) if kind == 'stream' and draw(st.booleans()) else value}"
    if kind in ("addr", "seg"):
        address = draw(st.sampled_from(subject.addresses or [0x7F00]))
        prefix = draw(st.sampled_from(["", "0x", "b", "s"] if kind == "addr" else ["", "0x", "s"]))
        return f"{kind}:{prefix}{address:x}"
    if kind == "id":
        address, version = draw(st.sampled_from(subject.ids or [(0x7F00, 0)]))
        version += draw(st.sampled_from([0, 0, 0, 1]))
        prefix = draw(st.sampled_from(["", "0x", "b", "s"]))
        return f"id:{prefix}{address:x}_{version}" if draw(st.integers(0, 4)) else f"id:{address:x}"
    if kind == "pool":
        pool = draw(st.sampled_from(subject.pools + [(2, 1)]))
        return "pool:" + ",".join(str(p) for p in pool[:draw(st.integers(1, len(pool)))])
    if kind in ("ctx", "meta"):
        return f"{kind}:" + quote(substring(draw, draw(st.sampled_from(subject.texts or [""]))))
    if kind == "file":
        text = quote(substring(draw, draw(st.sampled_from(subject.files))) or "x")
        return f"file:{text}:{draw(st.sampled_from(subject.lines))}" if draw(st.integers(0, 3)) == 0 else f"file:{text}"
    if kind == "func":
        return "func:" + quote(substring(draw, draw(st.sampled_from(subject.names))))
    text = substring(draw, draw(st.sampled_from(subject.names + subject.files)))
    if kind == "frame":
        return "frame:" + quote(text)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'  # a quoted bare word: frame text


def parse_size_or_zero(text: str) -> int:
    from memtui.units import parse_size

    return parse_size(text) or 0


@st.composite
def expression(draw, subject: Subject, depth: int = 0) -> str:
    if depth >= 3 or draw(st.integers(0, 2)) == 0:
        return draw(term(subject))
    shape = draw(st.sampled_from(["and", "or", "not", "minus", "paren", "and_kw"]))
    if shape == "not":
        return "not " + draw(expression(subject, depth + 1))
    if shape == "minus":
        return "-" + draw(expression(subject, depth + 1)).lstrip("-")
    if shape == "paren":
        return "(" + draw(expression(subject, depth + 1)) + ")"
    parts = draw(st.lists(expression(subject, depth + 1), min_size=2, max_size=3))
    joiner = {"and": " ", "or": " or ", "and_kw": " and "}[shape]
    return "(" + joiner.join(parts) + ")" if draw(st.booleans()) else joiner.join(parts)


@pytest.mark.parametrize("seed", [7, 8])
@SYNTHETIC
@given(data=st.data())
def test_mask_equals_reference_synthetic(seed, data):
    check_against_reference(subject_for(synthetic_snapshot(seed), key=f"synthetic{seed}"), data)


@pytest.mark.parametrize("path", real_files())
@REAL
@given(data=st.data())
def test_mask_equals_reference_real(path, data):
    check_against_reference(subject_for(path), data)


def check_against_reference(subject: Subject, data) -> None:
    count_case("filters against the reference")
    text = data.draw(expression(subject), label="filter")
    compiled = compile_filter(text)
    for ref in subject.references:
        try:
            expected = ref.mask(compiled.tree)
        except FilterError:
            with pytest.raises(FilterError):
                compiled.mask(subject.model, ref.device)
            continue
        got = compiled.mask(subject.model, ref.device)
        assert got.dtype == bool and len(got) == len(expected)
        mismatch = np.flatnonzero(got != np.array(expected, bool))
        assert not len(mismatch), f"{text!r} on device {ref.device}: events {mismatch[:10].tolist()} differ"
        # The canonical text means the same thing.
        again = compile_filter(str(compiled.tree)).mask(subject.model, ref.device)
        assert np.array_equal(again, got), f"{str(compiled.tree)!r} (from {text!r}) means something else"
