"""The interned tables an export carries: only the stacks, frames and strings it uses.

A filtered export of a million-event trace may touch a few dozen stacks; writing the
whole table would bloat it and leak unrelated call sites. Ids are renumbered densely in
the order of the source tables, and every id column goes through the maps built here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.model import Snapshot


@dataclass
class ExportTables:
    stack_map: np.ndarray  # source stack id -> exported id or -1; one extra slot so id -1 maps to -1
    stacks: np.ndarray  # source stack ids, in exported order
    frame_map: np.ndarray  # source frame id -> exported id
    frames: np.ndarray  # source frame ids, in exported order
    string_map: np.ndarray  # source string id -> exported id
    strings: np.ndarray  # source string ids, in exported order

    def stack_ids(self, column: np.ndarray) -> list[int]:
        # Index -1 (no stack) hits the extra last slot, which holds -1.
        return self.stack_map[column].tolist()

    def string_ids(self, column: np.ndarray) -> list[int]:
        return self.string_map[column].tolist()

    def as_object(self, snapshot: Snapshot) -> dict:
        stacks = snapshot.stacks
        strings = snapshot.strings
        dicts = strings.dict_ids
        return {
            "kind": "tables",
            "actions": list(snapshot.actions.names),
            "strings": [strings.raw(int(i)) for i in self.strings],
            # Frame maps carry any keys beyond filename/line/name (fx_*, a forward line's text).
            "frames": [stacks.frame_dict(int(f)) for f in self.frames],
            "stacks": [self.frame_map[stacks.frame_ids(int(s))].tolist() for s in self.stacks],
            "dict_strings": [k for k, i in enumerate(self.strings.tolist()) if i in dicts],
        }


def build_tables(snapshot: Snapshot, selections: dict[int, np.ndarray], include_stacks: bool) -> ExportTables:
    n_stacks = len(snapshot.stacks)
    used_stacks = np.zeros(n_stacks + 1, bool)  # slot n_stacks collects the -1s
    used_strings = np.zeros(len(snapshot.strings), bool)
    for d, rows in selections.items():
        dev = snapshot.devices[d]
        if include_stacks:
            used_stacks[dev.trace.stack[rows]] = True
            used_stacks[dev.trace.fwd[rows]] = True
            used_stacks[dev.segments.stack] = True
            used_stacks[dev.segments.fwd] = True
            used_stacks[dev.blocks.stack] = True
            used_stacks[dev.blocks.fwd] = True
        used_strings[dev.trace.ctx[rows]] = True
        used_strings[dev.trace.meta[rows]] = True
    used_stacks[n_stacks] = False
    stack_ids = np.flatnonzero(used_stacks[:n_stacks])
    stack_map = np.full(n_stacks + 1, -1, np.int64)
    stack_map[stack_ids] = np.arange(len(stack_ids))

    flat_parts = [snapshot.stacks.frame_ids(int(s)) for s in stack_ids]
    used_frames = np.zeros(len(snapshot.frames), bool)
    if flat_parts:
        used_frames[np.concatenate(flat_parts)] = True
    frame_ids = np.flatnonzero(used_frames)
    frame_map = np.full(len(snapshot.frames), -1, np.int64)
    frame_map[frame_ids] = np.arange(len(frame_ids))

    string_ids = np.flatnonzero(used_strings)
    string_map = np.full(len(snapshot.strings), -1, np.int64)
    string_map[string_ids] = np.arange(len(string_ids))
    return ExportTables(stack_map, stack_ids, frame_map, frame_ids, string_map, string_ids)
