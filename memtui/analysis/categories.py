"""What kind of memory every allocation is, in the model's terms.

Each allocation (a life: alloc → free) gets exactly one category, decided once for the
whole trace, all at once over numpy columns:

``parameters``, ``gradients``, ``optimizer_state``, ``activations``, ``temporaries``,
``other``, ``unknown``, and any category a user rule names (memtui/analysis/category_rules.py).

The evidence is what the snapshot holds: the frames of the allocating stack
(memtui/analysis/category_frames.py), the phase each event ran in (forward, inside
``backward()``, inside an optimizer step, inside ``zero_grad``), taken from those frames,
from ``external_annotations`` (``Optimizer.step#Adam.step`` START/END) and, for events with
no stack, from the nearest earlier event with one (memtui/model/stackless.py); and the
allocation's life: the phase it was made in and the one it was freed in. The rules, in
the order they are tried, are :data:`RULES`; docs/analyses.md explains each in terms a
user can check against a stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from memtui.analysis import category_frames as cf
from memtui.analysis.category_rules import CategoryRules
from memtui.analysis.live import LifeSpans, life_spans
from memtui.model import DeviceModel, Snapshot
from memtui.model import actions as act
from memtui.model.lifetimes import NONE
from memtui.model.segments import ALLOCATED
from memtui.model.trace_figures import has_forward_frames

CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "temporaries", "other", "unknown")
PARAMETERS, GRADIENTS, OPTIMIZER_STATE, ACTIVATIONS, TEMPORARIES, OTHER, UNKNOWN = range(len(CATEGORIES))

# (code, category, why) for every built-in rule, in the order they are tried. A user rule's
# code is USER_RULE + its position in the file.
RULES = [
    (1, OTHER, "a library workspace kept for the process (cuBLAS/cuDNN: getCUDABlasLtWorkspace, "
               "setWorkspaceForHandle in the stack)"),
    (2, PARAMETERS, "made by Module._apply (.to/.cuda/.half), an nn.Parameter, a torch.nn module's __init__ or "
                    "reset_parameters, or from_pretrained"),
    (3, GRADIENTS, "made by AccumulateGrad (the autograd node that writes .grad)"),
    (4, OPTIMIZER_STATE, "made by the optimizer (torch/optim in the stack, or inside Optimizer.step) and kept "
                         "after that step"),
    (5, TEMPORARIES, "made by the optimizer and freed within the same step"),
    (6, GRADIENTS, "made during backward() and still allocated after it ends: a .grad (freed by zero_grad, or "
                   "kept with the size of a parameter or of a gradient zero_grad freed)"),
    (15, OTHER, "made during backward() and kept, but neither freed by zero_grad nor the size of any parameter "
                "or gradient (an input's .grad, a library workspace made on the autograd thread)"),
    (17, TEMPORARIES, "made during a backward() that an OOM (or the end of the trace) cut short, still "
                      "allocated when it stopped, and not the size of a parameter or gradient"),
    (7, TEMPORARIES, "made and freed within one backward()"),
    (8, GRADIENTS, "freed by zero_grad"),
    (9, UNKNOWN, "no stack, and nothing else places it (context=None, a thread without Python, or its alloc "
                 "is before the trace)"),
    (10, ACTIVATIONS, "made outside backward() and freed during backward() (saved for backward)"),
    (11, OTHER, "made outside backward() and the optimizer, and kept through a whole backward() that ran to "
                "its end (inputs, caches, buffers)"),
    (12, ACTIVATIONS, "made inside a module's forward and still allocated, with no backward() after it in "
                      "the trace"),
    (13, OTHER, "made outside any module's forward and still allocated"),
    (14, TEMPORARIES, "made and freed with no backward() in between (within the forward, or the op)"),
    (16, UNKNOWN, "the trace keeps no stacks for its allocations (context='state'), so when this was made and "
                  "freed says nothing"),
]
RULE_TEXT = {code: text for code, _, text in RULES}
RULE_CATEGORY = {code: category for code, category, _ in RULES}
USER_RULE = 1000
OWN_STACK, VIA_BACKWARD_CALL, VIA_FORWARD = 0, 1, 2


@dataclass
class Phases:
    """The phase of every event of one device, and where each phase's run ends."""

    backward: np.ndarray  # bool: inside backward() (the autograd engine, or the main thread waiting on it)
    optimizer: np.ndarray  # bool: inside an optimizer step (not zero_grad)
    zero_grad: np.ndarray  # bool: inside zero_grad
    backward_end: np.ndarray  # int64: last event of the backward run holding the event, -1 outside
    optimizer_end: np.ndarray  # int64: last event of the optimizer run holding the event, -1 outside
    pass_start: np.ndarray  # first event of each backward run, ascending
    pass_end: np.ndarray  # last event of each backward run
    pass_complete: np.ndarray  # bool per run: it ran to its end (no OOM in it, events after it)


@dataclass
class CategoryTable:
    """The category of every allocation of one device (and why), decided once."""

    names: list[str]  # the seven built-in names, then the user rules' own
    spans: LifeSpans  # the lives, then the blocks live at the end that no life accounts for
    span_category: np.ndarray  # int8 per spans row
    span_rule: np.ndarray  # int16 per spans row: RULES code, or USER_RULE + k
    block_category: np.ndarray  # int8 per block of the snapshot's block table
    block_rule: np.ndarray
    phases: Phases
    # The stack each allocation is shown under: its allocating stack; for one made on the
    # autograd thread without Python frames, the forward traceback of its backward op when
    # the trace has forward_frames (VIA_FORWARD), else the stack of the backward() call it
    # ran under (VIA_BACKWARD_CALL); -1 for none. ``*_via_backward`` says which (0: its own).
    span_stack: np.ndarray
    span_via_backward: np.ndarray
    block_stack: np.ndarray
    block_via_backward: np.ndarray
    user_rules: CategoryRules = field(default_factory=CategoryRules)
    n_lives: int = 0

    @property
    def life_category(self) -> np.ndarray:
        return self.span_category[: self.n_lives]

    def rule_text(self, code: int) -> str:
        if code >= USER_RULE:
            k = code - USER_RULE
            rules = self.user_rules
            origin = f" ({rules.source})" if rules.source else ""
            return f"your rule {k + 1}{origin}: {rules.rules[k].describe()}"
        return RULE_TEXT.get(code, "")


def categorize(snapshot: Snapshot, dev: DeviceModel, rules: CategoryRules | None = None,
               spans: LifeSpans | None = None) -> CategoryTable:
    """The category of every life and every snapshot block of ``dev``."""
    rules = rules if rules is not None else CategoryRules()
    spans = spans if spans is not None else life_spans(dev)
    n = len(dev.trace)
    flags = cf.stack_flags(snapshot.stacks)
    phases = event_phases(snapshot, dev, flags)
    names = list(CATEGORIES) + [c for c in rules.categories if c not in CATEGORIES]
    user_category = np.array([names.index(r.category) for r in rules.rules] or [0], np.int8)

    n_lives = len(dev.lives)
    blocks = dev.blocks
    unlinked = np.nonzero(dev.block_life == NONE)[0]
    # Rows: every life, then every block no life accounts for (made before the trace).
    start = np.concatenate([spans.start[:n_lives], np.full(len(unlinked), -1, np.int64)])
    stop = np.concatenate([spans.stop[:n_lives], np.full(len(unlinked), n, np.int64)])
    # The allocating stack: the alloc's, else the block table's (never a free's stack).
    final_stack = np.full(n_lives, -1, np.int64)
    linked = np.nonzero(dev.block_life != NONE)[0]
    final_stack[dev.block_life[linked]] = blocks.stack[linked]
    life_start = spans.start[:n_lives]
    alloc_stack = np.where(life_start >= 0, dev.trace.stack[np.maximum(life_start, 0)] if n else -1, final_stack)
    alloc_stack = np.where((alloc_stack < 0) & (life_start >= 0), final_stack, alloc_stack)
    alloc_stack = np.concatenate([alloc_stack, blocks.stack[unlinked].astype(np.int64)])
    meta = np.where(start >= 0, dev.trace.meta[np.maximum(start, 0)] if n else -1, -1)

    size = np.concatenate([spans.size[:n_lives], blocks.size[unlinked].astype(np.int64)])
    category, rule = _classify(start, stop, alloc_stack, size, flags, phases, dev, n)
    if len(rules):
        hit = rules.match(snapshot.stacks, snapshot.strings, alloc_stack, meta)
        mine = hit >= 0
        category[mine] = user_category[hit[mine]]
        rule[mine] = USER_RULE + hit[mine]

    shown_stack, via = alloc_stack.copy(), np.zeros(len(start), np.int8)
    if n:
        a = np.maximum(start, 0)
        before = dev.last_stacked_before[a]
        under_call = (alloc_stack < 0) & (start >= 0) & phases.backward[a] & (before != NONE)
        shown_stack[under_call] = dev.trace.stack[before[under_call]]
        via[under_call] = VIA_BACKWARD_CALL
    # forward_frames name the forward op a backward node belongs to: a better place than
    # the backward() call or the engine's C++ frames. The model says which stack names each
    # allocation (model/relevance.py, site_stacks), as every other view groups them.
    site = _site_stacks(dev, start, unlinked, n_lives)
    use = (site >= 0) & (site != alloc_stack)
    shown_stack[use] = site[use]
    via[use] = VIA_FORWARD

    def per_block(values: np.ndarray) -> np.ndarray:
        out = np.empty(len(blocks), values.dtype)
        out[unlinked] = values[n_lives:]
        out[linked] = values[dev.block_life[linked]]
        return out

    # The spans' extra rows are the allocated blocks among the unlinked ones, in block order.
    extra = np.nonzero(blocks.state[unlinked] == ALLOCATED)[0]
    extra = extra[: len(spans) - n_lives]

    def per_span(values: np.ndarray) -> np.ndarray:
        return np.concatenate([values[:n_lives], values[n_lives:][extra]])

    return CategoryTable(
        names, spans, per_span(category), per_span(rule), per_block(category), per_block(rule), phases,
        per_span(shown_stack), per_span(via), per_block(shown_stack), per_block(via), rules, n_lives)


def _site_stacks(dev: DeviceModel, start: np.ndarray, unlinked: np.ndarray, n_lives: int) -> np.ndarray:
    """Per row: the stack the model names it by (its forward traceback's for a backward
    allocation, where the trace has forward_frames), or -1 where the model has none."""
    out = np.full(len(start), -1, np.int64)
    traced = np.nonzero(start >= 0)[0]
    site = getattr(dev, "site_stack", None)
    if site is not None and len(traced) and site is not dev.trace.stack:
        out[traced] = site[start[traced]]
    block_site = getattr(dev, "block_site_stack", None)
    if block_site is not None and len(unlinked) and block_site is not dev.blocks.stack:
        out[n_lives:] = block_site[unlinked]
    return out


def _forward_stacks(dev: DeviceModel) -> np.ndarray | None:
    """Each event's forward_frames stack id (-1: none), or None when the trace has none."""
    fwd = getattr(dev.trace, "fwd", None)
    return fwd if fwd is not None and has_forward_frames(fwd) else None


def _classify(start, stop, alloc_stack, size, flags, phases: Phases, dev: DeviceModel, n: int):
    traced = start >= 0
    a = np.maximum(start, 0)
    r = np.minimum(stop, max(n - 1, 0))
    freed = stop < n
    aflags = flags[alloc_stack + 1]
    has = lambda mask, bit: (mask & bit) != 0  # noqa: E731
    if n:
        a_bwd = traced & phases.backward[a]
        a_opt = traced & phases.optimizer[a]
        r_bwd = freed & phases.backward[r]
        free_flags = flags[dev.trace.stack[r].astype(np.int64) + 1]
        r_zero = freed & (phases.zero_grad[r] | has(free_flags, cf.ZERO_GRAD))
        survives_bwd = stop > phases.backward_end[a]
        survives_opt = stop > phases.optimizer_end[a]
    else:
        a_bwd = a_opt = r_bwd = r_zero = survives_bwd = survives_opt = np.zeros(len(start), bool)
    # A backward() that ran to its end, started after the alloc and ended before the free:
    # the allocation was kept through it.
    complete_start = phases.pass_start[phases.pass_complete]
    nxt = np.searchsorted(complete_start, start, "right")
    ends = np.append(phases.pass_end[phases.pass_complete], np.iinfo(np.int64).max)
    crosses = ends[nxt] < stop
    # Whether the backward() an allocation was made in ran to its end.
    in_pass = np.searchsorted(phases.pass_start, start, "right") - 1
    made_in_cut_pass = (in_pass >= 0) & ~np.append(phases.pass_complete, True)[np.maximum(in_pass, 0)] & a_bwd
    pretrace_opt = ~traced & has(aflags, cf.OPTIM) & ~has(aflags, cf.ZERO_GRAD)
    pretrace_bwd = ~traced & has(aflags, cf.ENGINE | cf.BACKWARD_CALL)
    no_stack = alloc_stack < 0
    # Forward, backward and their boundaries are only known when the trace's allocations
    # carry stacks; otherwise only what a stack itself says (above) places an allocation.
    phases_known = act.ALLOC in dev.actions_with_stacks
    # A gradient has its parameter's shape and dtype: kept memory made in backward() that no
    # zero_grad frees and that matches neither a parameter nor a gradient zero_grad freed in
    # size is something else. With nothing to compare with, every survivor stays a gradient.
    grad_sizes = np.unique(np.concatenate([size[has(aflags, cf.PARAM)], size[r_zero]]))
    grad_like = r_zero | (np.isin(size, grad_sizes) if len(grad_sizes) else True)
    conditions = [
        (has(aflags, cf.WORKSPACE), 1),
        (has(aflags, cf.PARAM), 2),
        (has(aflags, cf.ACCUMULATE_GRAD), 3),
        ((a_opt & survives_opt) | pretrace_opt, 4),
        (a_opt, 5),
        (((a_bwd & survives_bwd) | (pretrace_bwd & ~r_bwd)) & grad_like, 6),
        (made_in_cut_pass & survives_bwd, 17),
        ((a_bwd & survives_bwd) | (pretrace_bwd & ~r_bwd), 15),
        (a_bwd | pretrace_bwd, 7),
        (r_zero, 8),
        (no_stack, 9),
        (np.full(len(start), not phases_known), 16),
        (r_bwd, 10),
        (crosses, 11),
        (~freed & has(aflags, cf.MODULE_CALL), 12),
        (~freed, 13),
    ]
    rule = np.select([c for c, _ in conditions], [code for _, code in conditions], 14).astype(np.int16)
    lookup = np.zeros(max(RULE_CATEGORY) + 1, np.int8)
    for code, category in RULE_CATEGORY.items():
        lookup[code] = category
    return lookup[rule], rule


def event_phases(snapshot: Snapshot, dev: DeviceModel, flags: np.ndarray | None = None) -> Phases:
    """Which events ran inside backward(), an optimizer step or zero_grad.

    From each event's own frames when it has a stack (and its ``forward_frames``: only a
    backward op has them); an event without one (the autograd thread under stacks="python",
    a free under context="alloc") takes the phase of the nearest earlier event with a stack.
    Annotation spans (``Optimizer.step#…``, ``Optimizer.zero_grad#…``) mark their events too.
    """
    flags = flags if flags is not None else cf.stack_flags(snapshot.stacks)
    trace = dev.trace
    n = len(trace)
    ev = flags[trace.stack.astype(np.int64) + 1]
    has = lambda bit: (ev & bit) != 0  # noqa: E731
    backward = has(cf.BACKWARD_CALL | cf.ENGINE)
    forward = _forward_stacks(dev)
    if forward is not None:
        backward |= forward >= 0  # only a backward op carries the traceback of its forward
    zero_grad = has(cf.ZERO_GRAD)
    optimizer = has(cf.OPTIM) & ~zero_grad
    stackless = (trace.stack < 0) & (trace.action != act.SNAPSHOT)
    if forward is not None:
        stackless &= forward < 0
    before = dev.last_stacked_before
    inherit = np.nonzero(stackless & (before != NONE))[0]
    src = before[inherit]
    backward[inherit], optimizer[inherit], zero_grad[inherit] = backward[src], optimizer[src], zero_grad[src]
    for name, mask in (("Optimizer.step#", optimizer), ("Optimizer.zero_grad#", zero_grad)):
        for lo, hi in annotation_spans(snapshot, dev, name):
            mask[lo:hi + 1] = True
    # An annotation span does not outrank what a stack says: zero_grad and backward() inside
    # one stay what they are, and an optimizer frame is the optimizer even under backward()
    # (an optimizer run from a gradient hook).
    optimizer = (optimizer & ~zero_grad & ~backward) | (has(cf.OPTIM) & ~has(cf.ZERO_GRAD))
    backward &= ~optimizer | has(cf.ENGINE | cf.BACKWARD_CALL)
    pass_start, pass_end, backward_end = _runs(backward)
    _, _, optimizer_end = _runs(optimizer)
    if n == 0:
        backward_end = optimizer_end = np.zeros(0, np.int64)
    # A backward() that an OOM interrupted, or that the dump cut, says nothing about what
    # outlives it.
    ooms = np.nonzero(trace.action == act.OOM)[0]
    first_oom_after = np.searchsorted(ooms, pass_start, "left")
    oom_inside = np.append(ooms, n)[first_oom_after] <= pass_end
    complete = (pass_end < n - 1) & ~oom_inside
    return Phases(backward, optimizer, zero_grad, backward_end, optimizer_end, pass_start, pass_end, complete)


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first index of each run of True, last index of each, that last index per element or -1)."""
    n = len(mask)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    padded = np.concatenate([[False], mask, [False]])
    edges = np.diff(padded.astype(np.int8))
    starts = np.nonzero(edges == 1)[0].astype(np.int64)
    ends = np.nonzero(edges == -1)[0].astype(np.int64) - 1
    run = np.cumsum(edges[:-1] == 1) - 1
    end_of = np.where(mask, ends[np.maximum(run, 0)] if len(ends) else -1, -1).astype(np.int64)
    return starts, ends, end_of


def annotation_spans(snapshot: Snapshot, dev: DeviceModel, prefix: str, exact: bool = False) -> list[tuple[int, int]]:
    """(first event, last event) of each START/END annotation pair whose name starts with
    ``prefix`` (is ``prefix``, with ``exact``), placed among the events by time (``first``
    is ``last + 1`` when no event falls inside: then ``last`` is the event just before it);
    none without event times."""
    times = dev.trace.time_us
    if not len(times) or not np.isfinite(times).all():
        return []
    clock = np.maximum.accumulate(times)
    starts: dict[str, list[float]] = {}
    spans = []
    for a in snapshot.annotations:
        named = a.name == prefix if exact else a.name.startswith(prefix)
        if a.device != dev.device or not named or not np.isfinite(a.time_us):
            continue
        if a.stage == "START":
            starts.setdefault(a.name, []).append(a.time_us)
        elif a.stage == "END" and starts.get(a.name):
            t0 = starts[a.name].pop()
            lo = int(np.searchsorted(clock, t0, "left"))
            hi = int(np.searchsorted(clock, a.time_us, "right")) - 1
            spans.append((lo, max(hi, lo - 1)))
    return sorted(spans)
