"""Every spelling of an address_n or address names the same allocation, through one parser:
bare, ``0x``, memory_viz's ``b``/``s`` prefixes and today's ``b'``/``s'``, in any case,
quoted or padded; ``memtui stack`` on a bare address lists its allocations as ``/`` does."""

from __future__ import annotations

import json

import pytest

from memtui.cli import main
from memtui.model.address_n import names_segment, parse_address, parse_address_candidates
from memtui.open import open_snapshot
from memtui.tui.views.search import looks_like_identifier, run_search
from tests.conftest import sample_files
from tests.fixtures.tiny_snapshot import write_tiny_snapshot

ADDR = 0x7F3A00400000  # two lives in the tiny snapshot: _0 (events 2, 7, 8) and _1 (event 10, live)
SEGMENT = 0x7F3A40000000


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_snapshot(tmp_path_factory.mktemp("tiny"))


def spellings(name: str) -> list[str]:
    upper = name.upper()
    return [name, f"0x{name}", f"b{name}", f"b0x{name}", f"b'{name}", f"b'{name}'", f"b'0x{name}", f"B'{upper}",
            f"B'0X{upper}'", upper, f"  b'{name}  ", f"\t0x{name}\n", f'"{name}"', f"'b{name}'", f"\"b'{name}'\"",
            f"`{name}`"]


@pytest.mark.parametrize("text", spellings("7f3a00400000_1"))
def test_every_block_spelling_parses_to_the_address_n(text):
    query = parse_address(text)
    assert query is not None and query.readings[0] == (ADDR, 1) and query.versioned and query.explicit
    assert not query.segment and not names_segment(text)
    assert parse_address_candidates(text)[0] == (ADDR, 1)


@pytest.mark.parametrize("text", ["s7f3a40000000_0", "s'7f3a40000000_0", "s'7f3a40000000_0'", "S'7F3A40000000_0",
                                  "s0x7f3a40000000_0", "s'0x7f3a40000000_0", " 's7f3a40000000_0' "])
def test_every_segment_spelling_parses_to_a_segment(text):
    query = parse_address(text)
    assert query is not None and query.readings == ((SEGMENT, 0),) and query.segment and names_segment(text)


def test_bare_addresses_and_ambiguous_prefixes():
    assert parse_address("7f3a00400000").readings == ((ADDR, None),)
    assert parse_address("b'7f3a00400000").readings == ((ADDR, None),)
    assert not parse_address("b'7f3a00400000").versioned
    # b is a hex digit: without ' or 0x both readings, the prefix-stripped one first.
    assert parse_address("b7f_0").readings == ((0x7F, 0), (0xB7F, 0))
    assert parse_address("0xb7f").readings == ((0xB7F, None),)
    assert parse_address("b'7f_0").readings == ((0x7F, 0),)


@pytest.mark.parametrize("text", ["", "s", "zz", "7f_", "_3", "7f_0'", "'7f_0", "b''7f_0", "b'", "x7f_0",
                                  "7f 00_0", "0x", "b'7f_0''", "'7f_0\""])
def test_not_an_address(text):
    assert parse_address(text) is None and parse_address_candidates(text) == []


def test_what_is_taken_for_frame_text():
    assert looks_like_identifier("b'7f06_0") and looks_like_identifier("b'ad") and looks_like_identifier("0x12")
    assert not looks_like_identifier("bad") and not looks_like_identifier("sad") and not looks_like_identifier("add")


# -- the model and the explorer's search ------------------------------------------------------------

@pytest.mark.parametrize("text", spellings("7f3a00400000_1"))
def test_find_and_search_land_on_the_same_life(tiny, text):
    snapshot = open_snapshot(tiny, cache=None)
    matches = snapshot.find(text)
    assert [m.address_n for m in matches] == ["7f3a00400000_1"]
    hit = run_search(snapshot, 0, text)
    assert hit.kind == "address_n" and hit.events.tolist() == [10]


@pytest.mark.parametrize("text", ["s'7f3a40000000_0", "'s7f3a40000000_0'", "S'7F3A40000000_0'"])
def test_a_segment_spelling_finds_the_segment_not_the_block_at_its_address(tiny, text):
    snapshot = open_snapshot(tiny, cache=None)
    matches = snapshot.find(text)
    assert matches and all(m.kind == "segment" for m in matches)
    assert matches[0].address_n == "s7f3a40000000_0"


@pytest.mark.parametrize("text", ["7f3a00400000", "b'7f3a00400000", "0x7f3a00400000", "'7F3A00400000'"])
def test_a_bare_address_finds_every_life(tiny, text):
    snapshot = open_snapshot(tiny, cache=None)
    hit = run_search(snapshot, 0, text)
    assert hit.kind == "address" and hit.events.tolist() == [2, 10]


# -- memtui stack ------------------------------------------------------------------------------------

def stack(capsys, *args) -> tuple[int, str, str]:
    code = main(["stack", "--no-cache", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("text", spellings("7f3a00400000_1"))
def test_stack_output_of_an_address_n_is_the_same_in_every_spelling(tiny, capsys, text):
    _, want, _ = stack(capsys, tiny, "7f3a00400000_1")
    _, want_json, _ = stack(capsys, tiny, "7f3a00400000_1", "--json")
    code, got, err = stack(capsys, tiny, text)
    assert code == 0, err
    assert got == want and got.startswith("7f3a00400000_1  1.00 MiB  device 0  default pool\n")
    assert stack(capsys, tiny, text, "--json")[1] == want_json


def test_stack_of_a_bare_address_lists_its_allocations(tiny, capsys):
    code, out, err = stack(capsys, tiny, "7f3a00400000")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "2 allocations at 7f3a00400000 on device 0; name one by its address_n for its stacks"
    first = next(line for line in lines if line.startswith("7f3a00400000_0"))
    second = next(line for line in lines if line.startswith("7f3a00400000_1"))
    assert first.split()[1:5] == ["2", "7", "8", "2.00"] and "model.py:31 Block.forward" in first
    assert second.split()[1:5] == ["10", "-", "-", "1.00"] and "train.py:88 train_step" in second
    assert "active_allocated at snapshot" in second

    code, out, _ = stack(capsys, tiny, "b'7f3a00400000", "--json")
    rows = json.loads(out)
    assert [(r["address_n"], r["alloc"], r["free_requested"], r["free_completed"], r["size"]) for r in rows] == [
        ("7f3a00400000_0", 2, 7, 8, 2 << 20), ("7f3a00400000_1", 10, None, None, 1 << 20)]
    assert rows[0]["state"] is None and rows[1]["state"] == "active_allocated"
    assert rows[1]["top_frame"].endswith("train_step")


def test_stack_of_a_bare_address_with_one_life_shows_its_stacks(tiny, capsys):
    snapshot = open_snapshot(tiny, cache=None)
    single = next(m for m in snapshot.find("7f3a00f00000"))
    assert len(snapshot.find("7f3a00f00000")) == 1
    _, want, _ = stack(capsys, tiny, single.address_n)
    _, want_json, _ = stack(capsys, tiny, single.address_n, "--json")
    assert stack(capsys, tiny, "7f3a00f00000")[1] == want
    assert stack(capsys, tiny, "0x7f3a00f00000", "--json")[1] == want_json


def test_stack_refuses_what_is_not_an_address(tiny, capsys):
    code, out, err = stack(capsys, tiny, "train_step")
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "not an address_n or address" in err and "b'7f064c000000_0" in err
    code, _, err = stack(capsys, tiny, "b'7f3a00400000_9")
    assert code == 2 and "no such allocation" in err


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in sample_files()[:4]])
def test_stack_lists_what_the_explorer_finds_on_real_files(path, capsys):
    snapshot = open_snapshot(path, cache=None)
    dev = snapshot.devices[0]
    if not len(dev.lives):
        pytest.skip("no block lives")
    versions = dev.lives.version
    busiest = int(dev.lives.addr[int(versions.argmax())])
    text = f"b'{busiest:x}"
    searched = run_search(snapshot, 0, text)
    code, out, err = stack(capsys, path, text, "--json")
    assert code == 0, err
    listed = json.loads(out)
    if int(versions.max()) == 0:
        assert isinstance(listed, dict)
        return
    assert [r["address_n"] for r in listed] == [m.address_n for m in searched.matches]
    shown = [next((r[k] for k in ("alloc", "free_requested", "free_completed") if r[k] is not None), None)
             for r in listed]
    assert sorted(i for i in shown if i is not None) == searched.events.tolist()


@pytest.mark.parametrize("text", [t for t in spellings("7f3a00400000_1") if t == t.strip() and t[0] not in "\"'`"])
def test_the_filter_language_takes_every_spelling(tiny, text):
    """A filter naming an allocation (bare or after ``addr:``) matches the same rows whatever
    the spelling: the filter parses addresses with the same parser as ``/`` and ``stack``.
    (Quoted words are text searches in the filter language, and a space ends a value.)"""
    from memtui.query import compile_filter

    snapshot = open_snapshot(tiny, cache=None)
    want = compile_filter("addr:7f3a00400000_1").indices(snapshot, 0)
    assert len(want)
    assert list(compile_filter(f"addr:{text}").indices(snapshot, 0)) == list(want)
    assert list(compile_filter(text).indices(snapshot, 0)) == list(want)
