"""The opcode walk that refuses lying memo indices and lengths before the unpickler acts on them.

Real files of every protocol walk clean in pieces of any size; each lie is refused at
once; the compiled walk and the Python one agree on every input, byte for byte.
"""

from __future__ import annotations

import lzma
import pickle
import random
import struct

import pytest

from memtui.errors import SnapshotError
from memtui.load import opcode_check
from memtui.load.opcode_check import OpcodeCheck
from tests.conftest import sample_files
from tests.fixtures import variants

WALKS = ["python", "compiled"] if opcode_check._walk_native is not None else ["python"]


def walk(data: bytes, native: str, pieces=None, size: int | None = None) -> OpcodeCheck:
    limit = (len(data) if size is None else size) + 1024
    check = OpcodeCheck("f", limit, 1 << 20, lambda n, at: f"length {n} at {at}", native=native == "compiled")
    pos = 0
    for piece in pieces or [len(data)]:
        check.feed(data[pos:pos + piece])
        pos += piece
    check.feed(data[pos:])
    return check


def real_pickles() -> list[bytes]:
    found = [pickle.dumps(variants.modern(), protocol=p) for p in range(6)]
    found += [lzma.decompress(p.read_bytes()) for p in sample_files()[:4]]
    return found


@pytest.mark.parametrize("native", WALKS)
def test_real_pickles_walk_clean_in_pieces_of_any_size(native):
    rng = random.Random(3)
    for data in real_pickles():
        for _ in range(3):
            pieces = [rng.choice([1, 2, 3, 7, 64, 4096]) for _ in range(rng.randrange(1, 200))]
            check = walk(data, native, pieces)
            assert check.done and check.walked == len(data)


LIES = {
    "LONG_BINPUT 2**28": (b"\x80\x04Nr" + struct.pack("<I", 1 << 28) + b".", "memo slot 268,435,456 at byte 3"),
    "LONG_BINPUT 2**32-1 in a frame": (b"\x80\x04\x95\x07\0\0\0\0\0\0\0Nr\xff\xff\xff\xff.", "memo slot 4,294,967,295"),
    "PUT in protocol 0": (b"(lp99999999999\nI1\na.", "memo slot 99,999,999,999 at byte 2"),
    "PUT of 100 digits": (b"N" + b"p" + b"9" * 100 + b"\n.", "memo slot"),
    "BINBYTES8 1 TiB": (b"\x80\x04\x8e" + struct.pack("<Q", 1 << 40) + b"abc.", "length 1099511627776 at 11"),
    "BYTEARRAY8 in a frame": (b"\x80\x05\x95\x0c\0\0\0\0\0\0\0\x96" + struct.pack("<Q", 1 << 33) + b".", "length"),
    "FRAME 1 TiB": (b"\x80\x04\x95" + struct.pack("<Q", 1 << 40) + b".", "length 1099511627776 at 11"),
    "BINUNICODE 4 GiB": (b"\x80\x02X\xff\xff\xff\xff.", "length 4294967295 at 7"),
}


@pytest.mark.parametrize("native", WALKS)
@pytest.mark.parametrize("lie", list(LIES))
def test_each_lie_is_refused_whatever_the_pieces(lie, native):
    data, message = LIES[lie]
    for piece in (1, 2, 5, len(data)):
        with pytest.raises(SnapshotError, match=message):
            walk(data, native, [piece] * (len(data) // piece))


@pytest.mark.parametrize("native", WALKS)
def test_what_a_pickler_writes_is_never_refused(native):
    # Slots numbered as picklers number them, up to the highest a file of this size can hold.
    many = list(range(300))
    data = pickle.dumps([many, many, [str(i) for i in range(70_000)]], protocol=2)
    assert b"r" in data
    for protocol in range(6):
        check = walk(pickle.dumps([many, many], protocol=protocol), native)
        assert check.done
    assert walk(data, native).done
    assert walk(b"\x80\x02Nr\x03\x00\x00\x00.", native).done  # slot 3 at byte 3: possible


def outcome(data: bytes, native: str, pieces) -> tuple:
    try:
        check = walk(data, native, pieces, size=len(data))
    except SnapshotError as exc:
        return ("refused", str(exc))
    return (check.done, check.walked, check._skip, check._held, check._lines)


@pytest.mark.skipif(len(WALKS) < 2, reason="the compiled part is not built")
def test_the_compiled_walk_agrees_with_the_python_one():
    rng = random.Random(11)
    bases = real_pickles()
    alphabet = bytes(range(256))
    for case in range(3000):
        if case % 2:
            base = rng.choice(bases)
            start = rng.randrange(len(base))
            data = bytearray(base[start:start + rng.randrange(1, 400)])
            for _ in range(rng.randrange(4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            data = b"\x80\x04" + bytes(data)
        else:
            data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 40)))
        pieces = [rng.randrange(1, 16) for _ in range(rng.randrange(4))]
        assert outcome(data, "compiled", pieces) == outcome(data, "python", pieces), data
