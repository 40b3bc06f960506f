"""The command line, the explorer and the MCP server offer the same analyses with the same options.

All three are made from the spec table (memtui.services.catalog); these tests read what each
front end actually offers (the argparse parser, the tool's input schema, the main screen's
keys) and hold it against the table, so no front end can drift from it.
"""

from __future__ import annotations

import argparse
import asyncio

import pytest

from memtui.cli import command_modules
from memtui.commands._analysis import spec_options
from memtui.errors import UsageError
from memtui.services.catalog import SPECS, explorer_specs
from memtui.services.spec import AnalysisSpec

ARGUMENTS = {"snapshot": ["x.pickle"], "pair": ["a.pickle", "b.pickle"], "rank_files": ["ranks/"]}


def parser_of(spec: AnalysisSpec) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"memtui {spec.name}", exit_on_error=False)
    command_modules()[spec.name].add_arguments(parser)
    return parser


def positional_values(spec: AnalysisSpec) -> list[str]:
    return ARGUMENTS[spec.subject] + ["7f0000000000_0" for o in spec.option_list("cli") if o.positional]


def parsed(spec: AnalysisSpec, *flags: str) -> argparse.Namespace:
    return parser_of(spec).parse_args(positional_values(spec) + list(flags))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_command_line_offers_every_option_with_its_default(spec):
    actions = {a.dest: a for a in parser_of(spec)._actions}
    for opt in spec.option_list("cli"):
        action = actions[opt.name]
        assert opt.positional or opt.cli_flag in action.option_strings
        if not opt.positional:
            assert action.default == opt.default, opt.name
        if opt.kind == "choice":
            assert tuple(action.choices) == opt.choices
    given = spec_options(spec, parsed(spec))  # no flags: the spec's defaults
    for opt in spec.option_list("cli"):
        if not opt.positional:
            assert getattr(given, opt.name) == opt.default, opt.name


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_command_line_accepts_exactly_the_bounds(spec):
    for opt in spec.option_list("cli"):
        if opt.kind not in ("int", "float"):
            continue
        for value in (opt.low, opt.high):
            if value is not None:
                options = spec_options(spec, parsed(spec, opt.cli_flag, str(value)))
                assert getattr(options, opt.name) == value
        for value, inside in ((opt.low, 1), (opt.high, -1)):
            if value is not None:
                with pytest.raises(UsageError, match=opt.cli_flag):
                    spec_options(spec, parsed(spec, opt.cli_flag, str(value - inside)))


def test_every_command_of_an_analysis_is_made_from_its_spec():
    commands = command_modules()
    for spec in SPECS:
        assert commands[spec.name].HELP == spec.help


def test_the_mcp_tools_are_the_specs_with_the_same_bounds():
    pytest.importorskip("mcp")
    from memtui.mcp.answers import PAGING
    from memtui.mcp.server import OTHER_TOOLS, build_server
    from memtui.mcp.store import SnapshotStore

    tools = {t.name: t for t in asyncio.run(build_server(SnapshotStore(["."], None)).list_tools())}
    assert set(tools) == {spec.tool_name for spec in SPECS} | set(OTHER_TOOLS)
    for spec in SPECS:
        properties = tools[spec.tool_name].input_schema["properties"]
        offered = spec.option_list("mcp")
        paging = {o.name for o in PAGING.get(spec.name, ())}
        assert {o.name for o in offered} <= set(properties)
        assert not paging & {o.name for o in offered}, "a paging option shadows an option of the analysis"
        for opt in offered:
            schema = properties[opt.name]
            assert schema.get("minimum") == opt.low and schema.get("maximum") == opt.high, (spec.name, opt.name)
            if opt.positional:
                assert opt.name in tools[spec.tool_name].input_schema["required"]
            else:
                assert schema.get("default") == opt.default, (spec.name, opt.name)
            if opt.kind == "choice":
                assert tuple(schema["enum"]) == opt.choices
            assert schema["description"] == opt.help


def test_the_explorer_keys_are_the_specs_keys():
    from memtui.tui.screens.main import SCREEN_KEYS
    from memtui.tui.views.key_table import ANALYSIS_KEYS

    assert [(key, action) for key, action, _, _ in ANALYSIS_KEYS] == \
        [(s.key, f"analysis('{s.name}')") for s in explorer_specs()]
    keys = [key for key, *_ in SCREEN_KEYS]
    for spec in explorer_specs():
        assert keys.count(spec.key) == 1, f"{spec.key} is bound more than once"
