"""The MCP server: memtui's analyses as tools, over stdio (the only module importing the SDK).

There is a tool per analysis of the spec table (:mod:`memtui.services.catalog`), its
parameters made from the spec's options, so the tools take what the command line takes,
with the same bounds, plus ``list_snapshots``. Arguments are checked strictly: an unknown
key or a value of the wrong type (``limit: true``, ``limit: "5"``) is an error naming it.

Each call runs its :mod:`memtui.mcp.tools` answer in a worker thread, one call at a time,
and answers with one text item: compact JSON whose ``summary`` comes first
(:mod:`memtui.mcp.compact`), in the tools' terms (:mod:`memtui.mcp.terms`), at most
``max_chars`` characters (8,000 unless asked; :mod:`memtui.mcp.budget`). A cancelled call
(the client's ``notifications/cancelled``, or the client going away) stops its work: the
load's progress reports raise, and the worker thread is interrupted at its next Python
line, so the next call does not wait for it.

A :class:`~memtui.errors.MemtuiError` (a missing file, a path outside the roots, a refused
pickle, a bad filter) becomes a tool error with its one-line message; so does anything
else, so no call can bring the server down. Loads report MCP progress notifications when
the client sent a progress token.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations as types.
import functools
import inspect
import logging
import os
import time
from typing import Annotated, Any, Literal

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict, Field, ValidationError, create_model

from memtui import __version__
from memtui.errors import MemtuiError, printable
from memtui.mcp import tools
from memtui.mcp.annotations import memory_by_annotation
from memtui.mcp.answers import MAX_LIMIT, PAGING, Answer
from memtui.mcp.budget import DEFAULT_MAX_CHARS, MAX_MAX_CHARS, clip, fit, pre_cut
from memtui.mcp.cancel import CallCancelled, Cancellable
from memtui.mcp.compact import compact
from memtui.mcp.compare import compare_runs
from memtui.mcp.listing import list_snapshots
from memtui.mcp.store import SnapshotStore
from memtui.mcp.terms import in_tool_terms, translated
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
OTHER_TOOLS = ("live_status", "list_snapshots", "compare_runs", "memory_by_annotation")

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


MAX_CHARS = Annotated[int, Field(
    description=f"the most characters the answer may take (default {DEFAULT_MAX_CHARS:,}); a longer answer is "
                "cut, with truncated, omitted and more saying how to get the rest", ge=200, le=MAX_MAX_CHARS)]
STRICT = ConfigDict(extra="forbid", strict=True)
ERROR_CHARS = 500  # an error quotes what it was given; never more than this


class _Server(MCPServer):
    def __init__(self, store: SnapshotStore) -> None:
        super().__init__("memtui", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
        self.store = store
        self.strict: dict[str, Any] = {}  # tool -> the pydantic model its arguments must pass, strictly
        self.calls: set[Cancellable] = set()  # the calls whose work is running

    def add_strict_tool(self, fn, name: str, description: str) -> None:
        params = [p for p in inspect.signature(fn).parameters.values() if p.name != "ctx"]
        self.strict[name] = create_model(f"{name}_arguments", __config__=STRICT, **{
            p.name: (p.annotation, ... if p.default is inspect.Parameter.empty else p.default) for p in params})
        self.add_tool(fn, name=name, description=description, annotations=READ_ONLY, structured_output=False)
        tool = self._tool_manager.get_tool(name)
        tool.parameters["additionalProperties"] = False  # the schema says what the check does

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        model = self.strict.get(name)
        if model is not None:
            try:
                model.model_validate(arguments or {})
            except ValidationError as exc:
                # The SDK converts quietly ("5" for 5, true for 1) and ignores unknown keys;
                # an agent that misspelt an argument should hear so, on one line.
                raise ToolError(clip(f"{name}: {argument_problems(exc, list(model.model_fields))}",
                                     ERROR_CHARS)) from None
        return await super().call_tool(name, arguments, context)

    def cancel_all(self, wait: float) -> bool:
        """Stop every running call; whether they all stopped within ``wait`` seconds."""
        for call in list(self.calls):
            call.cancel()
        deadline = time.monotonic() + wait
        return all(call.finished.wait(max(0.0, deadline - time.monotonic())) for call in list(self.calls))


def argument_problems(exc: ValidationError, names: list[str]) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        if error["type"] == "extra_forbidden":
            problems.append(f"unknown argument {clip(where, 60)!r} (the arguments are {', '.join(names)})")
        elif error["type"] == "missing":
            problems.append(f"{where} is required")
        else:
            given = clip(repr(error.get("input")), 60)
            problems.append(f"{where}: {error['msg'][0].lower()}{error['msg'][1:]}, not {given}")
    return "; ".join(problems)


def build_server(store: SnapshotStore) -> MCPServer:
    """A server with one tool per analysis of the spec table, each taking the spec's options,
    and ``list_snapshots``."""
    server = _Server(store)
    for spec in SPECS:
        server.add_strict_tool(_tool(server, spec), spec.tool_name, spec.tool_help or spec.help)
    server.add_strict_tool(_listing_tool(server), "list_snapshots", LIST_HELP)
    live = _live_tool(server)
    server.add_strict_tool(live, "live_status", inspect.cleandoc(live.__doc__ or ""))
    server.add_strict_tool(_compare_tool(server), "compare_runs", COMPARE_HELP)
    server.add_strict_tool(_annotation_tool(server), "memory_by_annotation", ANNOTATION_HELP)
    return server


LIST_HELP = ("The snapshot files (.pickle, .pkl, .pt, .msgpack, compressed too) under the folders this server may "
             "read, newest first, with size and modification time: what to pass as path to the other tools.")


def _listing_tool(server: _Server):
    async def list_snapshots_tool(
            ctx: Context,
            folder: Annotated[str | None, Field(description="one folder under the roots to list (default: every "
                                                             "root)")] = None,
            contains: Annotated[str, Field(description="only files whose name contains this text", max_length=200)]
            = "",
            limit: Annotated[int, Field(description="the most files to list", ge=1, le=1000)] = 50,
            offset: Annotated[int, Field(description="files to skip, for the next page (the answer's next_offset)",
                                         ge=0)] = 0,
            max_chars: MAX_CHARS = DEFAULT_MAX_CHARS) -> CallToolResult:
        def work(progress=None) -> Answer:
            return list_snapshots(server.store, folder, contains, limit, offset)

        return await _run(server, ctx, work, max_chars, paged=True)

    list_snapshots_tool.__name__ = "list_snapshots"
    return list_snapshots_tool


COMPARE_HELP = ("Two runs side by side at their allocated peaks, in one call: each run's peak (event, allocated, "
                "reserved), its memory by category there (parameters, gradients, optimizer_state, activations, ...), "
                "the change per category, and the call sites whose live memory differs most between the two peaks, "
                "largest growth first and largest shrink last. For 'why does run B need more memory than run A'.")


def _compare_tool(server: _Server):
    async def compare_runs_tool(
            ctx: Context,
            a: Annotated[str, Field(description="the first run's snapshot file")],
            b: Annotated[str, Field(description="the second run's snapshot file")],
            device_a: Annotated[int | None, Field(description="device of the first run (default: its own default)")]
            = None,
            device_b: Annotated[int | None, Field(description="device of the second run (default: its own default)")]
            = None,
            depth: Annotated[int, Field(description="user frames that make a call site (default 1)", ge=1, le=100)]
            = 1,
            top: Annotated[int, Field(description="changed call sites and new or gone sites to list (default 10)",
                                      ge=0, le=MAX_LIMIT)] = 10,
            max_chars: MAX_CHARS = DEFAULT_MAX_CHARS) -> CallToolResult:
        def work(progress=None) -> Answer:
            return compare_runs(server.store, a, b, device_a, device_b, depth, top, progress)

        return await _run(server, ctx, work, max_chars)

    compare_runs_tool.__name__ = "compare_runs"
    return compare_runs_tool


ANNOTATION_HELP = ("Allocated memory over each annotated stage of the run (record_function ranges such as "
                   "Optimizer.step#AdamW.step, memtui.record.step() markers): per stage, how often it ran, the most "
                   "allocated memory rose inside one run of it, what it left behind, and the highest peak inside it "
                   "with the events of that run. Largest rise first.")


def _annotation_tool(server: _Server):
    async def memory_by_annotation_tool(
            ctx: Context,
            path: Annotated[str, Field(description=SUBJECTS["snapshot"][0][2])],
            device: Annotated[int | None, Field(description="device (default: the snapshot's default device)")]
            = None,
            top: Annotated[int, Field(description="stages to list (default 20)", ge=1, le=MAX_LIMIT)] = 20,
            max_chars: MAX_CHARS = DEFAULT_MAX_CHARS) -> CallToolResult:
        def work(progress=None) -> Answer:
            return memory_by_annotation(server.store.open(path, progress), device, top)

        return await _run(server, ctx, work, max_chars)

    memory_by_annotation_tool.__name__ = "memory_by_annotation"
    return memory_by_annotation_tool


def _live_tool(server: _Server):
    # A question that is no analysis of a snapshot file: the running jobs, as memtui watch --status says.
    async def live_status(ctx: Context,
                          target: Annotated[str | None, Field(description=(
                              "which running job: a pid, PID:RANK, a job id or a word of its command line"
                              " (default: every live job)"))] = None,
                          limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description=(
                              "the most processes listed"))] = 64,
                          max_chars: MAX_CHARS = DEFAULT_MAX_CHARS) -> CallToolResult:
        """The CUDA memory of running jobs now (those started with memtui run --live, memtui.record.live() or
        MEMTUI_LIVE=1): per process and device, allocated, reserved, the headroom to its limit and its OOMs."""
        work = functools.partial(tools.live_status, server.store, target, limit)
        return await _run(server, ctx, work, max_chars, paged=True)

    return live_status


def _tool(server: _Server, spec: AnalysisSpec):
    """The async function the SDK calls for ``spec``: its signature (the subject, the spec's
    options, the tool's paging options, each typed and bounded, and ``max_chars``) is what
    the SDK makes the tool's input schema from."""
    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                annotation=Annotated[kind, Field(description=description)])
              for name, kind, description in SUBJECTS[spec.subject]]
    for opt in spec.option_list("mcp") + list(PAGING.get(spec.name, ())):
        default = inspect.Parameter.empty if opt.positional else opt.default  # the command line requires it too
        params.append(inspect.Parameter(opt.name, inspect.Parameter.KEYWORD_ONLY, annotation=parameter_type(opt),
                                        default=default))
    params.append(inspect.Parameter("max_chars", inspect.Parameter.KEYWORD_ONLY, annotation=MAX_CHARS,
                                    default=DEFAULT_MAX_CHARS))
    params.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context))
    paged = spec.name in PAGING

    async def call(ctx: Context, max_chars: int = DEFAULT_MAX_CHARS, **arguments) -> CallToolResult:
        work = functools.partial(tools.answer, server.store, spec, arguments)
        return await _run(server, ctx, work, max_chars, paged=paged, all_frames=bool(arguments.get("all_frames")))

    call.__name__ = spec.tool_name
    call.__signature__ = inspect.Signature(params, return_annotation=CallToolResult)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params} | {"return": CallToolResult}
    return call


def parameter_type(opt: Option) -> Any:
    """An option as a typed, bounded, described tool parameter."""
    kind: Any = {"int": int, "float": float, "str": str, "bool": bool, "text_list": list[str]}.get(opt.kind)
    if opt.kind in ("size", "moment"):
        kind = int | str
    elif opt.kind == "choice":
        kind = Literal[opt.choices]
    if opt.optional or opt.kind == "size":
        kind = kind | None
    bounds = {k: v for k, v in (("ge", opt.low), ("le", opt.high)) if v is not None}
    return Annotated[kind, Field(description=opt.help, **bounds)]


async def _run(server: _Server, ctx: Context, work, max_chars: int, paged: bool = False,
               all_frames: bool = False) -> CallToolResult:
    store = server.store
    call = Cancellable()
    progress = call.progress(_Progress(ctx) if _progress_token(ctx) is not None else None)

    def locked() -> Answer:
        with store.lock:
            with call.running():
                return work(progress=progress)

    server.calls.add(call)
    try:
        answer = await anyio.to_thread.run_sync(locked, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        call.cancel()  # the client cancelled or left: stop the work, not only the wait
        raise
    except CallCancelled:
        return _error("cancelled")
    except MemtuiError as exc:
        return _error(exc.message)
    except OSError as exc:
        return _error(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
    except Exception as exc:  # a bug in memtui: said on one line; the server goes on answering
        log.exception("memtui mcp: tool failed")
        return _error(f"internal error in memtui ({type(exc).__name__}: {exc})")
    finally:
        server.calls.discard(call)
    return CallToolResult(content=[TextContent(type="text", text=answer_text(answer, max_chars, paged, all_frames))])


def answer_text(answer: Answer, max_chars: int, paged: bool = False, all_frames: bool = False) -> str:
    """The one copy of an answer: its summary, then its data, compact, in the tools' terms,
    within ``max_chars``."""
    omitted: dict[str, int] = {}
    data = pre_cut(answer.data, max_chars, omitted)
    if omitted:
        data["truncated"] = True
        data["omitted"] = {**data.get("omitted", {}), **omitted}
    data = compact({"summary": answer.summary.splitlines(), **data}, all_frames)
    more = f"the answer was cut to max_chars={max_chars:,}: call again with a larger max_chars"
    if paged:
        more += " or page with a smaller limit"
    if omitted:
        data["more"] = more
    return fit(translated(data), max_chars, more)


def _error(message: str) -> CallToolResult:
    text = clip(in_tool_terms(printable(message)), ERROR_CHARS)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


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
    """Serve over stdio until the client closes the connection; then stop any call still
    working, so a client that went away does not leave the server computing for it."""
    server = build_server(SnapshotStore(roots, cache))
    try:
        server.run("stdio")
    finally:
        if not server.cancel_all(wait=1.0):
            log.warning("memtui mcp: a call did not stop; exiting without it")
            os._exit(0)
