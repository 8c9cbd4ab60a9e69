"""Arguments that read the same in every command (test:///default, a real git repository).

Covers: ``diff BASE [HEAD]`` takes the refs as positional arguments, like ``git diff``,
and gives the same report as ``--base``/``--head``; a ref given twice, three refs or
none is a usage error (exit 1) that says so; ``host-facts -o`` is a format as in every
other command (``-o json`` prints the facts), ``--out FILE`` writes them, and ``-o
FILE`` is refused with a pointer to ``--out`` instead of writing a file named after the
format.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo

URI = "test:///default"


def two_commits(git_repo: GitRepo) -> None:
    git_repo.write("vms/refs-a.yaml", vm_yaml("refs-a"))
    git_repo.commit("a")
    git_repo.write("vms/refs-a.yaml", vm_yaml("refs-a", memory="128Mi"))
    git_repo.commit("more memory")


def test_diff_takes_positional_refs(git_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    two_commits(git_repo)
    repo = ["--repo", str(git_repo.path), "-o", "json"]
    outputs = []
    for refs in (
        ["--base", "HEAD~1"],
        ["HEAD~1"],
        ["HEAD~1", "HEAD"],
        ["--base", "HEAD~1", "--head", "HEAD"],
    ):
        assert cli.main(["diff", *refs, *repo]) == 2, refs
        outputs.append(json.loads(capsys.readouterr().out))
    assert all(o == outputs[0] for o in outputs)
    assert outputs[0]["summary"]["changed"] == 1
    assert cli.main(["diff", "HEAD", "HEAD~1", *repo]) == 2  # the other way round
    assert json.loads(capsys.readouterr().out)["base"]["ref"] == "HEAD"


@pytest.mark.parametrize(
    ("refs", "words"),
    [
        ([], "diff needs a base ref: `reconciler diff BASE [HEAD]`"),
        (["HEAD~1", "--base", "HEAD"], "give the base ref once"),
        (["HEAD~1", "HEAD", "--head", "HEAD"], "give the head ref once"),
        (["HEAD~1", "HEAD", "HEAD"], "diff takes at most two refs"),
    ],
)
def test_diff_refs_given_wrong_are_usage_errors(
    git_repo: GitRepo, capsys: pytest.CaptureFixture[str], refs: list[str], words: str
) -> None:
    two_commits(git_repo)
    assert cli.main(["diff", *refs, "--repo", str(git_repo.path)]) == 1
    assert words in capsys.readouterr().err


def test_host_facts_output_is_a_format_and_out_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["host-facts", "--connect", URI, "-o", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["caps"]["arch"] == "x86_64"
    assert not (tmp_path / "json").exists()
    assert cli.main(["host-facts", "--connect", URI, "--out", "h1.json"]) == 0
    assert capsys.readouterr().out == ""
    assert json.loads((tmp_path / "h1.json").read_text()) == printed
    with pytest.raises(SystemExit) as exit_:
        cli.main(["host-facts", "--connect", URI, "-o", "hosts/h2.json"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert (
        "'hosts/h2.json' is not an output format (json); to write the facts to a file: --out hosts/h2.json"
        in err
    )
    assert not (tmp_path / "hosts").exists()
