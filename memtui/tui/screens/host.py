"""What the main screen's controllers may use of it: a small protocol, not its attributes.

The filter, search and breakdown controllers (screens/*_controller.py) each keep their own
state and reach the screen only through these parts, so the screen can change inside
without them noticing, and a test can hand them a stand-in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from memtui.model import Snapshot
from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.log_scope import LogScope


class Say(Protocol):
    def say(self, text: str, warning: bool = False) -> None: ...


class ExplorerHost(Protocol):
    snapshot: Snapshot
    current_view: DeviceView
    scope: LogScope
    status: Say

    @property
    def cursor(self) -> int: ...

    def go_to(self, event: int) -> bool: ...

    def set_scope(self, scope: LogScope, at: int | None = None) -> None: ...

    def switch_device(self, device: int, then: Callable[[], None] | None = None) -> None: ...

    def run_worker(self, work: Callable[[], Any], **kwargs: Any) -> Any: ...

    def post_message(self, message: Any) -> bool: ...

    def show_snapshot_block(self, final_block: int) -> None: ...

    @property
    def app(self) -> Any: ...
