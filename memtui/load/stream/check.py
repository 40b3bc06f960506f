"""After a streaming load: make sure the result is exactly what the plain path would see.

Everything the rewrite can have changed shows up as an object no plain pickle of a
snapshot contains at that place: a sink anywhere but as a device trace, the empty tuple
that stands in a dropped memo slot, a frame list the sink already turned into a token.
Any of them anywhere outside the sinks sends the file to the plain path.
"""

from __future__ import annotations

from memtui.load.stream.errors import StreamFallback
from memtui.load.stream.sink import TraceSink


def detach_traces(obj: object, sinks: list[TraceSink], is_token: type) -> dict:
    """``obj`` with its device traces replaced by empty lists, after checking it.

    Each sink's ``device`` is set to its place in ``device_traces``.
    """
    if not isinstance(obj, dict):
        raise StreamFallback(f"the pickle holds a {type(obj).__name__}")
    traces = obj.get("device_traces")
    if not isinstance(traces, list):
        raise StreamFallback("no device_traces list")
    places = [d for d, t in enumerate(traces) if isinstance(t, TraceSink)]
    if [traces[d] for d in places] != sinks:
        raise StreamFallback("the trace sinks are not the device traces, in order")
    if any(t for t in traces if not isinstance(t, TraceSink)):
        raise StreamFallback("a device trace was not streamed")
    for d, sink in zip(places, sinks):
        sink.device = d
    rest = dict(obj)
    rest["device_traces"] = [[] for _ in traces]
    _check_plain(rest, is_token)
    return rest


def _check_plain(root: dict, is_token: type) -> None:
    # Torch shares a segment's and a block's frame list with the trace entry that allocated
    # it, and the segments come first: by the end, such a list holds the token the sink left
    # in it, which the segment builder resolves like the plain path's identity cache would.
    # Only there: the segments, their blocks and the lists holding them are walked in their
    # places; met anywhere else (a block as a frame, say), the file goes to the plain path,
    # as does a token list under any other key.
    if () in root:
        raise StreamFallback("a dropped memo slot is used as a key")
    structure, todo = _segment_structure(root, is_token)
    seen: set[int] = set()
    todo.extend(value for key, value in root.items() if key != "segments")
    while todo:
        obj = todo.pop()
        kind = type(obj)
        if kind is dict or kind is list or kind is tuple:
            if id(obj) in structure:
                raise StreamFallback("a segment, a block or a list of them is referred to from elsewhere")
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if kind is dict:
                if () in obj:
                    raise StreamFallback("a dropped memo slot is used as a key")
                todo.extend(obj.values())
            else:
                if kind is tuple and not obj:
                    raise StreamFallback("a dropped memo slot is referred to")
                todo.extend(obj)
        elif kind is TraceSink or kind is is_token:
            raise StreamFallback(f"a {kind.__name__} outside the device traces")


def _segment_structure(root: dict, is_token: type) -> tuple[set[int], list[object]]:
    """The ids of the segments list, the segments, their blocks lists and the blocks, and
    every value below them to walk (their frame lists too, unless they hold a token)."""
    segments = root.get("segments")
    if type(segments) is not list:
        return set(), [segments]
    structure = {id(segments)}
    values: list[object] = []
    for segment in segments:
        if type(segment) is not dict:
            values.append(segment)
            continue
        if id(segment) in structure:
            continue
        structure.add(id(segment))
        blocks = segment.get("blocks")
        walked_blocks = type(blocks) is list and id(blocks) not in structure
        if walked_blocks:
            structure.add(id(blocks))
            for block in blocks:
                if type(block) is dict and id(block) not in structure:
                    structure.add(id(block))
                    values.extend(_values_but_token_frames(block, is_token))
                else:
                    values.append(block)
        values.extend(v for k, v in _items_but_token_frames(segment, is_token) if not (k == "blocks" and walked_blocks))
    return structure, values


def _items_but_token_frames(holder: dict, is_token: type):
    if () in holder:
        raise StreamFallback("a dropped memo slot is used as a key")
    return [(k, v) for k, v in holder.items() if not (k == "frames" and _is_token_list(v, is_token))]


def _values_but_token_frames(holder: dict, is_token: type) -> list[object]:
    return [v for _, v in _items_but_token_frames(holder, is_token)]


def _is_token_list(value: object, is_token: type) -> bool:
    return type(value) is list and len(value) == 1 and type(value[0]) is is_token
