"""Writing a snapshot dict back out as torch's pickle, or as JSON.

The pickle is what ``torch.cuda.memory._dump_snapshot`` writes: protocol 4, plain dicts,
lists, tuples, strings and numbers, so ``python -m torch.cuda._memory_viz`` and the
pytorch.org/memory_viz page read it (frame lines torch writes as 2**64 - 1, which
memory_viz's unpickler cannot read, are written as -1: :func:`memory_viz_frame_lines`).
memtui's own keys (``memtui_header``) are left out: the output is a snapshot, not an export.

JSON is written the way ``json.dump`` writes the snapshot dict, which memtui (and
memory_viz) read back. It is measured as it is written with the loader's own limits
(``memtui.load.limits.JsonStructure``): a file memtui would refuse to open is not written.
A value nested too deeply for either format fails in one line, not with a traceback.
"""

from __future__ import annotations

import io
import json
import os
import pickle

from memtui.atomic import WriteError, atomic_write, check_writable_target
from memtui.errors import SnapshotError, UsageError
from memtui.jsonvalue import json_value
from memtui.load.limits import MAX_JSON_DEPTH, JsonStructure
from memtui.load.read import read_snapshot
from memtui.load.source import ProgressFn

PICKLE_PROTOCOL = 4  # what _dump_snapshot uses, and the newest memory_viz's unpickler reads
FORMATS = {".pickle": "pickle", ".pkl": "pickle", ".json": "json"}


def output_format(path: str) -> str:
    """'pickle' or 'json', from the output file's extension."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise UsageError(f"{path}: cannot tell the output format; name it .pickle (or .pkl) or .json")
    return FORMATS[ext]


def convert_file(source: str, target: str, force: bool = False, progress: ProgressFn | None = None) -> str:
    """Read any snapshot memtui opens and write it to ``target``; returns the format written."""
    kind = output_format(target)
    check_writable_target(target, force, source=source)
    raw = read_snapshot(source, progress)
    refuse_filtered_export(raw, source)
    snapshot = torch_layout(raw)
    if kind == "pickle":
        memory_viz_frame_lines(snapshot)
        write_pickle(snapshot, target, force)
    else:
        write_json(snapshot, target, force)
    return kind


def refuse_filtered_export(raw: dict, source: str) -> None:
    """A filtered export is not converted: memory_viz replays a trace from its first event
    to rebuild allocator state, and a trace with events left out replays into impossible
    states (frees of blocks never allocated, allocations that never end, more allocated
    than reserved). The source snapshot, or an export without a filter, converts."""
    header = raw.get("memtui_header")
    if not isinstance(header, dict):
        return
    events, total = header.get("events"), header.get("source_events")
    if isinstance(events, int) and isinstance(total, int) and events != total:
        raise UsageError(f"{os.path.basename(source)}: a filtered export ({events:,} of {total:,} events) is not "
                         "converted, since memory_viz would replay it into impossible figures; convert the source "
                         "snapshot, or an export made without a filter")


def torch_layout(snapshot: dict) -> dict:
    """The snapshot without memtui's own top-level keys."""
    return {k: v for k, v in snapshot.items() if not (isinstance(k, str) and k.startswith("memtui_"))}


_UINT64 = 1 << 64
_INT64_END = 1 << 63


def memory_viz_frame_lines(snapshot: dict) -> int:
    """Frames' ``line`` as memory_viz's unpickler can read it; returns how many changed.

    Torch writes a frame without a line number (code FX generated, seen in 2.11) as
    2**64 - 1, the unsigned form of -1. Pickled that is a 9-byte integer, which the
    JavaScript unpickler refuses ("Unsupported number bigger than 8 bytes"), so memory_viz
    cannot open such a file at all. Written as -1, the same 64 bits, it opens. Frame lists
    and frame dicts are shared objects: each is looked at once.
    """
    seen_lists: set[int] = set()
    seen_frames: set[int] = set()
    changed = 0

    def fix(frames: object) -> None:
        nonlocal changed
        if type(frames) is not list or id(frames) in seen_lists:
            return
        seen_lists.add(id(frames))
        for frame in frames:
            if type(frame) is dict and id(frame) not in seen_frames:
                seen_frames.add(id(frame))
                line = frame.get("line")
                if type(line) is int and _INT64_END <= line < _UINT64:
                    frame["line"] = line - _UINT64
                    changed += 1

    for trace in snapshot.get("device_traces") or []:
        for entry in trace if isinstance(trace, list) else []:
            if type(entry) is dict:
                fix(entry.get("frames"))
    for seg in snapshot.get("segments") or []:
        if isinstance(seg, dict):
            fix(seg.get("frames"))
            for block in seg.get("blocks") or []:
                if isinstance(block, dict):
                    fix(block.get("frames"))
    return changed


def write_pickle(snapshot: dict, target: str, force: bool = False) -> None:
    try:
        with atomic_write(target, force) as fh:
            pickle.dump(snapshot, fh, protocol=PICKLE_PROTOCOL)
    except RecursionError:
        raise WriteError(f"{target}: not written: the snapshot holds a value nested too deeply to pickle") from None


def write_json(snapshot: dict, target: str, force: bool = False) -> None:
    try:
        try:
            _dump_json(snapshot, target, force)
        except (ValueError, TypeError):
            # NaN/inf times or an odd value somewhere: standard JSON has no spelling for them.
            _dump_json(json_value(snapshot), target, force)
    except (RecursionError, _TooDeep):
        raise WriteError(f"{target}: not written: the snapshot holds a value nested more than {MAX_JSON_DEPTH} "
                         "deep, which memtui does not read back from JSON") from None
    except _Refused as exc:
        raise WriteError(f"{target}: not written: {exc}") from None


class _Refused(Exception):
    """The JSON being written is one the loader would refuse."""


class _TooDeep(_Refused):
    pass


def _dump_json(snapshot: dict, target: str, force: bool) -> None:
    # Streamed: json.dump writes piece by piece, never the whole text at once.
    with atomic_write(target, force) as fh:
        measured = _MeasuredWriter(fh, JsonStructure(target))
        buffered = io.BufferedWriter(measured, 1 << 20)
        text = io.TextIOWrapper(buffered, encoding="utf-8", write_through=False)
        try:
            json.dump(snapshot, text, allow_nan=False, separators=(",", ":"))
            text.flush()
        except BaseException:
            measured.abandon()  # what the layers above still hold is dropped when they are collected
            raise
        text.detach().detach()
        measured.finish()


class _MeasuredWriter(io.RawIOBase):
    """Passes bytes to ``fh`` after the loader's JSON limits have measured them."""

    def __init__(self, fh, structure: JsonStructure) -> None:
        self._fh = fh
        self._structure = structure
        self._refused = False

    def writable(self) -> bool:
        return True

    def abandon(self) -> None:
        """The file is not written after all: take and drop whatever still comes."""
        self._refused = True

    def write(self, data) -> int:
        if self._refused:
            # The write was refused or abandoned; the text and buffer layers above still
            # flush what they hold when they are collected, and must not raise again.
            return len(data)
        self._check(self._structure.feed, data)
        return self._fh.write(data)

    def finish(self) -> None:
        self._check(self._structure.finish)

    def _check(self, step, *args) -> None:
        try:
            step(*args)
        except SnapshotError as exc:
            self._refused = True
            if self._structure.deepest > MAX_JSON_DEPTH:
                raise _TooDeep() from None
            raise _Refused(str(exc).split(": refused: ", 1)[-1]) from None
