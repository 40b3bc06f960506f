"""memtui breakdown: text and JSON, every moment and grouping, user rules, errors."""

from __future__ import annotations

import json

import pytest

from memtui.analysis.categories import CATEGORIES
from memtui.cli import main
from memtui.commands import _common as command
from tests.conftest import SAMPLES
from tests.fixtures.opened import cached

TRAIN = SAMPLES / "scenarios" / "train_mlp_adam_all.pickle.xz"
TRAIN_PY = SAMPLES / "scenarios" / "train_mlp_adam_py.pickle.xz"
OOM = SAMPLES / "oom_training.pickle.xz"


@pytest.fixture(autouse=True)
def open_each_file_once(monkeypatch, tmp_path):
    monkeypatch.setattr(command, "load", lambda path, cache: cached(str(path)))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user rules unless a test writes them


def run(args: list[str], capsys) -> str:
    assert main(["breakdown", *map(str, args)]) == 0
    return capsys.readouterr().out


def run_json(args: list[str], capsys) -> dict:
    return json.loads(run([*args, "--json"], capsys))


def test_text_lists_each_category_with_its_call_sites(capsys):
    out = run([TRAIN], capsys)
    assert "the allocated peak" in out
    for name in ("parameters", "gradients", "optimizer_state", "cached free"):
        assert name in out
    assert "workloads.py:" in out and " _mlp\n" in out  # where the parameters were made (.cuda())


def test_json_has_the_fixed_keys_and_adds_up(capsys):
    out = run_json([TRAIN], capsys)
    assert {"device", "at", "allocated", "reserved", "cached_free", "categories", "sites"} <= set(out)
    assert out["at"] == {"event": out["at"]["event"], "moment": "peak"}
    assert list(out["categories"])[:7] == list(CATEGORIES)
    assert sum(out["categories"].values()) == out["allocated"]
    assert out["cached_free"] + out["pending_free"] + out["allocated"] == out["reserved"]
    assert all(s["category"] in CATEGORIES and s["bytes"] > 0 for s in out["sites"])


@pytest.mark.parametrize("at", ["end", "peak", "step:1", "step:last", "0", "100"])
def test_every_moment(at, capsys):
    out = run_json([TRAIN, "--at", at], capsys)
    assert sum(out["categories"].values()) == out["allocated"]
    if at.isdigit():
        assert out["at"] == {"event": int(at), "moment": "event"}


def test_the_oom_moment(capsys):
    out = run_json([OOM, "--at", "oom"], capsys)
    snapshot = cached(str(OOM))
    dev = snapshot.devices[out["device"]]
    assert out["at"]["event"] == int(dev.oom_indices()[0])


@pytest.mark.parametrize("at", ["soon", "oom", "step:99", "99999999"])
def test_a_moment_that_does_not_exist_is_one_line(at, capsys):
    assert main(["breakdown", str(TRAIN), "--at", at]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memtui: --at") and err.count("\n") == 1


def test_by_site_gives_each_site_its_category_mix(capsys):
    out = run_json([TRAIN_PY, "--by", "site"], capsys)
    assert out["sites"] and all(sum(s["categories"].values()) == s["bytes"] for s in out["sites"])
    text = run([TRAIN_PY, "--by", "both"], capsys)
    assert "call site" in text and "largest call sites" in text
    assert "(autograd thread) under backward() at" in text  # python stacks: the gradients' site, as leaks says


def test_by_tree_folds_the_live_set(capsys):
    out = run_json([TRAIN, "--by", "tree", "--min-share", "0"], capsys)
    root = out["tree"]
    assert root["bytes"] == out["allocated"]

    def check(node):
        assert sum(c["bytes"] for c in node["children"]) <= node["bytes"]
        assert sum(node["categories"].values()) == node["bytes"]
        for c in node["children"]:
            check(c)

    check(root)
    text = run([TRAIN, "--by", "tree"], capsys)
    assert "(all allocations)" in text and "└── " in text


def test_steps_give_each_steps_peak(capsys):
    out = run_json([TRAIN, "--steps"], capsys)
    steps = out["steps"]["steps"]
    assert len(steps) == 3
    for step in steps:
        assert step["first"] <= step["event"] <= step["last"]
        assert sum(step["categories"].values()) == step["allocated"]
    assert "at each step's peak" in run([TRAIN, "--steps"], capsys)


RULES = """
[[rule]]
category = "my_weights"
file = "workloads.py"
function = "_mlp"
"""


def test_user_rules_come_first_and_may_name_new_categories(tmp_path, capsys):
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    out = run_json([TRAIN, "--categories", rules], capsys)
    assert out["rules"] == str(rules)
    assert out["categories"]["parameters"] == 0
    assert out["categories"]["my_weights"] == 50356224
    assert sum(out["categories"].values()) == out["allocated"]
    assert "rules: " in run([TRAIN, "--categories", rules], capsys)


def test_the_default_rules_file_is_read(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "xdg" / "memtui"
    folder.mkdir(parents=True)
    (folder / "categories.toml").write_text(RULES)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert run_json([TRAIN], capsys)["categories"]["my_weights"] == 50356224


@pytest.mark.parametrize("text, says", [
    ("[[rule]]\ncategory = ", "not valid TOML"),
    ("[[rule]]\nfile = 'x.py'\n", "needs a category name"),
    ("[[rule]]\ncategory = 'x'\n", "matches nothing"),
    ("[[rule]]\ncategory = 'x'\nfunction = 'f'\nline = 3\n", "unknown key 'line'"),
    ("[rules]\n", "unknown key 'rules'"),
])
def test_bad_rules_are_one_line(tmp_path, capsys, text, says):
    rules = tmp_path / "rules.toml"
    rules.write_text(text)
    assert main(["breakdown", str(TRAIN), "--categories", str(rules)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_a_missing_rules_file_is_one_line(tmp_path, capsys):
    assert main(["breakdown", str(TRAIN), "--categories", str(tmp_path / "nope.toml")]) == 2
    assert "cannot read the category rules" in capsys.readouterr().err


def test_rules_match_metadata_and_frames(tmp_path):
    from memtui.analysis.categories import categorize
    from memtui.analysis.category_rules import parse_rules

    snapshot = cached(str(TRAIN_PY))
    dev = snapshot.devices[snapshot.default_device()]
    rules = parse_rules("[[rule]]\ncategory = 'step_state'\nframe = '*adam.py:1[78]? _init_group'\n")
    table = categorize(snapshot, dev, rules)
    mine = table.span_category == table.names.index("step_state")
    assert mine.sum() == 12  # exp_avg and exp_avg_sq of six parameters
    assert "your rule 1" in table.rule_text(int(table.span_rule[mine][0]))

    # memtui's own step markers stamp user_metadata: a rule can take one step's allocations.
    snapshot = cached(str(SAMPLES / "train_linear_adam.pickle.xz"))
    dev = snapshot.devices[snapshot.default_device()]
    rules = parse_rules("[[rule]]\ncategory = 'step_two'\nmetadata = 'memtui.step#2'\n")
    table = categorize(snapshot, dev, rules)
    mine = table.span_category == table.names.index("step_two")
    starts = table.spans.start[: table.n_lives][mine[: table.n_lives]]
    assert len(starts) and all(snapshot.strings[int(dev.trace.meta[a])] == "memtui.step#2" for a in starts)


@pytest.mark.parametrize("path", [p for p in sorted(SAMPLES.glob("*.pickle.xz"))], ids=lambda p: p.name)
def test_every_bundled_sample(path, capsys):
    for by in ("category", "site", "tree"):
        out = run_json([path, "--by", by, "--at", "end"], capsys)
        assert sum(out["categories"].values()) == out["allocated"]
    assert run([path, "--steps"], capsys).strip()


def test_the_unknown_note_is_true_of_rows_with_stacks(capsys):
    # context="state": the blocks have stacks, the trace's events none; the rows that hold
    # unknown memory have a call site, so "recorded without a stack" alone is false.
    path = SAMPLES / "recorded" / "context_state.pickle.xz"
    assert main(["breakdown", str(path), "--by", "site", "--no-cache"]) == 0
    out = capsys.readouterr().out
    note = next(line for line in out.splitlines() if line.startswith("unknown:"))
    assert "with a stack that no rule places" in note
