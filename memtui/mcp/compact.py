"""Answers an agent reads cheaply: the same facts as ``--json``, in fewer characters.

- A stack frame ``{"filename", "line", "name"}`` becomes ``"file.py:12 name"``; a run of
  frames inside the torch package is one ``"… N torch frames …"`` line (the innermost
  frame, the operation that allocated, is always kept). ``all_frames`` keeps every frame.
- Fields with nothing in them (None, torch's ``"N/A"``) are left out, and so are the raw
  ``time_us`` and ``addr`` where ``time_s`` and ``address_n`` say the same. (An empty
  string stays: for some fields it means something, such as the default settings.)
- An installed package's files are named from the package on (``torch/nn/functional.py``,
  not the full path into ``site-packages``); the other paths are written relative to the
  directory that saves the most characters, named once as ``"paths_under"``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from memtui.model.relevance import is_torch_frame

EMPTY = (None, "N/A")
REDUNDANT = {"time_us": "time_s", "addr": "address_n"}
_PATH = re.compile(r"(?<![\w.])/(?:[^\s/:\"']+/)+")  # an absolute directory inside a string
_INSTALLED = re.compile(r"(?<![\w.])/\S*?/(?:site|dist)-packages/")  # up to an installed package
MIN_SAVING = 200  # characters a shared prefix must save to be worth naming


def compact(data: Any, all_frames: bool = False) -> Any:
    """``data`` with frames, rows and paths made compact (see the module docstring)."""
    data = compact_under(data, "", all_frames)
    if isinstance(data, dict):
        prefix = common_directory(data)
        if prefix:
            data = _strip_prefix(data, prefix)
            first = {"summary": data.pop("summary")} if "summary" in data else {}
            data = {**first, "paths_under": prefix, **data}
    return data


def compact_under(data: Any, prefix: str, all_frames: bool = False) -> Any:
    """``data`` compacted with paths written relative to ``prefix`` ("" for none)."""
    data = _replace(_frames_and_rows(data, all_frames), "-packages/", _INSTALLED)
    return _strip_prefix(data, prefix) if prefix else data


def _is_frame(value: Any) -> bool:
    return isinstance(value, dict) and "filename" in value and "line" in value and "name" in value


def frame_text(frame: dict) -> str:
    line = frame.get("line")
    where = f"{frame['filename']}:{line}" if line not in (None, 0, -1) else str(frame["filename"])
    return f"{where} {frame['name']}".strip()


def frame_lines(frames: list[dict], all_frames: bool) -> list[str]:
    """Frames as text, innermost first, with runs of torch's own frames counted rather than listed."""
    if all_frames:
        return [frame_text(f) for f in frames]
    out: list[str] = []
    run = 0
    for i, frame in enumerate(frames):
        if i > 0 and is_torch_frame(str(frame["filename"])):
            run += 1
            continue
        if run:
            out.append(f"… {run} torch frame{'s' if run != 1 else ''} …")
            run = 0
        out.append(frame_text(frame))
    if run:
        out.append(f"… {run} torch frame{'s' if run != 1 else ''} …")
    return out


def _frames_and_rows(value: Any, all_frames: bool) -> Any:
    if isinstance(value, list):
        if value and all(_is_frame(v) for v in value):
            return frame_lines(value, all_frames)
        return [_frames_and_rows(v, all_frames) for v in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if item in EMPTY and key not in ("more",):
                continue
            if key in REDUNDANT and REDUNDANT[key] in value:
                continue
            out[key] = _frames_and_rows(item, all_frames)
        return out
    return value


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def common_directory(data: Any) -> str:
    """The directory whose removal from every path saves the most characters ("" if none saves much)."""
    counts: Counter[str] = Counter()
    for text in _strings(data):
        for found in _PATH.findall(text):
            # Every ancestor directory of the path is a candidate prefix.
            parts = found.rstrip("/").split("/")
            for depth in range(2, len(parts) + 1):
                counts["/".join(parts[:depth]) + "/"] += 1
    best, saving = "", MIN_SAVING
    for prefix, n in counts.items():
        if (len(prefix) - 1) * n > saving:
            best, saving = prefix, (len(prefix) - 1) * n
    return best


def _strip_prefix(value: Any, prefix: str) -> Any:
    pattern = re.compile(r"(?<![\w./-])" + re.escape(prefix))  # the prefix where a path starts, not inside one
    return _replace(value, prefix, pattern)


def _replace(value: Any, prefix: str, pattern: re.Pattern) -> Any:
    if isinstance(value, str):
        return pattern.sub("", value) if prefix in value else value
    if isinstance(value, dict):
        return {k: _replace(v, prefix, pattern) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, prefix, pattern) for v in value]
    return value
