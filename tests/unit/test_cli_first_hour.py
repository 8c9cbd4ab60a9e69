"""The CLI as a newcomer meets it: flags spelled out, files named, configs honoured.

Covers: no parser or subparser takes an abbreviation (every subcommand walked;
``plan --prun`` is refused with "did you mean --prune?", never read as ``--prune``); a
missing ``render -f`` file, plan file or export is named with the reason, never
``[Errno 2]``; ``plan --out`` into a missing directory is refused before anything is
planned; ``validate --config`` reads the config's ``source.repo`` and ``source.path``
(from another directory); a config outside the repository is read, not called a
symlink; a committed symlink out of the repository still is one; ``plan --config``
with a remote source (a ``file://`` URL) fetches it as the daemon does and plans;
``build --show-secrets`` without a key is an error at the encrypted file's line, never
stand-ins; a world-readable ``SOPS_AGE_KEY_FILE`` is refused by the CLI as by the
daemon; ``import --help`` examples use ``--output-dir`` (``--output`` is the format).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.cli.parser import build_parser
from tests.helpers.manifests import vm_yaml
from tests.helpers.sops import age_key, encrypt

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo


def _parsers() -> list[argparse.ArgumentParser]:
    root = build_parser()
    out = [root]
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            out.extend(action.choices.values())
    return out


def test_no_parser_takes_an_abbreviation(capsys: pytest.CaptureFixture[str]) -> None:
    parsers = _parsers()
    assert len(parsers) > 10
    assert all(p.allow_abbrev is False for p in parsers)
    for p in parsers[1:]:  # every long flag of every subcommand, cut short by one letter
        for action in p._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and len(flag) > 4:
                    with pytest.raises(SystemExit) as exit_:
                        p.parse_args([flag[:-1]])
                    assert exit_.value.code == 1, (p.prog, flag)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli.main(["plan", "--prun"])
    assert "unrecognized arguments: --prun; did you mean --prune?" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "-f", "{missing}"],
        ["apply", "{missing}"],
        ["import", "--from-kubevirt", "{missing}", "--output-dir", "{tmp}/out"],
    ],
    ids=["render-f", "apply-plan-file", "import-export"],
)
def test_a_missing_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    missing = tmp_path / "no-such-file.yaml"
    assert cli.main([a.format(missing=missing, tmp=tmp_path) for a in argv]) == 1
    err = capsys.readouterr().err
    assert f"{missing}: No such file or directory" in err
    assert "Errno" not in err


def test_plan_out_into_a_missing_directory_is_refused_before_planning(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git_repo.write("vm.yaml", vm_yaml("web"))
    git_repo.commit()
    out = tmp_path / "no" / "such" / "plan.json"
    argv = ["plan", "--repo", str(git_repo.path), "--connect", "test:///default", "--out", str(out)]
    assert cli.main(argv) == 1
    captured = capsys.readouterr()
    assert f"the directory {out.parent} does not exist" in captured.err
    assert "plan:" not in captured.out  # nothing was planned
    assert not out.parent.exists()


def _config(path: Path, repo: str, entry: str) -> Path:
    path.write_text(
        f"source:\n  repo: {repo}\n  path: {entry}\nconnect: test:///default\n"
        f"stateDir: {path.parent / 'state'}\nlisten: false\n"
    )
    return path


def test_validate_config_reads_its_source(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo.write("prod/vm.yaml", vm_yaml("web"))
    git_repo.write("prod/kustomization.yaml", "resources: [vm.yaml]\n")
    git_repo.write("other/vm.yaml", "not: [a, vm")
    git_repo.commit()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the repository: the config says where it is
    config = _config(tmp_path / "config.yaml", str(git_repo.path), "prod")
    assert cli.main(["validate", "--config", str(config)]) == 0
    assert "entry prod: valid, 1 VM" in capsys.readouterr().out


def test_a_config_outside_the_repository_is_no_symlink(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo.write("vm.yaml", vm_yaml("web"))
    git_repo.commit()
    outside = tmp_path / "etc"
    outside.mkdir()
    config = _config(outside / "config.yaml", str(git_repo.path), "")
    monkeypatch.chdir(git_repo.path)  # inside the repository, the config given as ../etc/...
    relative = f"../etc/{config.name}"
    assert (git_repo.path / relative).resolve() == config.resolve()
    assert cli.main(["validate", "--config", relative]) == 0
    assert "symlink" not in capsys.readouterr().err
    (git_repo.path / "hosts.yaml").symlink_to(config)  # a committed link out is still refused
    assert cli.main(["validate", "--config", "hosts.yaml"]) == 1
    assert "a symlink leading outside the repository" in capsys.readouterr().err


def test_plan_config_with_a_remote_source_fetches_it(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo.write("prod/vm.yaml", vm_yaml("remote-web"))
    git_repo.write("prod/kustomization.yaml", "resources: [vm.yaml]\n")
    git_repo.commit()
    monkeypatch.chdir(tmp_path)  # no repository here: ".: not a git repository" before
    config = _config(tmp_path / "config.yaml", f"file://{git_repo.path}", "prod")
    assert cli.main(["plan", "--config", str(config)]) == 2
    out = capsys.readouterr().out
    assert "+ vm/remote-web" in out or "vm/remote-web" in out
    assert "not a git repository" not in out


def test_build_show_secrets_without_a_key_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = age_key(tmp_path / "keys")
    repo = tmp_path / "repo"
    repo.mkdir()
    secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: hunter2-value\n"
    (repo / "secret.yaml").write_bytes(encrypt(secret, key.recipient))
    (repo / "kustomization.yaml").write_text("resources: [secret.yaml]\n")
    for var in ("SOPS_AGE_KEY", "SOPS_AGE_KEY_FILE", "GNUPGHOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    assert cli.main(["build", "--show-secrets", "--root", str(repo), str(repo)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "secret.yaml:" in captured.err
    assert "no decryption key is given" in captured.err
    assert cli.main(["build", "--root", str(repo), str(repo)]) == 0  # masked: no key needed
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key.path))
    capsys.readouterr()
    assert cli.main(["build", "--show-secrets", "--root", str(repo), str(repo)]) == 0
    assert "hunter2-value" in capsys.readouterr().out


def test_a_world_readable_key_file_is_refused_by_the_cli(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = age_key(tmp_path / "keys")
    key.path.chmod(0o644)
    git_repo.write("vm.yaml", vm_yaml("web"))
    git_repo.commit()
    monkeypatch.delenv("SOPS_AGE_KEY", raising=False)
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key.path))
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 1
    assert f"mode 0644 lets others read it: chmod 600 {key.path}" in capsys.readouterr().err


def test_import_help_examples_use_the_output_dir_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["import", "--help"])
    text = capsys.readouterr().out
    examples = [line for line in text.splitlines() if line.strip().startswith("reconciler import")]
    assert len(examples) == 4
    assert all("--output-dir " in line and "--output " not in line for line in examples)
