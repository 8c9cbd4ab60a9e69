"""The SOPS workflow of examples/sops works as its README says.

Covers: the example repository's encrypted Secret and env file build with the demo key
into the values committed (the user data keeps ``#cloud-config`` first) and render a VM
with no error, with the key and without (sealed); ``age`` itself opens their data keys;
``reconciler encrypt`` picks the ``.sops.yaml`` rule by path as sops does (a Secret's
values only, a whole env file) and writes files the build decrypts, refuses a rule it
cannot write (PGP) and a file already encrypted; ``diff`` of a changed encrypted value says
"Secret web-userdata changed (encrypted)" without the key (also under the daemon's
configuration, whose key file it does not read) and names it without "(encrypted)" with
it, and a file encrypted again with the same values is no change.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import cli, overlays, render, source
from reconciler.desired import desired_state
from reconciler.manifests import dump_documents, parse_yaml_value
from reconciler.manifests.sops.files import open_documents, open_file
from reconciler.manifests.sops.keys import SEALED, Keys
from reconciler.manifests.sops.sealing import Rule, encrypt_file
from reconciler.settings.host import HostConfig
from reconciler.source.files import DirView

if TYPE_CHECKING:
    from tests.helpers.git import GitRepo

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sops"
KEY = EXAMPLE / "demo-age.key"
USERDATA = """apiVersion: v1
kind: Secret
metadata:
  name: web-userdata
stringData:
  userdata: |
    #cloud-config
    password: {password}
"""


def demo_keys() -> Keys:
    return Keys.from_age_keys(KEY.read_text(), str(KEY))


def test_the_example_builds_with_the_demo_key_and_renders_sealed_without() -> None:
    built = {
        m.obj["metadata"]["name"]: m for m in overlays.build(DirView(EXAMPLE / "repo"), "", keys=demo_keys())
    }
    userdata = built["web-userdata"].obj["stringData"]["userdata"]
    assert userdata.startswith("#cloud-config\npassword: demo-only-change-me\n")
    (db,) = (m for name, m in built.items() if name.startswith("db-creds-"))
    assert base64.b64decode(db.obj["data"]["DB_PASSWORD"]) == b"demo-only-change-me-too"
    vm = built["web"].obj["spec"]["template"]["spec"]["volumes"]
    assert vm[1]["secret"]["secretName"] == db.obj["metadata"]["name"]  # the hashed name reached the VM


@pytest.mark.parametrize("sealed", [False, True])
def test_the_example_renders(git_repo: GitRepo, sealed: bool) -> None:
    shutil.copytree(EXAMPLE / "repo", git_repo.path, dirs_exist_ok=True)
    git_repo.commit("example")
    keys = SEALED if sealed else demo_keys()
    d = desired_state(
        source.read_snapshot(git_repo.path), "", HostConfig(), render.HostCaps.default(), keys=keys
    )
    assert d.errors == ()
    assert [r.name for r in d.rendered] == ["web"]
    assert "demo-only" not in d.rendered[0].xml


@pytest.mark.parametrize("name", ["web-userdata.yaml", "db.env"])
def test_age_opens_the_committed_data_keys(name: str) -> None:
    data = (EXAMPLE / "repo" / "secrets" / name).read_bytes()
    if name.endswith(".env"):
        line = next(x for x in data.decode().splitlines() if x.startswith("sops_age__list_0__map_enc="))
        enc = line.split("=", 1)[1].replace("\\n", "\n")
    else:
        enc = parse_yaml_value(data, name)[0]["sops"]["age"][0]["enc"]
    out = subprocess.run(["age", "-d", "-i", str(KEY)], input=enc.encode(), capture_output=True, check=True)
    assert len(out.stdout) == 32


def test_encrypt_takes_the_rule_of_sops_yaml_by_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE / "repo", repo)
    (repo / "secrets" / "new.yaml").write_text(USERDATA.format(password="fresh-one"))
    (repo / "secrets" / "new.env").write_text("TOKEN=fresh-two\n")
    assert cli.main(["encrypt", "-i", str(repo / "secrets" / "new.yaml")]) == 0
    assert cli.main(["encrypt", "-i", str(repo / "secrets" / "new.env")]) == 0
    yaml_text = (repo / "secrets" / "new.yaml").read_text()
    env_text = (repo / "secrets" / "new.env").read_text()
    assert "fresh" not in yaml_text + env_text
    assert "name: web-userdata" in yaml_text  # outside encrypted_regex: in clear
    assert "encrypted_regex: ^(data|stringData)$\n" in yaml_text  # as sops (go-yaml) writes it
    assert env_text.startswith("TOKEN=ENC[AES256_GCM,")
    (doc,) = open_documents(parse_yaml_value(yaml_text.encode(), "new.yaml"), demo_keys())
    assert doc["stringData"]["userdata"].endswith("password: fresh-one\n")
    assert open_file(env_text.encode(), "new.env", "new.env", demo_keys()) == b"TOKEN=fresh-two\n"
    assert cli.main(["encrypt", str(repo / "secrets" / "new.yaml")]) == 1
    assert "already encrypted with SOPS" in capsys.readouterr().err
    (repo / ".sops.yaml").write_text("creation_rules:\n  - pgp: 35C1A64CD7FC0AB6EB66756B2445463C3234ECE1\n")
    (repo / "secrets" / "other.yaml").write_text(USERDATA.format(password="x"))
    assert cli.main(["encrypt", str(repo / "secrets" / "other.yaml")]) == 1
    assert "has pgp: only age recipients are written here" in capsys.readouterr().err


def test_a_changed_encrypted_value_in_the_pr_diff(
    git_repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shutil.copytree(EXAMPLE / "repo", git_repo.path, dirs_exist_ok=True)
    git_repo.commit("example")
    secret = git_repo.path / "secrets" / "web-userdata.yaml"
    recipient = Keys.from_age_keys(KEY.read_text(), str(KEY)).recipients
    rule = Rule(age=recipient, encrypted_regex="^(data|stringData)$")

    def encrypted(text: str) -> bytes:
        from datetime import UTC, datetime

        return encrypt_file(text.encode(), "yaml", rule, datetime.now(UTC))

    (committed,) = open_documents(parse_yaml_value(secret.read_bytes(), "s"), demo_keys())
    secret.write_bytes(encrypted(dump_documents([committed])))
    base = git_repo.commit("the same values, encrypted again")
    secret.write_bytes(encrypted(USERDATA.format(password="a-new-password")))
    git_repo.commit("a new value")
    for var in ("SOPS_AGE_KEY", "SOPS_AGE_KEY_FILE", "GNUPGHOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    args = ["diff", "--repo", str(git_repo.path), "--base", base]
    assert cli.main(args) == 2
    out = capsys.readouterr().out
    assert "Secret web-userdata changed (encrypted): reaches vm/web" in out
    assert "secret default/web-userdata (encrypted)" in out
    # under the daemon's configuration, in CI: its key file is not there, and not needed
    config = tmp_path / "config.yaml"
    config.write_text(f"source: {{repo: {git_repo.path}}}\ndecryption: {{ageKeyFile: /etc/no/such.key}}\n")
    assert cli.main([*args, "--config", str(config)]) == 2
    assert "Secret web-userdata changed (encrypted): reaches vm/web" in capsys.readouterr().out
    private = tmp_path / "demo-age.key"
    private.write_text(KEY.read_text())
    private.chmod(0o600)
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(private))
    assert cli.main(args) == 2
    out = capsys.readouterr().out
    assert "Secret web-userdata changed: reaches vm/web" in out
    assert "(encrypted)" not in out
    assert "password" not in out
    assert cli.main(["diff", "--repo", str(git_repo.path), "--base", "HEAD~2", "--head", base]) == 0
    assert "Secret" not in capsys.readouterr().out  # encrypted again, same values: no change
