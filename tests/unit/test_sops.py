"""SOPS files read as Flux reads them, written as sops writes them, and refused when touched.

Covers: the files Flux's kustomize-controller tests decrypt (produced by the sops tool,
pinned in tests/data/sops/flux) give the values Flux's tests expect: a Secret manifest,
patches, a dotenv file, a binary file, a Secret whose data value is a whole SOPS file, a
second key (age, and PGP through gpg with Flux's test key); a post-quantum recipient and
a Vault one are refused by name, at the file's line; files we encrypt decrypt again
(YAML, JSON, dotenv, binary; MAC-only-encrypted; several documents) and ``age`` itself
opens their data key; every tampering (a value, two values swapped, a key renamed or
added, the MAC, lastmodified, the recipient) is an error at the file and line of what
was touched, naming no value; sealed reading (no keys) gives stand-ins from the
ciphertext and still checks the structure; a key file's bad line is named, not shown;
``Keys`` never prints or pickles its material.
"""

from __future__ import annotations

import base64
import pickle
import re
import subprocess
from typing import TYPE_CHECKING

import pytest

from reconciler.errors import ManifestError
from reconciler.manifests import parse_yaml_value
from reconciler.manifests.sops import Problem
from reconciler.manifests.sops.files import (
    encrypted_documents,
    file_format,
    open_documents,
    open_file,
    problem_at,
)
from reconciler.manifests.sops.keys import SEALED, Keys
from reconciler.manifests.sops.sealing import Rule, encrypt_file, seal_value
from reconciler.manifests.sops.values import Walk, go_float
from tests.helpers.sops import FLUX, age_key, encrypt, flux_keys

if TYPE_CHECKING:
    from pathlib import Path

SECRET = """apiVersion: v1
kind: Secret
metadata:
  name: db-creds
  labels: {tier: db}
type: Opaque
stringData:
  userdata: |
    #cloud-config
    password: hunter2-in-the-value
  port: 5432
  ratio: 1.5
  enabled: true
  empty: ""
data:
  token: c2VjcmV0LXRva2VuLXZhbHVl
"""


def documents(data: bytes, keys: Keys, path: str = "secret.yaml") -> list[object]:
    """The documents of an encrypted YAML file in clear, or its error as a ManifestError."""
    docs = parse_yaml_value(data, path)
    try:
        return open_documents(docs, keys)
    except Problem as err:
        raise problem_at(err, data, path, [1]) from err


def line_of(data: bytes, needle: str) -> int:
    return next(n for n, line in enumerate(data.decode().splitlines(), 1) if needle in line)


# -- Flux's files ------------------------------------------------------------------------------


def test_flux_secret_manifest_and_patches_decrypt_to_the_values_flux_expects() -> None:
    keys = flux_keys()
    (age,) = documents((FLUX / "algorithms" / "age.yaml").read_bytes(), keys)
    assert age == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "age"},
        "stringData": {"key": "value"},
    }
    (merge1,) = documents((FLUX / "patches" / "merge1.yaml").read_bytes(), keys)
    (merge2,) = documents((FLUX / "patches" / "merge2.yaml").read_bytes(), keys)
    assert merge1["stringData"] == {"key": "merge1"}  # type: ignore[index]
    assert merge2["stringData"] == {"merge2": "merge2"}  # type: ignore[index]
    (glob,) = documents((FLUX / "global" / "secret.yaml").read_bytes(), flux_keys("age-global.txt"))
    assert glob["stringData"] == {"key": "global-value"}  # type: ignore[index]


def test_flux_dotenv_binary_and_inside_files_decrypt() -> None:
    keys = flux_keys()
    env = (FLUX / "envs" / "env.env").read_bytes()
    assert file_format(env, "env.env") == "dotenv"
    assert open_file(env, "envs/env.env", "env.env", keys) == b"key=value\n"
    assert open_file((FLUX / "component" / "env.env").read_bytes(), "c", "env.env", keys) == b"key=value\n"
    txt = (FLUX / "files" / "file.txt").read_bytes()
    assert file_format(txt, "key") == "binary"
    assert open_file(txt, "files/file.txt", "key", keys) == b"value"
    (inside,) = parse_yaml_value((FLUX / "inside" / "secret.yaml").read_bytes(), "inside/secret.yaml")
    raw = base64.b64decode(inside["data"]["key"])
    assert open_file(raw, "inside/secret.yaml", "key", keys) == b"value"


def test_flux_pgp_file_opens_through_gpg_with_the_keyring(tmp_path: Path) -> None:
    from reconciler.config.keys import gpg_decrypter

    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    subprocess.run(
        ["gpg", "--batch", "--quiet", "--homedir", str(home), "--import", str(FLUX / "keys" / "pgp.asc")],
        check=True,
        capture_output=True,
    )
    try:
        pgp = gpg_decrypter(str(home))
        assert pgp is not None
        keys = Keys(pgp=pgp)
        (doc,) = documents((FLUX / "algorithms" / "pgp.yaml").read_bytes(), keys, "algorithms/pgp.yaml")
        assert doc["stringData"] == {"key": "value"}  # type: ignore[index]
        without = Keys(flux_keys()._age)  # age only: the PGP recipient is named
        with pytest.raises(
            ManifestError, match=r"encrypted for PGP 35C1A64CD7FC0AB6EB66756B2445463C3234ECE1"
        ):
            documents((FLUX / "algorithms" / "pgp.yaml").read_bytes(), without, "algorithms/pgp.yaml")
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False, capture_output=True)


def test_a_recipient_we_cannot_open_is_named_at_the_file_line() -> None:
    """age's post-quantum recipients (age1pq1…) are not among the identities we hold."""
    data = (FLUX / "algorithms" / "age-pq.yaml").read_bytes()
    with pytest.raises(ManifestError) as err:
        documents(data, flux_keys(), "algorithms/age-pq.yaml")
    assert err.value.path == "algorithms/age-pq.yaml"
    assert err.value.line == line_of(data, "sops:")
    assert "none of the host's keys opens this file: it is encrypted for age1pq1" in err.value.message
    assert "ENC[" not in str(err.value)
    # Flux's Vault file is encrypted by its test at run time: committed, it is plain
    assert not encrypted_documents(parse_yaml_value((FLUX / "algorithms" / "vault.yaml").read_bytes(), "v"))


# -- our own files -----------------------------------------------------------------------------


def test_our_yaml_decrypts_with_types_and_only_data_and_stringdata_encrypted(tmp_path: Path) -> None:
    key = age_key(tmp_path)
    data = encrypt(SECRET, key.recipient)
    text = data.decode()
    assert "hunter2" not in text
    assert "c2VjcmV0LXRva2VuLXZhbHVl" not in text
    assert "name: db-creds" in text
    assert "tier: db" in text
    assert text.rstrip().endswith("version: 3.9.0")
    assert "\nsops:\n" in text
    (doc,) = documents(data, key.keys())
    assert doc == parse_yaml_value(SECRET.encode(), "x")[0]


def test_age_itself_opens_the_data_key_we_wrote(tmp_path: Path) -> None:
    key = age_key(tmp_path)
    (doc,) = parse_yaml_value(encrypt(SECRET, key.recipient), "x")
    enc = doc["sops"]["age"][0]["enc"]
    out = subprocess.run(
        ["age", "-d", "-i", str(key.path)], input=enc.encode(), capture_output=True, check=True
    )
    assert len(out.stdout) == 32


@pytest.mark.parametrize(
    ("fmt", "plain", "name"),
    [
        ("binary", b"#cloud-config\npassword: hunter2\n", "userdata"),
        ("dotenv", b"USER=admin\nPASSWORD=hunter2\n", "creds.env"),
        ("json", b'{"user": "admin", "n": 3}', "creds.json"),
        ("yaml", b"#cloud-config\npassword: hunter2\n", "user-data.yaml"),
    ],
)
def test_whole_files_round_trip(tmp_path: Path, fmt: str, plain: bytes, name: str) -> None:
    key = age_key(tmp_path)
    data = encrypt(plain, key.recipient, fmt, regex=None)
    assert b"hunter2" not in data
    assert file_format(data, name) == fmt
    opened = open_file(data, name, name, key.keys())
    if fmt == "json" or fmt == "yaml":
        assert parse_yaml_value(opened, name) == parse_yaml_value(plain, name)
    else:
        assert opened == plain


def test_an_encrypted_comment_of_a_yaml_file_opens_in_place(tmp_path: Path) -> None:
    """sops encrypts a YAML file's comments too: ``#cloud-config`` must come back first."""
    key = age_key(tmp_path)
    data = encrypt(b"password: hunter2\n", key.recipient, "yaml", regex=None)
    (doc,) = parse_yaml_value(data, "u.yaml")
    data_key = Walk(doc["sops"], key.keys()).key  # as sops seals a top-level comment
    comment = seal_value("cloud-config", data_key, ":", kind="comment")
    text = open_file(b"#" + comment.encode() + b"\n" + data, "u.yaml", "u.yaml", key.keys()).decode()
    assert text == '#cloud-config\npassword: "hunter2"\n'


def test_mac_only_encrypted_and_several_documents(tmp_path: Path) -> None:
    key = age_key(tmp_path)
    rule = Rule(age=(key.recipient,), encrypted_regex="^(data|stringData)$", mac_only_encrypted=True)
    from datetime import UTC, datetime

    two = SECRET + "---\n" + SECRET.replace("db-creds", "other")
    data = encrypt_file(two.encode(), "yaml", rule, datetime.now(UTC))
    docs = documents(data, key.keys())
    assert [d["metadata"]["name"] for d in docs] == ["db-creds", "other"]  # type: ignore[index]
    # outside the MAC: a label may change; inside it (any value, any document): it may not
    relabelled = data.replace(b"tier: db", b"tier: web", 1)
    assert documents(relabelled, key.keys())[0]["metadata"]["labels"] == {"tier": "web"}  # type: ignore[index]


# -- tampering ---------------------------------------------------------------------------------


def tampered(tmp_path: Path, how: str) -> tuple[bytes, Keys, str]:
    """A file of ours changed in one way; the line (text) where the error must point."""
    key = age_key(tmp_path)
    data = encrypt(SECRET, key.recipient)
    text = data.decode()
    tokens = re.findall(r"^  (\w+): (ENC\[[^\]]+\])$", text, re.M)
    values = dict(tokens)
    if how == "value":
        token = values["port"]
        body = token.split("data:")[1].split(",")[0]
        flipped = base64.b64encode(
            bytes([base64.b64decode(body)[0] ^ 1]) + base64.b64decode(body)[1:]
        ).decode()
        return text.replace(body, flipped).encode(), key.keys(), "port:"
    if how == "swapped":
        a, b = values["port"], values["ratio"]
        return text.replace(a, "@").replace(b, a).replace("@", b).encode(), key.keys(), "port:"
    if how == "renamed":
        return text.replace("  port:", "  prot:").encode(), key.keys(), "prot:"
    if how == "added":
        return (
            text.replace("  name: db-creds", "  name: db-creds\n  namespace: prod").encode(),
            key.keys(),
            "mac:",
        )
    if how == "clear-value":
        return text.replace(values["enabled"], "false").encode(), key.keys(), "enabled:"
    if how == "mac":
        mac = re.search(r"mac: (ENC\[[^\]]+\])", text)
        assert mac is not None
        return text.replace(mac.group(1), values["port"]).encode(), key.keys(), "mac:"
    if how == "lastmodified":
        return (
            re.sub(r'lastmodified: "[^"]+"', 'lastmodified: "2020-01-01T00:00:00Z"', text).encode(),
            key.keys(),
            "mac:",
        )
    if how == "recipient":
        other = age_key(tmp_path / "other")
        return data, other.keys(), "sops:"
    raise AssertionError(how)


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("value", "stringData.port does not decrypt"),
        ("swapped", "stringData.port does not decrypt"),
        ("renamed", "stringData.prot does not decrypt"),
        ("added", "MAC mismatch"),
        ("clear-value", "stringData.enabled: expected an encrypted value"),
        ("mac", "sops.mac does not decrypt"),
        ("lastmodified", "sops.mac does not decrypt"),
        ("recipient", "none of the host's keys opens this file"),
    ],
)
def test_a_touched_file_is_an_error_at_its_line_naming_no_value(tmp_path: Path, how: str, says: str) -> None:
    data, keys, where = tampered(tmp_path, how)
    with pytest.raises(ManifestError) as err:
        documents(data, keys)
    assert says in err.value.message
    assert err.value.path == "secret.yaml"
    assert err.value.line == line_of(data, where), str(err.value)
    shown = str(err.value)
    for value in ("hunter2", "5432", "c2VjcmV0", "ENC["):
        assert value not in shown


# -- sealed (no keys) --------------------------------------------------------------------------


def test_sealed_reading_gives_stand_ins_from_the_ciphertext(tmp_path: Path) -> None:
    key = age_key(tmp_path)
    data = encrypt(SECRET, key.recipient)
    (doc,) = documents(data, SEALED)
    (again,) = documents(data, SEALED)
    assert doc == again  # the same ciphertext, the same stand-ins
    values = doc["stringData"]  # type: ignore[index]
    assert values["empty"] == ""
    assert all(base64.b64decode(v).startswith(b"sops:") for k, v in values.items() if k != "empty")
    assert base64.b64decode(doc["data"]["token"]).startswith(b"sops:")  # type: ignore[index]
    other = encrypt(SECRET, key.recipient)  # encrypted again: new ciphertext, new stand-ins
    assert documents(other, SEALED)[0]["stringData"]["port"] != values["port"]  # type: ignore[index]
    broken = data.replace(b"ENC[AES256_GCM,data:", b"ENC[AES256_GCM,dta:", 1)
    with pytest.raises(ManifestError, match="not a SOPS value"):
        documents(broken, SEALED)


# -- keys --------------------------------------------------------------------------------------


def test_key_file_errors_name_the_line_never_its_text() -> None:
    text = "# created: now\nAGE-SECRET-KEY-1NOTAKEYATALLxx\n"
    with pytest.raises(ManifestError) as err:
        Keys.from_age_keys(text, "keys.txt")
    assert (err.value.path, err.value.line) == ("keys.txt", 2)
    assert "NOTAKEY" not in str(err.value)
    with pytest.raises(ManifestError, match="not an age identity"):
        Keys.from_age_keys("hunter2\n", "keys.txt")
    with pytest.raises(ManifestError, match="no age identity"):
        Keys.from_age_keys("# nothing\n", "keys.txt")


def test_keys_are_never_shown_nor_pickled(tmp_path: Path) -> None:
    key = age_key(tmp_path)
    keys = key.keys()
    secret_line = next(line for line in key.path.read_text().splitlines() if line.startswith("AGE-SECRET"))
    for shown in (repr(keys), str(keys), f"{keys}"):
        assert "AGE-SECRET" not in shown
        assert secret_line[16:30] not in shown
    assert keys.recipients == (key.recipient,)
    with pytest.raises(TypeError):
        pickle.dumps(keys)
    assert repr(SEALED) == "Keys(sealed)"


def test_go_float_is_gos_shortest_positional_form() -> None:
    cases = {1.5: "1.5", 3.0: "3", 1e20: "100000000000000000000", 1e-7: "0.0000001", -0.25: "-0.25"}
    for value, text in cases.items():
        assert go_float(value) == text
