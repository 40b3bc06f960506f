"""Panes a handler changes, drawn in the same frame as the change that led to it.

Textual draws a frame once the screen is idle with widgets marked for drawing, and a
widget is marked only when it has gone idle itself after its ``refresh()``. The event log
moves its cursor and is marked at once; the screen then hears of the move and changes the
map, the inspector and the plot, but their marks arrive after the screen has gone idle
and begun a frame with the event log alone, so their change waited for the next frame.
In tmux at ten million events a key's change was whole 45-50 ms after the key, and 20-26
ms once the screen marks the panes it changed itself, before it goes idle.
"""

from __future__ import annotations

from textual.messages import Update
from textual.screen import Screen
from textual.widget import Widget


def draw_in_this_frame(screen: Screen, *widgets: Widget) -> None:
    """Mark ``widgets`` (each already told to ``refresh()``) for the frame ``screen`` draws
    next, from a handler of ``screen``'s own."""
    for widget in widgets:
        if widget.display:
            screen.post_message(Update(widget))
