"""Memory categories against the truth of recorded training runs, and their invariants.

The truth files hold parameter, gradient and optimizer-state bytes summed over the live
tensors inside the recording process (sample_snapshots/scenarios.py and workloads.py).
Each is compared at the moment it was measured:

- "end": after the last ``zero_grad``, where the truth was summed (a run that dumps later,
  such as context_alloc's, has freed its model by then); the trace's end when the run has
  no zero_grad annotation;
- "before zero_grad": the event before the last ``zero_grad`` starts (gradients still held);
- "peak": the allocated peak, for what is known there: parameters always, the optimizer
  state once the first step is over, gradients while an optimizer step runs.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from memtui.analysis.breakdown import category_values_at, live_from_spans, live_from_state
from memtui.analysis.categories import (
    ACTIVATIONS,
    CATEGORIES,
    GRADIENTS,
    OPTIMIZER_STATE,
    PARAMETERS,
    UNKNOWN,
    annotation_spans,
    categorize,
)
from memtui.analysis.live import allocated_curve
from memtui.replay import Replayer
from tests.conftest import SAMPLES, sample_files, scenario_files
from tests.fixtures.opened import cached

TOLERANCE = 0.03
CHECKED = ("parameters", "gradients", "optimizer_state")
# grad_accumulation measures its gradients after opt.step, before zero_grad (workloads.py).
GRADIENTS_BEFORE_ZERO_GRAD = {"grad_accumulation"}


def truth_files() -> list:
    files = sorted((SAMPLES / "scenarios").glob("train_*.pickle.xz"))
    files += [p for p in sorted((SAMPLES / "recorded").glob("*.pickle.xz"))
              if "parameters_bytes" in _truth(str(p))]
    return [pytest.param(p, id=p.name.split(".")[0]) for p in files]


@functools.cache
def _truth(path: str) -> dict:
    return json.loads(open(path.replace(".pickle.xz", ".truth.json")).read())


@functools.cache
def _table(path: str):
    snapshot = cached(path)
    dev = snapshot.devices[snapshot.default_device()]
    table = categorize(snapshot, dev)
    return snapshot, dev, table, allocated_curve(dev, table.spans)


def _at(path: str, i: int) -> dict[str, int]:
    _, dev, table, _ = _table(path)
    total, _ = live_from_spans(table, dev, i).per_category(len(table.names))
    return dict(zip(table.names, (int(v) for v in total)))


def _close(got: int, want: int) -> bool:
    return got == want if want == 0 else abs(got - want) <= TOLERANCE * want


def expectations(path) -> list[tuple[str, int, dict[str, int]]]:
    """(moment, event, expected bytes per checked category) for one truth file."""
    truth = _truth(str(path))
    snapshot, dev, table, curve = _table(str(path))
    name = path.name.split(".")[0]
    n = len(dev.trace)
    zero_grads = annotation_spans(snapshot, dev, "Optimizer.zero_grad#")
    steps = annotation_spans(snapshot, dev, "Optimizer.step#")
    set_to_none = truth.get("zero_grad_set_to_none", True)
    before = truth.get("gradients_bytes_before_zero_grad")
    if name in GRADIENTS_BEFORE_ZERO_GRAD or (before is None and not set_to_none):
        before = truth.get("gradients_bytes")
    after = truth.get("gradients_bytes") if name not in GRADIENTS_BEFORE_ZERO_GRAD else 0
    if after is None:
        after = 0 if set_to_none else before
    out = []
    end = zero_grads[-1][1] if zero_grads else n - 1
    want = {"parameters": truth["parameters_bytes"], "gradients": after}
    if "optimizer_state_bytes" in truth:
        want["optimizer_state"] = truth["optimizer_state_bytes"]
    out.append(("end", end, want))
    if zero_grads and before is not None:
        out.append(("before zero_grad", zero_grads[-1][0] - 1, {**want, "gradients": before}))
    peak = int(np.argmax(curve))
    at_peak = {"parameters": truth["parameters_bytes"]}
    if steps and peak > steps[0][1] and "optimizer_state" in want:
        at_peak["optimizer_state"] = want["optimizer_state"]
    if before is not None and any(lo <= peak <= hi for lo, hi in steps):
        at_peak["gradients"] = before
    out.append(("peak", peak, at_peak))
    return out


@pytest.mark.parametrize("path", truth_files())
def test_parameters_gradients_and_optimizer_state_match_the_truth(path):
    if path.name.startswith("context_state"):
        pytest.skip("context='state' keeps stacks only for blocks live at the dump, after the model was freed")
    failures = []
    for moment, event, want in expectations(path):
        got = _at(str(path), event)
        for category, expected in want.items():
            if not _close(got[category], expected):
                failures.append(f"{moment} (event {event}): {category} {got[category]:,} vs truth {expected:,}")
    assert not failures, "; ".join(failures)


def every_traced_file() -> list:
    return [pytest.param(p, id=str(p.relative_to(SAMPLES))) for p in sample_files() + scenario_files()]


@pytest.mark.parametrize("path", every_traced_file())
def test_categories_add_up_to_allocated_exactly(path):
    """Every allocated byte is in exactly one category, whichever way the live set is taken."""
    snapshot, dev, table, curve = _table(str(path))
    n = len(dev.trace)
    assert len(table.span_category) == len(table.spans)
    assert ((table.span_category >= 0) & (table.span_category < len(table.names))).all()
    if not n:
        live = live_from_spans(table, dev, -1)
        assert live.per_category(len(table.names))[0].sum() == dev.allocated
        return
    points = np.unique(np.r_[np.linspace(0, n - 1, 7).astype(np.int64), int(np.argmax(curve)), n - 1])
    values = category_values_at(table, dev, points)
    assert (values.sum(axis=0) == curve[points]).all()
    replayer = Replayer(dev)
    for k, i in enumerate(points):
        by_spans = live_from_spans(table, dev, int(i)).per_category(len(table.names))[0]
        state = replayer.state_at(int(i))
        by_state = live_from_state(table, state).per_category(len(table.names))[0]
        assert by_spans.sum() == curve[i]
        assert (by_spans == values[:, k]).all()
        if not dev.partial_trace:
            assert by_state.sum() == state.allocated
            assert (by_state == by_spans).all(), f"event {i}"


def test_a_recording_without_stacks_is_unknown_not_guessed():
    """context=None: no frame anywhere. Only the optimizer's annotations place anything
    (a free inside zero_grad, an allocation inside Optimizer.step); the rest is unknown."""
    from memtui.analysis.categories import RULE_TEXT

    path = SAMPLES / "context_none.pickle.xz"
    snapshot, dev, table, curve = _table(str(path))
    assert len(table.spans)
    by_annotation = {4, 5, 8}
    rules = set(int(r) for r in np.unique(table.span_rule))
    assert rules <= by_annotation | {9}, [RULE_TEXT[r] for r in rules]
    assert UNKNOWN in set(np.unique(table.span_category))
    assert not (np.isin(table.span_category, [PARAMETERS, ACTIVATIONS])).any()


def test_stacks_of_live_blocks_only_say_nothing_about_phases():
    """context='state': the trace has no stacks; a block's own stack places it only when
    the stack itself says what it is."""
    snapshot, dev, table, curve = _table(str(SAMPLES / "recorded" / "context_state.pickle.xz"))
    end = _at(str(SAMPLES / "recorded" / "context_state.pickle.xz"), len(dev.trace) - 1)
    assert end["activations"] == end["temporaries"] == end["gradients"] == 0
    assert end["unknown"] == sum(end.values())


def test_python_stacks_place_the_autograd_threads_allocations():
    """With stacks="python" backward's allocations have no stack: the gradients are still
    found (made in backward, kept, freed by zero_grad) and shown under the backward() call."""
    path = SAMPLES / "scenarios" / "train_mlp_adam_py.pickle.xz"
    snapshot, dev, table, curve = _table(str(path))
    grads = np.nonzero(table.span_category == GRADIENTS)[0]
    assert len(grads)
    assert (table.span_via_backward[grads]).all()
    assert (table.span_stack[grads] >= 0).all()
    assert set(np.unique(table.span_category[table.spans.start >= 0])) >= {PARAMETERS, OPTIMIZER_STATE}


def test_activations_rise_in_forward_and_fall_in_backward():
    path = SAMPLES / "recorded" / "hf_gpt2_all.pickle.xz"
    snapshot, dev, table, curve = _table(str(path))
    backward = table.phases.backward
    starts = table.phases.pass_start
    assert len(starts) == 3  # three training steps
    first = int(starts[0])
    before_backward = _at(str(path), first - 1)["activations"]
    after_backward = _at(str(path), int(table.phases.pass_end[0]))["activations"]
    assert before_backward > 10 * max(after_backward, 1)
    assert backward[first]


def test_every_rule_names_a_category_and_says_why():
    from memtui.analysis.categories import RULES

    codes = [code for code, _, _ in RULES]
    assert len(codes) == len(set(codes))
    for _code, category, why in RULES:
        assert 0 <= category < len(CATEGORIES) and why
    assert ACTIVATIONS in {category for _, category, _ in RULES}


def test_forward_frames_place_backward_memory_under_its_forward_op():
    """A newer torch attaches to each backward op the traceback of its forward op
    (forward_frames): the backward's memory is shown there, and those events are backward."""
    from memtui.analysis.categories import VIA_FORWARD

    path = SAMPLES / "format" / "backward_anomaly.pickle.xz"
    snapshot, dev, table, curve = _table(str(path))
    fwd = dev.trace.fwd
    assert (fwd >= 0).any()
    assert table.phases.backward[fwd >= 0].all()
    lives = np.arange(table.n_lives)
    made_with_forward = lives[(table.spans.start[:table.n_lives] >= 0)
                              & (fwd[np.maximum(table.spans.start[:table.n_lives], 0)] >= 0)]
    assert len(made_with_forward)
    assert (table.span_via_backward[made_with_forward] == VIA_FORWARD).all()
    assert (table.span_stack[made_with_forward] == fwd[table.spans.start[made_with_forward]]).all()
    assert (table.span_category[made_with_forward] == GRADIENTS).any()


def test_an_oom_in_backward_leaves_activations_and_backward_temporaries():
    """oom_training fails inside loss.backward(): the forward's activations are still held,
    the backward's own buffers are temporaries of a backward that never finished."""
    path = SAMPLES / "oom_training.pickle.xz"
    snapshot, dev, table, curve = _table(str(path))
    oom = int(dev.oom_indices()[0])
    assert not table.phases.pass_complete[-1]
    at_oom = _at(str(path), oom)
    assert at_oom["activations"] >= 512 << 20 and at_oom["temporaries"] >= 512 << 20
    assert at_oom["parameters"] == 48 * (1 << 20) + 3 * 8192
