"""Small truths of the text reports: `top` says each block's state, and an OOM's estimated
device total says how it was estimated and where the real one can be given."""

from __future__ import annotations

import dataclasses

from memtui.analysis.oom import diagnose_ooms
from memtui.cli import main
from memtui.report.oom import explain
from tests.tui.helpers import loaded, tiny_path

GIB = 1 << 30


def test_top_prints_the_state_of_every_block(capsys):
    assert main(["top", str(tiny_path()), "-n", "20"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], lines[1:]
    column = header.index("state")
    states = [row[column:column + 12].strip() for row in rows]
    assert rows and all(states), lines  # never a blank cell
    assert "allocated" in states and "pending free" in states  # the tiny snapshot has both


def test_an_estimated_device_total_says_how_and_points_to_the_cli_option():
    d = diagnose_ooms(loaded(str(tiny_path())), 0)[0]
    d = dataclasses.replace(d, verdict="capacity", process_limit=False, device_total=8 * GIB,
                            device_total_estimated=True, non_pytorch=GIB)
    text = " ".join(explain(d))
    assert "set --device-memory" not in text  # an option the explorer does not have
    assert "not record" in text and "estimated" in text
    assert "memtui oom SNAPSHOT --device-memory" in text


def test_a_given_device_total_is_not_called_estimated():
    d = diagnose_ooms(loaded(str(tiny_path())), 0)[0]
    d = dataclasses.replace(d, verdict="capacity", process_limit=False, device_total=8 * GIB,
                            device_total_estimated=False, non_pytorch=GIB)
    text = " ".join(explain(d))
    assert "estimated" not in text and "--device-memory" not in text


def test_a_dump_without_a_trace_says_it_could_not_show_an_oom(capsys):
    # Dumped at the OOM with history off: the trace is empty, so "no OOM" alone would mislead.
    from tests.conftest import SAMPLES

    assert main(["oom", str(SAMPLES / "heldout" / "oom_state_only.pickle.xz")]) == 0
    out = capsys.readouterr().out
    assert "no OOM in this snapshot's trace" in out and "an OOM before the dump would not show" in out
    assert main(["oom", str(SAMPLES / "train_linear_adam.pickle.xz")]) == 0  # a trace with no OOM: no caveat
    assert "would not show" not in capsys.readouterr().out
