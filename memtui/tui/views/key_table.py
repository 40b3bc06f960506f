"""The explorer's key definitions that several modules share, as plain data: a leaf.

Each row is ``(key, action, description, shown in the footer)``; the app, the main screen
and the breakdown controller make their bindings from these rows and the keyboard reference
(memtui/tui/keys.py) reads the same rows, so the help screen needs neither the app nor the
screens that bind them (no import cycle app -> help -> keys -> app).
"""

from __future__ import annotations

from memtui.services.catalog import explorer_specs

KeyRow = tuple[str, str, str, bool]

_KEY_NAMES = {
    "up": "↑", "down": "↓", "left": "←", "right": "→", "pageup": "PgUp", "pagedown": "PgDn",
    "home": "Home", "end": "End", "enter": "Enter", "escape": "Esc", "slash": "/", "question_mark": "?",
    "backslash": "\\",
    "left_square_bracket": "[", "right_square_bracket": "]", "tab": "Tab", "shift+tab": "Shift+Tab",
    "ctrl+p": "Ctrl+P", "ctrl+c": "Ctrl+C", "ctrl+q": "Ctrl+Q",
    "comma": ",", "full_stop": ".", "less_than_sign": "<", "greater_than_sign": ">", "space": "Space",
}


def key_label(keys: str) -> str:
    """``up,k`` → ``↑ / k``."""
    return " / ".join(_KEY_NAMES.get(k.strip(), k.strip()) for k in keys.split(","))


def app_key_rows(q_says: str, ctrl_c: str) -> list[KeyRow]:
    """q, ? and Ctrl+C, which every screen of an app answers (``ctrl_c``: its action)."""
    return [("q", "quit", q_says, True), ("question_mark", "help", "Help", True), ("ctrl+c", ctrl_c, "Quit", False)]


# memtui watch: back from a frozen snapshot to the live view.
WATCH_BACK_KEY: KeyRow = ("backspace", "back_to_live", "Back to live", False)

IN_FOOTER = {"oom"}  # the analysis keys the footer shows; the others are in help and the palette

# The analyses of the spec table (memtui.services.catalog) that have a key.
ANALYSIS_KEYS: list[KeyRow] = [(s.key or "", f"analysis('{s.name}')", s.key_help, s.name in IN_FOOTER)
                               for s in explorer_specs()]
ANALYSIS_PALETTE = [
    ("show_all_events", "Show all events", "Clear the call-site filter that an analysis put on the event log"),
]

BREAKDOWN_KEYS: list[KeyRow] = [
    ("b", "breakdown", "Breakdown by category at the cursor", False),
    ("B", "breakdown_tree", "Live set as a call tree at the cursor", False),
    ("T", "toggle_stacked", "Timeline stacked by category", False),
]
BREAKDOWN_PALETTE = [
    ("breakdown", "Breakdown by category",
     "Parameters, gradients, optimizer state, activations... at the cursor, following it (in place of the stack)"),
    ("breakdown_tree", "Call tree of live memory",
     "The allocations live at the cursor folded by call stack, with their categories"),
    ("toggle_stacked", "Timeline by category", "Draw the timeline stacked by category, or as allocated/reserved"),
]
