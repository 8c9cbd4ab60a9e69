"""README.md and docs/ are true by test: every shell block they show runs.

Covers: every fenced ``sh`` block of README.md and ``docs/*.md`` either runs here or is
marked on the line above it with ``<!-- not run: REASON -->`` (a reason is given; a
marker stands only before a shell block); the blocks that run do, in the order the
files show them, against a copy of ``examples/repo`` laid out as ``make demo`` lays it
out (``/tmp/reconciler-demo/repo``, with an ``origin`` for the CI example), the daemon's
configuration of that copy standing for ``/etc/reconciler/config.yaml`` (also as
``$RECONCILER_CONFIG``), libvirt's test driver for ``qemu:///system``, and
``reconciler run`` given ``--once``; each command exits 0 or 2 (changes).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.git import GitRepo

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
BIN = Path(sys.executable).parent
SHELL = ("sh", "bash", "shell")
FENCE = re.compile(r"^```(\S*)\s*$")
MARK = re.compile(r"^<!-- not run: (.*) -->$")
URI = "test:///default"

pytestmark = pytest.mark.timeout(600)


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # of the opening fence
    lang: str
    text: str
    not_run: str | None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    out: list[Block] = []
    lines = doc.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        mark = MARK.match(lines[start - 1]) if start else None
        out.append(
            Block(doc, start + 1, lang, "\n".join(lines[start + 1 : end]), mark.group(1) if mark else None)
        )
        i = end + 1
    return out


def all_blocks() -> list[Block]:
    return [b for doc in DOCS for b in blocks(doc)]


def test_every_shell_block_runs_or_says_why() -> None:
    found = all_blocks()
    shell = [b for b in found if b.lang in SHELL]
    assert len(shell) >= 10, [b.where for b in shell]
    assert [b.where for b in found if b.not_run is not None and b.lang not in SHELL] == []
    assert [b.where for b in shell if b.not_run is not None and len(b.not_run.strip()) < 10] == []
    marked = sum(
        1 for doc in DOCS for line in doc.read_text().splitlines() if line.startswith("<!-- not run")
    )
    assert marked == sum(1 for b in shell if b.not_run is not None)  # no marker stands alone
    # Indented code is not a block the test finds: commands are shown fenced.
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            assert not re.match(r"^    (reconciler|\$R) ", line), f"{doc.name}:{n}: fence it as a sh block"


def logical_lines(text: str) -> list[str]:
    out: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    return [_without_comment(line) for line in out if line.strip() and not line.lstrip().startswith("#")]


def _without_comment(line: str) -> str:
    """The command without a trailing ``  # comment`` (a ``#`` outside quotes after a blank)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and i and line[i - 1] in " \t":
            return line[:i].rstrip()
    return line


def script(block: Block, subst: dict[str, str]) -> str:
    """The block as one bash script: each command must exit 0 or 2."""
    lines = []
    for line in logical_lines(block.text):
        for old, new in subst.items():
            line = line.replace(old, new)
        line = re.sub(r"\breconciler run ", "reconciler run --once ", line)
        quoted = line.replace("'", "'\\''")
        lines.append(
            f"{line} || {{ rc=$?; [ $rc -eq 2 ] || {{ echo 'exit '$rc': {quoted}' >&2; exit 1; }}; }}"
        )
    return "\n".join(lines) + "\n"


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """The demo's repository (its first commit, an origin), the daemon's configuration of it."""
    demo = tmp_path / "reconciler-demo"
    repo = GitRepo(demo / "repo")
    shutil.copytree(ROOT / "examples" / "repo", repo.path, dirs_exist_ok=True)
    repo.commit("Initial fleet")
    origin = tmp_path / "origin.git"
    repo.git("clone", "-q", "--bare", str(repo.path), str(origin))
    repo.git("remote", "add", "origin", str(origin))
    repo.git("fetch", "-q", "origin")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"source: {{repo: {repo.path}, path: overlays/prod}}\n"
        f"connect: {URI}\n"
        f"stateDir: {tmp_path / 'state'}\n"
        "listen: false\n"
    )
    env = {
        **{k: v for k, v in os.environ.items() if k != "LIBVIRT_DEFAULT_URI"},
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "RECONCILER_CONFIG": str(config),
        "GIT_AUTHOR_NAME": "docs",
        "GIT_AUTHOR_EMAIL": "docs@example.invalid",
        "GIT_COMMITTER_NAME": "docs",
        "GIT_COMMITTER_EMAIL": "docs@example.invalid",
    }
    # The daemon has reconciled once (as the systemd examples assume): status has a state.
    subprocess.run([str(BIN / "reconciler"), "run", "--once"], env=env, capture_output=True, check=True)
    return demo, config, env


def test_the_shell_blocks_run(sandbox: tuple[Path, Path, dict[str, str]]) -> None:
    demo, config, env = sandbox
    subst = {
        "/tmp/reconciler-demo": str(demo),
        "/etc/reconciler/config.yaml": str(config),
        ".venv/bin/reconciler": str(BIN / "reconciler"),
        "qemu:///system": URI,
    }
    failed = []
    ran = 0
    for block in all_blocks():
        if block.lang not in SHELL or block.not_run is not None:
            continue
        proc = subprocess.run(
            ["bash", "-c", script(block, subst)],
            cwd=demo / "repo",
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        ran += 1
        if proc.returncode != 0:
            failed.append(f"{block.where}: {proc.stderr.strip()[-1500:]}")
    assert not failed, "\n\n".join(failed)
    assert ran >= 6
