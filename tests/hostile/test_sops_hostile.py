"""Hostile SOPS files and patterns: linear-time regular expressions, metadata that is SOPS or an error.

Covers:
- patterns from input run in linear time (RE2, as Go's ``regexp`` in sops and kustomize):
  a committed ``encrypted_regex: ^(a+)+$`` over a key of thirty ``a``s and a ``!`` (a
  build with keys, sealed and ``validate``), a ``.sops.yaml`` ``path_regex`` of that
  shape at ``encrypt``, a kustomize patch target ``name`` and an ``images`` name of that
  shape: each ends at once, where Python's ``re`` would run for hours;
- a pattern that does not compile (``(``, ``\\Z`` which Python takes and Go refuses) is an
  error at its file:line (committed metadata, ``.sops.yaml``) or naming its flag
  (``--encrypted-regex``, ``--unencrypted-regex``), never a traceback;
- a document carrying a ``sops`` key (a manifest, or a generator's YAML or JSON file) is SOPS
  or an error at its line: ``sops: {}``,
  ``sops: []``, ``sops: null``, a MAC that is a number, a list, quoted garbage or missing,
  a ``sops`` key in a later document only; with keys, sealed (no key) and with none, the
  literal ``ENC[…]`` text never becomes the Secret's data.
In-process: the bound is pytest's hang guard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler import cli, overlays
from reconciler.errors import ManifestError
from reconciler.manifests.sops.keys import SEALED, Keys
from reconciler.source.files import DirView
from tests.helpers.sops import FLUX, age_key, flux_keys

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo

EVIL = "^(a+)+$"
EVIL_KEY = "a" * 30 + "!"
AGE_FILE = (FLUX / "algorithms" / "age.yaml").read_text()


def _tree(root: Path, secret: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "secret.yaml").write_text(secret)
    (root / "kustomization.yaml").write_text("resources: [secret.yaml]\n")
    return root


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


# -- linear-time patterns ---------------------------------------------------------------------


def test_a_committed_evil_encrypted_regex_ends_at_once(tmp_path: Path) -> None:
    """With keys, the values the pattern leaves clear fail the MAC; sealed, no MAC is
    checked and the file builds: either way at once."""
    text = AGE_FILE.replace("encrypted_regex: ^(data|stringData)$", f"encrypted_regex: '{EVIL}'")
    text = text.replace("stringData:\n", f"{EVIL_KEY}: x\nstringData:\n")
    root = _tree(tmp_path / "repo", text)
    with pytest.raises(ManifestError, match="MAC mismatch"):
        overlays.build(DirView(str(root)), "", keys=flux_keys())
    (secret,) = overlays.build(DirView(str(root)), "", keys=SEALED)
    assert secret.obj["metadata"]["name"] == "age"


def test_validate_with_an_evil_encrypted_regex_ends_at_once(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = AGE_FILE.replace("encrypted_regex: ^(data|stringData)$", f"encrypted_regex: '{EVIL}'")
    git_repo.write("secret.yaml", text.replace("stringData:\n", f"{EVIL_KEY}: x\nstringData:\n"))
    git_repo.write("kustomization.yaml", "resources: [secret.yaml]\n")
    git_repo.commit("evil")
    key = tmp_path / "age.txt"
    key.write_text((FLUX / "keys" / "age.txt").read_text())
    key.chmod(0o600)
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 1
    assert "secret.yaml:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("pattern", "words"), [("(", "missing ): ("), ("data\\Z", "invalid escape sequence: \\Z")]
)
def test_a_committed_pattern_that_does_not_compile_is_an_error_at_its_line(
    tmp_path: Path, pattern: str, words: str
) -> None:
    text = AGE_FILE.replace("encrypted_regex: ^(data|stringData)$", f"encrypted_regex: '{pattern}'")
    root = _tree(tmp_path / "repo", text)
    for keys in (flux_keys(), SEALED):
        with pytest.raises(ManifestError) as err:
            overlays.build(DirView(str(root)), "", keys=keys)
        assert (err.value.path, err.value.line) == ("secret.yaml", _line(text, "encrypted_regex"))
        assert "sops.encrypted_regex is not a regular expression" in err.value.message
        assert words in err.value.message


def test_a_sops_yaml_evil_path_regex_ends_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = age_key(tmp_path / "keys")
    (tmp_path / ".sops.yaml").write_text(
        f"creation_rules:\n  - path_regex: '{EVIL}'\n    age: {key.recipient}\n"
    )
    secret = tmp_path / f"{EVIL_KEY}.yaml"
    secret.write_text("stringData: {a: b}\n")
    assert cli.main(["encrypt", str(secret)]) == 1
    assert "no creation rule matches" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["path_regex", "encrypted_regex", "unencrypted_regex"])
def test_a_sops_yaml_pattern_that_does_not_compile_is_named_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    recipient = age_key(tmp_path / "keys").recipient
    config = tmp_path / ".sops.yaml"
    config.write_text(f"creation_rules:\n  - age: {recipient}\n    {key}: '('\n")
    secret = tmp_path / "s.yaml"
    secret.write_text("stringData: {a: b}\n")
    assert cli.main(["encrypt", str(secret)]) == 1
    err = capsys.readouterr().err
    assert f"{config}:3:" in err
    assert f"creation_rules[0].{key} is not a regular expression" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("flag", ["--encrypted-regex", "--unencrypted-regex"])
def test_a_flag_pattern_that_does_not_compile_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    recipient = age_key(tmp_path / "keys").recipient
    secret = tmp_path / "s.yaml"
    secret.write_text("stringData: {a: b}\n")
    assert cli.main(["encrypt", "--age", recipient, flag, "(", str(secret)]) == 1
    err = capsys.readouterr().err
    assert f"{flag}: not a regular expression" in err
    assert "missing )" in err


KUST_EVIL_TARGET = """\
resources: [cm.yaml]
patches:
  - target: {kind: ConfigMap, name: '(a+)+'}
    patch: |
      - op: add
        path: /data/b
        value: c
images:
  - name: '(a+)+'
    newTag: v2
"""
CONFIGMAP = f"""\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {EVIL_KEY.replace("!", "-b")}
data:
  image: {EVIL_KEY.replace("!", "/")}x
"""


def test_kustomize_patterns_from_input_end_at_once(tmp_path: Path) -> None:
    (tmp_path / "cm.yaml").write_text(CONFIGMAP)
    (tmp_path / "kustomization.yaml").write_text(KUST_EVIL_TARGET)
    (cm,) = overlays.build(DirView(str(tmp_path)), "")
    assert cm.obj["data"] == {"image": EVIL_KEY.replace("!", "/") + "x"}  # matched nothing


def test_a_kustomize_target_pattern_that_does_not_compile_is_an_error_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "cm.yaml").write_text(CONFIGMAP)
    (tmp_path / "kustomization.yaml").write_text(KUST_EVIL_TARGET.replace("(a+)+'}", "('}"))
    with pytest.raises(ManifestError) as err:
        overlays.build(DirView(str(tmp_path)), "")
    assert (err.value.path, err.value.line) == ("kustomization.yaml", 3)
    assert "invalid name pattern" in err.value.message


# -- a sops key is SOPS or an error -------------------------------------------------------------

MAC_LINE = next(line for line in AGE_FILE.splitlines() if line.startswith("  mac: "))
SECRET = AGE_FILE[: AGE_FILE.index("sops:\n")]
MALFORMED = {
    "empty-mapping": SECRET + "sops: {}\n",
    "list": SECRET + "sops: []\n",
    "null": SECRET + "sops:\n",
    "mac-number": AGE_FILE.replace(MAC_LINE, "  mac: 5"),
    "mac-list": AGE_FILE.replace(MAC_LINE, "  mac: [" + MAC_LINE.removeprefix("  mac: ") + "]"),
    "mac-garbage": AGE_FILE.replace(MAC_LINE, '  mac: "ENC[AES256_GCM,data:x"'),
    "mac-missing": AGE_FILE.replace(MAC_LINE + "\n", ""),
    "later-document": SECRET + "---\n" + SECRET.replace("name: age", "name: other") + "sops: {}\n",
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("keys", [flux_keys(), SEALED, None], ids=["keys", "sealed", "none"])
def test_a_sops_key_that_is_no_sops_metadata_is_an_error_at_its_line(
    tmp_path: Path, case: str, keys: Keys | None
) -> None:
    text = MALFORMED[case]
    root = _tree(tmp_path / "repo", text)
    with pytest.raises(ManifestError) as err:
        overlays.build(DirView(str(root)), "", keys=keys)
    assert err.value.path == "secret.yaml"
    sops_lines = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith("sops:")]
    mac_lines = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith("  mac:")]
    assert err.value.line in sops_lines + mac_lines
    assert "mHeXsmQ" not in err.value.message  # no ciphertext shown


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("creds.yaml", "password: ENC[AES256_GCM,data:mHeXsmQ=,iv:x,tag:y,type:str]\nsops: {}\n"),
        ("creds.json", '{"password": "ENC[AES256_GCM,data:mHeXsmQ=,iv:x,tag:y,type:str]", "sops": []}\n'),
    ],
)
@pytest.mark.parametrize("keys", [flux_keys(), SEALED], ids=["keys", "sealed"])
def test_a_generator_file_with_a_sops_key_is_sops_or_an_error(
    tmp_path: Path, name: str, text: str, keys: Keys
) -> None:
    (tmp_path / name).write_text(text)
    (tmp_path / "kustomization.yaml").write_text(f"secretGenerator:\n  - name: creds\n    files: [{name}]\n")
    with pytest.raises(ManifestError) as err:
        overlays.build(DirView(str(tmp_path)), "", keys=keys)
    assert err.value.path == name
    assert "sops metadata" in err.value.message
    assert "mHeXsmQ" not in err.value.message
