"""``reconciler encrypt``: a file encrypted as ``sops --encrypt`` does, for hosts without sops.

Input: parsed arguments (a file; age recipients and what to encrypt from the flags, else
from the first ``creation_rules`` entry of the nearest ``.sops.yaml`` whose
``path_regex`` matches the file, as sops picks it). Output: the encrypted file on stdout,
or in place (``-i``); exit 0, or 1 with the reason (never a value). The file's format
goes by its extension as sops reads it (``.yaml``/``.yml``, ``.json``, ``.env``, else
binary), or ``--input-type``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, say_error

if TYPE_CHECKING:
    import argparse

    from reconciler.manifests.sops.sealing import Rule

SOPS_CONFIG = ".sops.yaml"


def cmd_encrypt(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from reconciler.manifests import limits
    from reconciler.manifests.sops.files import file_format
    from reconciler.manifests.sops.sealing import encrypt_file, format_for

    path = Path(args.file)
    try:
        data = limits.read_regular_file(path)
    except OSError as err:
        say_error(f"{args.file}: {err.strerror or err}")
        return EXIT_ERROR
    fmt = args.input_type or format_for(path.name)
    if file_format(data, path.name) is not None:
        say_error(f"{args.file}: already encrypted with SOPS")
        return EXIT_ERROR
    rule = rule_for(path, args)
    if rule is None:
        return EXIT_ERROR
    try:
        out = encrypt_file(data, fmt, rule, datetime.now(UTC))
    except (ValueError, UnicodeDecodeError) as err:
        message = "not UTF-8 text" if isinstance(err, UnicodeDecodeError) else str(err)
        say_error(f"{args.file}: cannot encrypt as {fmt}: {message}")
        return EXIT_ERROR
    if args.in_place:
        tmp = path.with_name(f".{path.name}.encrypting")
        tmp.write_bytes(out)
        tmp.chmod(path.stat().st_mode & 0o777)
        tmp.replace(path)
    else:
        sys.stdout.write(out.decode())
    return EXIT_OK


def rule_for(path: Path, args: argparse.Namespace) -> Rule | None:
    """The recipients and selection of ``args``, else of the ``.sops.yaml`` rule for ``path``."""
    from reconciler.errors import ManifestError
    from reconciler.manifests.patterns import PatternError, compile_pattern
    from reconciler.manifests.sops import sealing

    for flag, value in (
        ("--encrypted-regex", args.encrypted_regex),
        ("--unencrypted-regex", args.unencrypted_regex),
    ):
        try:
            if value:
                compile_pattern(value)
        except PatternError as err:
            say_error(
                f"encrypt: {flag}: not a regular expression as sops (Go, RE2 syntax) reads it: {err.message}"
            )
            return None
    if args.age:
        recipients = tuple(r.strip() for given in args.age for r in given.split(",") if r.strip())
        return sealing.Rule(
            age=recipients,
            encrypted_regex=args.encrypted_regex or "",
            unencrypted_regex=args.unencrypted_regex or "",
        )
    found = nearest_config(path.resolve().parent)
    if found is None:
        say_error(f"{path}: no --age recipient and no {SOPS_CONFIG} above it to take one from")
        return None
    try:
        rule = creation_rule(found, path.resolve())
    except ManifestError as err:
        say_error(str(err))
        return None
    except ValueError as err:
        say_error(f"{found}: {err}")
        return None
    if args.encrypted_regex or args.unencrypted_regex:
        from dataclasses import replace

        rule = replace(
            rule, encrypted_regex=args.encrypted_regex or "", unencrypted_regex=args.unencrypted_regex or ""
        )
    return rule


def nearest_config(directory: Path) -> Path | None:
    for d in (directory, *directory.parents):
        if (d / SOPS_CONFIG).is_file():
            return d / SOPS_CONFIG
    return None


REGEX_KEYS = ("path_regex", "encrypted_regex", "unencrypted_regex")


def creation_rule(config: Path, file: Path) -> Rule:
    """sops' choice: the first creation rule without a ``path_regex`` or whose regex
    matches the file's path relative to the config's directory (as Go matches it:
    ``manifests.patterns``). A pattern that does not compile is a ``ManifestError`` at
    its line in the config."""
    from reconciler.errors import ManifestError
    from reconciler.manifests import limits, locate, parse_yaml_value
    from reconciler.manifests.patterns import PatternError, compile_pattern

    data = limits.read_regular_file(config)
    try:
        docs = parse_yaml_value(data, str(config))
    except ManifestError as err:
        raise ValueError(err.message) from err
    rules = docs[0].get("creation_rules") if docs and isinstance(docs[0], dict) else None
    if not isinstance(rules, list):
        raise ValueError("no creation_rules list")
    relative = str(file).removeprefix(str(config.parent) + os.sep)
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            raise ValueError(f"creation_rules[{i}] is not a mapping")
        for key in REGEX_KEYS:
            try:
                if rule.get(key):
                    compile_pattern(str(rule[key]))
            except PatternError as err:
                line, col = locate(data, 1, ("creation_rules", i, key))
                raise ManifestError(
                    f"creation_rules[{i}].{key} is not a regular expression as sops (Go, RE2 syntax) "
                    f"reads it: {err.message}",
                    str(config),
                    line,
                    col,
                ) from err
        pattern = rule.get("path_regex")
        if pattern and not compile_pattern(str(pattern)).search(relative):
            continue
        return _rule(rule, i)
    raise ValueError(f"no creation rule matches {relative}")


def _rule(rule: dict[str, Any], i: int) -> Rule:
    from reconciler.manifests.sops import sealing

    for unsupported in ("key_groups", "pgp", "kms", "gcp_kms", "azure_keyvault", "hc_vault_transit_uri"):
        if rule.get(unsupported):
            raise ValueError(
                f"creation_rules[{i}] has {unsupported}: only age recipients are written here "
                "(encrypt this file with sops)"
            )
    age = rule.get("age")
    recipients = [str(a) for a in age] if isinstance(age, list) else str(age or "").split(",")
    recipients = [r.strip() for r in recipients if r.strip()]
    if not recipients:
        raise ValueError(f"creation_rules[{i}] names no age recipient")
    return sealing.Rule(
        age=tuple(recipients),
        encrypted_regex=str(rule.get("encrypted_regex") or ""),
        unencrypted_regex=str(rule.get("unencrypted_regex") or ""),
        encrypted_suffix=str(rule.get("encrypted_suffix") or ""),
        unencrypted_suffix=str(rule.get("unencrypted_suffix") or ""),
        mac_only_encrypted=rule.get("mac_only_encrypted") is True,
    )
