"""memtui whatif from the command line: the JSON names, the text, and bad input."""

import json
import subprocess
import sys

from tests.conftest import SAMPLES

OOM = SAMPLES / "scenarios" / "oom_growing_batch_py.pickle.xz"
NO_OOM = SAMPLES / "train_linear_adam.pickle.xz"


def memtui(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memtui", "--no-cache", "whatif", *args], capture_output=True,
                          text=True, timeout=120)


def test_json_has_the_documented_names():
    done = memtui(str(OOM), "--conf", " expandable_segments:True ", "--conf", "default", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {"device", "recorded", "fidelity", "scenarios"} <= set(out)
    assert {"settings", "reserved_peak", "oom_event", "cap_bytes"} <= set(out["recorded"])
    assert {"checked", "exact", "segment_events", "matched", "first_difference"} <= set(out["fidelity"])
    assert out["fidelity"]["checked"] and out["fidelity"]["exact"]
    assert out["recorded"]["oom_event"] is not None and out["recorded"]["cap_bytes"] > 0
    names = {s["settings"] for s in out["scenarios"]}
    assert names == {"expandable_segments:True", "default"}  # echoed as given, stripped
    for s in out["scenarios"]:
        assert {"settings", "reserved_peak", "oom_event", "passes_recorded_oom", "min_cap_bytes"} <= set(s)
    default = next(s for s in out["scenarios"] if s["settings"] == "default")
    # Under its own settings and the limit its OOM implies, the recording runs out where it did.
    assert default["passes_recorded_oom"] is False and default["oom_event"] == out["recorded"]["oom_event"]


def test_text_starts_with_the_advice_and_says_fidelity():
    done = memtui(str(NO_OOM), "--conf", "", "--conf", "max_split_size_mb:64")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] and not lines[0].startswith("device")
    assert any(line.startswith("fidelity: exact") for line in lines)


def test_bad_settings_are_one_line_and_status_2():
    done = memtui(str(NO_OOM), "--conf", "max_split_size_mb:lots")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_setting_that_still_runs_out_where_the_recording_did_is_not_advised():
    """The demo: every setting tried still runs out at the recorded OOM and needs no smaller limit, so a
    lower peak under the inferred limit is no advice (it only says where that limit stopped it)."""
    done = memtui(str(SAMPLES.parent / "memtui" / "data" / "demo_snapshot.pickle.xz"))
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("no setting tried does better than the recorded one (default)"), first
    assert "the recording fits in" in first



def _scenario(settings: str, peak: int, oom_event: int | None, cap: int | None, recorded: bool = False):
    from memtui.analysis.whatif import Scenario

    return Scenario(settings, peak, 0, 0, oom_event, False if oom_event is not None else True, cap, None, 0,
                    recorded=recorded)


def _advice(best, base, recorded_oom: int | None = 710) -> str:
    from memtui.analysis.whatif import Fidelity, Limit, WhatIf, advice

    return advice(WhatIf(0, "default", base.reserved_peak, recorded_oom, Limit(1 << 30, True, "process cap"),
                         Fidelity(True, True, 10, 10), [best, base]))


def test_the_advice_says_no_figure_against_itself():
    """Two peaks that read the same (5.81 GiB) are left out of the advice; what differs is said."""
    gib = 1 << 30
    line = _advice(_scenario("max_split_size_mb:128", int(5.81 * gib), 710, int(6.82 * gib)),
                   _scenario("default", int(5.81 * gib) + 4096, 710, int(6.84 * gib), recorded=True))
    assert line == "max_split_size_mb:128: the OOM at event 710 still happens; fits in 6.82 GiB instead of 6.84 GiB"


def test_a_setting_that_runs_out_before_the_recorded_oom_is_said_to():
    gib = 1 << 30
    line = _advice(_scenario("max_split_size_mb:64", 0, 1, int(6.82 * gib)),
                   _scenario("default", 0, 1, int(6.84 * gib), recorded=True))
    assert line.startswith("max_split_size_mb:64: it runs out earlier, at event 1, before the recorded OOM at event"
                           " 710"), line


def test_a_smallest_fit_that_reads_the_same_is_no_advice():
    gib = 1 << 30
    line = _advice(_scenario("expandable_segments:True", int(5.5 * gib), 710, int(5.5 * gib)),
                   _scenario("default", int(5.5 * gib), 710, int(5.5 * gib) + (2 << 20), recorded=True))
    assert line.startswith("no setting tried does better"), line


def test_with_no_recorded_oom_a_setting_that_stays_within_the_cap_is_advised():
    # No OOM recorded, a --cap under which the recorded setting runs out: a setting that does
    # not, or does later, is the advice, even with peaks that read the same and no smallest fit.
    gib = 1 << 30
    ran_out = _scenario("default", int(5.5 * gib), 900, None, recorded=True)
    ran_out.passes_recorded_oom = None
    best = _scenario("expandable_segments:True", int(5.5 * gib), None, None)
    best.passes_recorded_oom = None
    line = _advice(best, ran_out, recorded_oom=None)
    assert line == ("expandable_segments:True: it does not run out under this limit, where the recorded setting"
                    " does at event 900"), line
    later = _scenario("expandable_segments:True", int(5.5 * gib), 1200, None)
    later.passes_recorded_oom = None
    line = _advice(later, ran_out, recorded_oom=None)
    assert line == ("expandable_segments:True: it runs out later under this limit, at event 1,200 instead of 900"), line
