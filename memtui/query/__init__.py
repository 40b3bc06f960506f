"""The filter language: text → syntax tree → boolean mask over one device's trace.

``compile_filter("size>1MiB file:train.py leaked")`` parses once (raising
:class:`FilterError` with the column and what was expected); ``Filter.mask(snapshot,
device)`` evaluates it with numpy. The language is documented in docs/filter.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.model import Snapshot
from memtui.query.evaluate import EvalContext, evaluate
from memtui.query.nodes import FilterError, MatchAll, Node
from memtui.query.parser import FIELDS, FLAGS, parse

__all__ = ["FIELDS", "FLAGS", "Filter", "FilterError", "compile_filter"]


@dataclass(frozen=True)
class Filter:
    """A compiled filter: the text as typed and its syntax tree."""

    text: str
    tree: Node

    @property
    def matches_everything(self) -> bool:
        return isinstance(self.tree, MatchAll)

    def mask(self, snapshot: Snapshot, device: int) -> np.ndarray:
        """Boolean array, one entry per event of ``device``'s trace."""
        result = evaluate(self.tree, EvalContext(snapshot, device))
        # Terms may hand back a column they computed once; the caller owns its own copy.
        return np.array(result, dtype=bool, copy=True)

    def indices(self, snapshot: Snapshot, device: int) -> np.ndarray:
        """Trace indices of the matching events, ascending."""
        return np.flatnonzero(self.mask(snapshot, device))

    def __str__(self) -> str:
        return str(self.tree)


def compile_filter(text: str) -> Filter:
    """Parse ``text``; an empty or blank text matches every event."""
    return Filter(text, parse(text or ""))
