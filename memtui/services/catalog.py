"""The one table of analyses: every front end makes its commands, keys and tools from :data:`SPECS`.

Adding an analysis is a spec here and its service module (see docs/architecture.md). The
table names each service module rather than importing it, so that a command imports only its
own analysis.
"""

from __future__ import annotations

from memtui.services.spec import AnalysisSpec

SPECS: tuple[AnalysisSpec, ...] = (
    AnalysisSpec(
        "info", "Summarise a snapshot: per-device segments, blocks, memory, trace actions, OOMs, settings.",
        "info", "InfoOptions", "info", tool="snapshot_info",
        tool_help="Overview of a PyTorch CUDA memory snapshot: for each GPU device, the segments and blocks at "
                  "snapshot time, reserved/allocated/active bytes, the trace's event counts by action, the OOMs "
                  "(event index, requested size), the allocator settings and warnings. Call this first on a new "
                  "file; default_device is the device the other tools use when none is given."),
    AnalysisSpec(
        "top", "List the largest live blocks at snapshot time with their address_n and allocating call site.",
        "top", "TopOptions", "top", tool="top_allocations",
        tool_help="The largest blocks still allocated when the snapshot was taken, largest first: size, address_n "
                  "(the allocation's id, for allocation_stack), state and the source line that allocated it."),
    AnalysisSpec(
        "events", "Print trace events: index, time, action, address_n, size, stream, top frame.",
        "events", "EventsOptions", "events",
        tool_help="Rows of the allocator trace of one device, in order: index, time, action (alloc, "
                  "free_requested, free_completed, segment_alloc, segment_free, oom, ...), address_n, size, stream "
                  "and the top stack frame. Optionally only the events matching a filter. Bounded by limit; page "
                  "with next_start."),
    AnalysisSpec(
        "stack", "Show the full stack of one allocation (alloc and free), by address_n; a bare address lists every "
                 "allocation made at it.",
        "stack", "StackOptions", "stack", tool="allocation_stack",
        tool_help="The full stacks of one allocation: where it was allocated, where its free was requested and "
                  "completed (event indices), and its state at snapshot time if still there. A bare address made "
                  "several allocations answers with the list of them instead; name one by address_n."),
    AnalysisSpec(
        "oom", "Explain every OOM in a snapshot: fragmentation, capacity, a per-process cap or non-PyTorch memory, "
               "with the evidence, and who holds the memory.",
        "oom", "OomOptions", "oom", key="w", key_help="Why OOM", tool="explain_oom",
        tool_help="Why each out-of-memory error in the snapshot happened: verdict 'fragmentation' (enough memory "
                  "free but no block large enough: try expandable_segments), 'capacity' (not enough memory: reduce "
                  "what is live) or 'external' (memory used outside PyTorch), a per-process cap, the requesting "
                  "line, and the call sites and allocations holding memory at the OOM."),
    AnalysisSpec(
        "leaks", "Group live allocations by call site; a verdict (leak, growth that plateaus or is given back) with "
                 "its evidence, and the sites whose kept memory grows all through the run.",
        "leaks", "LeaksOptions", "leaks", key="L", key_help="Leaks by call site",
        tool_help="Live memory by call site (source line) at snapshot time, and the call sites whose live memory "
                  "grew step after step over the run: a leak such as appending a tensor that keeps its graph to a "
                  "list every iteration. Each site has its frames and its live bytes at each sample point."),
    AnalysisSpec(
        "cycles", "Did reference cycles hold memory? Bursts of frees weighed on their stacks: the garbage "
                  "collector, reference counting or an exception; a verdict with its confidence and evidence.",
        "cycles", "CyclesOptions", "cycles", key="C", key_help="Reference cycles", tool="reference_cycles",
        tool_help="Detects memory held by Python reference cycles: allocations that pile up over many iterations "
                  "and are freed together in bursts when the garbage collector runs (a sawtooth). Lists the "
                  "bursts, the call sites whose memory the collector freed, and OOMs that struck while memory "
                  "waited for the collector."),
    AnalysisSpec(
        "breakdown", "Allocated memory by category (parameters, gradients, optimizer state, activations, ...) at "
                     "the peak, the end, an OOM or any event, with the call sites behind each.",
        "breakdown", "BreakdownOptions", "breakdown_at", tool="memory_breakdown",
        tool_help="Where the allocated memory goes at one moment, in the model's terms: bytes and allocation "
                  "counts per category (parameters, gradients, optimizer_state, activations, temporaries, other, "
                  "unknown), with the call sites behind each, at the allocated peak, the end, an OOM, a step or "
                  "any event."),
    AnalysisSpec(
        "diff", "Compare live memory by call site and segments by pool between two snapshots (or two devices, or "
                "two events of one trace); new and gone call sites, largest growth first.",
        "diff", "DiffOptions", "diff", subject="pair", key="D", key_help="Diff: cursor vs end", tool="diff_snapshots",
        tool_help="What changed between two snapshots (or two devices, or two moments of one trace): reserved and "
                  "allocated bytes, segments per pool, and live memory per call site with new and gone sites, "
                  "largest growth first and largest shrink last."),
    AnalysisSpec(
        "ranks", "Compare one snapshot per rank (files or a directory): peak allocated, reserved, OOMs, events, and "
                 "the call sites where a rank differs from the ranks' median; flags the outlier rank.",
        "ranks", "RanksOptions", "ranks", subject="rank_files", key="R", key_help="Compare ranks",
        tool="compare_ranks",
        tool_help="Compares distributed-training ranks: peak allocated and reserved, OOMs and events per rank, the "
                  "median rank as reference, the outlier ranks with reasons, and the call sites where a rank "
                  "differs from the ranks' median."),
    AnalysisSpec(
        "whatif", "Replay the recording through a model of PyTorch's caching allocator under other "
                  "PYTORCH_CUDA_ALLOC_CONF settings: reserved peak, whether and where it runs out, the smallest "
                  "memory it fits in.",
        "whatif", "WhatIfOptions", "whatif", key="W", key_help="What if: other allocator settings", tool="what_if",
        reports_progress=True,
        tool_help="What if the allocator had been set differently: the recording's requests replayed through a "
                  "model of PyTorch's caching allocator under each setting. Per setting: the reserved peak, whether "
                  "and where it runs out under the limit, whether it serves the request the recording ran out on, "
                  "the smallest memory it fits in. 'fidelity' says whether the model reproduces the recording's own "
                  "segment events (when it does not, the predictions are not certain)."),
)


def spec(name: str) -> AnalysisSpec:
    return next(s for s in SPECS if s.name == name)


def explorer_specs() -> list[AnalysisSpec]:
    """The analyses the explorer opens with a key of their own, in the table's order."""
    return [s for s in SPECS if s.key]
