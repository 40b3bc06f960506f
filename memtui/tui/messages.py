"""Messages that workers post to the app and screens (workers never touch widgets)."""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message

from memtui.model import Snapshot
from memtui.tui.device_view import DeviceView
from memtui.tui.search import SearchResult


class LoadProgress(Message):
    """The loader reached ``done`` of ``total`` in ``stage`` (total 0: unknown)."""

    def __init__(self, stage: str, done: int, total: int) -> None:
        super().__init__()
        self.stage = stage
        self.done = done
        self.total = total


class LoadFinished(Message):
    def __init__(self, snapshot: Snapshot, view: DeviceView) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.view = view


class LoadFailed(Message):
    """The file cannot be opened: one line for the user and the exit status."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__()
        self.message = message
        self.exit_code = exit_code


class DeviceReady(Message):
    """A device's view was built in a worker and can be shown."""

    def __init__(self, view: DeviceView, then: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.view = view
        self.then = then  # what to do once the view shows (apply a search, go to an OOM)


class SearchDone(Message):
    def __init__(self, result: SearchResult) -> None:
        super().__init__()
        self.result = result
