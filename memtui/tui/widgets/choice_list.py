"""A list to pick one line from, moved with j and k as well as the arrows, as every other
list and pane of the explorer is."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import OptionList


class ChoiceList(OptionList):
    # OptionList's own keys with j and k beside the arrows: all of them here, so that the
    # keyboard reference (memtui/tui/keys.py) lists them from the bindings.
    BINDINGS = [
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("down,j", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select", "Pick", show=False),
    ]
