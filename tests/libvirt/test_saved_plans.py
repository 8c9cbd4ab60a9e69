"""Saved plans and consent, through the CLI as a user runs it (test:///default).

Covers: ``plan --out FILE`` (also spelt ``-out``) writes a versioned file with the
revision, entry, host URI, resolved policy and the fingerprint of every domain a
change touches, and no live XML; ``apply FILE`` applies exactly that plan (the
definitions saved are the ones defined) and, applied again, refuses naming each
domain that changed; a domain changed in between (its state or its definition)
refuses the whole plan and applies nothing; given ``--ref``, a plan of another commit refuses;
plan flags are refused with a file; a file of another schema version is refused;
one domain that moved among many is named alone; a plan with errors is not
written. Without a terminal, ``apply`` (with or without a
file) refuses a plan that stops, restarts or deletes a VM unless ``--yes``, applies
nothing then, and says so naming ``--yes``; creates and starts go ahead. A saved
plan holds no Secret value: a VM whose cloud-init user data is a Secret generated in
the repository is saved by names and digests, and ``apply FILE`` takes the values
from the revision built again, checked against the payload saved (the test driver
provisions nothing; tests/integration/test_saved_plans_qemu.py builds the ISO).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from reconciler.ownership import read_mark
from tests.helpers.domains import drop_domains

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

URI = "test:///default"
NAMES = ("saved-a", "saved-b")
VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: {strategy}
  template:
    spec:
      terminationGracePeriodSeconds: 1
      domain:
        machine: {{type: {machine}}}
        cpu: {{cores: 1}}
        memory: {{guest: {memory}}}
        devices: {{}}
"""


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:
        drop_domains(h, NAMES)
        yield h
        drop_domains(h, NAMES)


def write(
    git_repo: GitRepo, name: str, strategy: str = "Always", machine: str = "q35", memory: str = "64Mi"
) -> None:
    git_repo.write(
        f"vms/{name}.yaml", VM.format(name=name, strategy=strategy, machine=machine, memory=memory)
    )


def repo_args(git_repo: GitRepo) -> list[str]:
    return ["--repo", str(git_repo.path), "--connect", URI, "--owner", "saved-test"]


def this_host(git_repo: GitRepo, *more: str) -> list[str]:
    """What ``apply FILE`` verifies a plan with: the repository and this host's own configuration."""
    return ["--repo", str(git_repo.path), "--owner", "saved-test", *more]


def test_a_saved_plan_is_applied_exactly_and_then_refused(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in NAMES:
        write(git_repo, name)
    sha = git_repo.commit("two VMs")
    out = tmp_path / "plan.json"
    assert cli.main(["plan", *repo_args(git_repo), "-out", str(out)]) == 2
    assert f"Saved the plan to {out}" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert (doc["schemaVersion"], doc["kind"]) == (5, "ReconcilerPlan")
    (saved,) = doc["plans"]
    assert (saved["uri"], saved["revision"], saved["entry"]) == (URI, sha, "")
    assert saved["policy"]["owner"] == "saved-test"
    assert saved["config"]["instancetypeRevisions"] == "pin"
    assert saved["live"] == {"saved-a": None, "saved-b": None}  # both absent when planned
    assert all("live" not in c for c in saved["plan"]["changes"])
    spec_hash = {c["name"]: c["desired"]["specHash"] for c in saved["plan"]["changes"]}
    for c in saved["plan"]["changes"]:  # the final definitions apply defines, marked for the plan
        mark = read_mark(c["definition"]["xml"])
        assert mark is not None
        assert (mark.commit, mark.owner, mark.spec_hash) == (sha, "saved-test", spec_hash[c["name"]])

    git_repo.write(
        "vms/saved-a.yaml", VM.format(name="saved-a", strategy="Always", machine="pc", memory="64Mi")
    )
    git_repo.commit("a later commit: the saved plan still applies as saved")
    assert cli.main(["apply", str(out), *this_host(git_repo)]) == 0
    text = capsys.readouterr().out
    assert "the saved plan" in text
    assert "Applied: 2 created, 0 updated, 0 deleted, 0 unchanged, 0 failed." in text
    for name in NAMES:
        d = hv.get_domain(name)
        assert d is not None
        assert d.state == PowerState.RUNNING
        assert d.mark is not None
        assert (d.mark.commit, d.mark.owner, d.mark.spec_hash) == (sha, "saved-test", spec_hash[name])
        assert "machine='q35'" in d.persistent_xml  # as saved, not as HEAD says now

    # Applied again, the same file finds both domains defined since: nothing is applied.
    assert cli.main(["apply", str(out), *this_host(git_repo)]) == 1
    err = capsys.readouterr().err
    assert "not applied to host localhost: changed since the plan" in err, err
    for name in NAMES:
        assert f"vm/{name}: a domain of this name was defined since the plan" in err, err


def test_a_host_changed_since_the_plan_refuses_it_whole(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in NAMES:
        write(git_repo, name)
    git_repo.commit("two VMs")
    assert cli.main(["apply", *repo_args(git_repo)]) == 0
    write(git_repo, "saved-a", memory="128Mi")
    write(git_repo, "saved-b", memory="128Mi")
    git_repo.commit("more memory")
    out = tmp_path / "plan.json"
    assert cli.main(["plan", *repo_args(git_repo), "--out", str(out)]) == 2
    saved = json.loads(out.read_text())["plans"][0]
    assert saved["live"]["saved-a"]["state"] == "running"
    before = {n: hv.persistent_xml(n) for n in NAMES}

    hv.destroy("saved-a")  # someone stops one of the planned domains
    capsys.readouterr()
    assert cli.main(["apply", str(out), "--yes", *this_host(git_repo)]) == 1
    err = capsys.readouterr().err
    assert "vm/saved-a: was running when planned, now shutoff" in err, err
    assert "saved-b" not in err
    assert {n: hv.persistent_xml(n) for n in NAMES} == before  # nothing applied, not even saved-b

    # A definition edited by hand is named too.
    hv.start("saved-a")
    hv.define(
        before["saved-b"].replace("<name>saved-b</name>", "<name>saved-b</name><title>edited</title>"),
        "saved-b",
    )
    assert cli.main(["apply", str(out), *this_host(git_repo)]) == 1
    assert "vm/saved-b: its definition changed since the plan" in capsys.readouterr().err


def test_a_saved_plan_checks_the_revision_and_takes_no_plan_flags(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(git_repo, "saved-a")
    sha = git_repo.commit("one VM")
    out = tmp_path / "plan.json"
    assert cli.main(["plan", *repo_args(git_repo), "--out", str(out)]) == 2
    write(git_repo, "saved-a", memory="128Mi")
    moved = git_repo.commit("moved on")
    capsys.readouterr()
    assert cli.main(["apply", str(out), *this_host(git_repo, "--ref", "HEAD")]) == 1
    err = capsys.readouterr().err
    assert f"HEAD of {git_repo.path} is now {moved[:12]}, the plan was made at {sha[:12]}" in err, err
    assert hv.get_domain("saved-a") is None
    assert cli.main(["apply", str(out), "--prune", "--connect", URI]) == 1
    assert "--connect --prune: a saved plan carries its hosts, revision and policy" in capsys.readouterr().err
    assert cli.main(["apply", str(out), *this_host(git_repo, "--ref", sha)]) == 0
    assert hv.get_domain("saved-a") is not None


def test_a_file_of_another_version_or_a_plan_with_errors(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schemaVersion": 99, "kind": "ReconcilerPlan", "plans": []}))
    assert cli.main(["apply", str(other)]) == 1
    assert "a saved plan of schema version 99; this reconciler reads version 5" in capsys.readouterr().err
    git_repo.write("vms/bad.yaml", "apiVersion: kubevirt.io/v1\nkind: VirtualMachin\nmetadata: {name: x}\n")
    git_repo.commit("broken")
    out = tmp_path / "plan.json"
    assert cli.main(["plan", *repo_args(git_repo), "--out", str(out)]) == 1
    assert "not written: a plan with errors cannot be applied" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("change", "action"),
    [
        ({"strategy": "Halted"}, "stop"),
        ({"machine": "pc"}, "restart"),
        (None, "delete"),
    ],
)
def test_without_a_terminal_stops_restarts_and_deletes_need_yes(
    git_repo: GitRepo,
    hv: Hypervisor,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, str] | None,
    action: str,
) -> None:
    flags = [*repo_args(git_repo), "--prune", "--max-prune-percent", "100", "--rollout", "Restart"]
    for name in NAMES:
        write(git_repo, name)
    git_repo.commit("two VMs")
    assert cli.main(["apply", *flags]) == 0  # creates and starts need no --yes
    if change is None:
        git_repo.remove("vms/saved-a.yaml")
    else:
        write(git_repo, "saved-a", **change)
    git_repo.write(  # a change beside it that stops nothing
        "vms/saved-b.yaml",
        VM.format(name="saved-b", strategy="Always", machine="q35", memory="64Mi").replace(
            "terminationGracePeriodSeconds: 1", "terminationGracePeriodSeconds: 2"
        ),
    )
    git_repo.commit("change")
    before = {n: hv.persistent_xml(n) for n in NAMES}
    capsys.readouterr()

    assert cli.main(["apply", *flags]) == 1
    err = capsys.readouterr().err
    assert f"the plan deletes, restarts, stops or adopts 1 VM(s): vm/saved-a ({action})" in err, err
    assert "needs --yes" in err, err
    assert {n: hv.persistent_xml(n) for n in NAMES} == before  # nothing applied
    assert hv.state("saved-a") == PowerState.RUNNING

    out = tmp_path / "plan.json"
    assert cli.main(["plan", *flags, "--out", str(out)]) == 2
    assert cli.main(["apply", str(out), *this_host(git_repo)]) == 1  # a saved plan asks the same consent
    assert "needs --yes" in capsys.readouterr().err
    assert cli.main(["apply", str(out), "--yes", *this_host(git_repo)]) == 0
    assert "Applied:" in capsys.readouterr().out
    a = hv.get_domain("saved-a")
    if action == "delete":
        assert a is None
    elif action == "stop":
        assert a is not None
        assert a.state == PowerState.SHUTOFF
    else:
        assert a is not None
        assert "pc" in a.persistent_xml
        assert a.state == PowerState.RUNNING
    b = hv.get_domain("saved-b")
    assert b is not None
    assert b.persistent_xml != before["saved-b"]


GEN = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: saved-a
spec:
  runStrategy: Always
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
          cloudInitNoCloud:
            secretRef: {name: gen-userdata}
"""
KUSTOMIZATION = """resources: [vms/gen.yaml]
configurations: [namerefs.yaml]
secretGenerator:
  - name: gen-userdata
    files: [userdata=userdata.txt]
"""
NAMEREFS = """nameReference:
  - kind: Secret
    fieldSpecs:
      - {path: spec/template/spec/volumes/cloudInitNoCloud/secretRef/name, kind: VirtualMachine}
"""
SECRET_VALUE = "only-in-the-iso-4b1e"


def test_a_saved_plan_holds_no_secret_value(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import base64

    from reconciler import source
    from reconciler.plan import saved
    from reconciler.reconcile import rendered_again

    git_repo.write("vms/gen.yaml", GEN)
    git_repo.write("kustomization.yaml", KUSTOMIZATION)
    git_repo.write("namerefs.yaml", NAMEREFS)
    git_repo.write("userdata.txt", f"#cloud-config\npassword: {SECRET_VALUE}\n")
    git_repo.commit("a VM with a generated Secret")
    host = tmp_path / "host.yaml"
    host.write_text(f"allowedDirectories: [{tmp_path}]\nvolumeDirectory: {tmp_path / 'volumes'}\n")
    out = tmp_path / "plan.json"
    assert cli.main(["plan", *repo_args(git_repo), "--host-config", str(host), "--out", str(out)]) == 2
    data = out.read_text()
    assert SECRET_VALUE not in data
    assert base64.b64encode(SECRET_VALUE.encode()).decode()[:12] not in data
    for chunk in json.loads(data)["plans"][0]["plan"]["changes"][0]["desired"]["volumes"]:
        if chunk["content"]:
            assert SECRET_VALUE not in base64.b64decode(chunk["content"]).decode()
            assert chunk["secrets"]
            assert chunk["secrets"][0].startswith("default/gen-userdata-")

    # The values come back from the revision built again, checked against the digests saved.
    (entry,) = saved.load(data.encode(), str(out))
    (change,) = entry.planned.plan.changes
    assert change.desired is not None
    (iso,) = [v for v in change.desired.volumes if v.kind == "cloudinit-iso"]
    assert not iso.secrets  # nothing in the file
    assert list(entry.secrets) == [("saved-a", iso.path)]
    snap = source.read_snapshot(str(git_repo.path), entry.planned.revision)
    again = rendered_again(entry.planned, snap, hv)
    filled = saved.with_secrets(entry, again)
    (vol,) = [v for v in filled.plan.changes[0].desired.volumes if v.kind == "cloudinit-iso"]  # type: ignore[union-attr]
    assert vol.secrets.names() == entry.secrets[("saved-a", iso.path)]
    assert vol.content == iso.content
    assert cli.main(["apply", str(out), *this_host(git_repo, "--host-config", str(host))]) == 0, (
        capsys.readouterr().err
    )
    d = hv.get_domain("saved-a")
    assert d is not None
    assert read_mark(d.persistent_xml) is not None


def test_one_domain_among_many_that_moved_is_named(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [f"saved-many-{i:02d}" for i in range(40)]
    for name in names:
        write(git_repo, name, strategy="Halted")
    git_repo.commit("many VMs")
    out = tmp_path / "plan.json"
    with Hypervisor(URI) as hv:
        try:
            assert cli.main(["plan", *repo_args(git_repo), "--out", str(out)]) == 2
            hv.define(hv_xml(out, names[7]), names[7])  # one of them appears meanwhile
            capsys.readouterr()
            assert cli.main(["apply", str(out), *this_host(git_repo)]) == 1
            err = capsys.readouterr().err
            assert f"vm/{names[7]}: a domain of this name was defined since the plan" in err, err
            assert err.count("defined since the plan") == 1, err
            assert [n for n in names if hv.get_domain(n) is not None] == [names[7]]
        finally:
            drop_domains(hv, names)


def hv_xml(saved: Path, name: str) -> str:
    """The definition a saved plan holds for ``name``."""
    doc = json.loads(saved.read_text())
    (xml,) = [c["desired"]["xml"] for c in doc["plans"][0]["plan"]["changes"] if c["name"] == name]
    return str(xml)
