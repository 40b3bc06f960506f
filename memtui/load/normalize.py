"""Bring every known snapshot variant to the current torch layout.

Above this module nothing sees a variant: the model can assume a dict with
``segments`` (each with ``blocks`` carrying ``address``, ``size``, ``requested_size``,
``state`` and ``frames``), ``device_traces`` (a list per device), ``allocator_settings``
and ``external_annotations``. Trace entries are left as they are (there can be
millions); the model reads them tolerantly with ``dict.get``.
"""

from __future__ import annotations

from memtui.errors import SnapshotError

# Repeated references may multiply rows this many times, up to this many rows, before a
# file counts as built to expand (see _refuse_amplification).
_AMPLIFICATION_LIMIT = 4
_AMPLIFICATION_FLOOR = 1_000_000

# Numbers of segments and blocks: JSON written elsewhere (JavaScript prints integers past
# 2**53 with an exponent) may carry them as whole floats, which the model would not
# take for addresses, sizes or devices.
_SEGMENT_INTS = ("device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream")
_BLOCK_INTS = ("address", "size", "requested_size")

# Older torch spelled the pending state differently.
STATE_ALIASES = {"active_awaiting_free": "active_pending_free"}


def normalize(obj: object, description: str) -> dict:
    """Return the snapshot as a dict in the current layout, or raise SnapshotError."""
    if isinstance(obj, list):
        # torch < 2.1 could pickle the segment list alone.
        if not all(isinstance(seg, dict) for seg in obj):
            raise SnapshotError(f"{description}: not a memory snapshot (a list of {_kinds(obj)}, not of segments)")
        obj = {"segments": obj, "device_traces": []}
    if not isinstance(obj, dict):
        raise SnapshotError(f"{description}: not a memory snapshot (the pickle holds a {type(obj).__name__})")
    if "segments" not in obj and "device_traces" not in obj:
        keys = ", ".join(sorted(map(str, obj))[:6]) or "none"
        raise SnapshotError(f"{description}: not a memory snapshot (no 'segments' or 'device_traces'; keys: {keys})")

    segments = obj.get("segments") or []
    traces = obj.get("device_traces") or []
    if not isinstance(segments, list):
        raise SnapshotError(f"{description}: 'segments' is a {type(segments).__name__}, expected a list")
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise SnapshotError(f"{description}: 'device_traces' must be a list of lists, one per device")
    for i, trace in enumerate(traces):
        if trace and not isinstance(trace[0], dict):
            raise SnapshotError(f"{description}: device trace {i} holds {type(trace[0]).__name__}, not entries")

    _refuse_amplification(traces, segments, description)

    out = dict(obj)
    out["segments"] = [_normalize_segment(seg, description) for seg in segments]
    out["device_traces"] = traces
    settings = obj.get("allocator_settings")
    out["allocator_settings"] = settings if isinstance(settings, dict) else {}
    annotations = obj.get("external_annotations")
    if not isinstance(annotations, list):
        annotations = []
    out["external_annotations"] = [a for a in annotations if isinstance(a, dict)]
    return out


def _normalize_segment(seg: object, description: str) -> dict:
    if not isinstance(seg, dict):
        raise SnapshotError(f"{description}: a segment is a {type(seg).__name__}, expected a dict")
    if "address" not in seg or "total_size" not in seg:
        raise SnapshotError(f"{description}: a segment lacks 'address' or 'total_size'")
    seg = dict(seg)
    _whole_numbers(seg, _SEGMENT_INTS)
    pool = seg.get("segment_pool_id")
    if isinstance(pool, list):  # torch writes a tuple; JSON has no tuples
        seg["segment_pool_id"] = tuple(pool)
    blocks_in = seg.get("blocks") or []
    if not isinstance(blocks_in, (list, tuple)):
        raise SnapshotError(f"{description}: a segment's blocks are a {type(blocks_in).__name__}, expected a list")
    blocks = []
    offset = seg["address"]
    for block in blocks_in:
        if not isinstance(block, dict):
            raise SnapshotError(f"{description}: a block is a {type(block).__name__}, expected a dict")
        block = _normalize_block(block, offset)
        # Wrong types stay for the model to replace and report; only numbers move on.
        if _is_int(block["address"]) and _is_int(block["size"]):
            offset = block["address"] + block["size"]
        blocks.append(block)
    seg["blocks"] = blocks
    seg.setdefault("device", 0)
    seg.setdefault("stream", 0)
    seg.setdefault("segment_type", "large")
    seg.setdefault("segment_pool_id", (0, 0))
    seg.setdefault("is_expandable", False)
    seg.setdefault("frames", [])
    if "allocated_size" not in seg:
        seg["allocated_size"] = _sum_of(blocks, "size", lambda state: state == "active_allocated")
    if "active_size" not in seg:
        seg["active_size"] = _sum_of(blocks, "size", _is_active)
    seg.setdefault("requested_size", _sum_of(blocks, "requested_size", _is_active))
    return seg


def _refuse_amplification(traces: list, segments: list, description: str) -> None:
    """A pickle can name one object many times over for a few bytes each: a small file
    repeating a trace of a million entries a thousand times describes billions of them.
    Torch writes each trace, segment and block list once; a file whose repeats multiply
    what it holds many times over, into millions of rows, is refused."""
    seen: set[int] = set()
    rows = distinct = 0
    parts = [(t, len(t)) for t in traces]
    for seg in segments:
        blocks = seg.get("blocks") if isinstance(seg, dict) else None
        parts.append((seg, 1))
        if isinstance(blocks, (list, tuple)):
            parts.append((blocks, len(blocks)))
    for obj, count in parts:
        rows += count
        if id(obj) not in seen:
            seen.add(id(obj))
            distinct += count
    if rows > _AMPLIFICATION_FLOOR and rows > _AMPLIFICATION_LIMIT * distinct:
        raise SnapshotError(f"{description}: refused: it repeats the same traces or segments into {rows:,} rows "
                            f"from {distinct:,}, which torch never writes (a file built to expand in memory)")


def _whole_numbers(record: dict, keys: tuple[str, ...]) -> None:
    for key in keys:
        value = record.get(key)
        if isinstance(value, float) and value.is_integer():
            record[key] = int(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_active(state: object) -> bool:
    return isinstance(state, str) and state.startswith("active")


def _sum_of(blocks: list[dict], key: str, state_matches) -> int:
    return sum(b[key] for b in blocks if _is_int(b[key]) and state_matches(b["state"]))


def _normalize_block(block: dict, running_address: int) -> dict:
    block = dict(block)
    _whole_numbers(block, _BLOCK_INTS)
    history = block.pop("history", None)
    if "frames" not in block:
        # torch 2.0 kept each block's allocation history; the last one is the live one.
        last = history[-1] if isinstance(history, list) and history and isinstance(history[-1], dict) else {}
        block["frames"] = list(last.get("frames") or [])
        if "requested_size" not in block and "real_size" in last:
            block["requested_size"] = last["real_size"]
    block.setdefault("address", running_address)
    block.setdefault("size", 0)
    block.setdefault("requested_size", block["size"])
    state = block.get("state", "inactive")
    block["state"] = STATE_ALIASES.get(state, state) if isinstance(state, str) else state
    return block


def _kinds(values: list) -> str:
    names = sorted({type(v).__name__ for v in values[:50]})
    return "/".join(names) or "nothing"
