"""Column-for-column comparison of two models (streaming vs plain, cached vs fresh)."""

from __future__ import annotations

import dataclasses

import numpy as np

from memtui.model import Snapshot


def assert_same_model(got: Snapshot, want: Snapshot) -> None:
    """Every table, column, string and setting of ``got`` equals ``want``'s."""
    assert got.strings.values == want.strings.values
    assert got.strings.escaped == want.strings.escaped
    assert got.actions.names == want.actions.names
    assert got.strings.dict_ids == want.strings.dict_ids
    for name in ("filename", "line", "name", "native", "user", "internal", "generated", "forward", "original",
                 "extra_offsets", "extra_key", "extra_value"):
        _same_array(getattr(got.frames, name), getattr(want.frames, name), f"frames.{name}")
    for name in ("flat", "offsets", "label"):
        _same_array(getattr(got.stacks, name), getattr(want.stacks, name), f"stacks.{name}")
    assert len(got.devices) == len(want.devices)
    for g, w in zip(got.devices, want.devices):
        assert g.device == w.device
        for part in ("trace", "lives", "segment_lives", "segments", "blocks"):
            _same_dataclass(getattr(g, part), getattr(w, part), f"device {g.device} {part}")
        _same_array(g.block_version, w.block_version, "block_version")
        _same_array(g.block_life, w.block_life, "block_life")
        _same_array(g.site_stack, w.site_stack, "site_stack")
        _same_array(g.block_site_stack, w.block_site_stack, "block_site_stack")
    assert got.allocator_settings == want.allocator_settings
    assert got.annotations == want.annotations
    assert got.header == want.header
    assert got.warnings == want.warnings
    assert got.source_size == want.source_size


def _same_dataclass(got: object, want: object, where: str) -> None:
    for f in dataclasses.fields(want):
        a, b = getattr(got, f.name), getattr(want, f.name)
        if isinstance(b, np.ndarray):
            _same_array(a, b, f"{where}.{f.name}")
        else:
            assert a == b, f"{where}.{f.name}"


def _same_array(got: np.ndarray, want: np.ndarray, where: str) -> None:
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), f"{where} differs"
