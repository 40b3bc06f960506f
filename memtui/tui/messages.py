"""Every message a worker posts (workers never touch widgets; they report back only this way).

A widget's own messages stay nested in the widget (``EventLog.CursorMoved``); those and
these are dataclasses. A :class:`Latest` message is worth nothing once a newer one of its
kind is queued right behind it: Textual then drops it (``can_replace``), so a held key or a
fast worker costs one update, not one per step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from memtui.model import Snapshot
from memtui.tui.views.device_view import DeviceView

if TYPE_CHECKING:  # named in the messages' fields alone: imported by what sends them, after the first screen
    from memtui.export.writer import ExportResult
    from memtui.tui.views.breakdown_view import DeviceBreakdown
    from memtui.tui.views.log_scope import Filter
    from memtui.tui.views.search import SearchResult


class Latest(Message):
    """A message that a newer one of the same kind, queued right behind it, replaces."""

    def can_replace(self, message: Message) -> bool:
        return type(message) is type(self)


# -- opening a snapshot (memtui/tui/screens/loading.py; the last two bubble up to the app) ---
@dataclass
class LoadProgress(Latest, bubble=False):
    """The loader reached ``done`` of ``total`` in ``stage`` (total 0: unknown)."""

    stage: str
    done: int
    total: int


@dataclass
class LoadFinished(Message):
    snapshot: Snapshot
    view: DeviceView


@dataclass
class LoadFailed(Message):
    """The file cannot be opened: one line for the user and the exit status."""

    message: str
    exit_code: int


# -- the explorer (memtui/tui/screens/main.py) ------------------------------------------------
@dataclass
class DeviceReady(Message):
    """A device's view was built in a worker and can be shown."""

    view: DeviceView
    then: Callable[[], None] | None = None  # what to do once the view shows (apply a search, go to an OOM)


@dataclass
class SearchDone(Message):
    result: SearchResult


@dataclass
class FilterDone(Message):
    """A filter's matching events, or why it cannot be applied."""

    scope: Filter | None
    error: str | None = None


# -- analysis screens, the list of ranks, the export dialog -----------------------------------
@dataclass
class AnalysisComputed(Message):
    result: object


@dataclass
class AnalysisFailed(Message):
    message: str


@dataclass
class SimulatedStateReady(Message):
    """The allocator model's state after ``event`` (the what-if screen's segment map)."""

    event: int
    state: object


@dataclass
class SummaryProgress(Latest):
    """Rank summaries: ``done`` of ``total`` files read, ``failed`` of them unreadable."""

    done: int
    total: int
    failed: int


@dataclass
class ExportProgress(Latest):
    done: int
    total: int


@dataclass
class ExportFinished(Message):
    result: ExportResult | None
    error: str | None


@dataclass
class BreakdownReady(Message):
    """A device's categories are decided (or could not be: ``error``)."""

    model: DeviceBreakdown | None
    error: str = ""


# -- watching a live job (memtui/tui/screens/live.py) -----------------------------------------
@dataclass
class LiveModelReady(Latest, bubble=False):
    """The explorer's model of what a job has sent so far (``version`` of its state)."""

    version: int
    view: DeviceView | None
    sites: list
    oom_lines: list | None  # None: the OOMs did not change since the last one
    client: object = None  # whose state it was built from (the rank shown may have changed since)
    oom_key: tuple | None = None  # which OOMs the lines explain (their number, the last one's time)
    ooms_explained: int = 0  # the OOM messages for this device received before the build


@dataclass
class SnapshotSaved(Message, bubble=False):
    """A frozen or kept state was written to ``path`` (None: it failed, ``error`` says why)."""

    path: str | None
    error: str = ""
    open_after: bool = False
