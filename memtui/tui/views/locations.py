"""Code locations as the explorer's columns print them: ``file.py:123 function``.

One rule for every column (the event log's frame, the call sites of the analysis screens):
the file without its folder, the line, the function. When the column is too narrow the
function name is cut first, then the file name from its left (``…ain.py:88``); the line
number is never cut while it fits at all. The full path stays in the detail views (the
inspector, the line under an analysis table).

Pure (no textual): a :class:`Location` carries the short text, the full text and how much
of the short text is the ``file:line`` that cutting must keep.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtui.model.frames import FrameTable

ELLIPSIS = "…"
SITE_SEPARATOR = " <- "  # how memtui.analysis.callsites joins the frames of a deeper call site


def basename(filename: str) -> str:
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    return name or filename


@dataclass(frozen=True)
class Location:
    short: str  # ``file.py:123 function``, or a C++ frame's label
    full: str  # with the file's whole path
    keep: int = 0  # the first ``keep`` characters of ``short`` are ``file.py:123``: cut them last

    def __str__(self) -> str:
        return self.short

    def fit(self, width: int) -> str:
        return fit_location(self.short, width, self.keep)


def fit_location(text: str, width: int, keep: int = 0) -> str:
    """``text`` in at most ``width`` cells, cut at its end, but never into its first ``keep``
    characters (``file.py:123``) while more than them fits; when even they do not fit, the
    file name loses its start and the line number stays."""
    if len(text) <= width:
        return text
    if width <= 0:
        return ""
    if keep <= 0 or width >= keep + 2:
        return text[:width - 1] + ELLIPSIS  # the function name (or what follows ``file:line``) is cut
    head = text[:keep]
    if width >= keep:
        return head
    colon = head.rfind(":")
    if colon < 0:
        return head[:width - 1] + ELLIPSIS
    line = head[colon:]  # ``:123``
    room = width - len(line) - 1  # for the end of the file name, after the ellipsis
    if room >= 1:
        return ELLIPSIS + head[:colon][-room:] + line
    return line[1:][:width]  # not even ``…x:123`` fits: the number alone, as much as fits


def frame_location(filename: str, line: int, name: str) -> Location:
    """A Python frame's location."""
    where = f"{basename(filename)}:{line}"
    return Location(f"{where} {name}" if name else where, f"{filename}:{line} {name}".rstrip(), len(where))


def table_location(frames: FrameTable, fid: int) -> Location:
    """The location of frame ``fid`` of the snapshot's frame table (a C++ frame: its label)."""
    if fid < 0:
        return Location("", "")
    if frames.native[fid] and not frames.forward[fid]:
        text = frames.label_text(fid)
        return Location(text, text)
    found = frame_location(frames.filename_of(fid), int(frames.line[fid]), frames.name_of(fid))
    if frames.forward[fid]:  # a forward traceback's line naming a backward allocation (label_text)
        return Location(f"{found.short} (backward)", f"{found.full} (backward)", found.keep)
    return found


def site_location(label: str, frames: list[dict] | None) -> Location:
    """An analysis call site: ``label`` as memtui.analysis.callsites writes it (full paths,
    frames joined by `` <- ``), short with each of its Python ``frames`` (the dicts the
    analyses return with it) named by its file's name alone."""
    if not frames:
        return Location(label, label)
    parts = label.split(SITE_SEPARATOR)
    keep = 0
    if len(parts) == len(frames):
        short_parts = []
        for k, (part, frame) in enumerate(zip(parts, frames)):
            filename, line = str(frame.get("filename", "")), frame.get("line", "")
            prefix = f"{filename}:{line}"
            if filename and part.startswith(prefix):
                short = basename(filename) + part[len(filename):]
                if k == 0:
                    keep = len(f"{basename(filename)}:{line}")
            else:
                short = part  # a C++ frame, already short
            short_parts.append(short)
        return Location(SITE_SEPARATOR.join(short_parts), label, keep)
    return Location(label, label)
