"""The MCP server: memtui's analyses as tools, over stdio (the only module importing the SDK).

Each tool runs its :mod:`memtui.mcp.tools` function in a worker thread, one call at a
time, and answers with a short text summary, then the JSON (as a second text item and as
structured content, as the SDK does for a tool returning a dict). A
:class:`~memtui.errors.MemtuiError` (a missing file, a path outside the roots, a refused
pickle, a bad filter) becomes a tool error with its one-line message; so does anything
else, so no call can bring the server down. Loads report MCP progress notifications when
the client sent a progress token.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations as types.
import functools
import inspect
import json
import logging
import time
from typing import Annotated, Any, Literal

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from memtui import __version__
from memtui.errors import MemtuiError, printable
from memtui.mcp import tools
from memtui.mcp.store import SnapshotStore

log = logging.getLogger("memtui.mcp")

INSTRUCTIONS = """\
memtui reads PyTorch CUDA memory snapshots (the .pickle files written by
torch.cuda.memory._dump_snapshot(), also compressed as .xz/.gz/.zst, or memtui .msgpack exports)
and answers questions about them. A snapshot holds, per GPU device, the allocator's segments and
blocks at the moment it was taken and a trace of events before it (alloc, free_requested,
free_completed, segment_alloc/free, oom, ...), each with the Python/C++ stack that caused it.
Every allocation has an id, address_n: its address in hex and how many allocations at that address
came before it (7f064c000000_3). Sizes are bytes. Start with snapshot_info; then explain_oom for an
out-of-memory error, leaks for memory that grows, reference_cycles for memory only the garbage
collector gave back, top_allocations for who holds memory at the end, events to read the trace,
allocation_stack for one allocation's stacks. The first call on a large file loads it (seconds);
later calls on it are fast. Paths are files under the folders this server was started with."""

Path = Annotated[str, Field(description="the snapshot file: absolute, or relative to the server's first root "
                                        "folder")]
Device = Annotated[int | None, Field(description="GPU device number; default: the device with an OOM, else the "
                                                 "one with the most events, else the most reserved")]
Depth = Annotated[int, Field(ge=1, le=100, description="how many user (Python) frames make a call site; 1 is the "
                                                        "deepest user frame, the line that allocated")]
Limit = Annotated[int, Field(ge=1, le=tools.MAX_LIMIT, description="the most rows to return")]
Offset = Annotated[int, Field(ge=0, description="rows to skip, for the next page (the answer's next_offset)")]

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)


class _Server(MCPServer):
    def __init__(self, store: SnapshotStore) -> None:
        super().__init__("memtui", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
        self.store = store

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                # pydantic's report spans lines and names internal models: say it on one line.
                problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                                     for e in exc.__cause__.errors())
                raise ToolError(f"{name}: {problems}") from None
            raise


def build_server(store: SnapshotStore) -> MCPServer:
    server = _Server(store)

    def tool(fn):
        """Register ``fn`` (an async function whose docstring is the tool's description)."""
        server.add_tool(fn, description=inspect.cleandoc(fn.__doc__), annotations=READ_ONLY, structured_output=False)
        return fn

    async def run(ctx: Context, work, *args, **kwargs) -> CallToolResult:
        return await _run(server.store, ctx, functools.partial(work, server.store, *args, **kwargs))

    @tool
    async def snapshot_info(path: Path, ctx: Context) -> CallToolResult:
        """Overview of a PyTorch CUDA memory snapshot: for each GPU device, the segments and blocks at snapshot
        time, reserved/allocated/active bytes, the trace's event counts by action, the OOMs (event index,
        requested size), the allocator settings and warnings. Call this first on a new file; default_device is
        the device the other tools use when none is given."""
        return await run(ctx, tools.snapshot_info, path)

    @tool
    async def top_allocations(path: Path, ctx: Context, limit: Limit = 20, offset: Offset = 0,
                              device: Annotated[int | None, Field(description="only this device (default: all)")]
                              = None) -> CallToolResult:
        """The largest blocks still allocated when the snapshot was taken, largest first: size, address_n
        (the allocation's id, for allocation_stack), state and the source line that allocated it."""
        return await run(ctx, tools.top_allocations, path, limit, offset, device)

    @tool
    async def events(path: Path, ctx: Context,
                     filter: Annotated[str, Field(description=(
                         "memtui filter expression, terms ANDed: 'size>1MiB', 'action:alloc,oom', 'file:train.py',"
                         " 'file:model.py:42', 'func:forward', 'id:7f064c000000_3' (one allocation's events),"
                         " 'leaked' (allocations never freed), 'freed', 'live', 'stream:N', 'time:1s..2s',"
                         " 'event:100..200'; 'or', 'not'/'-' and parentheses combine; a bare word searches the"
                         " stacks. Empty: every event"))] = "",
                     start: Annotated[int, Field(description=(
                         "trace index to start at (negative counts from the end); for the next page pass the"
                         " answer's next_start"))] = 0,
                     limit: Limit = 50, device: Device = None) -> CallToolResult:
        """Rows of the allocator trace of one device, in order: index, time, action (alloc, free_requested,
        free_completed, segment_alloc, segment_free, oom, ...), address_n, size, stream and the top stack
        frame. Optionally only the events matching a filter. Bounded by limit; page with next_start."""
        return await run(ctx, tools.events, path, filter, start, limit, device)

    @tool
    async def allocation_stack(path: Path, ctx: Context,
                               address_n: Annotated[str, Field(description=(
                                   "the allocation: address_n as the other tools print it (7f064c000000_0; 0x and"
                                   " memory_viz's b'/s' prefixes accepted), or a bare address (7f064c000000) to"
                                   " list every allocation made at it"))],
                               all_frames: Annotated[bool, Field(description=(
                                   "include C++ and allocator-internal frames"))] = False,
                               limit: Limit = 50, offset: Offset = 0) -> CallToolResult:
        """The full stacks of one allocation: where it was allocated, where its free was requested and
        completed (event indices), and its state at snapshot time if still there. A bare address made several
        allocations answers with the list of them instead; name one by address_n."""
        return await run(ctx, tools.allocation_stack, path, address_n, all_frames, limit, offset)

    @tool
    async def explain_oom(path: Path, ctx: Context, device: Annotated[int | None, Field(
                              description="only this device's OOMs (default: the one memtui oom picks)")] = None,
                          device_memory: Annotated[int | str | None, Field(description=(
                              "the GPU's total memory, as bytes or '80GiB'; estimated from common GPUs when not"
                              " given"))] = None,
                          depth: Depth = 1,
                          top: Annotated[int, Field(ge=0, le=tools.MAX_LIMIT, description=(
                              "call sites and allocations listed per OOM"))] = 10,
                          limit: Annotated[int, Field(ge=1, le=tools.MAX_LIMIT, description=(
                              "the most OOMs to explain"))] = 5) -> CallToolResult:
        """Why each out-of-memory error in the snapshot happened: verdict 'fragmentation' (enough memory free but
        no block large enough: try expandable_segments), 'capacity' (not enough memory: reduce what is live) or
        'external' (memory used outside PyTorch), a per-process cap, the requesting line, and the call sites and
        allocations holding memory at the OOM."""
        return await run(ctx, tools.explain_oom, path, device, device_memory, depth, top, limit)

    @tool
    async def what_if(path: Path, ctx: Context,
                      conf: Annotated[list[str] | None, Field(description=(
                          "PYTORCH_CUDA_ALLOC_CONF values to try, each whole ('' or 'default': torch's defaults;"
                          " e.g. 'expandable_segments:True'); default: a set of useful candidates"))] = None,
                      cap: Annotated[int | str | None, Field(description=(
                          "the memory limit as a per-process cap, bytes or '40GiB' (default: what the recorded"
                          " OOM implies, else none)"))] = None,
                      device: Device = None) -> CallToolResult:
        """What if the allocator had been set differently: the recording's requests replayed through a model of
        PyTorch's caching allocator under each setting. Per setting: the reserved peak, whether and where it runs
        out under the limit, whether it serves the request the recording ran out on, the smallest memory it fits
        in. 'fidelity' says whether the model reproduces the recording's own segment events (when it does not,
        the predictions are not certain)."""
        return await run(ctx, tools.what_if, path, conf, cap, device)

    @tool
    async def leaks(path: Path, ctx: Context, device: Device = None, depth: Depth = 1,
                    top: Annotated[int, Field(ge=0, le=tools.MAX_LIMIT, description=(
                        "call sites to list besides the growing ones"))] = 20,
                    windows: Annotated[int, Field(ge=2, le=500, description=(
                        "time windows to sample when no step annotations mark iterations"))] = 10,
                    points: Annotated[int, Field(ge=2, le=500, description=(
                        "the most sample points over the run"))] = 24,
                    ) -> CallToolResult:
        """Live memory by call site (source line) at snapshot time, and the call sites whose live memory grew
        step after step over the run: a leak such as appending a tensor that keeps its graph to a list every
        iteration. Each site has its frames and its live bytes at each sample point."""
        return await run(ctx, tools.leaks, path, device, depth, top, windows, points)

    @tool
    async def reference_cycles(path: Path, ctx: Context, device: Device = None, depth: Depth = 1,
                               limit: Annotated[int, Field(ge=1, le=tools.MAX_LIMIT, description=(
                                   "the most call sites and bursts to list"))] = 20) -> CallToolResult:
        """Detects memory held by Python reference cycles: allocations that pile up over many iterations and are
        freed together in bursts when the garbage collector runs (a sawtooth). Lists the bursts, the call sites
        whose memory the collector freed, and OOMs that struck while memory waited for the collector."""
        return await run(ctx, tools.reference_cycles, path, device, depth, limit)

    @tool
    async def diff_snapshots(a: Annotated[str, Field(description="the 'before' snapshot file")],
                             b: Annotated[str, Field(description="the 'after' snapshot file (may be the same file"
                                                                 " with other devices or events)")],
                             ctx: Context, device: Device = None,
                             device_a: Annotated[int | None, Field(description="device of side a")] = None,
                             device_b: Annotated[int | None, Field(description="device of side b")] = None,
                             at_a: Annotated[int | None, Field(description=(
                                 "replay side a to just after this trace event instead of snapshot time"))] = None,
                             at_b: Annotated[int | None, Field(description="the same for side b")] = None,
                             depth: Depth = 1,
                             top: Annotated[int, Field(ge=1, le=tools.MAX_LIMIT, description=(
                                 "changed call sites to list: the largest growth and the largest shrink"))] = 30,
                             include_unchanged: Annotated[bool, Field(description=(
                                 "list call sites whose memory did not change too"))] = False) -> CallToolResult:
        """What changed between two snapshots (or two devices, or two moments of one trace): reserved and
        allocated bytes, segments per pool, and live memory per call site with new and gone sites, largest
        growth first and largest shrink last."""
        return await run(ctx, tools.diff_snapshots, a, b, device, device_a, device_b, at_a, at_b, depth, top,
                         include_unchanged)

    @tool
    async def compare_ranks(inputs: Annotated[list[str], Field(description=(
                                "one snapshot per rank, or a directory of them (rank numbers are read from the"
                                " file names)"))],
                            ctx: Context,
                            at: Annotated[Literal["peak", "end"], Field(description=(
                                "compare call sites at each rank's peak or at snapshot time (end)"))] = "peak",
                            depth: Depth = 1,
                            limit: Annotated[int, Field(ge=1, le=tools.MAX_LIMIT, description=(
                                "the most ranks, sites and groups listed"))] = 64,
                            ) -> CallToolResult:
        """Compares distributed-training ranks: peak allocated and reserved, OOMs and events per rank, the median
        rank as reference, the outlier ranks with reasons, and the call sites where a rank differs from the
        median one."""
        return await run(ctx, tools.compare_ranks, inputs, at, depth, limit)

    breakdown = _breakdown_module()
    if breakdown is not None:
        @tool
        async def memory_breakdown(path: Path, ctx: Context,
                                   at: Annotated[str, Field(description=(
                                       "the moment: 'peak' (most allocated, the default), 'end', 'oom' or 'oom:N',"
                                       " 'step:N' or 'step:last', or a trace event number"))] = "peak",
                                   device: Device = None,
                                   by: Annotated[Literal["category", "site"], Field(description=(
                                       "'category': each category with its top call sites; 'site': the top call"
                                       " sites with their category mix"))] = "category",
                                   top: Annotated[int, Field(ge=0, le=tools.MAX_LIMIT, description=(
                                       "call sites per category"))] = 3,
                                   steps: Annotated[bool, Field(description=(
                                       "also the breakdown at each training step's peak"))] = False,
                                   depth: Depth = 1) -> CallToolResult:
            """Where the allocated memory goes at one moment, in the model's terms: bytes and allocation counts
            per category (parameters, gradients, optimizer_state, activations, temporaries, other, unknown),
            with the call sites behind each, at the allocated peak, the end, an OOM, a step or any event."""
            return await run(ctx, breakdown.memory_breakdown, path, at, device, by, top, steps, depth)

    @tool
    async def live_status(ctx: Context,
                          target: Annotated[str | None, Field(description=(
                              "which running job: a pid, PID:RANK, a job id or a word of its command line"
                              " (default: every live job)"))] = None,
                          limit: Annotated[int, Field(ge=1, le=tools.MAX_LIMIT, description=(
                              "the most processes listed"))] = 64) -> CallToolResult:
        """The CUDA memory of running jobs now (those started with memtui run --live, memtui.record.live() or
        MEMTUI_LIVE=1): per process and device, allocated, reserved, the headroom to its limit and its OOMs."""
        return await run(ctx, tools.live_status, target, limit)

    return server


def _breakdown_module():
    """:mod:`memtui.mcp.breakdown`, or None where memtui has no ``breakdown`` command."""
    try:
        from memtui.mcp import breakdown
    except ImportError as exc:
        if exc.name not in ("memtui.commands.breakdown", "memtui.analysis.breakdown"):
            log.warning("memtui mcp: memory_breakdown left out (%s)", exc)
        return None
    return breakdown


async def _run(store: SnapshotStore, ctx: Context, work) -> CallToolResult:
    progress = _Progress(ctx) if _progress_token(ctx) is not None else None

    def locked() -> tools.Answer:
        with store.lock:
            return work(progress=progress)

    try:
        answer = await anyio.to_thread.run_sync(locked)
    except MemtuiError as exc:
        return _error(exc.message)
    except OSError as exc:
        return _error(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
    except Exception as exc:  # a bug in memtui: said on one line; the server goes on answering
        log.exception("memtui mcp: tool failed")
        return _error(f"internal error in memtui ({type(exc).__name__}: {exc})")
    text = json.dumps(answer.data, default=str)
    return CallToolResult(content=[TextContent(type="text", text=answer.summary), TextContent(type="text", text=text)],
                          structured_content=answer.data)


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=printable(message))], is_error=True)


def _progress_token(ctx: Context):
    try:
        return (ctx.request_context.meta or {}).get("progress_token")
    except (AttributeError, ValueError):
        return None


class _Progress:
    """The loader's (stage, done, total) as MCP progress in percent, at most ten a second.

    It is called in the worker thread and hands each notification to the event loop. The
    value only ever grows, as the protocol asks: reading is 0-95%, indexing the rest.
    """

    SHARE = {"reading": (0.0, 95.0), "indexing": (95.0, 5.0), "ranks": (0.0, 100.0)}

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.sent = -1.0
        self.last = 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        base, share = self.SHARE.get(stage, (0.0, 100.0))
        value = round(base + share * (done / total if total else 1.0), 1)
        now = time.monotonic()
        if value <= self.sent or (now - self.last < 0.1 and value < 100.0):
            return
        self.sent, self.last = value, now
        try:
            anyio.from_thread.run(functools.partial(self.ctx.report_progress, value, 100.0, stage))
        except Exception:  # the client went away or the loop is closing: progress is optional
            log.debug("progress not sent", exc_info=True)


def serve(roots: list[str], cache) -> None:
    """Serve over stdio until the client closes the connection."""
    server = build_server(SnapshotStore(roots, cache))
    server.run("stdio")
