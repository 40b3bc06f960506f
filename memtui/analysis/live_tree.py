"""The live set folded into a call tree by stack, as memray's tree reporter does.

The root is everything allocated at the moment; its children are the outermost frames
(``<module>``), and each node holds the bytes and count of the allocations whose stacks
pass through it, with how those bytes split over the categories. Folding is per distinct
stack (a few hundred), never per allocation.

Frames are shown by the one relevance rule (memtui/model/relevance.py): with internal
frames hidden a stack shows its Python frames; a stack of C++ frames only (the autograd
engine's thread) shows as ``(autograd thread)`` and its label frame (``AddmmBackward0``).
An allocation recorded without a stack while backward() ran (stacks="python") hangs under
the backward() call's own stack as ``(autograd thread)``, or, when the trace has
``forward_frames``, under the forward op it is the backward of (frames that read
``file:line function (backward)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memtui.analysis.breakdown import LiveSet
from memtui.analysis.categories import VIA_BACKWARD_CALL, VIA_FORWARD
from memtui.model import Snapshot
from memtui.units import format_bytes

ROOT = -1
NO_STACK = -2
AUTOGRAD = -3
SPECIAL_LABELS = {ROOT: "(all allocations)", NO_STACK: "(no stack)", AUTOGRAD: "(autograd thread)"}


@dataclass
class TreeNode:
    key: int  # frame id, or ROOT / NO_STACK / AUTOGRAD
    label: str
    bytes: int = 0
    count: int = 0
    categories: np.ndarray | None = None  # bytes per category id
    children: list[TreeNode] = field(default_factory=list)
    parent: TreeNode | None = field(default=None, repr=False)
    frame: dict[str, Any] | None = None  # {filename, line, name} for a frame node
    rules: np.ndarray | None = None  # bytes per rule, in the order of the root's ``rule_codes``
    rule_codes: list[int] = field(default_factory=list)  # the root's: which rule each column is

    def top_rule(self) -> int | None:
        """The code of the rule (memtui/analysis/categories.py) that placed most of its bytes."""
        if self.rules is None or not self.rules.any():
            return None
        root = self.path()[0]
        return root.rule_codes[int(np.argmax(self.rules))]

    @property
    def depth(self) -> int:
        d, node = 0, self
        while node.parent is not None:
            d, node = d + 1, node.parent
        return d

    def path(self) -> list[TreeNode]:
        """The nodes from the root down to this one."""
        out: list[TreeNode] = []
        node: TreeNode | None = self
        while node is not None:
            out.append(node)
            node = node.parent
        return out[::-1]

    def walk(self) -> Iterator[TreeNode]:
        """This node and every node under it, depth first, largest child first."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def to_json(self, names: list[str], min_bytes: int = 0) -> dict[str, Any]:
        cats = self.categories if self.categories is not None else np.zeros(len(names), np.int64)
        return {"label": self.label, "frame": self.frame, "bytes": self.bytes, "count": self.count,
                "categories": {names[c]: int(v) for c, v in enumerate(cats) if v},
                "children": [c.to_json(names, min_bytes) for c in self.children if c.bytes >= min_bytes]}


def live_tree(snapshot: Snapshot, live: LiveSet, n_categories: int, show_internal: bool = False) -> TreeNode:
    """The call tree of ``live`` (see the module docstring)."""
    root = TreeNode(ROOT, SPECIAL_LABELS[ROOT], categories=np.zeros(n_categories, np.int64))
    if not len(live):
        return root
    key = live.stack.astype(np.int64) * 3 + live.via_backward.astype(np.int64)
    keys, inverse = np.unique(key, return_inverse=True)
    per = np.zeros((len(keys), n_categories), np.int64)
    np.add.at(per, (inverse, live.category.astype(np.int64)), live.size)
    counts = np.bincount(inverse, minlength=len(keys))
    codes, rule_index = np.unique(live.rule, return_inverse=True)
    per_rule = np.zeros((len(keys), len(codes)), np.int64)
    np.add.at(per_rule, (inverse, rule_index), live.size)
    root.rule_codes = [int(c) for c in codes]
    root.rules = np.zeros(len(codes), np.int64)
    index: dict[tuple[int, int], TreeNode] = {}  # (id of parent node, key) -> child
    for k, packed in enumerate(keys):
        sid, via = divmod(int(packed), 3)
        node = root
        _add(node, per[k], int(counts[k]), per_rule[k])
        for part in _path(snapshot, sid, via, show_internal):
            child = index.get((id(node), part))
            if child is None:
                child = _new_node(snapshot, part, node, n_categories)
                child.rules = np.zeros(len(codes), np.int64)
                index[(id(node), part)] = child
                node.children.append(child)
            node = child
            _add(node, per[k], int(counts[k]), per_rule[k])
    for node in root.walk():
        node.children.sort(key=lambda c: (-c.bytes, -c.count, c.label))
    return root


def _add(node: TreeNode, per_category: np.ndarray, count: int, per_rule: np.ndarray) -> None:
    node.categories += per_category
    node.rules += per_rule
    node.bytes += int(per_category.sum())
    node.count += count


def _new_node(snapshot: Snapshot, part: int, parent: TreeNode, n_categories: int) -> TreeNode:
    if part < 0:
        return TreeNode(part, SPECIAL_LABELS[part], categories=np.zeros(n_categories, np.int64), parent=parent)
    frames = snapshot.stacks.frames
    return TreeNode(part, frames.label_text(part, short=True), categories=np.zeros(n_categories, np.int64),
                    parent=parent, frame=snapshot.stacks.frame_dict(part))


def _path(snapshot: Snapshot, sid: int, via: int, show_internal: bool) -> list[int]:
    """The frames of one stack from the outermost in."""
    if sid < 0:
        return [NO_STACK]
    stacks = snapshot.stacks
    frames = stacks.frames
    ids = stacks.frame_ids(sid)
    if show_internal:
        path = [int(f) for f in ids[::-1]]
    elif len(ids) and frames.native[ids].all():
        label = int(stacks.label[sid])
        path = [AUTOGRAD, label] if label >= 0 else [AUTOGRAD]
    else:
        path = stacks.visible_frames(sid)[::-1]
    return path + [AUTOGRAD] if via in (VIA_BACKWARD_CALL, VIA_FORWARD) else path


def format_tree(root: TreeNode, names: list[str], min_share: float = 0.01, max_children: int = 12,
                short_names: dict[str, str] | None = None) -> list[str]:
    """The tree as text lines, memray style: nodes under ``min_share`` of the total are
    folded into one ``(n more)`` line."""
    total = max(root.bytes, 1)
    lines = [_node_text(root, total, names, short_names)]

    def emit(node: TreeNode, prefix: str) -> None:
        shown = [c for c in node.children if c.bytes >= min_share * total][:max_children]
        hidden = [c for c in node.children if c not in shown]
        for k, child in enumerate(shown):
            last = k == len(shown) - 1 and not hidden
            lines.append(prefix + ("└── " if last else "├── ") + _node_text(child, total, names, short_names))
            emit(child, prefix + ("    " if last else "│   "))
        if hidden:
            hidden_bytes = sum(c.bytes for c in hidden)
            lines.append(prefix + f"└── ({len(hidden)} more: {_fmt(hidden_bytes)})")

    emit(root, "")
    return lines


def _node_text(node: TreeNode, total: int, names: list[str], short_names: dict[str, str] | None) -> str:
    share = 100 * node.bytes / total
    mix = ""
    if node.categories is not None and node.bytes:
        parts = [(names[c], int(v)) for c, v in enumerate(node.categories) if v]
        parts.sort(key=lambda p: -p[1])
        mix = "  [" + ", ".join(f"{(short_names or {}).get(n, n)} {100 * v / node.bytes:.0f}%" for n, v in parts[:3]) \
            + ("" if len(parts) <= 3 else ", …") + "]"
    return f"{_fmt(node.bytes)} ({share:.1f}%) ×{node.count:,} {node.label}{mix}"


def _fmt(n: int) -> str:
    return format_bytes(n)
