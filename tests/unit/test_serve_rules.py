"""The rules that decide who may reach `memtui serve`, and the command's token options."""

from __future__ import annotations

import argparse

import pytest

from memtui.commands import serve
from memtui.errors import UsageError
from memtui.export.place import ExportPlace
from memtui.web.access import host_allowed, same_origin, split_host, token_matches

MINE = {"gpubox", "gpubox.cluster.example"}


@pytest.mark.parametrize("host", ["localhost:8000", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST", "10.1.2.3:80",
                                  "gpubox:8000", "gpubox.cluster.example", "app.localhost:8000"])
def test_addresses_and_own_names_are_answered(host):
    assert host_allowed(host, MINE)


@pytest.mark.parametrize("host", [None, "", "rebound.example:8000", "127.0.0.1.nip.io", "gpubox.evil.example",
                                  "localhost.evil.example", "[::1", "a b"])
def test_names_someone_else_could_point_here_are_refused(host):
    assert not host_allowed(host, MINE)


def test_split_host():
    assert split_host("[::1]:8000") == "::1" and split_host("Name:1") == "name" and split_host("") is None


@pytest.mark.parametrize(("origin", "host", "same"), [
    ("http://localhost:8000", "localhost:8000", True),
    ("http://127.0.0.1:8000", "127.0.0.1:8000", True),
    ("https://box", "box", True),
    ("http://box:80", "box", True),
    (None, "localhost:8000", True),  # not a browser: the token still decides
    ("http://localhost:8001", "localhost:8000", False),  # another port of the same host
    ("http://127.0.0.1:8000", "localhost:8000", False),
    ("http://evil.example", "localhost:8000", False),
    ("null", "localhost:8000", False),
    ("file://", "localhost:8000", False),
    ("http://localhost:99999", "localhost:8000", False),
])
def test_websocket_only_from_the_page_s_own_origin(origin, host, same):
    assert same_origin(origin, host) is same


def test_token_comparison():
    assert token_matches("abc", "abc")
    assert not token_matches("abd", "abc") and not token_matches(None, "abc") and not token_matches("", "abc")
    assert not token_matches("\udcff", "abc")  # a lone surrogate from a query string is just wrong


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    return parser.parse_args([*argv, "snap.pickle"])


def test_a_token_is_generated_by_default_and_the_flag_still_parses():
    default, flagged = serve.choose_token(parse()), serve.choose_token(parse("--token"))
    assert len(default) >= 32 and len(flagged) >= 32 and default != flagged
    assert parse("--token").snapshot == "snap.pickle"  # `--token SNAP` no longer takes the file for the token
    assert serve.choose_token(parse("--no-token")) is None


def test_token_file_gives_its_first_line(tmp_path):
    path = tmp_path / "token"
    path.write_text("s3cret \nignored\n")
    assert serve.choose_token(parse("--token-file", str(path))) == "s3cret"
    path.write_text("\n")
    with pytest.raises(UsageError, match="its first line is empty"):
        serve.choose_token(parse("--token-file", str(path)))
    with pytest.raises(UsageError, match="cannot read it"):
        serve.choose_token(parse("--token-file", str(tmp_path / "missing")))
    path.write_text("x" * 300)
    with pytest.raises(UsageError, match="at most 256"):
        serve.choose_token(parse("--token-file", str(path)))


def test_export_place_keeps_names_inside_its_folder(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link").symlink_to(tmp_path)
    place = ExportPlace.inside(str(tmp_path / "out"))
    assert place.resolve("a.msgpack") == str(tmp_path / "out" / "a.msgpack")
    assert place.resolve("sub/../b.msgpack") == str(tmp_path / "out" / "b.msgpack")
    for outside in ("../a.msgpack", "/etc/passwd", "link/a.msgpack", ".", ""):
        with pytest.raises(UsageError):
            place.resolve(outside)
    with pytest.raises(UsageError, match="not a directory"):
        ExportPlace.inside(str(tmp_path / "missing"))
    with pytest.raises(UsageError, match="--export-dir"):
        ExportPlace(off="export is off (--export-dir DIR)").resolve("a.msgpack")
