"""Interned frames and stacks.

Snapshots repeat the same few frames millions of times, and inside one pickle identical
frame dicts are usually the same object. Interning goes by object identity first (one
dict lookup per reference) and by content only for an object not seen before. A stack
is a run of frame ids in a flat array (innermost frame first, as torch records them),
addressed by a stack id.

A frame is ``filename``, ``line`` and ``name``, plus any other keys torch wrote (the
``fx_node_*`` and ``fx_original_trace`` of ``augment_with_fx_traces``): those are kept,
in order, as the frame's *extras* and written back unchanged. A trace entry's
``forward_frames`` (the forward pass's traceback of the op a backward allocation runs
for, a list of formatted lines) becomes a stack too: each line a frame parsed from its
``File "...", line N, in name`` header, carrying the line itself as the extra
:data:`FORWARD_TEXT`, so it reads back exactly.
"""

from __future__ import annotations

from collections import deque
from itertools import compress, repeat
from typing import Any, cast

import numpy as np

from memtui.model.relevance import (
    FORWARD_TEXT,
    FX_ORIGINAL_TRACE,
    is_generated_frame,
    is_internal_frame,
    is_native_frame,
    is_torch_frame,
    label_frames,
    parse_traceback,
    short_native_name,
    shown_frames,
)
from memtui.model.strings import StringTable, text_of

NO_STACK = -1
# A frame's content: filename, line, name and its extra (key, value) pairs.
FrameKey = tuple[str, int, str, tuple[tuple[str, str], ...]]
_WHOLE = slice(None)
_PLAIN_KEYS = frozenset(("filename", "line", "name"))

# Identity caches stop growing here: past it a file does not share its frame objects,
# and keeping every one alive would cost more than interning by content.
_IDENTITY_CACHE_LIMIT = 1 << 20

class UnplainValue(Exception):
    """Strict interning met something that is not plain snapshot data; the caller falls back."""


class StackToken:
    """Stands in for a frame list once it is interned (see :meth:`StackTable.intern_plain`).

    No pickle can make one: the streaming unpickler refuses every global but its sink.
    """

    __slots__ = ("sid",)

    def __init__(self, sid: int) -> None:
        self.sid = sid


def _text(value: object) -> str:
    # The same conversion StringTable.intern applies, done early so frames key by text.
    return value if isinstance(value, str) else text_of(value)


class FrameTable:
    """Distinct frames as columns: filename id, line, function-name id, extras, and flags.

    Frames are keyed by their text while building; their strings enter the string table
    at :meth:`freeze`, in frame order, so string ids do not depend on how the trace was
    cut into batches. Extras are a CSR table: frame ``f``'s are the (key, value) string
    ids ``extra_key[extra_offsets[f]:extra_offsets[f + 1]]`` (and ``extra_value``).
    """

    def __init__(self, strings: StringTable) -> None:
        self.strings = strings
        self._keys: list[FrameKey] = []
        self._by_content: dict[FrameKey, int] = {}
        self.filename = np.zeros(0, np.int32)
        self.line = np.zeros(0, np.int64)
        self.name = np.zeros(0, np.int32)
        self.native = np.zeros(0, bool)
        self.user = np.zeros(0, bool)
        self.internal = np.zeros(0, bool)  # the recorder's and allocator's own frames (model/relevance.py)
        self.generated = np.zeros(0, bool)  # code torch generated (FX graph modules, Inductor output)
        self.forward = np.zeros(0, bool)  # a line of a forward_frames traceback
        self.original = np.zeros(0, np.int32)  # an FX frame's original source frame (fx_original_trace), or -1
        self.extra_offsets = np.zeros(1, np.int64)
        self.extra_key = np.zeros(0, np.int32)
        self.extra_value = np.zeros(0, np.int32)

    def intern(self, frame: object) -> int:
        if isinstance(frame, dict):
            filename, line, name = frame.get("filename", "??"), frame.get("line", 0), frame.get("name", "??")
            extras = tuple((_text(k), _text(v)) for k, v in frame.items() if k not in _PLAIN_KEYS) \
                if len(frame) > 3 or not _PLAIN_KEYS.issuperset(frame) else ()
        else:
            filename, line, name, extras = "??", 0, text_of(frame), ()
        if not isinstance(line, int) or isinstance(line, bool) or not 0 <= line < 1 << 62:
            line = 0
        return self._intern_key((_text(filename), line, _text(name), extras))

    def intern_plain(self, frame: object) -> int:
        """Like :meth:`intern`, but only for a frame dict of plain values."""
        if type(frame) is not dict:
            raise UnplainValue(f"a frame is a {type(frame).__name__}")
        filename, line, name = frame.get("filename", "??"), frame.get("line", 0), frame.get("name", "??")
        if type(filename) is not str or type(name) is not str or type(line) is not int:
            raise UnplainValue("a frame holds a value that is not plain")
        if not 0 <= line < 1 << 62:
            line = 0
        extras: tuple[tuple[str, str], ...] = ()
        if len(frame) > 3 or not _PLAIN_KEYS.issuperset(frame):
            extras = tuple((k, v) for k, v in frame.items() if k not in _PLAIN_KEYS)
            if any(type(k) is not str or type(v) is not str for k, v in extras):
                raise UnplainValue("a frame holds a value that is not plain")
        return self._intern_key((filename, line, name, extras))

    def intern_forward(self, line: object) -> int:
        """A frame for one formatted line of a ``forward_frames`` traceback."""
        text = _text(line)
        parsed = parse_traceback(text)
        filename, number, name = parsed[0] if parsed else ("", 0, text.strip())
        return self._intern_key((filename, number, name, ((FORWARD_TEXT, text),)))

    def _intern_key(self, key: FrameKey) -> int:
        fid = self._by_content.get(key)
        if fid is None:
            fid = len(self._keys)
            self._by_content[key] = fid
            self._keys.append(key)
        return fid

    def freeze(self) -> None:
        """Intern the frames' strings, turn the growing lists into numpy columns, compute flags."""
        # The frames an FX frame's fx_original_trace names are frames of the table too:
        # the label rule reads the innermost one in place of the generated line.
        originals: dict[int, list[int]] = {}
        for fid in range(len(self._keys)):
            trace = next((v for k, v in self._keys[fid][3] if k == FX_ORIGINAL_TRACE), None)
            if trace:
                found = parse_traceback(trace)
                if found:
                    originals[fid] = [self._intern_key((f, n, name, ())) for f, n, name in reversed(found)]
        intern = self.strings.intern
        keys = self._keys
        ids = [(intern(filename), intern(name)) for filename, _, name, _ in keys]
        self.filename = np.asarray([f for f, _ in ids], np.int32)
        self.line = np.asarray([key[1] for key in keys], np.int64)
        self.name = np.asarray([n for _, n in ids], np.int32)
        counts = [len(key[3]) for key in keys]
        self.extra_offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
        self.extra_key = np.asarray([intern(k) for key in keys for k, _ in key[3]], np.int32)
        self.extra_value = np.asarray([intern(v) for key in keys for _, v in key[3]], np.int32)
        self.forward = np.array([any(k == FORWARD_TEXT for k, _ in key[3]) for key in keys], bool)
        self._keys = []
        self._by_content = {}
        self.compute_flags(originals)

    def compute_flags(self, originals: dict[int, list[int]] | None = None) -> None:
        """The flags every view reads (model/relevance.py), from the columns."""
        names = [self.strings[i] for i in self.filename.tolist()]
        self.native = np.array([is_native_frame(f) for f in names], bool)
        self.generated = np.array([is_generated_frame(f) for f in names], bool)
        self.user = np.array([not is_native_frame(f) and not is_torch_frame(f) for f in names], bool) & ~self.generated
        functions = [self.strings[i] for i in self.name.tolist()]
        self.internal = np.array([is_internal_frame(f, n) for f, n in zip(names, functions)], bool)
        if originals is not None:
            self.original = np.full(len(names), -1, np.int32)
            for fid, chain in originals.items():
                # The original trace's own label: its innermost user frame, else its innermost.
                users = [f for f in chain if self.user[f]]
                self.original[fid] = users[0] if users else chain[0]

    def __len__(self) -> int:
        return len(self._keys) if self._keys else len(self.filename)

    def extras(self, fid: int) -> list[tuple[str, str]]:
        """The frame's keys beyond filename, line and name, exactly as torch wrote them (not
        escaped for a terminal: split multi-line values, then escape each line), in order."""
        lo, hi = int(self.extra_offsets[fid]), int(self.extra_offsets[fid + 1])
        raw = self.strings.raw
        return [(raw(int(k)), raw(int(v))) for k, v in zip(self.extra_key[lo:hi], self.extra_value[lo:hi])]

    def extra(self, fid: int, key: str) -> str | None:
        return next((v for k, v in self.extras(fid) if k == key), None)

    def filename_of(self, fid: int) -> str:
        return self.strings[int(self.filename[fid])]

    def name_of(self, fid: int) -> str:
        return self.strings[int(self.name[fid])]

    def describe(self, fid: int) -> str:
        """``file:line function`` for one frame."""
        return f"{self.filename_of(fid)}:{int(self.line[fid])} {self.name_of(fid)}"

    def text_matches(self, needle: str) -> np.ndarray:
        """Per frame: does ``needle`` (any case) occur in the frame as shown,
        ``filename:line function``. The one rule for "frames mentioning this text": what the
        event log shows (``oom.py:6``, ``optimizer.py:76 step``) is found by the filter's
        ``frame:`` and by the explorer's ``/`` alike."""
        needle = needle.lower()
        strings = self.strings
        return np.fromiter(
            (needle in f"{strings[int(f)].lower()}:{int(line)} {strings[int(name)].lower()}"
             for f, line, name in zip(self.filename, self.line, self.name)), bool, len(self.filename))

    def label_text(self, fid: int, short: bool = False) -> str:
        """How a label frame reads: ``file:line function`` (``short``: the file's name without
        its folder), for a C++ frame ``AddmmBackward0 (backward) [C++]``, and for a line of a
        forward traceback (naming a backward allocation) ``model.py:12 forward (backward)``."""
        if self.native[fid] and not self.forward[fid]:
            return f"{short_native_name(self.name_of(fid))} [C++]"
        filename = self.filename_of(fid)
        if short:
            filename = filename.replace("\\", "/").rsplit("/", 1)[-1]
        text = f"{filename}:{int(self.line[fid])} {self.name_of(fid)}"
        return f"{text} (backward)" if self.forward[fid] else text


class StackTable:
    """Stacks as slices of one flat frame-id array (CSR layout)."""

    def __init__(self, frames: FrameTable) -> None:
        self.frames = frames
        self._flat: list[int] = []
        self._offsets: list[int] = [0]
        self._by_content: dict[tuple[int, ...], int] = {}
        self._by_identity: dict[int, int] = {}
        self._keepalive: list[object] = []
        self._frame_identity: dict[int, int] = {}
        self._tokens: dict[int, StackToken] = {}
        self._by_frame_ids: dict[tuple[int, ...], int] = {(): NO_STACK}
        self._token_items: dict[int, tuple[StackToken]] = {}
        self.flat = np.zeros(0, np.int32)
        self.offsets = np.zeros(1, np.int64)
        self.label = np.zeros(0, np.int32)  # label frame of each stack (model/relevance.py), or -1
        self._forward_by_identity: dict[int, int] = {}
        self._forward_by_content: dict[tuple[str, ...], int] = {}

    def intern_forward(self, lines: object) -> int:
        """Stack id of a ``forward_frames`` list (formatted traceback lines, outermost first),
        as a stack of parsed frames, innermost first like every other stack."""
        if not lines:
            return NO_STACK
        sid = self._forward_by_identity.get(id(lines))
        if sid is not None:
            return sid
        if isinstance(lines, str) or not isinstance(lines, (list, tuple)):
            lines = [lines]  # a single string: one line of traceback
        content = tuple(_text(line) for line in lines)
        sid = self._forward_by_content.get(content)
        if sid is None:
            key = tuple(self.frames.intern_forward(line) for line in reversed(content))
            sid = self._by_content.get(key)
            if sid is None:
                sid = self._add(key)
            self._forward_by_content[content] = sid
        self._forward_by_identity[id(lines)] = sid
        self._keepalive.append(lines)
        return sid

    def intern(self, frames: object) -> int:
        """Stack id of a list of frame dicts (NO_STACK for a missing or empty list)."""
        if not frames:
            return NO_STACK
        # Entries share frame lists (a free_completed reuses its free_requested's list):
        # the identity cache makes those a single lookup. The list is kept alive while
        # building so its id cannot be reused by another object.
        sid = self._by_identity.get(id(frames))
        if sid is not None:
            return sid
        if not isinstance(frames, (list, tuple)):
            return NO_STACK
        if type(frames[0]) is StackToken:
            return frames[0].sid  # a list the streaming decoder interned (see intern_plain)
        intern_frame = self._intern_frame_cached
        key = tuple([intern_frame(f) for f in frames])
        sid = self._by_content.get(key)
        if sid is None:
            sid = self._add(key)
        self._by_identity[id(frames)] = sid
        self._keepalive.append(frames)
        return sid

    def intern_plain(self, frames: object) -> int:
        """Stack id of a frame list, for the streaming decoder: strict, and memory-lean.

        Only a list of plain frame dicts is accepted (:class:`UnplainValue` otherwise).
        Once interned, the list's content is replaced by one :class:`StackToken`: the
        unpickler's memo keeps the list alive (a later entry may refer to it again, as a
        free_completed does to its free_requested's list), and a one-item list costs a
        fraction of the frames it held.
        """
        if frames is None:
            return NO_STACK
        if type(frames) is not list:
            raise UnplainValue(f"frames is a {type(frames).__name__}")
        if not frames:
            return NO_STACK
        first = frames[0]
        if type(first) is StackToken:
            return first.sid
        # Frame dicts are shared objects inside a pickle, so the identities of a list's
        # frames name its stack: one tuple(map(id)) and one lookup, all in C.
        by_ids = self._by_frame_ids
        ids = tuple(map(id, frames))
        sid = by_ids.get(ids)
        if sid is None:
            sid = self._intern_frames_plain(frames)
            cache = self._frame_identity
            if len(by_ids) < _IDENTITY_CACHE_LIMIT and all(i in cache for i in ids):
                by_ids[ids] = sid  # only when every frame is kept alive, so no id is reused
        token = self._tokens.get(sid)
        if token is None:
            token = self._tokens[sid] = StackToken(sid)
            self._token_items[sid] = (token,)
            self._by_frame_ids[(id(token),)] = sid  # so a list already replaced is one lookup too
        frames[:] = (token,)
        return sid

    def intern_plain_batch(self, frame_lists: list[Any]) -> list[int]:
        """:meth:`intern_plain` of each item, with the common cases done in C.

        A list seen before (it holds its token) or a new list of frames seen before is a
        dict lookup of its frames' identities; only the rest goes through intern_plain.
        """
        # None for an item that is not a list: a key no dict holds, so it is looked up as new.
        keys: list[Any] = [tuple(map(id, f)) if f.__class__ is list else None for f in frame_lists]
        found: list[int | None] = list(map(self._by_frame_ids.get, keys))
        if None in found:
            for i in [i for i, sid in enumerate(found) if sid is None]:
                found[i] = self.intern_plain(frame_lists[i])
        sids = cast(list[int], found)  # every None was just replaced by a stack id
        # Replace every list's frames by its token (again, for the ones already replaced).
        items = self._token_items
        if NO_STACK in sids:
            kept = [sid >= 0 for sid in sids]
            lists, sids_kept = list(compress(frame_lists, kept)), list(compress(sids, kept))
        else:
            lists, sids_kept = frame_lists, sids
        deque(map(list.__setitem__, lists, repeat(_WHOLE), map(items.__getitem__, sids_kept)), 0)
        return sids

    def _intern_frames_plain(self, frames: list[Any]) -> int:
        cache = self._frame_identity
        intern_frame = self.frames.intern_plain
        ids: list[int] = []
        for frame in frames:
            fid = cache.get(id(frame))
            if fid is None:
                fid = intern_frame(frame)
                if len(cache) < _IDENTITY_CACHE_LIMIT:
                    # Kept alive so its id cannot be reused by another object meanwhile.
                    cache[id(frame)] = fid
                    self._keepalive.append(frame)
            ids.append(fid)
        key = tuple(ids)
        sid = self._by_content.get(key)
        return self._add(key) if sid is None else sid

    def _add(self, key: tuple[int, ...]) -> int:
        sid = len(self._offsets) - 1
        self._by_content[key] = sid
        self._flat.extend(key)
        self._offsets.append(len(self._flat))
        return sid

    def _intern_frame_cached(self, frame: object) -> int:
        cache = self._frame_identity
        fid = cache.get(id(frame))
        if fid is None:
            fid = self.frames.intern(frame)
            cache[id(frame)] = fid
            self._keepalive.append(frame)
        return fid

    def freeze(self) -> None:
        """Drop the build caches (and the objects they kept alive); build numpy columns."""
        self._by_identity = {}
        self._frame_identity = {}
        self._keepalive = []
        self._tokens = {}
        self._token_items = {}
        self._by_frame_ids = {}
        self._by_content = {}
        self._forward_by_identity = {}
        self._forward_by_content = {}
        self.frames.freeze()
        self.flat = np.asarray(self._flat, np.int32)
        self.offsets = np.asarray(self._offsets, np.int64)
        self._flat = []
        self._offsets = []
        self.label = np.array([self._label_frame(s) for s in range(len(self))], np.int32)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def frame_ids(self, sid: int) -> np.ndarray:
        if sid < 0:
            return self.flat[:0]
        return self.flat[self.offsets[sid]:self.offsets[sid + 1]]

    def label_frames(self, sid: int, depth: int = 1) -> tuple[int, ...]:
        """The label frame of a stack and, with ``depth`` > 1, the next ones outwards."""
        ids = self.frame_ids(sid)
        frames = self.frames
        names = [frames.name_of(int(f)) for f in ids] if len(ids) and frames.native[ids].all() else []
        return label_frames(ids, names, frames.native, frames.user, frames.internal, depth, frames.original)

    def label_is_user(self) -> np.ndarray:
        """Per stack: its label is a frame of the user's own code (not torch's, not C++)."""
        labels = self.label
        return (labels >= 0) & self.frames.user[np.maximum(labels, 0)] if len(labels) else np.zeros(0, bool)

    def _label_frame(self, sid: int) -> int:
        found = self.label_frames(sid)
        return found[0] if found else -1

    def visible_frames(self, sid: int, show_native: bool = False) -> list[int]:
        """Frame ids a stack view shows (model/relevance.py): internal frames only with ``show_native``."""
        frames = self.frames
        return shown_frames(self.frame_ids(sid), frames.native, frames.internal, show_native)

    def frame_dict(self, fid: int) -> dict[str, object]:
        """The frame as torch wrote it: filename, line, name and any extra keys (the fx_* of
        an FX frame); a forward traceback line as its parsed parts and the line itself."""
        out = {"filename": self.frames.filename_of(fid), "line": int(self.frames.line[fid]),
               "name": self.frames.name_of(fid)}
        if self.frames.extra_offsets[fid + 1] > self.frames.extra_offsets[fid]:
            out.update(self.frames.extras(fid))
        return out

    def forward_lines(self, sid: int) -> list[str]:
        """A forward stack back as the ``forward_frames`` torch wrote (outermost first)."""
        frames = self.frames
        return [frames.extra(int(f), FORWARD_TEXT) or "" for f in self.frame_ids(sid)[::-1]]

    def top_frame_text(self, sid: int) -> str:
        """The stack's label frame as text (:meth:`FrameTable.label_text`), or '' if none."""
        if sid < 0:
            return ""
        fid = int(self.label[sid])
        return self.frames.label_text(fid) if fid >= 0 else ""
