"""What the daemon tells the operator: git's errors, journald priorities, interrupted applies.

Covers: a failed fetch or clone keeps all of git's stderr (bounded, control characters
escaped), not only its last line; JSON log lines start with their syslog priority
(``<3>`` for an error) when stderr is the journald stream systemd names in
``JOURNAL_STREAM``, and are plain JSON anywhere else; the SIGTERM state message names
the VMs an interrupted apply did not reach once, instead of repeating the sentence
per VM.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

import pytest
import structlog

from reconciler.errors import SourceError
from reconciler.log import setup_logging
from reconciler.model import VMKey
from reconciler.model.changes import Action, Change
from reconciler.source.mirror import MAX_STDERR, GitSource, git_stderr
from reconciler.source.settings import SourceConfig
from reconciler.wording.problems import summarize
from tests.helpers.plans import because

if TYPE_CHECKING:
    from pathlib import Path


def test_fetch_error_keeps_all_of_git_stderr(tmp_path: Path) -> None:
    src = GitSource(SourceConfig(f"file://{tmp_path}/missing.git"), str(tmp_path / "state"))
    with pytest.raises(SourceError) as err:
        src.fetch()
    text = str(err.value)
    assert "does not appear to be a git repository" in text  # git's first line
    assert "Could not read from remote repository" in text
    assert "the repository exists" in text  # and its last
    assert "\n" not in text


def test_git_stderr_is_bounded_and_escaped() -> None:
    lines = ["remote: \x1b[31mhello\x1b[0m", *(f"noise {i}" for i in range(2000)), "fatal: the verdict"]
    text = git_stderr("\n".join(lines))
    assert len(text) <= MAX_STDERR + 40
    assert text.startswith("remote: \\x1b[31mhello\\x1b[0m | noise 0")
    assert text.endswith("fatal: the verdict")
    assert "characters cut" in text
    assert "\x1b" not in text


def log_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: str | None) -> list[str]:
    """Log one line per level with stderr on a file; ``journal``: JOURNAL_STREAM, "" for the file's."""
    path = tmp_path / "journal"
    with path.open("w") as stream:
        st = os.fstat(stream.fileno())
        monkeypatch.setattr(sys, "stderr", stream)
        monkeypatch.setenv("JOURNAL_STREAM", journal or f"{st.st_dev}:{st.st_ino}")
        try:
            setup_logging("json", "debug")
            log = structlog.get_logger("test")
            log.error("broken", subject="vm/web")
            log.warning("careful")
            log.info("fine")
            log.debug("detail")
        finally:
            structlog.reset_defaults()
    return path.read_text().splitlines()


def test_json_lines_carry_a_journald_priority(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = log_lines(tmp_path, monkeypatch, journal="")
    assert [line[:3] for line in lines] == ["<3>", "<4>", "<6>", "<7>"]
    assert json.loads(lines[0][3:])["event"] == "broken"


def test_json_lines_elsewhere_are_plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = log_lines(tmp_path, monkeypatch, journal="0:0")  # systemd's stream, but stderr was redirected
    assert [json.loads(line)["level"] for line in lines] == ["error", "warning", "info", "debug"]


def test_interrupted_changes_are_named_once() -> None:
    from reconciler.errors import HypervisorError
    from reconciler.host.apply import failure, untried

    def change(name: str) -> Change:
        return Change(VMKey.from_domain(name), Action.CREATE, because("not defined"))

    results = [
        failure(change("a"), HypervisorError("define failed: boom", subject="vm/a"), False),
        *(untried(change(f"n{i}"), "interrupted before this change") for i in range(7)),
    ]
    message = summarize(results)
    assert message.count("interrupted before this change") == 1
    assert "interrupted before this change (7 VMs: vm/n0, vm/n1, vm/n2 and 4 more)" in message
