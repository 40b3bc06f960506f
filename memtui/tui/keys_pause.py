"""Work the explorer does after its first screen, held until the keys pause.

After its first screen the explorer builds its time-travel index and writes the model, its
memory curves and the index to the cache: on 2 cores at ten million events a second of both
cores and of memory traffic. Started at once, it ran beside the first keys a user types,
which took 40-90 ms instead of 20-30. So it starts once no key has come for
:data:`KEYS_PAUSE_S` (and not before that long after it was asked for): a user who keeps
pressing keys has the cores, and the index waits (a state without it is a pass over the
lives, 8 ms at ten million events, or found from the state before). Quitting never waits for
it: the cache's writes held back are started and waited for as the process ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable

KEYS_PAUSE_S = 0.3
CHECK_EVERY_S = 0.05


class WorkAfterKeysPause:
    """Mixed into the App after :class:`memtui.tui.key_order.OrderedKeys`, which keeps
    :attr:`last_key_at` as each key comes in."""

    keys_pause_s = KEYS_PAUSE_S  # 0: the work runs once the screen is drawn, pause or not
    last_key_at: float  # OrderedKeys's (key_order.py)

    def _init_keys_pause(self) -> None:
        self._after_pause: list[Callable[[], None]] = []
        self._pause_from = 0.0
        self._pause_timer = None

    def when_keys_pause(self, work: Callable[[], None]) -> None:
        """``work()`` on the app's thread once no key has come for :attr:`keys_pause_s`."""
        if self.keys_pause_s <= 0:
            self.call_after_refresh(work)  # type: ignore[attr-defined]
            return
        if not self._after_pause:
            self._pause_from = time.monotonic()
        self._after_pause.append(work)
        if self._pause_timer is None:
            self._pause_timer = self.set_interval(CHECK_EVERY_S, self._run_if_paused)  # type: ignore[attr-defined]

    def _run_if_paused(self) -> None:
        if time.monotonic() - max(self._pause_from, self.last_key_at) < self.keys_pause_s:
            return
        work, self._after_pause = self._after_pause, []
        if self._pause_timer is not None:
            self._pause_timer.stop()
            self._pause_timer = None
        for each in work:
            each()
