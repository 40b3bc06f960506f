"""The line above the footer that answers the last key: jump results, search counts, not-found."""

from __future__ import annotations

from textual.widgets import Static


class StatusLine(Static):
    """Shows one message; a warning is styled so it stands out without colour too."""

    DEFAULT_CSS = """
    StatusLine {
        height: 1;
        padding: 0 1;
        color: $text-muted;
        &.-warning { color: $warning; text-style: bold; }
    }
    """

    def say(self, message: str, warning: bool = False) -> None:
        self.set_class(warning, "-warning")
        self.update(("! " if warning else "") + message)
