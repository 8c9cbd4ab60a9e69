"""cli/parser.py ``parse``: the one-command parser of start-up parses as the whole parser does.

Each command line below goes through ``parse`` and through the whole parser
(``build_parser().parse_args``); what comes out is compared: the parsed arguments (the
handler included), or the exit status and every word printed (usage errors, their
"did you mean", help, the version).
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from reconciler.cli.parser import _command_word, build_parser, parse

LINES = [
    ["diff", "--base", "HEAD~1", "--path", "overlays/prod"],
    ["diff", "main", "HEAD", "--format", "json", "--no-color"],
    ["--log-level", "debug", "diff", "--base", "main"],
    ["--log-format=json", "validate", "--path", "overlays/prod", "-j", "2"],
    ["build", "overlays/prod", "--ref", "HEAD"],
    ["expand", "overlays/prod"],
    ["render", "overlays/prod"],
    ["encrypt", "-i", "secret.yaml", "--age", "age1abc"],
    ["plan", "--path", "overlays/prod", "--connect", "test:///default"],
    ["apply", "--path", "overlays/prod", "--connect", "test:///default", "--yes"],
    ["status", "--connect", "test:///default"],
    ["run", "--config", "config.yaml"],
    ["show", "plan.json"],
    ["host-facts", "--connect", "test:///default"],
    ["import", "--connect", "test:///default"],
    ["images", "ls"],
    ["images"],
    # usage errors: the whole parser's words
    ["dif", "--base", "main"],
    ["diff", "--bse", "main"],
    ["diff", "--prun"],
    ["--log-level", "loud", "diff"],
    ["diff", "--format", "yaml", "--base", "main"],
    ["validate", "a", "b", "c"],
    ["--no-color"],
    ["--log-format", "diff"],
    ["--", "diff"],
    # help and the version: printed by the whole parser
    ["diff", "--help"],
    ["-h"],
    ["--version"],
]


def outcome(fn: Any, capsys: pytest.CaptureFixture[str]) -> tuple[Any, ...]:
    try:
        args = fn()
    except SystemExit as done:
        out = capsys.readouterr()
        return "exit", done.code, out.out, out.err
    assert isinstance(args, argparse.Namespace)
    return "parsed", vars(args), capsys.readouterr()


@pytest.mark.parametrize("line", LINES, ids=[" ".join(words) or "-" for words in LINES])
def test_parse_is_the_whole_parser(line: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    mine = outcome(lambda: parse(line)[1], capsys)
    whole = outcome(lambda: build_parser().parse_args(line), capsys)
    assert mine == whole


def test_the_command_word() -> None:
    assert _command_word(["--log-level", "debug", "diff", "x"]) == "diff"
    assert _command_word(["--log-format=json", "--no-color", "plan"]) == "plan"
    assert _command_word(["--log-format", "diff"]) is None
    assert _command_word([]) is None


def test_the_one_command_parser_has_one_command() -> None:
    parser = build_parser(only="diff")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == ["diff"]


def test_start_up_takes_the_one_command_parser() -> None:
    made = {
        " ".join(line): type(parse(line)[0]).__name__ for line in (["diff", "--base", "x"], ["--no-color"])
    }
    assert made == {"diff --base x": "_Partial", "--no-color": "_Parser"}
