"""The report layer: analysis results as sections, printed by the commands, laid out by the screens.

Its text rules (a table's heading, row template, the rows it keeps and the line that says
how many more) are checked on hand-made tables; over the bundled snapshots every report's
tables hold typed cells (sizes and counts as integers, call sites as places), and the
command prints exactly the report's text.
"""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from memtui.analysis.cycles import find_cycles
from memtui.analysis.diff import diff_views, view_at_end
from memtui.analysis.leaks import find_leaks
from memtui.analysis.oom import diagnose_ooms
from memtui.cli import main
from memtui.report.cycles import cycles_report
from memtui.report.diff import diff_report
from memtui.report.format import cell_text, signed_bytes, sparkline, template_value
from memtui.report.leaks import leaks_report
from memtui.report.oom import oom_report
from memtui.report.ranks import rank_ranges, rank_table, ranks_report
from memtui.report.sections import Column, Evidence, Lines, Notes, Place, Report, Table
from memtui.report.text import text_lines
from memtui.services.cycles import BURSTS_SHOWN
from memtui.services.oom import LARGEST_SHOWN
from tests.conftest import sample_files, scenario_files
from tests.fixtures.opened import cached

ROW = (Column("n", "count"), Column("size", "bytes"), Column("site", "location"))


def _table(n: int, **layout) -> Table:
    rows = [(k, 1 << 20, Place(f"f.py:{k} g")) for k in range(n)]
    return Table("t", columns=ROW, rows=rows, line="{n:>3} {size:>9} {site}", **layout)


def test_a_table_keeps_its_first_rows_and_says_how_many_more():
    lines = text_lines(Report("", [_table(5, heading="  n      size site", limit=2, more="... {n} more")]))
    assert lines == ["  n      size site", "  0  1.00 MiB f.py:0 g", "  1  1.00 MiB f.py:1 g", "... 3 more"]


def test_a_table_can_keep_both_ends():
    lines = text_lines(Report("", [_table(6, limit=3, tail=1, more="({n} more)")]))
    assert [line.split()[0] for line in lines] == ["0", "1", "(3", "5"]


def test_rows_left_out_before_the_table_are_said_too_and_an_empty_table_says_what_it_is_told():
    assert text_lines(Report("", [_table(1, left_out=4, more="{n:,} not listed")]))[-1] == "4 not listed"
    assert text_lines(Report("", [_table(0)])) == []
    assert text_lines(Report("", [_table(0, when_empty=["nothing"])])) == ["nothing"]


def test_sections_are_spaced_only_between_what_they_say():
    report = Report("", [Lines(space=True, lines=["a"]), Notes("quiet", space=True),
                         Table("t", space=True, columns=ROW),
                         Evidence(space=True, indent="  ", because=["x"], alternatives=[("v", "why")]),
                         Lines("last", space=True, lines=["z"])])
    assert text_lines(report) == ["a", "", "  because:", "    - x", "  also considered:", "    - v: why", "", "z"]
    assert text_lines(report, skip=("last",))[-1] == "    - v: why"
    assert text_lines(Report("", [Evidence(always=True)])) == ["because:"]
    assert text_lines(Report("", [Evidence()])) == []


def test_cells_by_kind():
    count, noun = Column("c", "count"), Column("c", "count", unit="burst")
    assert cell_text(count, 1234) == "1,234" and cell_text(noun, 2) == "2"  # a widget shows the number
    assert template_value(count, 1234) == 1234 and template_value(noun, 2) == "2 bursts"  # a line, its words
    assert cell_text(Column("d", "delta"), 1 << 20) == "+1.00 MiB" == signed_bytes(1 << 20)
    assert cell_text(Column("b", "bytes"), None) == ""
    assert cell_text(Column("s", "location"), Place("a.py:1 f", [])) == "a.py:1 f"
    assert sparkline([1, 1]) == "──" and len(sparkline(list(range(100)))) == 12


def test_one_rank_row_builder_serves_the_command_and_both_screens():
    ranks = [{"rank": r, "peak_allocated": 10 + r, "peak_reserved": 20, "reserved": 20, "ooms": 0, "events": 1000,
              "outlier": r == 2, "file": f"/x/s.rank{r}.pickle"} for r in range(3)]
    table = rank_table(ranks, [{"ranks": [2]}])
    assert table.values("group") == ["", "", "outlier 1"] and table.values("outlier") == ["", "", "outlier"]
    assert [str(p) for p in table.values("file")] == [r["file"] for r in ranks]
    assert text_lines(Report("", [table]))[-1].endswith("/x/s.rank2.pickle  <- outlier")
    assert rank_ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"


def _typed(report: Report) -> None:
    """Every row has a cell per column, each of its column's kind."""
    for section in report.sections:
        if not isinstance(section, Table):
            continue
        for row in section.rows:
            assert len(row) == len(section.columns), section.key
            for column, value in zip(section.columns, row):
                if column.kind in ("bytes", "delta", "count", "event"):
                    assert isinstance(value, (int, float)) and not isinstance(value, bool), (section.key, column)
                elif column.kind == "location":
                    assert isinstance(value, Place), (section.key, column)


def _printed(*argv: str) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue().splitlines()


FILES = [pytest.param(p, id=p.name) for p in sample_files()[:4] + scenario_files()[:6]]


@pytest.mark.parametrize("path", FILES)
def test_reports_hold_typed_rows_and_the_commands_print_them(path):
    snapshot = cached(str(path))
    dev = snapshot.devices[snapshot.device_or_default(None)]
    oom = oom_report(dev.device, diagnose_ooms(snapshot, dev.device), LARGEST_SHOWN)
    cycles = cycles_report(find_cycles(snapshot, dev), BURSTS_SHOWN)
    leaks = leaks_report(find_leaks(snapshot, dev))
    view = view_at_end(snapshot, dev)
    same = diff_views(view, view)
    diff = diff_report(same, show_all=True)
    for report in (oom, cycles, leaks, diff):
        _typed(report)
    assert len(diff.table("sites").rows) == len(same.sites)  # --all: unchanged sites too
    assert text_lines(diff_report(same))[-1] == "no call site changed"
    device = ["--device", str(dev.device)]
    assert _printed("oom", str(path), *device) == text_lines(oom)
    assert _printed("cycles", str(path), *device) == text_lines(cycles)
    assert _printed("leaks", str(path), *device) == text_lines(leaks)
    # leaks: the growing table and the others hold every site of the analysis, in its order
    assert [p.label for t in ("growing", "sites") for p in leaks.table(t).values("site")] == \
        [s.label for s in find_leaks(snapshot, dev).sites]


def test_the_ranks_report_shortens_its_text_not_its_rows():
    gib = 1 << 30
    ranks = [{"rank": r, "peak_allocated": (20 + (8 if r % 10 == 3 else 0)) * gib, "peak_reserved": 30 * gib,
              "reserved": 30 * gib, "ooms": 0, "events": 100, "outlier": r % 10 == 3, "file": f"/x/r{r}"}
             for r in range(100)]
    outliers = [{"rank": r["rank"], "reasons": ["peak allocated +8 GiB"]} for r in ranks if r["outlier"]]
    result = {"ranks": ranks, "failed": [], "reference_rank": 0, "median_peak_allocated": 20 * gib,
              "outliers": outliers, "divergent_sites": []}
    report = ranks_report(result, limit=64)
    table = report.table("ranks")
    assert len(table.rows) == 11 and table.left_out == 89  # the outliers and the median rank
    assert "  ... 89 more ranks not listed (--json lists all, --tui browses them)" in text_lines(report)
    assert len(rank_table(ranks).rows) == 100


def test_the_leaks_text_shows_every_sites_live_bytes_so_they_add_up(capsys):
    # The growing sites' live bytes are in the text too, not only their growth: with the
    # table of the others they add up to the live total the text gives.
    from memtui.units import format_bytes
    from tests.conftest import SAMPLES

    path = SAMPLES / "scenarios" / "leak_loss_list_py.pickle.xz"
    capsys.readouterr()
    assert main(["--no-cache", "leaks", str(path), "--json"]) == 0
    import json

    result = json.loads(capsys.readouterr().out)
    growing = [site for site in result["sites"] if site["growing"]]
    assert growing
    assert main(["--no-cache", "leaks", str(path)]) == 0
    text = capsys.readouterr().out
    for site in growing:
        assert f"holds {format_bytes(site['bytes'])} in {site['count']:,}" in text, text


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in sample_files() + scenario_files()])
def test_the_leaks_summary_names_every_site_the_evidence_says_kept_more(path):
    # One line sums up which sites grew (the explorer's leaks screen and the MCP tool print it):
    # it must not say that nothing grew where the verdict's evidence names a site that kept more
    # in most of the run's parts (a buffer grown by copying: kind "rising", not "leak").
    from memtui.analysis.leaks import RISING
    from memtui.report.leaks import growth_summary

    snapshot = cached(str(path))
    for dev in snapshot.devices:
        report = find_leaks(snapshot, dev)
        summary = growth_summary(report)
        named = [s for s in report.sites if s.growing or s.kind == RISING]
        for site in named:
            assert site.label in summary, (site.label, summary)
        assert summary.startswith("no call site") == (not named), summary
        for line in report.evidence:
            if re.search(r"kept more in \d+ of|what it keeps rose in \d+ of", line.text):
                assert not summary.startswith("no call site"), (line.text, summary)


def test_the_leaks_summary_of_a_buffer_grown_by_copying_says_it_still_grew():
    from memtui.report.leaks import growth_summary
    from tests.conftest import SAMPLES

    snapshot = cached(str(SAMPLES / "oom_training.pickle.xz"))
    report = find_leaks(snapshot, snapshot.devices[0])
    assert "kept more in 4 of the run's 4 parts" in report.evidence[0].text  # the verdict's own words
    assert "still kept more when the trace ended" in growth_summary(report)
    assert "generate.py:75" in growth_summary(report)
