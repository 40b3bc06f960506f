"""The indexed, columnar snapshot that everything above the loader works on."""

from __future__ import annotations

import math
import operator
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property, partial
from typing import Any, overload

import numpy as np

from memtui.cores import pairing_threads
from memtui.errors import SnapshotError, UsageError
from memtui.model import actions as act
from memtui.model import trace_figures
from memtui.model.actions import ActionTable
from memtui.model.address_n import format_address_n, names_segment, parse_address_candidates
from memtui.model.annotations import Annotations, link_annotations
from memtui.model.frames import FrameTable, StackTable
from memtui.model.lifetimes import NONE, Lifetimes, compute_lifetimes
from memtui.model.relevance import site_stacks
from memtui.model.segments import ALLOCATED, PENDING_FREE, BlockTable, PoolId, SegmentTable, build_segments
from memtui.model.slices import on_cores
from memtui.model.stackless import last_stacked_before, stackless_context
from memtui.model.strings import StringTable, terminal_safe, terminal_safe_value, text_of
from memtui.model.trace import ModelTables, TraceColumns, build_trace
from memtui.units import plural

MAX_DEVICES = 4096  # far more GPUs than one process sees; a larger count is a broken file

# What a view says of a filtered export's moments (DeviceModel.partial_trace), in one place.
NOT_REPLAYED = ("a filtered export holds part of the recording's trace, which is not replayed: its state is the"
                " source's end")
SOURCE_END = "the source's end (a filtered export is not replayed)"  # the moment its figures are of
# Why a live block's alloc is not among the trace's events (DeviceModel.alloc_not_in_trace).
ALLOC_BEFORE_TRACE = "allocated before the trace starts"
ALLOC_LEFT_OUT = "allocated in events this filtered export leaves out"


@dataclass
class Annotation:
    """One of the file's external annotations: a span's start or end, as the model reads it."""

    device: int
    stage: str
    name: str
    time_us: float


# An annotation's fields as a row, in Annotation's order (the model cache keeps them so).
annotation_row = operator.attrgetter(*(f.name for f in fields(Annotation)))


class ExternalAnnotations(Sequence[Annotation]):
    """The file's external annotations (spans the recording marked, ``external_annotations``),
    each made an Annotation when they are first read. A long recording has tens of thousands:
    making them cost every open 15-20 ms (16,000 at 1M events), where most commands count
    them (info) or never read them. ``make`` never raises (the loader hands over dicts, the
    cache rows it checked as it loaded)."""

    def __init__(self, items: list[Any] | Callable[[], list[Any]], make: Callable[[Any], Annotation],
                 rows: bool = False, count: int | None = None) -> None:
        """``rows``: each item is an annotation's fields in Annotation's order, and ``make``
        makes it with them as they are (the model cache's rows). ``items`` may be a function
        that gives them when they are first read, with ``count`` their number (the scanner's
        columns, see :meth:`of_columns`)."""
        self._items: list[Any] | Callable[[], list[Any]] | None = items
        self._make = make
        self._rows = rows
        self._len = len(items) if isinstance(items, list) else int(count or 0)
        self._made: list[Annotation] | None = None
        # Two threads may read them first at once (the cache's writer and the explorer's
        # worker): one makes them, the other waits for its list.
        self._making = threading.Lock()

    def _all(self) -> list[Annotation]:
        made = self._made
        if made is None:
            with self._making:
                made = self._made
                if made is None:
                    made = [self._make(item) for item in self._listed(self._items)]
                    self._made, self._items = made, None
        return made

    def _listed(self, items: list[Any] | Callable[[], list[Any]] | None) -> list[Any]:
        """``items`` (read once by the caller: _all may let them go meanwhile) as a list; where
        they are the function that gives them, it is called and its list kept."""
        if callable(items):
            items = self._items = items()
        return items or []

    @classmethod
    def of_columns(cls, columns: dict[str, Any]) -> ExternalAnnotations:
        """The annotations the compiled scanner read into columns (src/memtui_native/annotations.c):
        ``device`` and ``time_us`` arrays, ``stage`` and ``name`` lists of str."""
        return cls(partial(_rows_of_columns, columns), annotation_of_row, rows=True, count=len(columns["stage"]))

    def fields(self) -> list[tuple[Any, ...]]:
        """Each annotation's fields as a row, in Annotation's order, without making them
        Annotations where the rows are what they are made from (the cache's): the explorer's
        first screen places 16,000 of them at a million events."""
        items = self._items
        if self._rows and items is not None:
            return [tuple(row) for row in self._listed(items)]
        return [annotation_row(a) for a in self._all()]

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Annotation: ...

    @overload
    def __getitem__(self, index: slice) -> list[Annotation]: ...

    def __getitem__(self, index: int | slice) -> Annotation | list[Annotation]:
        return self._all()[index]

    def __iter__(self) -> Iterator[Annotation]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:  # as the list it stands for compares
        return isinstance(other, (list, ExternalAnnotations)) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the list it stands for


def annotation_of_row(row: Sequence[Any]) -> Annotation:
    """An annotation from its fields as a row, in Annotation's order, as they are."""
    return Annotation(*row)


def _rows_of_columns(columns: dict[str, Any]) -> list[tuple[int, str, str, float]]:
    """Each annotation's row from the scanner's columns: what ``_annotation`` makes of the dict
    the row stands for (the scanner holds a dict's device as an int, its time as a float, a
    missing key as its default)."""
    device, time = columns["device"], columns["time_us"]
    devices = np.where((device >= 0) & (device < MAX_DEVICES), device, 0).tolist()
    times = time.tolist()
    for i in np.flatnonzero(~np.isfinite(time)).tolist():
        times[i] = math.nan  # _as_time's NaN, the same object, as a row from a dict has it
    shown: dict[str, str] = {}  # a recording names a few spans many times: each is made safe once

    def safe(texts: list[str]) -> list[str]:
        return [shown[text] if text in shown else shown.setdefault(text, _shown(text)) for text in texts]

    return list(zip(devices, safe(columns["stage"]), safe(columns["name"]), times))


def annotation_fields(annotations: Sequence[Annotation]) -> list[tuple[Any, ...]]:
    """Each annotation's fields as a row (device, stage, name, time_us), made without an
    Annotation for each where they are the model cache's rows."""
    if isinstance(annotations, ExternalAnnotations):
        return annotations.fields()
    return [annotation_row(a) for a in annotations]


@dataclass
class Match:
    """Where an address_n or address was found: a trace life and/or a block at snapshot time."""

    device: int
    address_n: str
    life: int  # index into device.lives, or NONE
    block: int  # index into device.blocks, or NONE
    event: int  # the best trace index to show (alloc if present), or NONE
    kind: str = "block"  # "block" or "segment"


# The figures of a trace the device model keeps once computed (the cached properties below);
# the model cache stores them, so a warm open computes none of them again.
FIGURES = ("_action_counts", "_oom_indices", "time_span", "_stacked_actions", "forward_frames", "live_at_end")


@dataclass
class DeviceModel:
    """One device's trace, lives, segments and blocks, and the figures made of them."""

    device: int
    trace: TraceColumns
    lives: Lifetimes  # block allocations
    segment_lives: Lifetimes  # segment_alloc/free and segment_map/unmap
    segments: SegmentTable
    blocks: BlockTable
    block_version: np.ndarray  # address_n version of each block at snapshot time
    block_life: np.ndarray  # life index of each block at snapshot time, or NONE
    # A reopened memtui export: each event's index and address_n version in the source,
    # the source's first event time, and whether the trace is a filtered part of the
    # source's (then it cannot be replayed into allocator state: the file's segments are
    # the state at the source's end).
    source_index: np.ndarray | None = None
    source_version: np.ndarray | None = None
    source_time_origin_us: float = math.nan
    partial_trace: bool = False  # then every view says NOT_REPLAYED rather than show a moment
    # Where a trace entry or a block has forward_frames: the stack that names each one
    # (model/relevance.py, site_stacks); None when nothing has any, and then the own stack.
    forward_site: np.ndarray | None = None
    block_forward_site: np.ndarray | None = None

    @property
    def site_stack(self) -> np.ndarray:
        """Per event: the stack that names it and groups it by call site (model/relevance.py):
        its own, or for a backward allocation without a user frame its forward traceback."""
        return self.trace.stack if self.forward_site is None else self.forward_site

    @property
    def block_site_stack(self) -> np.ndarray:
        """Per block of the snapshot: the stack that names it (as :attr:`site_stack`)."""
        return self.blocks.stack if self.block_forward_site is None else self.block_forward_site

    # -- figures -------------------------------------------------------------------
    @property
    def reserved(self) -> int:
        return int(self.segments.total_size.sum())

    @property
    def allocated(self) -> int:
        return int(self.blocks.size[self.blocks.state == ALLOCATED].sum())

    @property
    def active(self) -> int:
        mask = (self.blocks.state == ALLOCATED) | (self.blocks.state == PENDING_FREE)
        return int(self.blocks.size[mask].sum())

    # Each a pass over a whole column on the process's cores (model/trace_figures.py), kept
    # once computed: the views ask for them again and again.
    @cached_property
    def _action_counts(self) -> np.ndarray:
        return trace_figures.action_counts(self.trace.action)

    @cached_property
    def _oom_indices(self) -> np.ndarray:
        indices = trace_figures.oom_indices(self.trace.action)
        indices.setflags(write=False)  # one array handed to every caller: none may change it
        return indices

    @cached_property
    def time_span(self) -> tuple[float, float] | None:
        """The trace's first and last time; None when no entry has one."""
        return trace_figures.time_span(self.trace.time_us)

    @cached_property
    def _stacked_actions(self) -> list[int]:
        """The action codes of the entries with a stack (asked by the inspector for the first
        event without one: kept in the model cache, so no key of a warm open waits for it)."""
        return trace_figures.stacked_actions(self.trace.action, self.trace.stack)

    @cached_property
    def forward_frames(self) -> int:
        """How many of the trace's entries carry forward frames."""
        return trace_figures.forward_frames(self.trace.fwd)

    @cached_property
    def live_at_end(self) -> int:
        """Allocations made in the trace and never freed; for a filtered export (whose frees may
        have been left out) the live blocks the file holds."""
        if self.partial_trace:
            return int(np.count_nonzero(self.block_version != -1))
        return trace_figures.never_freed(self.lives.start, self.lives.end)

    def computed_figures(self) -> dict[str, Any]:
        """Each of :data:`FIGURES`, computed here if not yet (for the model cache)."""
        return {name: getattr(self, name) for name in FIGURES}

    def keep_figures(self, figures: dict[str, Any]) -> None:
        """Take :data:`FIGURES` computed before (the model cache read back), as if computed
        here: a warm open makes no pass over the columns for them."""
        unknown = set(figures) - set(FIGURES)
        if unknown:
            raise ValueError(f"not a figure of the trace: {sorted(unknown)}")
        if "_oom_indices" in figures:
            figures["_oom_indices"].setflags(write=False)
        self.__dict__.update(figures)  # where functools.cached_property keeps what it computed

    def action_counts(self, names: list[str]) -> dict[str, int]:
        counts = self._action_counts
        return {name: int(counts[c]) for c, name in enumerate(names[:len(counts)]) if counts[c]}

    def has_any_action(self, codes: Iterable[int]) -> bool:
        """Whether any entry of the trace has one of the action ``codes``: from the counts a
        warm open reads from the cache (a pass over ten million codes is 10 ms)."""
        counts = self._action_counts
        return any(0 <= c < len(counts) and counts[c] for c in codes)

    def oom_indices(self) -> np.ndarray:
        return self._oom_indices

    # -- what the trace says beyond allocs and frees ---------------------------------------
    @cached_property
    def annotations(self) -> Annotations:
        """The ``annotate`` entries and the allocation each labels (model/annotations.py)."""
        counts = self._action_counts  # kept (and cached): most traces have no annotate entry to look for
        if act.ANNOTATE >= len(counts) or not counts[act.ANNOTATE]:
            return Annotations.none()
        trace = self.trace
        return link_annotations(trace.action, trace.addr, self.lives, self.blocks, self.block_version,
                                self.block_life)

    def event_pool(self, i: int) -> PoolId | None:
        """The memory pool of event ``i``: the ``pool_id`` newer torch records on each entry,
        else that of the snapshot's segment holding its address, else None."""
        k = int(self.trace.pool[i])
        if k >= 0:
            return tuple(self.trace.pools[k])
        segs = self.segments
        if not len(segs) or int(self.trace.action[i]) in (act.SNAPSHOT, act.OOM):
            return None
        addr = int(self.trace.addr[i])
        pos = int(np.searchsorted(segs.address, addr, "right")) - 1
        if pos >= 0 and addr < int(segs.address[pos]) + int(segs.total_size[pos]):
            return tuple(segs.pools[int(segs.pool[pos])])
        return None

    @cached_property
    def ghost_blocks(self) -> np.ndarray:
        """Per block of the snapshot: live, yet no event of the trace is its allocation's
        (allocated before recording began, or its alloc fell off the ring buffer, with no
        free since). memory_viz calls these ghost blocks. None in a file with no trace."""
        blocks = self.blocks
        if not len(self.trace) or self.partial_trace:  # a filtered export's live blocks' allocs may be left out
            return np.zeros(len(blocks), bool)
        ghost: np.ndarray = ((blocks.state == ALLOCATED) | (blocks.state == PENDING_FREE)) & (self.block_life == NONE)
        return ghost

    def alloc_not_in_trace(self) -> str:
        """Why a live block's alloc is not among this trace's events, as every view says it."""
        return ALLOC_LEFT_OUT if self.partial_trace else ALLOC_BEFORE_TRACE

    # -- events without a stack (model/stackless.py) ---------------------------------
    @cached_property
    def last_stacked_before(self) -> np.ndarray:
        """For each event, the nearest earlier event with a stack, or NONE."""
        return last_stacked_before(self.trace.stack)

    @property
    def actions_with_stacks(self) -> frozenset[int]:
        """Action codes that carry a stack somewhere in this trace."""
        return frozenset(self._stacked_actions)

    # -- the source's numbering (the same as this trace's unless reopened from an export) --
    def shown_index(self, i: int) -> int:
        """The number event ``i`` has in the source snapshot, as every view prints it."""
        return int(self.source_index[i]) if self.source_index is not None else i

    def row_of_shown_index(self, shown: int) -> int | None:
        """This trace's row for a source event number, or None when the export left it out."""
        if self.source_index is None:
            return shown if 0 <= shown < len(self.trace) else None
        row = int(np.searchsorted(self.source_index, shown))
        return row if row < len(self.source_index) and int(self.source_index[row]) == shown else None

    @property
    def time_origin_us(self) -> float:
        """Where relative times count from: the source's first event time."""
        if math.isfinite(self.source_time_origin_us):
            return self.source_time_origin_us
        span = self.time_span
        return span[0] if span else math.nan

    # -- address_n ---------------------------------------------------------------------
    def event_address_n(self, i: int) -> str:
        """address_n of trace event ``i`` ('' for events without one); for an ``annotate``
        entry, the allocation it labels."""
        if self.source_version is not None:
            return self._source_address_n(self.source_version, i)
        if int(self.trace.action[i]) == act.ANNOTATE:
            row = self.annotations.row_of_event(i)
            version = int(self.annotations.version[row]) if row != NONE else NONE
            return format_address_n(self.trace.addr[i], version) if version != NONE else ""
        version = int(self.lives.event_version[i])
        if version != NONE:
            return format_address_n(self.trace.addr[i], version)
        version = int(self.segment_lives.event_version[i])
        if version != NONE:
            return "s" + format_address_n(self.trace.addr[i], version)
        return ""

    def _source_address_n(self, source_version: np.ndarray, i: int) -> str:
        version = int(source_version[i])
        if version == NONE:
            return ""
        code = int(self.trace.action[i])
        prefix = "s" if code in act.SEGMENT_ACTIONS else ""
        return prefix + format_address_n(self.trace.addr[i], version)

    def block_address_n(self, b: int) -> str:
        """address_n of block ``b`` at snapshot time ('' for a free block)."""
        if self.block_version[b] == NONE:
            return ""
        return format_address_n(self.blocks.address[b], self.block_version[b])

    def find(self, text: str) -> list[Match]:
        """Allocations named by ``text``: an address_n (one match) or a bare address (all lives)."""
        matches: list[Match] = []
        segment_hint = names_segment(text)
        for addr, n in parse_address_candidates(text):
            found = self._find_block(addr, n) if not segment_hint else []
            if not found:
                found = self._find_segment(addr, n)
            if found:
                matches = found
                break
        return matches

    def _find_block(self, addr: int, n: int | None) -> list[Match]:
        lo, hi = self.lives.address_range(addr)
        if n is not None:
            # One life per (address, version): a binary search, not a walk over every life a
            # busy address had (thousands in a long trace).
            life = self.lives.find(addr, n)
            lo, hi = (life, life + 1) if life != NONE else (lo, lo)
        blocks_here: np.ndarray | list[int] = np.nonzero(self.blocks.address == addr)[0] if len(self.blocks) else []
        out: list[Match] = []
        for life in range(lo, hi):
            version = int(self.lives.version[life])
            if n is not None and version != n:
                continue
            block = next((int(b) for b in blocks_here if int(self.block_life[b]) == life), NONE)
            event = int(self.lives.start[life])
            if event == NONE:
                event = int(self.lives.request[life]) if self.lives.request[life] != NONE else int(self.lives.end[life])
            out.append(Match(self.device, format_address_n(addr, version), life, block, event))
        for b in blocks_here:
            b = int(b)
            if self.block_version[b] == NONE:
                continue  # a free (inactive) block has no address_n
            if self.block_life[b] == NONE and (n is None or int(self.block_version[b]) == n):
                out.append(Match(self.device, self.block_address_n(b), NONE, b, NONE))
        return out

    def segment_made_at(self, addr: int, index: int) -> int:
        """The event that made the segment at ``addr`` that is there after event ``index``
        (segment_alloc, or an expandable segment's first segment_map); NONE when it was
        made before the trace starts."""
        lo, hi = self.segment_lives.address_range(addr)
        starts = self.segment_lives.start[lo:hi]
        made = starts[(starts != NONE) & (starts <= index)]
        return int(made.max()) if len(made) else NONE

    def _find_segment(self, addr: int, n: int | None) -> list[Match]:
        lo, hi = self.segment_lives.address_range(addr)
        out = []
        for life in range(lo, hi):
            version = int(self.segment_lives.version[life])
            if n is not None and version != n:
                continue
            event = int(self.segment_lives.start[life])
            if event == NONE:
                event = int(self.segment_lives.end[life])
            out.append(Match(self.device, "s" + format_address_n(addr, version), life, NONE, event, "segment"))
        return out


@dataclass
class Snapshot:
    """A loaded snapshot: devices with columns, and the tables they refer to."""

    source_path: str
    source_size: int
    strings: StringTable
    frames: FrameTable
    stacks: StackTable
    actions: ActionTable
    devices: list[DeviceModel]
    allocator_settings: dict[str, object]
    annotations: Sequence[Annotation]
    header: dict[str, object] | None = None  # present when opened from a memtui export
    warnings: list[str] = field(default_factory=list)
    traced_devices: int = 0  # how many device traces the file holds (0 for a bare segment list)
    # Said to the user once when this load took a slower way than it should (memtui/open.py).
    load_notice: str | None = None

    @property
    def replaced_values_note(self) -> str | None:
        """One line, for every front end, when the model replaced values it could not use
        (``warnings``: a size past 64 bits read as 0, a segment's device number); ``memtui
        check`` lists them. None when it replaced none."""
        if not self.warnings:
            return None
        return f"memtui replaced values in this file ({plural(len(self.warnings), 'warning')})"

    # -- the recording ----------------------------------------------------------------------
    @property
    def trace_overflowed(self) -> bool:
        """Newer torch says in ``allocator_settings`` when the trace's ring buffer wrapped
        (``trace_alloc_overflowed``): every trace then starts mid-run."""
        return self.allocator_settings.get("trace_alloc_overflowed") is True

    @property
    def trace_max_entries(self) -> int | None:
        """The ring buffer's size (``trace_alloc_max_entries``), when the file says."""
        value = self.allocator_settings.get("trace_alloc_max_entries")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


    @property
    def name(self) -> str:
        """The file's name as shown: control characters in it (it came from elsewhere) escaped."""
        return terminal_safe(os.path.basename(self.source_path)) if self.source_path else "<memory>"

    def device(self, d: int) -> DeviceModel:
        return self.devices[d]

    # -- which devices there are, and which one to show -----------------------------------
    @property
    def present_devices(self) -> list[DeviceModel]:
        """Devices the file speaks of: one per device trace it holds, and any other device
        its segments name. A device number below those that neither names is not shown (a
        bare segment list of device 1 has no device 0)."""
        shown = [d for d in self.devices if d.device < self.traced_devices or len(d.trace) or len(d.segments)]
        return shown or self.devices[:1]

    def oom_elsewhere(self, device: int) -> tuple[int, int] | None:
        """(device, its first OOM's event index) of the first device other than ``device`` that
        has an OOM, or None: where the explorer's ``o`` and ``memtui oom`` send a user from a
        device without one."""
        for dev in self.present_devices:
            if dev.device != device and len(ooms := dev.oom_indices()):
                return dev.device, int(ooms[0])
        return None

    def default_device(self) -> int:
        """The device every view opens when none is asked for: the one with an OOM, else the
        one with the most events (the dump's own ``snapshot`` entries not counted), else the
        one with the most reserved bytes; the lowest number on a tie."""
        def weight(dev: DeviceModel) -> tuple[bool, int, int, int]:
            events = len(dev.trace) - int(np.count_nonzero(dev.trace.action == act.SNAPSHOT))
            return (len(dev.oom_indices()) > 0, events, dev.reserved, -dev.device)

        present = self.present_devices
        return max(present, key=weight).device if present else 0

    def device_or_default(self, device: int | None) -> int:
        """``device`` when given (SnapshotError naming the devices there are when it is not one
        of them), else :meth:`default_device`."""
        if device is None:
            return self.default_device()
        numbers = [d.device for d in self.present_devices]
        if device not in numbers:
            raise UsageError(f"no device {device}; this snapshot has device{'s' if len(numbers) > 1 else ''} "
                                f"{', '.join(map(str, numbers))}")
        return device

    def find(self, text: str, device: int | None = None) -> list[Match]:
        """Search every device (or one) for an address_n / address."""
        devices = self.devices if device is None else [self.devices[device]]
        for dev in devices:
            found = dev.find(text)
            if found:
                return found
        return []

    def event_top_frame(self, device: int, i: int, short: bool = False) -> str:
        """The label of event ``i``: its stack's label frame (a backward allocation's forward
        traceback's, model/relevance.py), or for an event recorded without a stack what is
        known of it (``(backward) train.py:47 main``), or ''."""
        sid = int(self.devices[device].site_stack[i])
        if sid >= 0:
            return self.stacks.frames.label_text(int(self.stacks.label[sid]), short)
        context = stackless_context(self, device, i)
        return context.short if context is not None else ""


def build_model(raw: dict[str, Any], source_path: str = "", source_size: int = 0) -> Snapshot:
    """Build the columnar model from a normalized snapshot dict.

    ``raw``'s trace lists are emptied as they are consumed, so the entry dicts can be
    freed while the next device is built and nothing holds them afterwards.
    """
    tables = ModelTables.new()
    traces = raw.get("device_traces") or []
    columns: list[TraceColumns] = []
    for d in range(device_count(raw)):
        entries = traces[d] if d < len(traces) else []
        columns.append(build_trace(entries, tables, f"device {d} trace"))
        if d < len(traces):
            traces[d] = []  # release the entry dicts as soon as they are columns
    return assemble_model(raw, columns, tables, source_path, source_size)


def device_count(raw: dict[str, Any]) -> int:
    """Devices in a snapshot: one per trace, and as many as its segments name; at least one,
    so that a file that records nothing (no trace, no segment) opens as an empty device 0
    in every view, as a file with an empty trace does, rather than as a model without one."""
    traces = raw.get("device_traces") or []
    if len(traces) > MAX_DEVICES:
        # Each device costs a model of its own: a small file listing a million empty
        # traces would take many minutes to open.
        raise SnapshotError(f"{len(traces):,} device traces; a snapshot has at most {MAX_DEVICES:,} devices")
    return max([1, len(traces)] + [_as_device(s.get("device", 0)) + 1 for s in raw["segments"]])


def assemble_model(raw: dict[str, Any], columns: list[TraceColumns], tables: ModelTables, source_path: str = "",
                   source_size: int = 0, paired: Sequence[PairedLives | None] = (),
                   annotation_columns: dict[str, Any] | None = None) -> Snapshot:
    """The model from every device's trace columns and the rest of the snapshot dict.

    Shared by the plain loader and the streaming decoder, which builds ``columns`` (with
    ``tables``) while it reads and hands over ``raw`` without its traces. ``paired``: per
    device, its allocations' lives if they were paired already; taken where this model
    would pair by the same actions. ``annotation_columns``: the external annotations as the
    compiled scanner read them (:meth:`ExternalAnnotations.of_columns`), where ``raw`` holds
    none of them.
    """
    strings, stacks, actions, warnings = tables.strings, tables.stacks, tables.actions, tables.warnings
    n_devices = len(columns)
    per_device_segments: list[list[dict[str, Any]]] = [[] for _ in range(n_devices)]
    unusable = 0
    for seg in raw["segments"]:
        named, device = seg.get("device", 0), _as_device(seg.get("device", 0))
        unusable += device != named
        per_device_segments[device].append(seg)
    if unusable:  # what `memtui check` and the loader's warnings say, rather than device 0 silently
        warnings.append(f"{plural(unusable, 'segment')} {'names' if unusable == 1 else 'name'} no usable device number"
                        f" (0 to {MAX_DEVICES - 1:,}): counted under device 0")
    tables_per_device = [build_segments(segs, stacks, strings, warnings) for segs in per_device_segments]
    stacks.freeze()
    label_is_user = stacks.label_is_user()

    # Each device's lifetimes (compiled, without the GIL) on threads of their own: on a
    # 10M-event trace the pairing is the longest step after decoding, and the block and
    # segment lives do not depend on each other.
    lives_of = on_cores([task for d in range(n_devices) for task in _lifetimes_tasks(
        columns[d], tables_per_device[d][1], paired[d] if d < len(paired) else None)])
    devices = []
    for d in range(n_devices):
        trace = columns[d]
        seg_table, block_table = tables_per_device[d]
        lives, segment_lives = lives_of[2 * d], lives_of[2 * d + 1]
        block_version, block_life = _link_blocks(block_table, lives)
        dev = DeviceModel(d, trace, lives, segment_lives, seg_table, block_table, block_version, block_life)
        if trace_figures.has_forward_frames(trace.fwd):
            dev.forward_site = site_stacks(trace.stack, trace.fwd, label_is_user)
        if trace_figures.has_forward_frames(block_table.fwd):
            dev.block_forward_site = site_stacks(block_table.stack, block_table.fwd, label_is_user)
        _attach_source_rows(dev, raw)
        devices.append(dev)
    return Snapshot(
        source_path=source_path,
        source_size=source_size,
        strings=strings,
        frames=tables.frames,
        stacks=stacks,
        actions=actions,
        devices=devices,
        allocator_settings=_safe_settings(raw.get("allocator_settings")),
        annotations=(ExternalAnnotations(raw.get("external_annotations") or [], _annotation)
                     if annotation_columns is None else ExternalAnnotations.of_columns(annotation_columns)),
        header=terminal_safe_value(raw.get("memtui_header")),  # type: ignore[arg-type]  # the loader checks it is a dict
        warnings=warnings,
        traced_devices=len(raw.get("device_traces") or []),
    )


@dataclass(frozen=True)
class PairedLives:
    """A trace's allocations paired with their frees before its model was built, and the
    action codes that started, requested the end of and ended a life in that pairing."""

    start: tuple[int, ...]
    request: tuple[int, ...]
    end: tuple[int, ...]
    lives: Callable[[], Lifetimes | None]  # waits for the pairing; None where it paired none


def _lifetimes_tasks(trace: TraceColumns, blocks: BlockTable,
                     paired: PairedLives | None) -> list[Callable[[], Lifetimes]]:
    """The allocations' and the segments' lifetimes of one trace, as two tasks."""
    return [partial(_block_lifetimes, trace, blocks, paired),
            partial(compute_lifetimes, trace.action, trace.addr, trace.size, act.SEGMENT_START, (), act.SEGMENT_END,
                    few=True)]


def _block_lifetimes(trace: TraceColumns, blocks: BlockTable, paired: PairedLives | None) -> Lifetimes:
    request_codes, end_codes = block_end_codes(trace.action, blocks)
    if paired is not None and (paired.start, paired.request, paired.end) == (act.BLOCK_START, request_codes, end_codes):
        lives = paired.lives()  # the same pairing, made while the command's modules were imported
        if lives is not None:
            return lives
    return compute_lifetimes(trace.action, trace.addr, trace.size, act.BLOCK_START, request_codes, end_codes,
                             threads=pairing_threads(len(trace.action)))


def _attach_source_rows(dev: DeviceModel, raw: dict[str, Any]) -> None:
    """For a reopened export: the source's event numbers, address_n versions and clock."""
    header = raw.get("memtui_header")
    if not isinstance(header, dict):
        return
    origins = header.get("source_first_time_us")
    origin = origins.get(str(dev.device)) if isinstance(origins, dict) else None
    if isinstance(origin, (int, float)) and math.isfinite(origin):
        dev.source_time_origin_us = float(origin)
    per_device = header.get("source_events_per_device")
    if isinstance(per_device, dict) and isinstance(per_device.get(str(dev.device)), int):
        dev.partial_trace = per_device[str(dev.device)] != len(dev.trace)
    else:
        source_events, exported = header.get("source_events"), header.get("events")
        dev.partial_trace = not (isinstance(source_events, int) and source_events == exported)
    rows = (raw.get("memtui_source_rows") or {}).get(dev.device) or {"index": [], "version": []}
    n = len(dev.trace)
    index = np.asarray(rows.get("index") or [], np.int64)
    version = np.asarray(rows.get("version") or [], np.int64)
    if len(index) != n or len(version) != n or (n > 1 and not (np.diff(index) > 0).all()) or (n and index[0] < 0):
        return  # an export without these columns (or damaged ones): number the rows as they are
    dev.source_index, dev.source_version = index, version.astype(np.int32)


def block_end_codes(action: np.ndarray, blocks: BlockTable) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Which actions request and end an allocation in this trace.

    Normally ``free_requested`` asks and ``free_completed`` (or an old single ``free``)
    ends. A recording made with ``skip_actions=["free_completed"]`` has no completions:
    then each ``free_requested`` ends its allocation, else every later allocation at the
    address would read as the same one. A trace whose only frees are requests still
    pending at snapshot time keeps the usual reading.
    """
    if len(action) and not act.any_of(action, act.BLOCK_END):
        requests = int(np.count_nonzero(action == act.FREE_REQUESTED))
        pending = int(np.count_nonzero(blocks.state == PENDING_FREE))
        if requests > pending:
            return (), (act.FREE_REQUESTED,)
    return act.BLOCK_REQUEST, act.BLOCK_END


def _link_blocks(blocks: BlockTable, lives: Lifetimes) -> tuple[np.ndarray, np.ndarray]:
    """address_n version and trace life of every block at snapshot time.

    A block's version is the number of lives at its address that ended in the trace; if
    the last life at that address is still open it is this block's life.
    """
    versions = np.full(len(blocks), NONE, np.int32)
    block_life = np.full(len(blocks), NONE, np.int32)
    for b in range(len(blocks)):
        if blocks.state[b] not in (ALLOCATED, PENDING_FREE):
            continue
        addr = int(blocks.address[b])
        version = lives.ends_at_address(addr)
        versions[b] = version
        life = lives.find(addr, version)
        if life != NONE:
            block_life[b] = life
    return versions, block_life


def _annotation(item: dict[str, Any]) -> Annotation:
    return Annotation(_as_device(item.get("device", 0)), _shown(item.get("stage", "")), _shown(item.get("name", "")),
                      _as_time(item.get("time_us")))


def _as_device(value: object) -> int:
    return value if isinstance(value, int) and 0 <= value < MAX_DEVICES else 0


def _as_time(value: object) -> float:
    if isinstance(value, int):  # beyond any float, math.isfinite and float() would raise
        return float(value) if -(1 << 1023) < value < 1 << 1023 else math.nan
    return float(value) if isinstance(value, float) and math.isfinite(value) else math.nan


def _shown(value: object) -> str:
    if type(value) is str and value.isprintable():
        return value  # the common case, without the two calls below
    return terminal_safe(text_of(value))


def _safe_settings(raw: object) -> dict[str, object]:
    """The allocator's settings, terminal-safe, always a dict (every reader asks it for keys).

    terminal_safe_value turns a container of more items than it walks into a placeholder; no
    torch writes such settings, so a file that does keeps the placeholder under one key."""
    safe = terminal_safe_value(dict(raw) if isinstance(raw, dict) else {})
    return safe if isinstance(safe, dict) else {"(unreadable settings)": safe}
