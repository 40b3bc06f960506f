"""The live view of a running job: the explorer's panes, fed by ``memtui.live``.

Counters arrive ten times a second and grow the timeline at its right edge; the trace
arrives as often as the job's budget allows, and each time the model is rebuilt in a
worker (the same build as for a file) and the event log's tail, the segment map and the
top call sites follow. ``p`` pauses the view (what arrives is kept), the event log then
scrolls back over what was received with the map following its cursor; ``f`` freezes:
the job takes a whole snapshot now without stopping, it is written to a file (atomically)
and opened in the normal explorer; ``s`` saves the last state received, which is what is
left once the job has ended.
"""

from __future__ import annotations

import os
import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Static

from memtui.live import protocol as p
from memtui.live.client import LiveClient
from memtui.live.model import build_live_model
from memtui.live.runtime import JobInfo
from memtui.live.views import by_headroom, duration, live_call_sites, oom_headline, oom_lines, ooms_on
from memtui.model import actions as act
from memtui.record.files import write_snapshot
from memtui.tui.messages import LiveModelReady, SnapshotSaved
from memtui.tui.one_frame import draw_in_this_frame
from memtui.tui.views.device_view import DeviceView, build_device_view
from memtui.tui.widgets.event_log import EventLog
from memtui.tui.widgets.key_footer import KeyFooter
from memtui.tui.widgets.live_plot import CounterPlot
from memtui.tui.widgets.rank_lines import RankLines
from memtui.tui.widgets.segment_map import SegmentMap
from memtui.tui.widgets.status_line import StatusLine
from memtui.tui.workers import thread_work
from memtui.units import format_bytes

REDRAW = 0.1  # seconds between looks at what arrived


def short_site(site: dict) -> str:
    """``file.py:line function`` of a call site's innermost frame, without the folders."""
    frames = site.get("frames") or []
    if not frames:
        return site.get("site", "?")
    f = frames[0]
    return f"{os.path.basename(str(f.get('filename', '?')))}:{f.get('line', '?')} {f.get('name', '')}"


class LiveScreen(Screen):
    BINDINGS = [
        Binding("p", "pause", "Pause"),
        Binding("f", "freeze", "Freeze"),
        Binding("s", "save", "Save state"),
        Binding("r", "next_rank", "Next rank", show=False),
        Binding("tab", "focus_next", "Next pane", show=False),
    ]

    def __init__(self, jobs: list[JobInfo], out_dir: str | None = ".") -> None:
        super().__init__()
        self.jobs = jobs
        self.out_dir = out_dir
        self.clients: list[LiveClient] = []
        self.selected = 0
        self.paused = False
        self.view: DeviceView | None = None
        self._built_version = -1
        self._building = False
        self._oom_key: tuple | None = None  # the OOMs last diagnosed: redone only when they change
        self._ooms_explained = 0  # this device's OOM messages received by the time of that diagnosis
        self._oom_lines: list[str] = []
        self._last_model: LiveModelReady | None = None

    # -- layout and lifetime -----------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="live-header")
        yield RankLines(id="ranks")
        yield CounterPlot(id="plot")
        yield Static(id="oom")
        self.event_log = EventLog(id="events")
        self.segment_map = SegmentMap(id="map")
        self.sites = Static(id="sites")
        yield self.event_log
        with Horizontal(id="panes"):
            yield self.segment_map
            yield self.sites
        self.status = StatusLine(id="status")
        yield self.status
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#ranks").display = len(self.jobs) > 1
        self.query_one("#oom").display = False
        self.event_log.border_title = "Events (tail)"
        self.sites.border_title = "Top call sites now"
        for i, job in enumerate(self.jobs):
            mode = p.FULL if i == self.selected else p.COUNTERS_ONLY
            try:
                self.clients.append(LiveClient(job, mode).connect())
            except Exception as exc:  # a job that ended between the listing and now
                self.status.say(str(exc), warning=True)
                self.clients.append(None)
        self.set_interval(REDRAW, self._redraw)
        self._redraw()

    def on_unmount(self) -> None:
        self.close_clients()

    def close_clients(self) -> None:
        for client in self.clients:
            if client is not None:
                client.close()

    @property
    def client(self) -> LiveClient | None:
        return self.clients[self.selected] if self.clients else None

    # -- the tick ----------------------------------------------------------------------
    def _redraw(self) -> None:
        client = self.client
        self._show_header()
        self._show_ranks()
        if client is None:
            return
        state = client.state
        with state.lock:
            # Two ticks a braille column: the plot never shows more than twice its width.
            curve = state.curve(self._device(), last=2 * max(self.query_one(CounterPlot).size.width, 1) + 2)
            steps = [t for _, t in state.steps]
            ooms = [float(o.get("t", 0.0)) for o in state.ooms]
            mine = self._device_ooms(state.ooms)
            latest = state.latest()
            version = state.version
        limit = next((d.limit for d in (latest.devices if latest else []) if d.device == self._device()), None)
        if not self.paused:  # paused, the view holds still: all but an OOM, said at once anyway
            self.query_one(CounterPlot).show(curve, steps, ooms, limit)
        if self._unexplained(mine):
            # Said the moment the message comes; the diagnosis replaces it once the state at
            # the OOM is indexed. (OOMs of other devices show in the ranks' lines.)
            box = self.query_one("#oom", Static)
            box.update(oom_headline(mine[-1], limit))
            box.display = True
        if self.paused:
            return
        if version != self._built_version and not self._building and state.has_state:
            self._building = True
            self._build(client, version)

    def _device_ooms(self, messages: list[dict]) -> list[dict]:
        return ooms_on(messages, self._device())

    def _unexplained(self, device_ooms: list[dict]) -> bool:
        """Whether this device's OOM messages include one the last diagnosis did not explain."""
        return len(device_ooms) > self._ooms_explained

    def _device(self) -> int:
        client = self.client
        devices = (client.state.hello.get("devices") if client else None) or [0]
        return int(devices[0])

    @thread_work(exclusive=True, group="live-model")
    def _build(self, client: LiveClient, version: int) -> None:
        try:
            messages = len(self._device_ooms(list(client.state.ooms)))  # the state read next holds these
            raw = client.state.raw_snapshot(with_seen=True)
            name = os.path.basename(client.job.argv[0]) if client.job.argv else "live"
            snapshot = build_live_model(raw, name)
            device = self._device()
            known = [d.device for d in snapshot.devices]
            view = build_device_view(snapshot, known.index(device)) if device in known else None
            sites = live_call_sites(snapshot, device) if view is not None else []
            found = view.device.oom_indices() if view is not None else []
            # Which OOMs the trace holds: their number and the last one's time (a number alone
            # stays the same when an old OOM leaves the ring buffer as a new one comes).
            oom_key = (len(found), float(view.device.trace.time_us[found[-1]])) if len(found) else None
        except Exception as exc:  # a state the model refuses: say so, keep what is shown
            self.app.call_from_thread(self.status.say, f"could not index what the job sent: {exc!r}", True)
            self.post_message(LiveModelReady(version, None, [], None, client))
            return
        lines = None
        if oom_key is not None and oom_key != self._oom_key:
            # The diagnosis replays and weighs the whole trace: done again only when a new OOM
            # came, on what torch recorded (the trace with the segments of the same read).
            try:
                recorded = build_live_model(client.state.raw_snapshot(), name)
                lines = oom_lines(recorded, device)
            except Exception as exc:  # the view stands; the headline says what is known
                lines = [f"the OOM could not be explained from what the job sent ({exc!r})"]
        self.post_message(LiveModelReady(version, view, sites, lines, client, oom_key, messages))

    def on_live_model_ready(self, message: LiveModelReady) -> None:
        self._building = False
        if message.client is not self.client:
            return  # built for the rank shown before: the next tick builds this one's
        self._built_version = message.version
        if message.oom_lines is not None:
            self._oom_lines = message.oom_lines
            self._oom_key, self._ooms_explained = message.oom_key, message.ooms_explained
        if message.view is None:
            return
        self._last_model = message
        if not self.paused:
            self._show_model(message)

    def _show_model(self, message: LiveModelReady) -> None:
        self.view = message.view
        self.event_log.set_view(message.view)  # the cursor goes to the newest event: the tail
        self._show_sites(message.sites)
        client = self.client
        newer = client is not None and self._unexplained(self._device_ooms(list(client.state.ooms)))
        if self._oom_lines and not newer:
            box = self.query_one("#oom", Static)
            box.update("\n".join(self._oom_lines[:12]))
            box.display = True

    def on_event_log_cursor_moved(self, message: EventLog.CursorMoved) -> None:
        view = self.view
        if view is None:
            return
        i = message.event
        state = view.replayer.state_at(i)
        focus = None
        if 0 <= i < view.n_events and int(view.device.trace.action[i]) not in (act.OOM, act.SNAPSHOT):
            focus = int(view.device.trace.addr[i])
        self.segment_map.show_state(view, state, focus)
        self.segment_map.refresh_title()
        draw_in_this_frame(self, self.segment_map)  # with the event log's cursor

    def _show_sites(self, sites: list[dict]) -> None:
        if not sites:
            self.sites.update("(no live blocks)")
            return
        lines = [f"{format_bytes(s['bytes']):>10} ×{s['count']:<4} {short_site(s)}" for s in sites]
        self.sites.update(Text("\n".join(lines), no_wrap=True, overflow="ellipsis"))  # one line a site

    def _show_header(self) -> None:
        client = self.client
        if client is None:
            return
        job, state = client.job, client.state
        latest = state.latest()
        script = os.path.basename(job.argv[0]) if job.argv else "?"
        who = f"pid {job.pid}" + (f" rank {job.rank}" if job.rank is not None else "")
        if state.ended:
            mode = f"ENDED ({(state.bye or {}).get('reason', 'ended')}): s saves the last state"
        else:
            mode = "PAUSED" if self.paused else "LIVE"
        parts = [mode, script, who, f"dev {self._device()}", duration(job.running_for()), f"{state.events():,} ev"]
        if state.seen_count():
            parts[-1] += f" +{state.seen_count():,} seen"
        if latest:
            d = next((d for d in latest.devices if d.device == self._device()), None)
            if d is not None:
                parts.append(f"alloc {format_bytes(d.allocated)} res {format_bytes(d.reserved)}"
                             + (f" free {format_bytes(d.headroom)}" if d.headroom is not None else ""))
        if state.missed:
            parts.append(f"missed {state.missed}")
        if state.gaps:
            parts.append(f"{state.gaps} gaps")
        self.query_one("#live-header", Static).update(" · ".join(parts))

    def _show_ranks(self) -> None:
        if len(self.jobs) < 2:
            return
        rows = []
        for i, (job, client) in enumerate(zip(self.jobs, self.clients)):
            latest = client.state.latest() if client else None
            counters = latest.devices[0] if latest and latest.devices else None
            name = f"rank {job.rank}" if job.rank is not None else f"pid {job.pid}"
            rows.append((i, (name, counters, i == self.selected, client is None or client.ended)))
        ordered = by_headroom([(row, row[1][1]) for row in rows])
        self.query_one(RankLines).show([row[1] for row, _ in ordered])

    # -- keys --------------------------------------------------------------------------
    def action_pause(self) -> None:
        self.paused = not self.paused
        self._show_header()  # says PAUSED or LIVE now, not at the next tick
        self.status.say("paused: the view holds still, the job's updates are kept; ↑↓ PgUp scroll back, "
                        "p resumes" if self.paused else "live again")
        if self.paused:
            self.event_log.focus()
        elif self._last_model is not None:
            self._show_model(self._last_model)  # catch up: a newer model, if any, follows

    def action_next_rank(self) -> None:
        if len(self.jobs) < 2:
            return
        old = self.selected
        self.selected = (self.selected + 1) % len(self.jobs)
        # Only the rank shown asks its job for the trace; the others send counters alone.
        for i in (old, self.selected):
            if self.clients[i] is not None and not self.clients[i].ended:
                self.clients[i].close()
                mode = p.FULL if i == self.selected else p.COUNTERS_ONLY
                try:
                    self.clients[i] = LiveClient(self.jobs[i], mode).connect()
                except Exception:
                    self.clients[i] = None
        self._built_version = -1
        self._oom_key, self._oom_lines, self._ooms_explained = None, [], 0
        self.query_one("#oom").display = False
        self.status.say(f"showing {self.jobs[self.selected].name}")

    def action_freeze(self) -> None:
        client = self.client
        if client is None or client.ended:
            self.status.say("the job has ended: s saves the last state received", warning=True)
            return
        self.status.say("freezing: the job takes a whole snapshot now (it keeps running)…")
        self._freeze(client)

    @thread_work(exclusive=True, group="save")
    def _freeze(self, client: LiveClient) -> None:
        snapshot = client.freeze(timeout=120)
        if snapshot is None:
            self.post_message(SnapshotSaved(None, "the job did not answer the freeze (it may have ended)"))
            return
        if self.out_dir is None:  # saving is off (a browser session without --export-dir): explore it only
            name = os.path.basename(client.job.argv[0]) if client.job.argv else "live"
            self.app.call_from_thread(self.app.open_file, lambda progress: build_live_model(snapshot, name))
            return
        self._write(snapshot, "frozen", open_after=True)

    def action_save(self) -> None:
        if self.out_dir is None:
            self.status.say("saving is off here (memtui serve --export-dir DIR allows it)", warning=True)
            return
        client = self.client
        if client is None or not client.state.has_state:
            self.status.say("nothing received yet to save", warning=True)
            return
        self._save(client)

    @thread_work(exclusive=True, group="save")
    def _save(self, client: LiveClient) -> None:
        self._write(client.state.raw_snapshot(), "last", open_after=False)

    def _write(self, snapshot: dict, tag: str, open_after: bool) -> None:
        job = self.client.job
        stem = os.path.splitext(os.path.basename(job.argv[0]))[0] if job.argv else "job"
        rank = f".rank{job.rank}" if job.rank is not None else ""
        path = os.path.join(self.out_dir, f"{stem}.pid{job.pid}{rank}.{tag}-{time.strftime('%H%M%S')}.pickle")
        try:
            written = write_snapshot(snapshot, path)  # atomic: whole or absent
        except Exception as exc:
            self.post_message(SnapshotSaved(None, f"could not write {path}: {exc}"))
            return
        self.post_message(SnapshotSaved(written, open_after=open_after))

    def on_snapshot_saved(self, message: SnapshotSaved) -> None:
        if message.path is None:
            self.status.say(message.error, warning=True)
            return
        folder, name = os.path.split(message.path)
        where = "" if folder == os.getcwd() else f" in {folder}"
        self.status.say(f"written {name}" + (" · opening it (backspace returns here)" if message.open_after else "")
                        + where)
        if message.open_after:
            self.app.open_file(message.path)
