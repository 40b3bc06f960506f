"""The filter language: syntax, error messages, and the meaning of each field."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pytest

from memtui.model import actions as act
from memtui.model import build_model
from memtui.query import FilterError, compile_filter
from tests.fixtures.synthetic import synthetic_snapshot

DOCS = Path(__file__).resolve().parents[2] / "docs" / "filter.md"


@pytest.fixture(scope="module")
def snap():
    return build_model(copy.deepcopy(synthetic_snapshot()))


def mask(snap, text, device=0):
    return compile_filter(text).mask(snap, device)


@pytest.mark.parametrize("text, column, fragment", [
    ("size>", 6, "expected a size such as 1MiB, got nothing"),
    ("size>lots", 6, "expected a size such as 1MiB, got 'lots'"),
    ("(live", 6, "expected ')' to close the '(' at column 1"),
    ("live)", 5, "unexpected ')'"),
    ("or live", 1, "expected a term, got 'or'"),
    ("live or", 8, "expected a term after 'or', got end of filter"),
    ("live and or freed", 10, "expected a term after 'and', got 'or'"),
    ("not", 4, "expected a term after 'not'"),
    ("-", 2, "expected a term after '-'"),
    ("()", 2, "expected a term after '(', got ')'"),
    ("sise:1MiB", 1, "unknown field 'sise'; fields are action, size"),
    ("file>3", 5, "file takes ':'"),
    ('frame:"abc', 1, "unterminated quoted text"),
    ("time:3s..1s", 6, "is empty"),
    ("time:soon", 6, "expected a time such as 1.5s"),
    ("event:..", 7, "a range needs at least one bound"),
    ("event:5..x", 10, "expected an event index"),
    ("stream:1,x", 10, "expected a stream number, got 'x'"),
    ("addr:zz", 6, "expected an address"),
    ("action:", 8, "expected an action name"),
])
def test_syntax_errors(text, column, fragment):
    with pytest.raises(FilterError) as info:
        compile_filter(text)
    error = info.value
    assert error.position == column - 1
    assert str(error).startswith(f"invalid filter at column {column}: ")
    assert fragment in str(error)
    assert error.expected
    assert "\n" not in str(error)


@pytest.mark.parametrize("text", ["(" * 400 + "size>1" + ")" * 400, "not " * 400 + "size>1",
                                  "(not " * 300 + "x" + ")" * 300, "(" * 100_000])
def test_deep_nesting_is_one_clear_error_not_a_recursion_error(text):
    with pytest.raises(FilterError) as info:
        compile_filter(text)
    assert "nests parentheses and 'not' more than 100 deep" in str(info.value) and "\n" not in str(info.value)


def test_nesting_up_to_the_limit_parses_evaluates_and_prints(snap):
    deep = compile_filter("(" * 50 + "not " * 50 + "size>1" + ")" * 50)
    assert str(deep.tree) == "-" * 50 + "size>1"
    assert mask(snap, "(" * 50 + "not " * 50 + "size>1" + ")" * 50).sum() == mask(snap, "size>1").sum()


def test_unknown_action_is_reported_when_evaluated(snap):
    with pytest.raises(FilterError, match="unknown action 'allco'; actions are alloc, free_requested"):
        mask(snap, "action:allco")
    assert mask(snap, "action:mystery").sum() > 0  # an action torch does not have, kept from the file


def test_precedence():
    assert str(compile_filter("a b or c").tree) == "frame:a frame:b or frame:c"
    assert str(compile_filter("a (b or c)").tree) == "frame:a (frame:b or frame:c)"
    assert str(compile_filter("not a b").tree) == "-frame:a frame:b"
    assert str(compile_filter("-(a or b) and c").tree) == "-(frame:a or frame:b) frame:c"
    assert str(compile_filter("  ").tree) == ""


def test_words():
    assert str(compile_filter("7f064c000000_3").tree) == "id:7f064c000000_3"
    assert str(compile_filter("b7f064c000000_0").tree) == "id:b7f064c000000_0"
    assert str(compile_filter("0x7f064c000000").tree) == "addr:0x7f064c000000"
    assert str(compile_filter("at::native").tree) == "frame:at::native"
    assert str(compile_filter('"or"').tree) == "frame:or"
    assert str(compile_filter('"live"').tree) == "frame:live"
    assert str(compile_filter('ctx:"Torch-Compiled Region: 0/0"').tree) == 'ctx:"Torch-Compiled Region: 0/0"'
    assert str(compile_filter("FUNCTION:x SIZE>=1mib").tree) == "func:x size>=1mib"


def test_empty_filter_matches_everything(snap):
    f = compile_filter("")
    assert f.matches_everything and f.mask(snap, 0).all()


def test_actions(snap):
    action = snap.devices[0].trace.action
    assert np.array_equal(mask(snap, "action:free"),
                          np.isin(action, [act.FREE_REQUESTED, act.FREE_COMPLETED, act.FREE]))
    assert np.array_equal(mask(snap, "action:segment"), np.isin(action, act.SEGMENT_ACTIONS))
    assert np.array_equal(mask(snap, "action:alloc,oom"), np.isin(action, [act.ALLOC, act.OOM]))


def test_sizes_and_units(snap):
    size = snap.devices[0].trace.size
    assert np.array_equal(mask(snap, "size>1MiB"), size > 1 << 20)
    assert np.array_equal(mask(snap, "size>=1MiB"), size >= 1 << 20)
    assert np.array_equal(mask(snap, "size<4KB"), size < 4000)
    assert np.array_equal(mask(snap, "size:4KiB"), size == 4096)
    assert np.array_equal(mask(snap, "size:4KiB..1MiB"), (size >= 4096) & (size <= 1 << 20))
    assert np.array_equal(mask(snap, "size=0.5KiB"), size == 512)


def test_event_and_time_ranges(snap):
    trace = snap.devices[0].trace
    assert np.flatnonzero(mask(snap, "event:10..20")).tolist() == list(range(10, 21))
    assert np.flatnonzero(mask(snap, "event>=100")).tolist() == list(range(100, len(trace)))
    t = (trace.time_us - np.nanmin(trace.time_us)) / 1e6
    with np.errstate(invalid="ignore"):
        assert np.array_equal(mask(snap, "time:1s..2s"), (t >= 1) & (t <= 2))
        assert np.array_equal(mask(snap, "time<1500ms"), t < 1.5)


def test_lifetime_flags(snap):
    dev = snap.devices[0]
    live, freed, leaked = mask(snap, "live"), mask(snap, "freed"), mask(snap, "leaked")
    in_a_life = (dev.lives.event_life != -1) | (dev.segment_lives.event_life != -1)
    assert not (live & freed).any()
    assert np.array_equal(live | freed, in_a_life)
    assert not (leaked & ~live).any()
    # A pending free is live but not leaked: the program did ask to free it.
    pending = live & (dev.trace.action == act.FREE_REQUESTED)
    assert pending.any() and not (pending & leaked).any()
    assert leaked.any()


def test_id_and_addr(snap):
    dev = snap.devices[0]
    life = int(np.flatnonzero(dev.lives.end != -1)[0])
    addr, version = int(dev.lives.addr[life]), int(dev.lives.version[life])
    events = {int(dev.lives.start[life]), int(dev.lives.request[life]), int(dev.lives.end[life])} - {-1}
    assert set(np.flatnonzero(mask(snap, f"id:{addr:x}_{version}")).tolist()) == events
    assert set(np.flatnonzero(mask(snap, f"{addr:x}_{version}")).tolist()) == events
    assert set(np.flatnonzero(mask(snap, f"b{addr:x}_{version}")).tolist()) == events
    assert np.array_equal(mask(snap, f"addr:0x{addr:x}"), dev.trace.addr == addr)


def test_segment_and_pool(snap):
    dev = snap.devices[0]
    seg = int(dev.segments.address[0])
    inside = (dev.trace.addr >= seg) & (dev.trace.addr < seg + int(dev.segments.total_size[0]))
    assert np.array_equal(mask(snap, f"seg:{seg:x}"), inside)
    assert mask(snap, "pool:1,3").any() and not (mask(snap, "pool:1,3") & mask(snap, "pool:0,0")).any()


def test_strings_and_frames(snap):
    assert mask(snap, "ctx:compiled").sum() > 0
    assert np.array_equal(mask(snap, "ctx:COMPILED"), mask(snap, "ctx:compiled"))
    assert mask(snap, "meta:epoch=2").sum() > 0
    assert np.array_equal(mask(snap, "file:train.py"), mask(snap, "frame:train.py"))
    assert 0 < mask(snap, "file:train.py:97").sum() <= mask(snap, "file:train.py").sum()
    assert mask(snap, 'frame:"malloc (fused)"').sum() > 0
    assert np.array_equal(mask(snap, "func:forward"), mask(snap, "forward"))


def test_device_field(snap):
    assert mask(snap, "device:0", 0).all() and not mask(snap, "device:0", 1).any()


def test_every_example_in_the_docs_compiles(snap):
    examples = re.findall(r"^    (\S.*?)\s*(?:#.*)?$", DOCS.read_text(), re.MULTILINE)
    assert len(examples) > 20
    for example in examples:
        f = compile_filter(example)
        try:
            f.mask(snap, 0)
        except FilterError as exc:  # an action this snapshot never saw is the only acceptable failure
            assert "unknown action" in str(exc), example
