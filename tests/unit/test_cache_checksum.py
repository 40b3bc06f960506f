"""The cache's checksum: the compiled sum and the numpy one agree, and damage changes it."""

from __future__ import annotations

import random

import pytest

from memtui.cache import checksum as checksum_module
from memtui.cache.checksum import checksum_numpy

native = pytest.importorskip("memtui._native")


def _piece(rng: random.Random, size: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(size))


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 31, 32, 33, 4095, 4096, 4097, 65_539])
def test_the_compiled_sum_is_the_numpy_one_at_every_length_and_padding(size):
    data = _piece(random.Random(size), size)
    padded = -(-size // 8) * 8
    for length in (padded, padded + 8, padded + 4096):
        assert native.checksum(data, length) == checksum_numpy(data, length), (size, length)


def test_the_module_uses_the_compiled_sum_where_it_is_built(monkeypatch):
    data = _piece(random.Random(1), 1000)
    assert checksum_module.checksum(data, 1000) == checksum_numpy(data, 1000)
    monkeypatch.setattr(checksum_module, "_native", None)
    assert checksum_module.checksum(data, 1000) == checksum_numpy(data, 1000)


def test_every_flipped_bit_and_every_moved_word_changes_the_sum():
    data = bytearray(_piece(random.Random(7), 256))
    whole = native.checksum(bytes(data), 256)
    for bit in range(len(data) * 8):
        data[bit // 8] ^= 1 << (bit % 8)
        assert native.checksum(bytes(data), 256) != whole, bit
        data[bit // 8] ^= 1 << (bit % 8)
    for a, b in ((0, 8), (8, 248), (120, 128)):  # two words swapped
        swapped = bytearray(data)
        swapped[a:a + 8], swapped[b:b + 8] = data[b:b + 8], data[a:a + 8]
        assert native.checksum(bytes(swapped), 256) != whole
    assert native.checksum(bytes(data[:248]), 256) != whole  # the last word zeroed, as a cut file's


@pytest.mark.parametrize("length", [3, 4])
def test_a_length_that_is_no_piece_is_refused(length):
    with pytest.raises(ValueError):
        native.checksum(b"abcd", length)
    with pytest.raises(ValueError):
        checksum_numpy(b"abcd", length)
