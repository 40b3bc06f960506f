"""The `x` dialog: write the event log's current view to a msgpack export.

Same code path as ``memtui export``: :func:`memtui.export.writer.export_snapshot`,
through a temporary file and a rename. An existing file is overwritten only after the
user confirms; the export runs in a worker with a progress bar, and Escape cancels it
(the partial file is removed). Where it may write is the app's
:class:`~memtui.export.place.ExportPlace` (a served session stays inside one folder).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, ProgressBar
from textual.worker import get_current_worker

from memtui.errors import MemtuiError
from memtui.export.place import ANYWHERE, ExportPlace
from memtui.export.writer import ExportResult, export_snapshot
from memtui.model import Snapshot
from memtui.tui.messages import ExportFinished, ExportProgress
from memtui.tui.views.log_scope import Filter, LogScope, Site
from memtui.tui.workers import thread_work


@dataclass
class ExportRequest:
    snapshot: Snapshot
    device: int
    rows: np.ndarray | None  # the view's events; None: every event of the device
    filter_text: str
    selection: str | None  # what the rows are when no filter text made them
    total: int  # events in the device's trace

    @classmethod
    def of_scope(cls, snapshot: Snapshot, device: int, total: int, scope: LogScope) -> ExportRequest:
        """The events the log lists: every event, a filter's matches or an analysis's call site's."""
        return cls(snapshot, device, scope.rows, scope.text if isinstance(scope, Filter) else "",
                   scope.label if isinstance(scope, Site) else None, total)

    @property
    def count(self) -> int:
        return self.total if self.rows is None else len(self.rows)


def default_export_path(snapshot: Snapshot, device: int, filtered: bool, place: ExportPlace = ANYWHERE) -> str:
    """``NAME.devD[.filtered].msgpack`` in the export folder, else the working directory (the
    source's own folder may be read-only), as an absolute path: the dialog and the message
    after it say where it goes."""
    stem = snapshot.name.split(".pickle")[0].split(".msgpack")[0] or "snapshot"
    return place.default_path(f"{stem}.dev{device}{'.filtered' if filtered else ''}.msgpack")


class _Cancelled(Exception):
    pass


class ExportDialog(ModalScreen[ExportResult | None]):
    """Returns the written export, or None when cancelled."""

    DEFAULT_CSS = """
    ExportDialog {
        align: center middle;
    }
    ExportDialog #export-box {
        width: 80;
        max-width: 100%;
        height: auto;
        border: round $accent;
        padding: 0 1;
        background: $surface;
    }
    /* Labels wrap in the box rather than being cut at its edge (80 columns). */
    ExportDialog Label { width: 100%; }
    ExportDialog #export-path { margin: 1 0 0 0; }
    ExportDialog #export-message { color: $text-muted; margin: 1 0 0 0; }
    ExportDialog #export-message.-warning { color: $warning; text-style: bold; }
    ExportDialog #export-bar { margin: 1 0 0 0; }
    ExportDialog #export-buttons { height: auto; margin: 1 0 0 0; }
    ExportDialog Button { margin: 0 2 0 0; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, request: ExportRequest, place: ExportPlace = ANYWHERE) -> None:
        super().__init__()
        self.request = request
        self.place = place
        self._confirmed_path: str | None = None  # the existing file the user agreed to replace
        self.running = False

    def compose(self) -> ComposeResult:
        r = self.request
        what = f"{r.count:,} of {r.total:,} events of device {r.device}"
        if r.filter_text:
            what += f" matching {r.filter_text}"
        elif r.selection:
            what += f": {r.selection}"
        with Vertical(id="export-box"):
            yield Label(f"Export {what}", id="export-what")
            yield Input(default_export_path(r.snapshot, r.device, r.rows is not None, self.place), id="export-path")
            yield Checkbox("Include stacks and frames", value=True, id="export-stacks")
            yield Label("msgpack (docs/export-format.md); memtui reopens it, memtui convert turns it into a pickle",
                        id="export-message")
            yield ProgressBar(total=max(r.count, 1), show_eta=False, id="export-bar")
            with Horizontal(id="export-buttons"):
                yield Button("Export", variant="primary", id="export-go")
                yield Button("Cancel", id="export-cancel")

    def on_mount(self) -> None:
        self.query_one("#export-box").border_title = "Export"
        self.query_one("#export-bar").display = False
        self.query_one("#export-path", Input).focus()

    def say(self, text: str, warning: bool = False) -> None:
        label = self.query_one("#export-message", Label)
        label.set_class(warning, "-warning")
        label.update(text)

    def path(self) -> str:
        """The file to write, absolute (a relative name is in the export folder or the working
        directory); UsageError where the export place does not allow it."""
        return self.place.resolve(self.query_one("#export-path", Input).value)

    @on(Input.Changed, "#export-path")
    def _path_changed(self) -> None:
        self._confirmed_path = None

    @on(Input.Submitted, "#export-path")
    @on(Button.Pressed, "#export-go")
    def action_export(self) -> None:
        if self.running:
            return
        try:
            path = self.path()
        except MemtuiError as exc:
            self.say(exc.message, warning=True)
            return
        if os.path.isdir(path):
            self.say(f"{path} is a directory: give a file name", warning=True)
            return
        force = os.path.lexists(path)
        if force and self._confirmed_path != path:
            self._confirmed_path = path
            self.say(f"{path} exists: Export again to overwrite it", warning=True)
            return
        self.running = True
        self.query_one("#export-go", Button).disabled = True
        self.query_one("#export-bar").display = True
        self.say(f"writing {path}…")
        self._write(path, force, self.query_one("#export-stacks", Checkbox).value)

    @thread_work(exclusive=True, group="export")
    def _write(self, path: str, force: bool, include_stacks: bool) -> None:
        worker = get_current_worker()
        r = self.request

        def progress(stage: str, done: int, total: int) -> None:
            if worker.is_cancelled:
                raise _Cancelled
            if stage == "exporting":
                self.post_message(ExportProgress(done, total))

        try:
            result = export_snapshot(r.snapshot, path, r.filter_text, r.device, include_stacks=include_stacks,
                                     force=force, progress=progress, rows=r.rows, selection=r.selection)
        except _Cancelled:
            return
        except MemtuiError as exc:
            self.post_message(ExportFinished(None, exc.message))
            return
        except Exception as exc:  # a bug, but the user keeps the explorer and gets one line
            self.post_message(ExportFinished(None, f"export failed ({type(exc).__name__}: {exc})"))
            return
        self.post_message(ExportFinished(result, None))

    def on_export_progress(self, message: ExportProgress) -> None:
        self.query_one("#export-bar", ProgressBar).update(total=max(message.total, 1), progress=message.done)

    def on_export_finished(self, message: ExportFinished) -> None:
        self.running = False
        if message.result is not None:
            self.dismiss(message.result)
            return
        self.query_one("#export-go", Button).disabled = False
        self.query_one("#export-bar").display = False
        self.say(message.error or "export failed", warning=True)

    @on(Button.Pressed, "#export-cancel")
    def action_cancel(self) -> None:
        # A running export stops at its next chunk; the atomic writer removes its temporary file.
        self.workers.cancel_group(self, "export")
        self.running = False
        self.dismiss(None)
