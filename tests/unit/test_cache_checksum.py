"""The cache's checksum: the compiled sum and the numpy one agree, and damage changes it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memtui.cache import checksum as checksum_module
from memtui.cache.checksum import checksum_numpy

try:
    from memtui import _native
except ImportError:
    _native = None
needs_native = pytest.mark.skipif(_native is None or not hasattr(_native, "checksum"), reason="no compiled module")
SUMS = [pytest.param(checksum_numpy, id="numpy"),
        pytest.param(lambda data, length: _native.checksum(data, length), id="compiled", marks=needs_native)]


def _piece(rng: random.Random, size: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(size))


@needs_native
@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 31, 32, 33, 4095, 4096, 4097, 65_539])
def test_the_compiled_sum_is_the_numpy_one_at_every_length_and_padding(size):
    data = _piece(random.Random(size), size)
    padded = -(-size // 8) * 8
    for length in (padded, padded + 8, padded + 4096):
        assert _native.checksum(data, length) == checksum_numpy(data, length), (size, length)
    view = memoryview(data + b"xyz")[3:]  # a slice that starts off any word boundary
    assert _native.checksum(view, padded + 8) == checksum_numpy(view, padded + 8)


def test_the_module_uses_the_compiled_sum_only_where_it_is_built(monkeypatch):
    data = _piece(random.Random(1), 1000)
    calls = []

    class Compiled:
        @staticmethod
        def checksum(buffer, length):
            calls.append(length)
            return checksum_numpy(buffer, length)

    monkeypatch.setattr(checksum_module, "_native", Compiled)
    monkeypatch.setattr(checksum_module, "compiled", True)
    assert checksum_module.checksum(data, 1000) == checksum_numpy(data, 1000) and calls == [1000]
    monkeypatch.setattr(checksum_module, "compiled", False)
    assert checksum_module.checksum(data, 1000) == checksum_numpy(data, 1000) and calls == [1000]


@pytest.mark.parametrize("check", SUMS)
def test_every_flipped_bit_and_every_moved_word_changes_the_sum(check):
    data = bytearray(_piece(random.Random(7), 256))
    whole = check(bytes(data), 256)
    for bit in range(len(data) * 8):
        data[bit // 8] ^= 1 << (bit % 8)
        assert check(bytes(data), 256) != whole, bit
        data[bit // 8] ^= 1 << (bit % 8)
    for a, b in ((0, 8), (8, 248), (120, 128)):  # two words swapped
        swapped = bytearray(data)
        swapped[a:a + 8], swapped[b:b + 8] = data[b:b + 8], data[a:a + 8]
        assert check(bytes(swapped), 256) != whole
    assert check(bytes(data[:248]), 256) != whole  # the last word zeroed, as a cut file's


@pytest.mark.parametrize("check", SUMS)
def test_two_flipped_bits_anywhere_change_the_sum(check):
    # The sign bits of two int64 values were the weak spot of a plainer mix (half of such
    # pairs cancelled); every pair of bits of a few words, and random pairs of a long piece.
    values = np.array([-1, 5, -1, 7, 0, 2**40, -(2**62), 3], np.int64)
    data = bytearray(values.tobytes())
    whole = check(bytes(data), len(data))
    bits = len(data) * 8
    pairs = [(a, b) for a in range(0, bits, 3) for b in range(a + 1, bits, 5)]
    pairs += [(64 * i + 63, 64 * j + 63) for i in range(len(values)) for j in range(i + 1, len(values))]  # sign bits
    for a, b in pairs:
        for bit in (a, b):
            data[bit // 8] ^= 1 << (bit % 8)
        assert check(bytes(data), len(data)) != whole, (a, b)
        for bit in (a, b):
            data[bit // 8] ^= 1 << (bit % 8)
    rng = random.Random(11)
    long = bytearray(_piece(rng, 4096))
    whole = check(bytes(long), 4096)
    for _ in range(300):
        a, b = rng.sample(range(4096 // 8), 2)
        long[a * 8 + 7] ^= 0x80
        long[b * 8 + 7] ^= 0x80
        assert check(bytes(long), 4096) != whole, (a, b)
        long[a * 8 + 7] ^= 0x80
        long[b * 8 + 7] ^= 0x80


@pytest.mark.parametrize("check", SUMS)
@pytest.mark.parametrize("length", [3, 4, 1 << 31])
def test_a_length_that_is_no_piece_is_refused(check, length):
    with pytest.raises(ValueError):
        check(b"abcd", length)
