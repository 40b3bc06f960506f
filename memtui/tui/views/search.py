"""What `/` finds: an allocation by address_n, every allocation at an address, or frames by text.

Pure: runs in a worker thread and returns a :class:`SearchResult`; the screen moves the
cursor. Identifier-looking queries that match nothing say "not found" instead of falling
back to a text search that would surprise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from memtui.model import DeviceModel, Match, Snapshot
from memtui.model.address_n import parse_address
from memtui.model.lifetimes import NONE
from memtui.units import plural


@dataclass
class SearchResult:
    query: str
    kind: str  # "address_n", "address", "text" or "none"
    device: int
    events: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # sorted, for n/N
    matches: list[Match] = field(default_factory=list)
    message: str = ""

    @property
    def found(self) -> bool:
        return self.kind != "none"


def looks_like_identifier(text: str) -> bool:
    """An address_n, a 0x or b'/s' address, or a long hex number: never meant as frame text."""
    address = parse_address(text)
    return address is not None and address.explicit


def run_search(snapshot: Snapshot, device: int, text: str) -> SearchResult:
    query = text.strip()
    if not query:
        return SearchResult(query, "none", device, message="empty search")
    address = parse_address(query)
    if address is not None:
        order = [device] + [d for d in range(len(snapshot.devices)) if d != device]
        for d in order:
            matches = snapshot.devices[d].find(query)
            if matches:
                return _address_result(query, d, matches, address.versioned)
        if address.explicit:
            what = "allocation" if address.versioned else "allocation at address"
            return SearchResult(query, "none", device, message=f"not found: no {what} {query}")
    return frame_text_search(snapshot, device, query)


def _address_result(query: str, device: int, matches: list[Match], versioned: bool) -> SearchResult:
    events = np.unique(np.array([m.event for m in matches if m.event != NONE], np.int64))
    if versioned:
        m = matches[0]
        where = "" if m.event != NONE else " (live at snapshot time; its alloc is not in the trace)"
        return SearchResult(query, "address_n", device, events, matches[:1], f"{m.address_n}{where}")
    lives = len(matches)
    return SearchResult(query, "address", device, events, matches,
                        f"{lives:,} allocation{'s' if lives != 1 else ''} at {query} (n/N steps through them)")


def frame_text_search(snapshot: Snapshot, device: int, query: str) -> SearchResult:
    """Events whose stack has a frame that, shown as ``filename:line function``, contains
    ``query`` (any case): what the event log shows (``oom.py:6``) is found, as the filter's
    ``frame:`` finds it (FrameTable.text_matches)."""
    frame_hit = snapshot.frames.text_matches(query)
    if not frame_hit.any():
        return SearchResult(query, "none", device, message=f"not found: no frame mentions '{query}'")
    stack_hit = stacks_with_frames(snapshot, frame_hit)
    dev: DeviceModel = snapshot.devices[device]
    sids = dev.trace.stack
    events = np.nonzero((sids >= 0) & stack_hit[np.maximum(sids, 0)])[0] if len(stack_hit) else np.zeros(0, np.int64)
    if not len(events):
        return SearchResult(query, "none", device,
                            message=f"not found: '{query}' is in no stack of device {device}'s trace")
    n_frames = int(frame_hit.sum())
    return SearchResult(query, "text", device, events.astype(np.int64),
                        message=f"{plural(len(events), 'event')} with a frame matching '{query}'"
                                f" ({n_frames} distinct frame{'s' if n_frames != 1 else ''}; n/N)")


def stacks_with_frames(snapshot: Snapshot, frame_hit: np.ndarray) -> np.ndarray:
    """For each stack id, whether any of its frames is marked in ``frame_hit``."""
    stacks = snapshot.stacks
    n_stacks = len(stacks)
    if n_stacks == 0:
        return np.zeros(0, bool)
    per_frame = frame_hit[stacks.flat].astype(np.int64)
    # Count hits per stack with a cumulative sum over the flat frame array (empty stacks give 0).
    csum = np.concatenate([[0], np.cumsum(per_frame)])
    return (csum[stacks.offsets[1:]] - csum[stacks.offsets[:-1]]) > 0
