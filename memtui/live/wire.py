"""How snapshots travel: frames once, entries as short lists.

A trace of 100,000 entries with Python stacks is about 67 MB as msgpack'd dicts, and
encoding it holds the job's interpreter for about a second (measured on an H100 host).
Most of it is repetition: an entry's frames are a few dozen distinct dicts shared by
every entry, and every entry spells out the same keys. So a frame is sent once, then
named by its number, and an entry is a list in a fixed order with only its unusual keys
spelled out. The watcher rebuilds the dicts, each distinct frame one shared object, as
torch hands them out.
"""

from __future__ import annotations

# An entry on the wire: [action, addr, size, stream, time_us, frames, rest]; ``rest`` holds
# every other key (None when there is none) and the defaults below are left out of it.
FIELDS = ("action", "addr", "size", "stream", "time_us")
DEFAULTS = {"compile_context": "N/A", "user_metadata": ""}
MISSING = "__missing__"  # a field an entry does not have (older torch: no time_us)


class FrameTable:
    """The job's side: each distinct frame gets a number, sent the first time it is used.

    torch builds fresh frame dicts at every read, shared within the read and dropped after
    it, so a frame is known by identity only while the read holds it: a dict made later may
    take a dropped one's id. Identities are kept with the object they name (never a bare id),
    and forgotten at each read (:meth:`new_read`); what outlives a read is the content.
    """

    def __init__(self) -> None:
        self.frames: list[dict] = []
        self._kept: dict[int, int] = {}  # ids of the frames in self.frames, alive as long as the table
        self._seen: dict[int, tuple[dict, int]] = {}  # this read's frames: (the object, its number)
        self._by_content: dict[tuple, int] = {}
        self._blocks: dict[tuple, tuple[dict, dict]] = {}  # (segment, block address) -> (as read, packed)
        self.sent = 0  # frames[:sent] went out already

    def new_read(self) -> None:
        """Forget this read's identities: its dicts may be freed, and their ids reused."""
        self._seen.clear()

    def number(self, frame: dict) -> int:
        found = self._kept.get(id(frame))
        if found is not None:
            return found
        seen = self._seen.get(id(frame))
        if seen is not None and seen[0] is frame:
            return seen[1]
        try:
            key = tuple(frame.items())  # torch writes a frame's keys in one order
            found = self._by_content.get(key)
        except TypeError:  # a value that cannot be hashed: no sharing for this frame
            key = None
        if found is None:
            found = len(self.frames)
            self.frames.append(frame)
            self._kept[id(frame)] = found  # kept in self.frames: its id stays its own
            if key is not None:
                self._by_content[key] = found
        else:
            self._seen[id(frame)] = (frame, found)  # the tuple keeps it alive while it is named
        return found

    def numbers(self, frames) -> list[int] | None:
        return None if frames is None else [self.number(f) for f in frames]

    def new_frames(self) -> tuple[int, list[dict]]:
        """(first number, frames) not sent yet; marks them sent."""
        start, self.sent = self.sent, len(self.frames)
        return start, self.frames[start:]

    def pack_block(self, segment: int, block: dict) -> dict:
        """``block`` with its frames as numbers; the same packed dict as last time when the
        block reads exactly as it did (most of a training job's blocks, read after read)."""
        key = (segment, block.get("address"))
        cached = self._blocks.get(key)
        if cached is not None and cached[0] == block:
            return cached[1]
        packed = dict(block)
        if "frames" in packed:
            packed["frames"] = self.numbers(packed["frames"])
        self._blocks[key] = (block, packed)
        return packed

    def forget_blocks_except(self, keys: set) -> None:
        for key in [k for k in self._blocks if k not in keys]:
            del self._blocks[key]


ALWAYS = (*FIELDS, *DEFAULTS, "frames")  # keys the list form implies; rest[MISSING] names absent ones


def pack_entries(entries: list[dict], table: FrameTable) -> list[list]:
    kept = table._kept
    number = table.number
    common = len(ALWAYS)
    out = []
    append = out.append
    for e in entries:
        frames = e.get("frames")
        if frames is None:
            numbers = None
        else:
            # Frames are shared dicts: most are found by identity, one lookup each.
            numbers = [kept.get(id(f)) for f in frames]
            if None in numbers:
                numbers = [number(f) for f in frames]
        if (len(e) == common and e.get("compile_context") == "N/A" and e.get("user_metadata") == ""
                and "action" in e and "frames" in e and "time_us" in e and "stream" in e and "addr" in e
                and "size" in e):
            rest = None  # the usual entry: everything is in the list
        else:
            rest = _rest(e)
        append([e.get("action"), e.get("addr"), e.get("size"), e.get("stream"), e.get("time_us"), numbers, rest])
    return out


def _rest(e: dict) -> dict | None:
    """The keys of an unusual entry that the list form does not carry, and the ones it lacks."""
    rest = {k: v for k, v in e.items() if k not in FIELDS and k != "frames" and DEFAULTS.get(k, MISSING) != v}
    missing = [k for k in ALWAYS if k not in e]
    if missing:
        rest[MISSING] = missing
    return rest or None


def unpack_entries(packed: list[list], frames: list[dict]) -> list[dict]:
    out = []
    for action, addr, size, stream, time_us, numbers, rest in packed:
        entry = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": time_us, **DEFAULTS,
                 "frames": [frames[i] for i in numbers] if numbers is not None else None}
        if rest:
            missing = rest.pop(MISSING, ())
            entry.update(rest)
            for key in missing:
                entry.pop(key, None)
        out.append(entry)
    return out


def pack_segments(segments: list[dict], table: FrameTable) -> list[dict]:
    out = []
    keys = set()
    for seg in segments:
        seg = dict(seg)
        if "frames" in seg:
            seg["frames"] = table.numbers(seg["frames"])
        if "blocks" in seg:
            address = seg.get("address")
            blocks = []
            for block in seg["blocks"] or []:
                blocks.append(table.pack_block(address, block))
                keys.add((address, block.get("address")))
            seg["blocks"] = blocks
        out.append(seg)
    table.forget_blocks_except(keys)
    return out


def unpack_segments(segments: list[dict], frames: list[dict]) -> list[dict]:
    """The segments with their frames as dicts again (new dicts: ``segments`` is left as it is)."""
    out = []
    for seg in segments:
        seg = dict(seg)
        if seg.get("frames") is not None:
            seg["frames"] = [frames[i] for i in seg["frames"]]
        if seg.get("blocks") is not None:
            blocks = []
            for block in seg["blocks"]:
                if block.get("frames") is not None:
                    block = {**block, "frames": [frames[i] for i in block["frames"]]}
                blocks.append(block)
            seg["blocks"] = blocks
        out.append(seg)
    return out


def pack_snapshot(snapshot: dict, table: FrameTable) -> dict:
    """A whole snapshot, its frames named in ``table`` (the caller sends the table's frames)."""
    packed = {k: v for k, v in snapshot.items() if k not in ("segments", "device_traces")}
    packed["segments"] = pack_segments(snapshot.get("segments") or [], table)
    packed["device_traces"] = [pack_entries(t or [], table) for t in snapshot.get("device_traces") or []]
    return packed


def unpack_snapshot(packed: dict, frames: list[dict]) -> dict:
    snapshot = dict(packed)
    snapshot["segments"] = unpack_segments(packed.get("segments") or [], frames)
    snapshot["device_traces"] = [unpack_entries(t or [], frames) for t in packed.get("device_traces") or []]
    return snapshot
