"""SOPS files in a build: decrypted where files enter it, with the keys the caller gives.

Covers: Flux's test trees build to the values Flux's tests expect (an encrypted patch
of a generated Secret, a Secret whose data value is a SOPS file) and Flux's own
``configMapGenerator`` of an encrypted file is refused (a ConfigMap is shown in clear);
a ``secretGenerator`` reads Flux's encrypted ``files`` and ``envs``; without keys an
encrypted file is an error at its line, and read sealed it builds with stand-ins, the
Secret marked sealed; an encrypted file holding a VirtualMachine, and an encrypted patch
of a VM, are refused; a generated Secret's name hash is the same with keys and without,
and is not kustomize's hash of the values (no digest of a value in a name); a key file
changed under a warm cache is not served what the old key decrypted; ``build`` masks
Secret values unless ``--show-secrets``; ``validate`` reads encrypted Secrets sealed
without a key; the daemon's ``decryption.ageKeyFile`` must be mode 0600.
"""

from __future__ import annotations

import base64
import shutil
from typing import TYPE_CHECKING

import pytest

from reconciler import cli, overlays
from reconciler.config.daemon_file import parse_config
from reconciler.errors import ConfigError, ManifestError
from reconciler.manifests.sops.keys import SEALED, Keys
from reconciler.overlays.generators import content_hash
from reconciler.source.files import DirView
from tests.helpers.sops import FLUX, age_key, encrypt, flux_keys

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo

SECRET = """apiVersion: v1
kind: Secret
metadata:
  name: db-creds
stringData:
  password: hunter2-from-git
"""
VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory: {guest: 64Mi}
        devices:
          disks:
            - name: cidata
              disk: {bus: virtio}
      volumes:
        - name: cidata
          secret: {secretName: db-creds}
"""


def built(root: Path, entry: str, keys: Keys | None) -> dict[str, dict[str, object]]:
    return {m.obj["metadata"]["name"]: m.obj for m in overlays.build(DirView(root), entry, keys=keys)}


def test_flux_trees_build_to_the_values_flux_expects() -> None:
    keys = flux_keys()
    patched = built(FLUX, "patches", keys)["patches-secret"]
    assert patched["stringData"] == {"key": "merge1", "merge2": "merge2"}
    inside = built(FLUX, "inside", keys)["inside-secret"]
    assert base64.b64decode(inside["data"]["key"]) == b"value"  # type: ignore[index]


@pytest.mark.parametrize("tree", ["envs", "files"])
def test_an_encrypted_file_in_a_configmap_generator_is_refused(tree: str) -> None:
    with pytest.raises(ManifestError) as err:
        built(FLUX, tree, flux_keys())
    assert err.value.path == f"{tree}/kustomization.yaml"
    assert "only a secretGenerator decrypts a file" in err.value.message


def test_a_secret_generator_reads_encrypted_files_and_env_files(tmp_path: Path) -> None:
    shutil.copy(FLUX / "files" / "file.txt", tmp_path / "file.txt")
    shutil.copy(FLUX / "envs" / "env.env", tmp_path / "env.env")
    (tmp_path / "kustomization.yaml").write_text(
        "secretGenerator:\n"
        "  - {name: files, files: [key=file.txt]}\n"
        "  - {name: envs, envs: [env.env], literals: [other=plain]}\n"
    )
    out = overlays.build(DirView(tmp_path), "", keys=flux_keys())
    data = {m.obj["metadata"]["name"].rsplit("-", 1)[0]: m.obj["data"] for m in out}
    assert base64.b64decode(data["files"]["key"]) == b"value"
    assert base64.b64decode(data["envs"]["key"]) == b"value"
    assert base64.b64decode(data["envs"]["other"]) == b"plain"
    assert not any(m.sealed for m in out)


def test_without_keys_an_encrypted_file_is_an_error_at_its_line_and_sealed_it_builds(tmp_path: Path) -> None:
    key = age_key(tmp_path / "keys")
    (tmp_path / "secret.yaml").write_bytes(encrypt(SECRET, key.recipient))
    (tmp_path / "vm.yaml").write_text(VM)
    (tmp_path / "kustomization.yaml").write_text("resources: [vm.yaml, secret.yaml]\n")
    with pytest.raises(ManifestError) as err:
        built(tmp_path, "", None)
    assert (err.value.path, err.value.line) == ("secret.yaml", 7)  # the sops: line
    assert "no decryption key is given" in err.value.message
    sealed = overlays.build(DirView(tmp_path), "", keys=SEALED)
    secret = next(m for m in sealed if m.kind == "Secret")
    assert secret.sealed
    assert secret.obj["stringData"]["password"] != "hunter2-from-git"
    clear = built(tmp_path, "", key.keys())["db-creds"]
    assert clear["stringData"] == {"password": "hunter2-from-git"}
    assert "sops" not in clear


def test_annotations_read_as_text_are_macd_as_sops_reads_them(tmp_path: Path) -> None:
    """The build keeps annotation values as their text (``5``, ``true``); sops' MAC took
    their YAML types: the file verifies."""
    key = age_key(tmp_path / "keys")
    annotated = SECRET.replace(
        "  name: db-creds\n", "  name: db-creds\n  annotations: {n: 5, flag: true, r: 1.50}\n"
    )
    (tmp_path / "secret.yaml").write_bytes(encrypt(annotated, key.recipient))
    (tmp_path / "kustomization.yaml").write_text("resources: [secret.yaml]\n")
    secret = built(tmp_path, "", key.keys())["db-creds"]
    assert secret["metadata"]["annotations"] == {"n": "5", "flag": "true", "r": "1.5"}  # type: ignore[index]


def test_only_secrets_may_be_encrypted_or_patched_encrypted(tmp_path: Path) -> None:
    key = age_key(tmp_path / "keys")
    (tmp_path / "vm.yaml").write_bytes(encrypt(VM, key.recipient, regex="^spec$"))
    (tmp_path / "kustomization.yaml").write_text("resources: [vm.yaml]\n")
    with pytest.raises(ManifestError, match="may hold Secrets only") as err:
        built(tmp_path, "", key.keys())
    assert (err.value.path, err.value.line) == ("vm.yaml", 1)
    (tmp_path / "vm.yaml").write_text(VM)
    patch = "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: web}\nspec: {runStrategy: Always}\n"
    (tmp_path / "patch.yaml").write_bytes(encrypt(patch, key.recipient, regex="^spec$"))
    (tmp_path / "kustomization.yaml").write_text("resources: [vm.yaml]\npatches: [{path: patch.yaml}]\n")
    with pytest.raises(ManifestError, match="may change Secrets only") as err:
        built(tmp_path, "", key.keys())
    assert (err.value.path, err.value.line) == ("kustomization.yaml", 2)


def test_a_generated_secret_is_named_from_its_ciphertext_not_its_values(tmp_path: Path) -> None:
    key = age_key(tmp_path / "keys")
    (tmp_path / "userdata").write_bytes(encrypt(b"#cloud-config\npassword: x\n", key.recipient, "binary"))
    (tmp_path / "kustomization.yaml").write_text("secretGenerator:\n  - {name: cloud, files: [userdata]}\n")
    (with_keys,) = overlays.build(DirView(tmp_path), "", keys=key.keys())
    (sealed,) = overlays.build(DirView(tmp_path), "", keys=SEALED)
    assert with_keys.obj["metadata"]["name"] == sealed.obj["metadata"]["name"]
    plain_hash = content_hash({**with_keys.obj, "metadata": {"name": "cloud"}})
    assert not with_keys.obj["metadata"]["name"].endswith(plain_hash)
    assert sealed.sealed
    assert not with_keys.sealed


def test_a_warm_cache_never_serves_what_other_keys_decrypted(tmp_path: Path) -> None:
    key = age_key(tmp_path / "keys")
    other = age_key(tmp_path / "other")
    (tmp_path / "secret.yaml").write_bytes(encrypt(SECRET, key.recipient))
    (tmp_path / "kustomization.yaml").write_text("resources: [secret.yaml]\n")
    cache = overlays.OverlayCache()
    view = DirView(tmp_path)
    assert (
        overlays.build(view, "", cache, keys=key.keys())[0].obj["stringData"]["password"]
        == "hunter2-from-git"
    )
    with pytest.raises(ManifestError, match="none of the host's keys"):
        overlays.build(view, "", cache, keys=other.keys())


def test_build_masks_secret_values_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = age_key(tmp_path / "keys")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "secret.yaml").write_bytes(encrypt(SECRET, key.recipient))
    (repo / "plain.yaml").write_text(
        SECRET.replace("db-creds", "plain").replace("hunter2-from-git", "plain-pw")
    )
    (repo / "kustomization.yaml").write_text(
        "resources: [secret.yaml, plain.yaml]\nsecretGenerator:\n  - {name: gen, literals: [k=literal-pw]}\n"
    )
    monkeypatch.delenv("SOPS_AGE_KEY", raising=False)
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key.path))
    assert cli.main(["build", "--root", str(repo), str(repo)]) == 0
    masked = capsys.readouterr().out
    for value in ("hunter2-from-git", "plain-pw", "literal-pw", base64.b64encode(b"literal-pw").decode()):
        assert value not in masked
    assert masked.count("'**SECRET**'") == 2
    assert masked.count(base64.b64encode(b"**SECRET**").decode()) == 1
    assert cli.main(["build", "--show-secrets", "--root", str(repo), str(repo)]) == 0
    shown = capsys.readouterr().out
    assert "hunter2-from-git" in shown
    assert "plain-pw" in shown


def test_validate_reads_encrypted_secrets_sealed_without_a_key(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = age_key(tmp_path / "keys")
    (git_repo.path / "secret.yaml").write_bytes(encrypt(SECRET, key.recipient))
    git_repo.write("vm.yaml", VM)
    git_repo.write("kustomization.yaml", "resources: [vm.yaml, secret.yaml]\n")
    git_repo.commit("encrypted")
    for var in ("SOPS_AGE_KEY", "SOPS_AGE_KEY_FILE", "GNUPGHOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.config/sops/age/keys.txt
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 0
    assert "valid, 1 VM" in capsys.readouterr().out
    (git_repo.path / "secret.yaml").write_bytes(
        encrypt(SECRET, key.recipient).replace(b"db-creds", b"db-credz")
    )
    git_repo.commit("tampered")
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key.path))
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 1
    out = capsys.readouterr()
    assert "secret.yaml:" in out.out
    assert "MAC mismatch" in out.out
    assert "hunter2" not in out.out + out.err


def test_the_daemon_age_key_file_must_be_its_owners_alone(tmp_path: Path) -> None:
    key = age_key(tmp_path / "keys")
    config = tmp_path / "config.yaml"
    text = f"source: {{repo: {tmp_path / 'repo'}}}\ndecryption:\n  ageKeyFile: {key.path}\n"
    config.write_text(text)
    loaded = parse_config(text.encode(), str(config))
    assert loaded.keys is not None
    assert loaded.keys.recipients == (key.recipient,)
    assert "AGE-SECRET" not in repr(loaded)
    key.path.chmod(0o640)
    with pytest.raises(ConfigError) as err:
        parse_config(text.encode(), str(config))
    assert (err.value.path, err.value.line) == (str(config), 3)
    assert "mode 0640 lets others read it: chmod 600" in err.value.message
    key.path.chmod(0o600)
    inside = text.replace(f"repo: {tmp_path / 'repo'}", f"repo: {tmp_path}")  # the key in the checkout
    with pytest.raises(
        ConfigError, match="is inside the repository: keys come from the host, never from git"
    ):
        parse_config(inside.encode(), str(config))
