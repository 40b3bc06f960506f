"""A Snapshot as named numpy arrays plus plain metadata, and back.

Every dataclass of the model is taken apart field by field: numpy fields become arrays
named ``device.0.trace.addr``, everything else goes to the metadata. The field names
of all these classes are part of the cache's schema signature, so a model that gains or
loses a field never reads a cache written by an older one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Any

import numpy as np

from memtui.model.actions import OOM, ActionTable
from memtui.model.frames import FrameTable, StackTable
from memtui.model.lifetimes import Lifetimes
from memtui.model.relevance import RULES_VERSION
from memtui.model.segments import BlockTable, SegmentTable
from memtui.model.snapshot import (
    FIGURES,
    Annotation,
    DeviceModel,
    ExternalAnnotations,
    Snapshot,
    annotation_of_row,
    annotation_row,
)
from memtui.model.strings import StringTable
from memtui.model.trace import TraceColumns

_DEVICE_PARTS = {
    "trace": TraceColumns,
    "lives": Lifetimes,
    "segment_lives": Lifetimes,
    "segments": SegmentTable,
    "blocks": BlockTable,
}
_FRAME_ARRAYS = ("filename", "line", "name", "native", "user", "internal", "generated", "forward", "original",
                 "extra_offsets", "extra_key", "extra_value")
_STACK_ARRAYS = ("flat", "offsets", "label")


# An annotation's fields as a tuple, in their order: dataclasses.astuple copies each value
# deeply, 77 ms for the 16,000 annotations of a 1M-event file, in every first open's write.


def schema_signature() -> str:
    """Changes whenever a model class gains, loses or renames a field."""
    classes = [Snapshot, DeviceModel, Annotation, *_DEVICE_PARTS.values()]
    text = ";".join(f"{c.__name__}:{','.join(f.name for f in dataclasses.fields(c))}" for c in classes)
    text += ";frames:" + ",".join(_FRAME_ARRAYS) + ";stacks:" + ",".join(_STACK_ARRAYS)
    text += ";figures:" + ",".join(FIGURES)
    text += f";relevance:{RULES_VERSION}"  # the flags and labels the cache keeps follow these rules
    text += ";devices:one at least"  # model/snapshot.py device_count: a kept model of an empty file had none
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def take_apart(snapshot: Snapshot) -> tuple[dict[str, np.ndarray], dict]:
    """(arrays, metadata) that :func:`put_together` turns back into an equal Snapshot."""
    arrays: dict[str, np.ndarray] = {}
    object_arrays: dict[str, list] = {}

    def add(name: str, value: np.ndarray) -> None:
        if value.dtype == object:  # integers past 64 bits: kept exact, in the metadata
            object_arrays[name] = [int(v) for v in value]
        else:
            arrays[name] = value

    for name in _FRAME_ARRAYS:
        add(f"frames.{name}", getattr(snapshot.frames, name))
    for name in _STACK_ARRAYS:
        add(f"stacks.{name}", getattr(snapshot.stacks, name))
    devices = []
    for dev in snapshot.devices:
        parts = {}
        for part in _DEVICE_PARTS:
            parts[part] = _split(getattr(dev, part), f"device.{dev.device}.{part}", add)
        add(f"device.{dev.device}.block_version", dev.block_version)
        add(f"device.{dev.device}.block_life", dev.block_life)
        source = {"time_origin_us": dev.source_time_origin_us, "partial_trace": dev.partial_trace,
                  "rows": dev.source_index is not None}
        for name in ("forward_site", "block_forward_site"):
            if getattr(dev, name) is not None:
                add(f"device.{dev.device}.{name}", getattr(dev, name))
        if dev.source_index is not None:
            add(f"device.{dev.device}.source_index", dev.source_index)
            add(f"device.{dev.device}.source_version", dev.source_version)
        figures = dev.computed_figures()
        add(f"device.{dev.device}.figures.oom_indices", figures.pop("_oom_indices"))
        figures["_action_counts"] = [int(count) for count in figures["_action_counts"]]
        devices.append({"device": dev.device, "parts": parts, "source": source, "figures": figures})
    strings = snapshot.strings
    meta = {
        "strings": list(strings.values),
        "string_keys": [key for key, _ in sorted(strings._ids.items(), key=lambda kv: kv[1])],
        "escaped": strings.escaped,
        "string_dicts": sorted(strings.dict_ids),
        "actions": list(snapshot.actions.names),
        "devices": devices,
        "allocator_settings": snapshot.allocator_settings,
        "annotations": [annotation_row(a) for a in snapshot.annotations],
        "header": snapshot.header,
        "warnings": list(snapshot.warnings),
        "source_size": snapshot.source_size,
        "object_arrays": object_arrays,
        "traced_devices": snapshot.traced_devices,
    }
    return arrays, meta


def _split(obj: object, prefix: str, add) -> dict:
    plain = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, np.ndarray):
            add(f"{prefix}.{f.name}", value)
        else:
            plain[f.name] = value
    return plain


def put_together(arrays: dict[str, np.ndarray], meta: dict, source_path: str) -> Snapshot:
    """The Snapshot that :func:`take_apart` described."""
    for name, values in meta["object_arrays"].items():
        arrays[name] = np.array(values, dtype=object)
    strings = StringTable()
    strings.values = list(meta["strings"])
    strings._ids = {key: i for i, key in enumerate(meta["string_keys"])}
    strings.escaped = meta["escaped"]
    strings.dict_ids = set(meta["string_dicts"])
    frames = FrameTable(strings)
    for name in _FRAME_ARRAYS:
        setattr(frames, name, arrays[f"frames.{name}"])
    stacks = StackTable(frames)
    for name in _STACK_ARRAYS:
        setattr(stacks, name, arrays[f"stacks.{name}"])
    devices = []
    for entry in meta["devices"]:
        d = entry["device"]
        parts = {}
        for part, cls in _DEVICE_PARTS.items():
            prefix = f"device.{d}.{part}"
            fields = dict(entry["parts"][part])
            for f in dataclasses.fields(cls):
                if f.name not in fields:
                    fields[f.name] = arrays[f"{prefix}.{f.name}"]
            parts[part] = cls(**fields)
        dev = DeviceModel(d, parts["trace"], parts["lives"], parts["segment_lives"], parts["segments"],
                          parts["blocks"], arrays[f"device.{d}.block_version"], arrays[f"device.{d}.block_life"])
        source = entry["source"]
        if source["rows"]:
            dev.source_index = arrays[f"device.{d}.source_index"]
            dev.source_version = arrays[f"device.{d}.source_version"]
        dev.source_time_origin_us = float(source["time_origin_us"])
        dev.forward_site = arrays.get(f"device.{d}.forward_site")
        dev.block_forward_site = arrays.get(f"device.{d}.block_forward_site")
        dev.partial_trace = bool(source["partial_trace"])
        dev.keep_figures(_checked_figures(dev, entry["figures"], arrays[f"device.{d}.figures.oom_indices"]))
        devices.append(dev)
    return Snapshot(
        source_path=source_path,
        source_size=meta["source_size"],
        strings=strings,
        frames=frames,
        stacks=stacks,
        actions=ActionTable(meta["actions"]),
        devices=devices,
        allocator_settings=meta["allocator_settings"],
        annotations=ExternalAnnotations(_annotation_rows(meta["annotations"]), annotation_of_row, rows=True),
        header=meta["header"],
        warnings=list(meta["warnings"]),
        traced_devices=int(meta["traced_devices"]),
    )


def _checked_figures(dev: DeviceModel, figures: dict, oom_indices: np.ndarray) -> dict:
    """The trace's figures as the cache wrote them, each checked against what it counts, as
    far as that costs no pass over a column (a cache is only as trusted as its folder; its
    checksums catch damage, not a file written to lie): a ValueError rejects the entry.

    The counts add up to the events, each at most that; the OOMs are ascending events of the
    trace whose action is an OOM, as many as the counts say; the span is two finite numbers
    in order; the stacked actions are distinct codes, ascending, each of an action the trace
    has; the other two are integers within the trace's bounds. What passes and is still
    wrong (a count moved between two actions, a span wider than the times) could only have
    been written on purpose, and shows wrong figures, never more."""
    n = len(dev.trace)
    raw_counts = figures["_action_counts"]
    if not isinstance(raw_counts, list) or not all(type(c) is int and 0 <= c <= n for c in raw_counts) or \
            sum(raw_counts) != n:
        raise ValueError("action counts that are not the trace's")
    counts = np.asarray(raw_counts, np.int64)
    ooms = int(counts[OOM]) if OOM < len(counts) else 0
    if oom_indices.dtype != np.int64 or oom_indices.shape != (ooms,) or \
            (ooms and (oom_indices[0] < 0 or oom_indices[-1] >= n or (np.diff(oom_indices) <= 0).any()
                       or (dev.trace.action[oom_indices] != OOM).any())):
        raise ValueError("OOM indices that are not the trace's")
    span = figures["time_span"]
    if span is not None:
        if not isinstance(span, tuple) or len(span) != 2 or not all(type(v) is float for v in span):
            raise ValueError("a time span that is not one")
        low, high = span
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise ValueError("a time span that is not one")
    stacked = figures["_stacked_actions"]
    if not isinstance(stacked, list) or stacked != sorted(set(stacked)) or \
            not all(type(c) is int and 0 <= c < len(counts) and counts[c] for c in stacked):
        raise ValueError("stacked actions that are not the trace's")
    forward, live = figures["forward_frames"], figures["live_at_end"]
    if type(forward) is not int or not 0 <= forward <= n or type(live) is not int or \
            not 0 <= live <= (len(dev.blocks) if dev.partial_trace else len(dev.lives)):
        raise ValueError("figures out of the trace's bounds")
    return {"_action_counts": counts, "_oom_indices": oom_indices, "time_span": span, "_stacked_actions": stacked,
            "forward_frames": forward, "live_at_end": live}


def _annotation_rows(rows: object) -> list[Any]:
    """The cached annotations' rows, each of an annotation's fields; anything else fails the
    load, as a bad row did when the rows were made Annotations at once (the entry is built
    again): they are made only when first read, where a bad one would raise."""
    width = len(dataclasses.fields(Annotation))
    if not isinstance(rows, list) or not all(isinstance(row, (list, tuple)) and len(row) == width for row in rows):
        raise ValueError("the cached annotations are not rows of an annotation's fields")
    return rows
