"""The MCP server: memtui's analyses as tools, over stdio (the only module importing the SDK).

There is a tool per analysis of the spec table (:mod:`memtui.services.catalog`), its
parameters made from the spec's options, so the tools take what the command line takes,
with the same bounds. Each runs its :mod:`memtui.mcp.tools` answer in a worker thread,
one call at a time, and answers with a short text summary, then the JSON (as a second text item and as
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
from memtui.mcp.answers import MAX_LIMIT, PAGING, Answer
from memtui.mcp.store import SnapshotStore
from memtui.services.catalog import SPECS
from memtui.services.options import Option
from memtui.services.spec import AnalysisSpec

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

# The tools that answer no analysis of the spec table.
OTHER_TOOLS = ("live_status",)

# What each kind of subject is called, with its type and description, as the tools take it.
SUBJECTS = {
    "snapshot": [("path", str, "the snapshot file: absolute, or relative to the server's first root folder")],
    "pair": [("a", str, "the 'before' snapshot file"),
             ("b", str, "the 'after' snapshot file (may be the same file with other devices or events)")],
    "rank_files": [("inputs", list[str], "one snapshot per rank, or a directory of them (rank numbers are read from "
                                         "the file names)")],
}
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
    """A server with one tool per analysis of the spec table, each taking the spec's options."""
    server = _Server(store)
    for spec in SPECS:
        tool = _tool(server, spec)
        server.add_tool(tool, name=spec.tool_name, description=spec.tool_help or spec.help, annotations=READ_ONLY,
                        structured_output=False)

    # A question that is no analysis of a snapshot file: the running jobs, as memtui watch --status says.
    async def live_status(ctx: Context,
                          target: Annotated[str | None, Field(description=(
                              "which running job: a pid, PID:RANK, a job id or a word of its command line"
                              " (default: every live job)"))] = None,
                          limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description=(
                              "the most processes listed"))] = 64) -> CallToolResult:
        """The CUDA memory of running jobs now (those started with memtui run --live, memtui.record.live() or
        MEMTUI_LIVE=1): per process and device, allocated, reserved, the headroom to its limit and its OOMs."""
        return await _run(server.store, ctx, functools.partial(tools.live_status, server.store, target, limit))

    server.add_tool(live_status, description=inspect.cleandoc(live_status.__doc__ or ""), annotations=READ_ONLY,
                    structured_output=False)
    return server


def _tool(server: _Server, spec: AnalysisSpec):
    """The async function the SDK calls for ``spec``: its signature (the subject, the spec's
    options, the tool's paging options, each typed and bounded) is what the SDK makes the
    tool's input schema from."""
    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                annotation=Annotated[kind, Field(description=description)])
              for name, kind, description in SUBJECTS[spec.subject]]
    for opt in spec.option_list("mcp") + list(PAGING.get(spec.name, ())):
        default = inspect.Parameter.empty if opt.positional else opt.default  # the command line requires it too
        params.append(inspect.Parameter(opt.name, inspect.Parameter.KEYWORD_ONLY, annotation=parameter_type(opt),
                                        default=default))
    params.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context))

    async def call(ctx: Context, **arguments) -> CallToolResult:
        return await _run(server.store, ctx, functools.partial(tools.answer, server.store, spec, arguments))

    call.__name__ = spec.tool_name
    call.__signature__ = inspect.Signature(params, return_annotation=CallToolResult)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params} | {"return": CallToolResult}
    return call


def parameter_type(opt: Option) -> Any:
    """An option as a typed, bounded, described tool parameter."""
    kind: Any = {"int": int, "float": float, "str": str, "bool": bool, "text_list": list[str]}.get(opt.kind)
    if opt.kind == "size":
        kind = int | str
    elif opt.kind == "choice":
        kind = Literal[opt.choices]
    if opt.optional or opt.kind == "size":
        kind = kind | None
    bounds = {k: v for k, v in (("ge", opt.low), ("le", opt.high)) if v is not None}
    return Annotated[kind, Field(description=opt.help, **bounds)]


async def _run(store: SnapshotStore, ctx: Context, work) -> CallToolResult:
    progress = _Progress(ctx) if _progress_token(ctx) is not None else None

    def locked() -> Answer:
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
