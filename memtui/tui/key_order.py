"""Keys in the order they were typed, each one delivered where the key before it left the focus.

Textual routes a key to the widget that has the focus when the app takes the key off its
queue; the widget handles it later, in its own task, and a binding that moves the focus
(``/`` opens the search bar) runs later still, once the key has bubbled back up to the
app. A burst of keys (a paste, a fast typist, keys typed while a screen appears) is
routed all at once, before the first key has moved the focus: the rest land in the
wrong widget and fire as its bindings (the address typed after ``/`` jumps along
allocations, its Enter opens a detail).

So the app takes one key at a time: the next key is routed only once the one before it is
done (a widget consumed it, or it bubbled back to the app and its binding ran, and what
that binding asked the app to do next, such as moving the focus, has happened). While
nothing has the focus (a screen that has just been pushed), a key waits for the screen to
mount and focus its widget. While a screen that has nowhere to put keys is up (the loading
screen: ``HOLDS_KEYS``), keys wait and go to the explorer once it shows; Ctrl+C and a
lone ``q`` still quit there.

Enter typed before the app has put the terminal in raw mode (while it starts) arrives
as a line feed, which Textual names ctrl+j: it is taken as Enter, as line editors do.
"""

from __future__ import annotations

import time
from collections import deque

from textual import events
from textual.app import App
from textual.message_pump import MessagePump

KEY_TIMEOUT = 0.5  # seconds: a key not done by then (its widget went away) stops holding the next ones
ALWAYS_AT_ONCE = {"ctrl+c"}
AT_ONCE_WHILE_HELD = {"q"}


class OrderedKeys:
    """Mixed into the App before :class:`textual.app.App`."""

    last_key_at = 0.0  # when the last key came in (time.monotonic)

    def _init_key_order(self) -> None:
        self._pending_keys: deque[events.Key] = deque()
        self._key_in_flight: events.Key | None = None
        self._key_since = 0.0

    @property
    def pending_keys(self) -> int:
        """Keys typed and not yet delivered (tests and the loading screen read it)."""
        return len(self._pending_keys) + (self._key_in_flight is not None)

    def _keys_held(self) -> bool:
        try:
            return bool(getattr(self.screen, "HOLDS_KEYS", False))
        except Exception:  # no screen yet
            return True

    def start_key_order(self) -> None:
        """Call once the app runs (on_mount): resume delivery whenever the screen changes."""
        self.screen_change_signal.subscribe(self, lambda _screen: self._deliver_soon())
        self.set_interval(KEY_TIMEOUT / 2, self._check_stuck_key)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            self.last_key_at = time.monotonic()  # (memtui/tui/keys_pause.py)
            if event.key == "ctrl+j":
                event = events.Key("enter", "\r")
            if event.key in ALWAYS_AT_ONCE or (
                    event.key in AT_ONCE_WHILE_HELD and self._keys_held() and not self.pending_keys):
                await App.on_event(self, event)
                return
            self._pending_keys.append(event)
            self._deliver_soon()
            return
        await App.on_event(self, event)

    def _focused_or_none(self):
        try:
            return self.focused
        except Exception:  # no screen
            return None

    # -- delivery ------------------------------------------------------------------------
    def _deliver_soon(self) -> None:
        # Through the app's queue: whatever the last key asked the app to do next (a focus
        # change scheduled with call_later) runs first.
        self.call_later(self._deliver_next_key)

    async def _deliver_next_key(self) -> None:
        if self._key_in_flight is not None or not self._pending_keys or self._keys_held():
            return
        key = self._pending_keys.popleft()
        self._key_in_flight, self._key_since = key, time.monotonic()
        if self._focused_or_none() is None:
            # A screen that has just been pushed focuses its widget when it mounts: let it.
            screen = self.screen
            if screen.call_later(self.call_later, self._route_key, key):
                return
        await self._route_key(key)

    async def _route_key(self, key: events.Key) -> None:
        if key is not self._key_in_flight:
            return  # given up on (timed out)
        if self._keys_held():
            # The screen changed back to one that holds keys: this one waits at the front.
            self._pending_keys.appendleft(key)
            self._key_in_flight = None
            return
        target: MessagePump = self._focused_or_none() or self.screen
        await App.on_event(self, key)  # priority bindings, then forwarded to ``target``
        if not key.is_forwarded:
            self._key_done(key)
        else:
            self._watch_key(key, target)

    def _watch_key(self, key: events.Key, node: MessagePump) -> None:
        # Runs once ``node`` has handled the key (the callback queues behind it).
        if not node.call_later(self._key_checked, key, node):
            self._key_done(key)

    def _key_checked(self, key: events.Key, node: MessagePump) -> None:
        parent = node._parent
        if parent is None or parent is self:
            # It bubbled to the app (or stopped at the screen): done once the app has run
            # the binding, which is queued ahead of this.
            self.call_later(self._key_done, key)
        elif key._stop_propagation or not key.bubble:
            self._key_done(key)
        else:
            self._watch_key(key, parent)

    def _key_done(self, key: events.Key) -> None:
        if key is self._key_in_flight:
            self._key_in_flight = None
            self._deliver_soon()

    def _check_stuck_key(self) -> None:
        key = self._key_in_flight
        if key is not None and time.monotonic() - self._key_since > KEY_TIMEOUT:
            self._key_in_flight = None
            self._deliver_soon()
        elif key is None and self._pending_keys:
            self._deliver_soon()

