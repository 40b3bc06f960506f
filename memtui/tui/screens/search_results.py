"""The allocations found at one address, to pick from (a bare hex address finds them all)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from memtui.model.lifetimes import NONE
from memtui.tui.views.device_view import DeviceView
from memtui.tui.views.search import SearchResult
from memtui.tui.widgets.choice_list import ChoiceList
from memtui.units import format_bytes

MAX_LISTED = 5000  # an address reused a million times would make a useless list; n/N still steps all


class SearchResultsScreen(ModalScreen[int | None]):
    """Returns the chosen allocation's event, or None."""

    BINDINGS = [Binding("escape,q", "dismiss_none", "Close")]

    def __init__(self, view: DeviceView, result: SearchResult) -> None:
        super().__init__()
        self.view = view
        self.result = result

    def compose(self) -> ComposeResult:
        lives = self.view.device.lives
        options = []
        for m in self.result.matches[:MAX_LISTED]:
            if m.life != NONE and m.kind == "block":
                size = format_bytes(int(lives.size[m.life]))
                steps = [f"{label} {int(col[m.life]):,}" for label, col in
                         (("alloc", lives.start), ("free requested", lives.request), ("completed", lives.end))
                         if int(col[m.life]) != NONE]
                text = f"{m.address_n:<22} {size:>11}  " + " → ".join(steps)
            else:
                text = f"{m.address_n:<22} {'':>11}  {'segment' if m.kind == 'segment' else 'at snapshot time'}"
            options.append(Option(text, id=str(m.event), disabled=m.event == NONE))
        with Vertical(id="results-box"):
            more = len(self.result.matches) - MAX_LISTED
            yield Label(self.result.message + (f" (first {MAX_LISTED:,} listed)" if more > 0 else ""))
            yield ChoiceList(*options, id="results")

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        self.dismiss(int(message.option.id))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
