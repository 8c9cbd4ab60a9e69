"""Hostile input: a commit written by an attacker (or a bad day) gets a one-line error
naming the file and line, never a traceback, a hang or a half-applied host.

One case per kind of attack: YAML alias and merge-key bombs (fail fast, in little
memory); deep nesting in YAML and in JSON inside a document (no RecursionError);
quantities and counts beyond what libvirt/QEMU accept (``memory: 100Ei``, 10^5 cores,
a 3 PiB disk, 10^18 seconds, a 300-character volume name, a control character in a
host path) refused at ``validate`` time; two VMs with one UUID or
one MAC address; names that are not strings or not DNS-1123 subdomains
(``name: 010``, 300 characters) or whose domain name would not fit a host file name;
names and directory names escaped in ``render``'s XML comments (``a--b``, a directory
name carrying a fake ``<domain>``); terminal escapes in file names and in names inside
messages printed as escapes; every git ref form resolved by git or refused in one
line; only regular files are read, with a size cap (``-f /dev/zero``, a FIFO, a
symlink loop, a 65 MiB file); ``build`` never follows a committed symlinked entry
directory out of the work tree. The daemon side (BuildFailed, not retried) is in tests/libvirt/test_hostile_daemon.py.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from reconciler import cli

if TYPE_CHECKING:
    from tests.helpers.git import GitRepo

HANG_GUARD_S = 120  # a hang guard for the subprocess cases, not a speed check
MEMORY_CAP = 512 * 1024 * 1024  # address space of the subprocess cases

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        cpu:
          cores: {cores}
        memory:
          guest: {memory}
        devices:
          interfaces:
            - name: default
              masquerade: {{}}
{extra}      networks:
        - name: default
          pod: {{}}
"""


def vm(name: str = "web", memory: str = "64Mi", cores: int = 1, extra: str = "") -> str:
    return VM.format(name=name, memory=memory, cores=cores, extra=extra)


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``reconciler ARGS`` in a child with a capped address space (a bomb dies, not the suite)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        preexec_fn=cap,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        check=False,
    )


def validate(repo: GitRepo, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("validate", "--repo", str(repo.path), *extra)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr or fragment in proc.stdout, (proc.stdout, proc.stderr)


ALIAS_BOMB = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: lol
data:
  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def merge_key_bomb() -> str:
    """Merge keys (``<<``) rebuilding their sources: 9^9 mappings built, none of them big."""
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: merge", "data:"]
    lines.append("  a: &a {" + ", ".join(f"k{i}: v" for i in range(9)) + "}")
    for prev, name in zip("abcdefghi", "bcdefghij", strict=True):
        lines.append(f"  {name}: &{name} {{<<: [{', '.join(['*' + prev] * 9)}]}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("bomb", [ALIAS_BOMB, merge_key_bomb()], ids=["aliases", "merge-keys"])
def test_alias_bomb_fails_fast_in_little_memory(git_repo: GitRepo, bomb: str) -> None:
    assert len(bomb) < 1024  # 9^9 = 387 million strings (or mappings) once expanded
    git_repo.write("vms/web.yaml", vm())
    git_repo.write("vms/bomb.yaml", bomb)
    git_repo.commit()
    proc = validate(git_repo)
    assert_one_line_error(proc, "vms/bomb.yaml:", "YAML aliases expand to more than")
    assert "MemoryError" not in proc.stderr


def test_deep_nesting_is_an_error_not_a_recursion_error(git_repo: GitRepo) -> None:
    git_repo.write("vms/web.yaml", vm())
    git_repo.write("vms/deep.yaml", "a: " + "[" * 10_000 + "]" * 10_000 + "\n")
    git_repo.write("vms/deeper.yaml", "a: " + "{b: " * 10_000 + "1" + "}" * 10_000 + "\n")
    git_repo.commit()
    proc = validate(git_repo)
    assert_one_line_error(proc, "nested more than 100 levels deep")
    assert "RecursionError" not in proc.stderr
    assert "vms/deep" in proc.stdout


def test_deep_json_inside_a_document_is_an_error(git_repo: GitRepo) -> None:
    revision = (
        "apiVersion: apps/v1\nkind: ControllerRevision\nmetadata:\n  name: small-v1\n"
        f"data: '{'[' * 100_000}{']' * 100_000}'\n"
    )
    git_repo.write("vms/rev.yaml", revision)
    pinned = vm().replace(
        "spec:\n  runStrategy",
        "spec:\n  instancetype:\n    name: small\n    revisionName: small-v1\n  runStrategy",
    )
    git_repo.write("vms/web.yaml", pinned)
    git_repo.commit()
    proc = validate(git_repo)
    assert_one_line_error(proc, "vms/web.yaml:", "controllerrevision small-v1 does not hold")
    assert "RecursionError" not in proc.stderr


@pytest.mark.parametrize(
    ("memory", "cores", "fragment"),
    [
        ("100Ei", 1, "a QEMU guest can address"),
        ("64Mi", 100_000, "any QEMU machine type accepts"),
    ],
)
def test_quantities_beyond_qemu_are_refused_at_validate(
    git_repo: GitRepo, memory: str, cores: int, fragment: str
) -> None:
    git_repo.write("vms/big.yaml", vm("big", memory=memory, cores=cores))
    git_repo.commit()
    proc = validate(git_repo)
    assert_one_line_error(proc, "vms/big.yaml:", fragment)


def test_counts_and_seconds_beyond_int32_are_refused(git_repo: GitRepo) -> None:
    grace = vm("slow").replace(
        "      domain:\n", "      terminationGracePeriodSeconds: 1000000000000000000\n      domain:\n"
    )
    git_repo.write("vms/slow.yaml", grace)
    git_repo.commit()
    proc = validate(git_repo)
    assert_one_line_error(proc, "vms/slow.yaml:9:", "is more than 2147483647")


@pytest.mark.parametrize("capacity", ["3Pi", "100Ei"])  # qemu-img refuses both
def test_disk_capacity_beyond_an_image_is_refused(git_repo: GitRepo, capacity: str) -> None:
    extra = f"""\
      volumes:
        - name: scratch
          emptyDisk:
            capacity: {capacity}
"""
    git_repo.write("vms/big.yaml", vm("big", extra=extra))
    git_repo.commit()
    assert_one_line_error(validate(git_repo), "vms/big.yaml:", "a disk image can hold")


def test_two_vms_with_one_uuid_or_one_mac_are_refused(git_repo: GitRepo) -> None:
    uuid = "      domain:\n        firmware:\n          uuid: 6a1a24a1-4061-4607-8bf4-a3963d0c5895\n"
    same_uuid = vm("a").replace("      domain:\n", uuid)
    git_repo.write("vms/a.yaml", same_uuid)
    git_repo.write("vms/b.yaml", same_uuid.replace("name: a", "name: b"))
    mac = "              masquerade: {}\n              macAddress: 02:00:00:00:00:01\n"
    git_repo.write("vms/c.yaml", vm("c").replace("              masquerade: {}\n", mac))
    git_repo.write("vms/d.yaml", vm("d").replace("              masquerade: {}\n", mac))
    git_repo.commit()
    proc = validate(git_repo)
    assert_one_line_error(proc)
    uuid_error = next(line for line in proc.stdout.splitlines() if "UUID" in line)
    assert uuid_error.startswith("vms/b.yaml:11:11:")  # the firmware.uuid line of the later VM
    assert "also used by vm/a (vms/a.yaml:1)" in uuid_error
    mac_error = next(line for line in proc.stdout.splitlines() if "MAC address" in line)
    assert mac_error.startswith("vms/d.yaml:")
    assert "02:00:00:00:00:01 is also used by vm/c" in mac_error


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("010", "metadata.name must be a string, got int 10: quote it in the YAML"),
        ("x" * 300, "metadata.name is 300 characters long; at most 253"),
        ("Web_1", "is not a DNS-1123 subdomain"),
        ("a..b", "is not a DNS-1123 subdomain"),
    ],
)
def test_names_must_be_dns_subdomain_strings(git_repo: GitRepo, name: str, fragment: str) -> None:
    git_repo.write("vms/web.yaml", vm(name))
    git_repo.commit()
    proc = validate(git_repo)
    assert_one_line_error(proc, "vms/web.yaml:4:", fragment)


def test_a_quoted_numeric_name_is_kept_as_written(
    git_repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    git_repo.write("vms/web.yaml", vm('"010"'))
    git_repo.commit()
    assert cli.main(["render", "--repo", str(git_repo.path)]) == 0
    assert "<name>010</name>" in capsys.readouterr().out


def test_volume_file_names_fit_the_host(git_repo: GitRepo) -> None:
    extra = f"""\
      volumes:
        - name: {"v" * 300}
          emptyDisk:
            capacity: 1Gi
"""
    git_repo.write("vms/web.yaml", vm("web", extra=extra))
    git_repo.commit()
    assert_one_line_error(validate(git_repo), "vms/web.yaml:", "is too long for a file name on the host")


def test_a_character_xml_cannot_carry_is_refused(git_repo: GitRepo) -> None:
    extra = """\
      volumes:
        - name: data
          hostDisk:
            path: "/var/lib/libvirt/images/a\\eb.qcow2"
            type: Disk
"""
    disks = "          disks:\n            - name: data\n              disk: {}\n          interfaces:\n"
    git_repo.write("vms/web.yaml", vm("web", extra=extra).replace("          interfaces:\n", disks))
    git_repo.commit()
    proc = validate(git_repo)
    assert_one_line_error(proc, "vms/web.yaml:24:13:", "holds '\\x1b', a character XML cannot carry")


def test_domain_name_fits_host_file_names(git_repo: GitRepo) -> None:
    long = ".".join(["a" * 60] * 4)  # a valid 243-character subdomain
    git_repo.write("vms/web.yaml", vm(long).replace("metadata:\n", "metadata:\n  namespace: team\n"))
    git_repo.commit()
    assert_one_line_error(validate(git_repo), "vms/web.yaml:", "fit the host's file names")


def render_document(out: str) -> ET.Element:
    """``render`` output (comments, then each domain) as one well-formed document."""
    return ET.fromstring(
        f"<all>{out}</all>", parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))
    )


def test_render_comments_stay_well_formed(git_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    crafted = 'x--><domain type="kvm"><name>evil</name></domain><!--'
    git_repo.write("vms/web.yaml", vm("a--b"))
    git_repo.write(f"{crafted}/vm.yaml", vm("c"))
    git_repo.commit()
    assert cli.main(["render", "--repo", str(git_repo.path)]) == 0
    doc = render_document(capsys.readouterr().out)
    assert [d.findtext("name") for d in doc.findall("domain")] == ["a--b", "c"]
    comment_tag: Any = ET.Comment  # the stub types iter()'s tag as a string; Comment is its tag for comments
    comments = [c.text or "" for c in doc.iter(comment_tag)]
    assert any("vm/a-\\-b from vms/web.yaml" in c for c in comments)
    assert any('x-\\-><domain type="kvm">' in c for c in comments)


def test_terminal_escapes_in_file_names_are_printed_escaped(git_repo: GitRepo) -> None:
    name = "vms/\x1b]0;owned\x07\x1b[2Jweb.yaml"
    git_repo.write(name, vm("web", memory="-1Gi"))
    git_repo.commit()
    proc = validate(git_repo)
    assert_one_line_error(proc, "vms/\\x1b]0;owned\\x07\\x1b[2Jweb.yaml:")
    assert "\x1b" not in proc.stdout + proc.stderr
    assert "\x07" not in proc.stdout + proc.stderr


def test_terminal_escapes_in_messages_are_printed_escaped(git_repo: GitRepo) -> None:
    git_repo.write("kustomization.yaml", 'resources:\n  - "\\e[2J\\nreconciler: all good.yaml"\n')
    git_repo.commit()
    proc = validate(git_repo)
    assert_one_line_error(proc, "kustomization.yaml:2:", "\\x1b[2J\\nreconciler: all good.yaml")
    assert "\x1b" not in proc.stdout + proc.stderr
    assert len(proc.stdout.strip().splitlines()) == 1  # a newline in a name forges no line


@pytest.mark.parametrize(
    "ref",
    [
        "HEAD@{yesterday}",
        "HEAD@{1.day.ago}",
        "@{-1}",
        "HEAD@{0}",
        "HEAD:../x",
        "HEAD:vms",
        "HEAD:vms/web.yaml",
        "HEAD^{tree}",
        ":/first",
        "HEAD~5",
        "@{upstream}",
        "main@{99}",
        "HEAD^!",
        "HEAD..HEAD",
        "--output=/tmp/x",
        "",
        "a\x1b[31mb",
    ],
)
def test_every_ref_form_resolves_or_is_one_line(git_repo: GitRepo, ref: str) -> None:
    git_repo.write("vms/web.yaml", vm())
    git_repo.commit("first")
    git_repo.git("checkout", "-q", "-b", "other")
    git_repo.git("checkout", "-q", "main")
    proc = validate(git_repo, f"--ref={ref}")
    assert "Traceback" not in proc.stderr
    if proc.returncode == 0:
        assert "valid, 1 VM" in proc.stdout
    else:
        assert proc.returncode == 1
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert "cannot resolve ref" in lines[0]
        assert "\x1b" not in lines[0]


@pytest.mark.parametrize("kind", ["device", "fifo", "loop", "oversized"])
def test_only_regular_files_of_bounded_size_are_read(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "x.yaml"
    if kind == "device":
        target = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "loop":
        (tmp_path / "y.yaml").symlink_to(target)
        target.symlink_to(tmp_path / "y.yaml")
    else:
        with target.open("wb") as fh:  # sparse: 65 MiB on paper, nothing on disk
            fh.truncate(65 << 20)
    proc = run_cli("expand", "-f", str(target))
    want = {
        "device": "not a regular file",
        "fifo": "not a regular file",
        "loop": "Too many levels of symbolic links",
        "oversized": "one file may hold",
    }[kind]
    assert_one_line_error(proc, want)
    # The same in a directory build (the work-tree view): a loop, a FIFO.
    if kind in ("fifo", "loop"):
        proc = run_cli("build", str(tmp_path), "--root", str(tmp_path))
        assert_one_line_error(proc, "not a regular file" if kind == "fifo" else "a symlink loop")


def test_build_never_follows_a_symlinked_entry_out_of_the_work_tree(
    git_repo: GitRepo, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n")
    (git_repo.path / "entry").symlink_to(outside)
    git_repo.commit("a symlinked entry")
    proc = run_cli("build", "entry", cwd=git_repo.path)
    assert_one_line_error(proc, "outside the root")
    assert "Secret" not in proc.stdout
