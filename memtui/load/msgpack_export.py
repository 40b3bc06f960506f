"""memtui's msgpack export format (docs/export-format.md): how to recognise one, and reading
it back into a snapshot dict in torch's own layout.

An export is a msgpack stream whose first object is the header map. The header's first
key is always ``"format"`` with the value ``"memtui"``, so a file can be recognised
from its first bytes without decoding it. The writer is :mod:`memtui.export.writer`; the
format's name and version live here, beside the other readers, so that the loader needs
nothing from the layers above it.

:func:`read_export` returns what ``torch.cuda.memory._snapshot()`` returns (``segments``,
``device_traces``, ``allocator_settings``, ``external_annotations``) plus
``memtui_header``, so everything above the loader treats an export like any snapshot.
Frame dicts and stack lists are built once per table row and shared by every entry
that uses them, just as the pickler shares them in torch's own files.
"""

from __future__ import annotations

import json
from typing import BinaryIO

from memtui.errors import SnapshotError
from memtui.load.limits import memory_bound
from memtui.units import format_bytes

FORMAT_NAME = "memtui"
FORMAT_VERSION = 1

# msgpack bytes of the header's first pair: fixstr "format", fixstr "memtui".
HEADER_FIRST_PAIR = b"\xa6format\xa6memtui"


def looks_like_export(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts a memtui export."""
    if not head:
        return False
    first = head[0]
    if 0x80 <= first <= 0x8F:
        return head[1:].startswith(HEADER_FIRST_PAIR)
    if first == 0xDE:  # map16
        return head[3:].startswith(HEADER_FIRST_PAIR)
    return False


# The frame key under which a forward_frames line is written (memtui.model.relevance.FORWARD_TEXT;
# the loader imports nothing from the model).
FORWARD_TEXT = "forward_frame"

# Bounds what one msgpack object may claim, so a hostile length cannot exhaust memory.
MAX_OBJECT_BYTES = 1 << 30
# Reading an event builds its entry dict (about 290 bytes) beside the decoded columns and,
# later, the model's: some 500 bytes of memory an event, from 35 bytes of a real export (9 at
# the least). An export whose events would take more than memory_bound of the bytes read so
# far is refused before they are built (limits.py states the bound).
MEMORY_PER_EVENT = 512
_NO_FRAMES_ACTIONS = ("snapshot",)


def read_export(stream: BinaryIO, description: str) -> dict:
    """Decode an export; every problem is a SnapshotError naming ``description``."""
    import msgpack  # here: every command imports this module, few read an export

    unpacker = msgpack.Unpacker(stream, raw=False, strict_map_key=False, max_buffer_size=MAX_OBJECT_BYTES,
                               unicode_errors="surrogatepass")
    consumed = getattr(stream, "consumed", None)  # bytes read so far, where the stream counts them
    try:
        return _Builder(description, (lambda: consumed) if consumed is None else (lambda: stream.consumed)).build(
            unpacker)
    except SnapshotError:
        raise
    except msgpack.OutOfData:
        raise SnapshotError(f"{description}: truncated memtui export") from None
    except (msgpack.UnpackException, msgpack.ExtraData, ValueError, TypeError, KeyError, IndexError,
            AttributeError, OverflowError) as exc:
        raise SnapshotError(f"{description}: corrupt memtui export ({type(exc).__name__}: {_short(exc)})") from None
    except MemoryError:
        raise SnapshotError(f"{description}: not enough memory to read this export") from None


class _Builder:
    def __init__(self, description: str, bytes_read=lambda: None) -> None:
        self.description = description
        self._bytes_read = bytes_read
        self._events_seen = 0
        self.actions: list[str] = []
        self.strings: list[object] = []
        self.stacks: list[list[dict]] = []
        self._forward: dict[int, list[str]] = {}
        self._pools: dict[int, list[tuple]] = {}  # per device: the pool_id tuples its events index
        self.traces: list[list[dict]] = []
        self.segments: list[dict] = []
        self.snapshot: dict = {}
        self.source_rows: dict[int, dict[str, list]] = {}  # per device: the source's event index and version

    def build(self, unpacker) -> dict:
        header = next(unpacker, None)
        if header is None:
            raise SnapshotError(f"{self.description}: truncated memtui export (it ends inside its header)")
        self._check_header(header)
        ended = False
        for obj in unpacker:
            kind = obj.get("kind") if isinstance(obj, dict) else None
            if kind == "snapshot":
                self.snapshot = obj
            elif kind == "tables":
                self._tables(obj)
            elif kind == "device":
                self._device(obj)
            elif kind == "events":
                self._events(obj)
            elif kind == "end":
                ended = True
                break
            # Other kinds are additions of a later minor revision: skipped on purpose.
        if not ended:
            raise SnapshotError(f"{self.description}: truncated memtui export (it stops before its end marker)")
        for device in header.get("devices") or []:
            self._trace(int(device))
        return {
            "segments": self.segments,
            "device_traces": self.traces,
            "allocator_settings": dict(self.snapshot.get("allocator_settings") or {}),
            "external_annotations": list(self.snapshot.get("annotations") or []),
            "memtui_header": header,
            "memtui_source_rows": self.source_rows,
        }

    def _check_header(self, header: object) -> None:
        if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
            raise SnapshotError(f"{self.description}: not a memtui export (no memtui header)")
        version = header.get("version")
        if not isinstance(version, int):
            raise SnapshotError(f"{self.description}: memtui export without a format version")
        if version > FORMAT_VERSION:
            raise SnapshotError(f"{self.description}: written by a newer memtui (export format {version}); "
                                f"this memtui reads format {FORMAT_VERSION}: upgrade memtui to open it")

    def _tables(self, obj: dict) -> None:
        self.actions = [str(a) for a in obj["actions"]]
        self.strings = [str(s) for s in obj["strings"]]
        for k in obj.get("dict_strings") or []:  # user_metadata that was a dict, as its JSON
            self.strings[k] = _as_dict(self.strings[k])
        # A frame keeps every key it was written with (fx_* of an FX frame, a forward line's text).
        frames = [{"filename": f["filename"], "line": f["line"], "name": f["name"],
                   **{k: v for k, v in f.items() if k not in ("filename", "line", "name")}} for f in obj["frames"]]
        self.stacks = [[frames[i] for i in stack] for stack in obj["stacks"]]

    def _frames(self, sid: int) -> list[dict]:
        return self.stacks[sid] if sid >= 0 else []

    def _forward_frames(self, sid: int) -> list[str]:
        """A forward stack back as torch's ``forward_frames``: its lines, outermost first."""
        found = self._forward.get(sid)
        if found is None:
            found = self._forward[sid] = [f.get(FORWARD_TEXT, "") for f in reversed(self.stacks[sid])]
        return found

    def _trace(self, device: int) -> list[dict]:
        if device < 0 or device > 4095:
            raise SnapshotError(f"{self.description}: device {device} out of range")
        while len(self.traces) <= device:
            self.traces.append([])
        return self.traces[device]

    def _device(self, obj: dict) -> None:
        device = int(obj["device"])
        self._trace(device)
        self._pools[device] = [tuple(p) for p in obj.get("trace_pools") or []]
        segs = obj["segments"]
        built = []
        for i in range(len(segs["address"])):
            built.append({
                "device": device,
                "address": _int(segs["address"][i]),
                "total_size": _int(segs["total_size"][i]),
                "allocated_size": _int(segs["allocated_size"][i]),
                "active_size": _int(segs["active_size"][i]),
                "requested_size": _int(segs["requested_size"][i]),
                "stream": _int(segs["stream"][i]),
                "segment_type": segs["segment_type"][i],
                "segment_pool_id": tuple(segs["pool"][i]),
                "is_expandable": bool(segs["expandable"][i]),
                "frames": self._frames(segs["stack"][i]),
                "blocks": [],
            })
            sid = segs["fwd"][i] if "fwd" in segs else -1
            if sid >= 0:
                built[-1]["forward_frames"] = self._forward_frames(sid)
        blocks = obj["blocks"]
        forward = blocks.get("fwd") or [-1] * len(blocks["address"])
        for i in range(len(blocks["address"])):
            block = {
                "address": _int(blocks["address"][i]),
                "size": _int(blocks["size"][i]),
                "requested_size": _int(blocks["requested_size"][i]),
                "state": blocks["state"][i],
                "frames": self._frames(blocks["stack"][i]),
            }
            if forward[i] >= 0:
                block["forward_frames"] = self._forward_frames(forward[i])
            built[blocks["segment"][i]]["blocks"].append(block)
        self.segments.extend(built)

    def _events(self, obj: dict) -> None:
        self._events_seen += len(obj["action"])
        read = self._bytes_read()
        if read is not None and self._events_seen * MEMORY_PER_EVENT > memory_bound(read):
            raise SnapshotError(f"{self.description}: refused: {self._events_seen:,} events in the first "
                                f"{format_bytes(read)}, packed tighter than memtui writes them (reading them would "
                                "take more memory than the file can ask for)")
        device = int(obj["device"])
        trace = self._trace(device)
        rows = self.source_rows.setdefault(device, {"index": [], "version": []})
        if "index" in obj and "version" in obj and len(obj["index"]) == len(obj["action"]) == len(obj["version"]):
            rows["index"].extend(int(i) for i in obj["index"])
            rows["version"].extend(int(v) for v in obj["version"])
        actions, strings, stacks = self.actions, self.strings, self.stacks
        no_frames: list = []
        columns = [obj[k] for k in ("action", "addr", "size", "stream", "time_us", "stack", "ctx", "meta",
                                    "device_free")]
        columns.append(obj.get("fwd") or [-1] * len(columns[0]))
        columns.append(obj.get("pool") or [-1] * len(columns[0]))
        pools = self._pools.get(device, [])
        for k in (1, 2, 3, 8):
            columns[k] = _ints(columns[k])
        for action, addr, size, stream, t, sid, ctx, meta, device_free, fwd, pool in zip(*columns):
            name = actions[action]
            entry = {"action": name, "addr": addr, "size": size, "stream": stream, "time_us": t,
                     "compile_context": strings[ctx], "user_metadata": strings[meta]}
            if t is None:
                del entry["time_us"]
            if name not in _NO_FRAMES_ACTIONS or sid >= 0:  # a snapshot entry has frames only if it had them
                entry["frames"] = stacks[sid] if sid >= 0 else no_frames
            if device_free != -1:
                entry["device_free"] = device_free
            if fwd >= 0:
                entry["forward_frames"] = self._forward_frames(fwd)
            if pool >= 0:
                entry["pool_id"] = pools[pool]
            trace.append(entry)


def _as_dict(text: str) -> object:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def _int(value: object) -> int:
    # Integers past 64 bits are stored as decimal strings.
    return int(value) if isinstance(value, str) else value


def _ints(values: list) -> list:
    if any(type(v) is str for v in values):
        return [_int(v) for v in values]
    return values


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text[:100]
