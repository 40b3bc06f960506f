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
    # Torch shares a block's frame list with the trace entry that allocated it, and the
    # segments come first: by the end, such a list holds the token the sink left in it,
    # which the segment builder resolves like the plain path's identity cache would.
    seen: set[int] = set()
    todo: list[tuple[object, bool]] = [(v, k == "segments") for k, v in root.items()]
    if () in root:
        raise StreamFallback("a dropped memo slot is used as a key")
    while todo:
        obj, in_segments = todo.pop()
        kind = type(obj)
        if kind is dict:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if () in obj:
                raise StreamFallback("a dropped memo slot is used as a key")
            for key, value in obj.items():
                if in_segments and key == "frames" and _is_token_list(value, is_token):
                    continue
                todo.append((value, in_segments))
        elif kind is list or kind is tuple:
            if kind is tuple and not obj:
                raise StreamFallback("a dropped memo slot is referred to")
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            todo.extend((item, in_segments) for item in obj)
        elif kind is TraceSink or kind is is_token:
            raise StreamFallback(f"a {kind.__name__} outside the device traces")


def _is_token_list(value: object, is_token: type) -> bool:
    return type(value) is list and len(value) == 1 and type(value[0]) is is_token
