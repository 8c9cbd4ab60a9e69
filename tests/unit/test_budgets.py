"""Budgets and bounds, in-process: the pieces the hostile suite drives through the CLI.

Covers: a Secret's slow key derivation paid once per value (several VMs naming one
Secret, a second build of the same revision with the same cache: no new derivation),
and the digest store holding a revision's worth; a mirror cloned again at most once for
one unreadable object; ``limits.object_size`` and ``RevisionBudget``; durations bounded
by the caller's minimum and the year maximum; restart windows by tz name and yearly
schedule; the one reader refusing what is no regular file, with the caller's error type.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.catalog import CatalogCache, build_catalog
from reconciler.errors import ConfigError, ManifestError
from reconciler.expand import expand_vm
from reconciler.manifests import limits, parse_documents
from reconciler.model import units
from reconciler.settings import windows
from reconciler.source.mirror import GitSource
from reconciler.source.settings import SourceConfig

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo


def _revision(vms: int, secrets: int) -> bytes:
    docs = [
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: s{i}\nstringData:\n  userdata: '#cloud-config {i}'\n"
        for i in range(secrets)
    ]
    for v in range(vms):
        volumes = "".join(
            f"        - name: s{i}\n          cloudInitNoCloud: {{secretRef: {{name: s{i}}}}}\n"
            for i in range(secrets)
        )
        docs.append(
            f"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm{v}\nspec:\n"
            f"  template:\n    spec:\n      domain:\n        memory: {{guest: 64Mi}}\n        devices: {{}}\n"
            f"      volumes:\n{volumes}"
        )
    return "---\n".join(docs).encode()


def test_key_derivation_is_paid_once_per_secret_value(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bytes] = []
    real = hashlib.scrypt

    def counted(password: bytes, *, salt: bytes, **rest: Any) -> bytes:
        calls.append(salt)
        return real(password, salt=salt, **rest)

    monkeypatch.setattr(hashlib, "scrypt", counted)
    docs = parse_documents(_revision(vms=4, secrets=3), "vms.yaml")
    cache = CatalogCache()
    for _ in range(2):  # the second build of the same revision derives nothing
        catalog = build_catalog(docs, cache=cache)
        for vm in catalog.vms:
            data = expand_vm(vm, catalog).secrets
            assert [data.digest(name) for name in data.names()]
    assert sorted(calls) == sorted(set(calls))  # never twice for one Secret
    assert len(calls) == 3
    assert cache.digests.bound >= 2 * limits.MAX_SECRETS_PER_REVISION


def test_a_vm_naming_more_secrets_than_allowed_is_refused_before_any_derivation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hashlib, "scrypt", lambda *a, **k: pytest.fail("derived"))
    docs = parse_documents(_revision(vms=1, secrets=limits.MAX_SECRETS_PER_VM + 1), "vms.yaml")
    catalog = build_catalog(docs)
    with pytest.raises(ManifestError, match=r"names 33 Secrets; at most 32 are allowed"):
        expand_vm(catalog.vms[0], catalog)


def test_a_mirror_is_cloned_again_at_most_once_for_one_unreadable_object(
    git_repo: GitRepo, tmp_path: Path
) -> None:
    git_repo.write("a.yaml", "a: 1\n")
    git_repo.commit()
    src = GitSource(SourceConfig(f"file://{git_repo.path}"), str(tmp_path / "state"))
    src.fetch()
    first = src.git_dir.stat().st_ino
    assert src.recover(unreadable="object 0123 of commit abcd")  # cloned again once
    second = src.git_dir.stat().st_ino
    assert second != first
    assert not src.recover(unreadable="object 0123 of commit abcd")  # the remote lacks it too
    assert src.git_dir.stat().st_ino == second
    assert src.recover(unreadable="object 4567 of commit abcd")  # another object: worth a clone


def test_object_size_and_the_revision_budget() -> None:
    assert limits.object_size({"a": "xyz", "b": [1, None, True]}) == 8 + 3 + 5 + 3 + 8 + 3 * 8
    budget = limits.RevisionBudget()
    assert budget.spend(limits.MAX_REVISION_OBJECTS, 0) == ""
    assert "objects" in budget.spend(1, 0)
    assert "MiB" in limits.RevisionBudget().spend(1, limits.MAX_REVISION_BYTES + 1)
    assert limits.replicas_problem(limits.MAX_POOL_REPLICAS) == ""
    assert "about 4400 digits" in limits.replicas_problem(10**4400)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (float("inf"), "not a positive duration"),
        (10**400, "more than 40 digits"),
        ("1ms", "shorter than the 1s"),
        ("2y", "not a positive duration"),
        ("367d", "longer than the 366d"),
    ],
)
def test_durations_are_bounded(value: object, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        units.positive_duration(value, minimum=1.0)


def test_a_duration_within_bounds_is_read() -> None:
    assert units.positive_duration("500ms", minimum=0.1) == 0.5
    assert units.positive_duration("366d") == 366 * 86400


@pytest.mark.parametrize("zone", ["America", "America/", "/etc/localtime", "../zoneinfo/UTC", "Factory"])
def test_a_time_zone_is_a_name_of_the_tz_database(zone: str) -> None:
    with pytest.raises(ValueError, match="is not a time zone"):
        windows.window("0 2 * * *", "1h", zone)


def test_a_schedule_opens_every_year() -> None:
    assert windows.window("0 0 29 2 1", "1h").schedule == "0 0 29 2 1"  # Mondays of February too
    with pytest.raises(ValueError, match="does not open every year"):
        windows.window("0 0 29 2 *", "1h")


def test_the_one_reader_refuses_what_is_no_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        limits.read_regular_file(fifo, error=ConfigError)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 11)
    with pytest.raises(ManifestError, match="more than the 10 bytes"):
        limits.read_regular_file(big, limit=10)
    assert limits.read_regular_file(big, limit=11) == b"x" * 11
    with pytest.raises(FileNotFoundError):
        limits.read_regular_file(tmp_path / "missing")
