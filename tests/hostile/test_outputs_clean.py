"""Hostile input, outputs side: what apply would refuse is refused first, host paths stay
host paths, and what a commit, a remote or a client controls never reaches an output raw.

Every case runs ``reconciler`` (or a short Python program) in a child process under
``tests.helpers.bounded``'s limits (CPU seconds, address space, a wall-clock hang guard)
and asserts: it ended by itself, no traceback, the right exit code and the right words.

- validate and plan refuse, at the file:line of the cause, what the ISO builder and the
  volume layout would refuse: a build Secret without ``userdata`` / ``networkdata``
  (a ``strinData`` typo), non-UTF-8 user data or SSH keys, keys that are no file name
  (``..``, ``""``, ``a/b``, ``../x``), ``binaryData`` or ``data`` that is no base64, non-string
  ConfigMap values, ``secretRef`` names ``../../etc`` or ``UPPER``, an emptyDisk
  ``root.overlay`` beside a containerDisk ``root`` (one generated file);
- ``allowedDirectories`` that are or resolve to ``/`` or a system tree
  (``/proc/self/root``, a symlink to ``/``) are refused; a file given on the command line
  that is a committed symlink out of its repository is never read (the PR flow's
  ``diff --host-config hosts/host.yaml``); a duplicate key names no value;
- a ``revisionName`` with escape sequences, newlines and Markdown reaches validate's
  warnings, the diff's text, its Markdown and its JSON as inert text: no ESC, no forged
  line, heading, mention, autolink or HTML; every string of the diff's JSON (paths, names,
  annotations in a spec diff, revision names) is printable and holds no credentials;
- an error quoting a committed value 50,000 characters long (an image-map name, a
  hostDisk path) shows it cut, with its length, in validate, plan and every diff format;
- credentials of ``source.repo`` appear nowhere: ``run --once`` output, the JSON log,
  ``state.json``, ``status``, ``/healthz`` and ``/api/status``;
- the webhook listener answers each malformed request with a 4xx and one log line
  (non-ASCII signature or token, unknown method, bad request line, a header too long,
  a body too large), and a client that drops its connection costs a count only;
- ``revisionName: git:<commit>`` pins read the same in validate, plan and diff, and a
  revision pinning more trees than the budget is an error at a VM's line.
"""

from __future__ import annotations

import base64
import json
import re
import textwrap
from typing import TYPE_CHECKING

import pytest

from tests.helpers.bounded import MEMORY_BYTES, assert_typed_error, run_cli, run_python

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

ESC = "\x1b"
TOKEN = "ghp_SECRETTOKEN0123456789"

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory: {{guest: 64Mi}}
        devices:
          disks:
{disks}      volumes:
{volumes}{credentials}"""


def vm(volumes: dict[str, str], name: str = "web", credentials: str = "") -> str:
    """A VM with one virtio disk per volume (``{name: "kind: {...}"}``)."""
    disks = "".join(f"            - name: {n}\n              disk: {{bus: virtio}}\n" for n in volumes)
    vols = "".join(f"        - name: {n}\n          {src}\n" for n, src in volumes.items())
    return VM.format(name=name, disks=disks, volumes=vols, credentials=credentials)


def secret(name: str, body: str) -> str:
    return f"---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n{body}"


def config_map(name: str, body: str) -> str:
    return f"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{body}"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def validate(repo: GitRepo, *extra: str) -> tuple[str, int]:
    b = run_cli("validate", "--repo", str(repo.path), *extra)
    assert not b.killed, b.output
    assert "Traceback" not in b.output, b.output
    return b.output, b.proc.returncode


def commit(repo: GitRepo, text: str) -> None:
    repo.write("vm.yaml", text)
    repo.commit()


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# -- validate knows what apply needs -------------------------------------------------------

CLOUD_INIT = {"cidata": "cloudInitNoCloud: {secretRef: {name: cloud}}"}
NETWORK = {"cidata": "cloudInitNoCloud: {userData: '#cloud-config', networkDataSecretRef: {name: net}}"}


@pytest.mark.parametrize(
    ("volumes", "objects", "fragment", "field"),
    [
        pytest.param(
            CLOUD_INIT,
            secret("cloud", "strinData:\n  userdata: '#cloud-config'\n"),
            "Secret cloud has no key userdata or userData",
            "secretRef",
            id="userdata-typo-strinData",
        ),
        pytest.param(
            CLOUD_INIT,
            secret("cloud", "stringData:\n  password: x\n"),
            "Secret cloud has no key userdata or userData (keys: password)",
            "secretRef",
            id="userdata-missing",
        ),
        pytest.param(
            NETWORK,
            secret("net", "stringData:\n  userdata: x\n"),
            "Secret net has no key networkdata or networkData",
            "networkDataSecretRef",
            id="networkdata-missing",
        ),
        pytest.param(
            CLOUD_INIT,
            secret("cloud", f"data:\n  userdata: {b64(b'#cloud-config' + bytes([0xFF, 0xFE]))}\n"),
            "key userdata: not UTF-8 text",
            "secretRef",
            id="userdata-not-utf8",
        ),
        pytest.param(
            {"cidata": "cloudInitNoCloud: {userData: '#cloud-config', networkDataSecretRef: {name: net}}"},
            secret("net", f"data:\n  networkData: {b64(bytes([0xC3, 0x28]))}\n"),
            "key networkData: not UTF-8 text",
            "networkDataSecretRef",
            id="networkdata-not-utf8",
        ),
        pytest.param(
            {"cidata": "cloudInitNoCloud: {secretRef: {name: ../../etc}}"},
            "",
            "Secret name '../../etc' is not a Kubernetes name",
            "secretRef",
            id="secretref-path-traversal",
        ),
        pytest.param(
            {"cidata": "cloudInitNoCloud: {secretRef: {name: UPPER}}"},
            "",
            "Secret name 'UPPER' is not a Kubernetes name",
            "secretRef",
            id="secretref-upper-case",
        ),
        pytest.param(
            {"cfg": "secret: {secretName: ../x}"},
            "",
            "Secret name '../x' is not a Kubernetes name",
            "secretName",
            id="secret-volume-traversal",
        ),
        pytest.param(
            {"cfg": "configMap: {name: ../../etc/passwd}"},
            "",
            "ConfigMap name '../../etc/passwd' is not a Kubernetes name",
            "configMap",
            id="configmap-volume-traversal",
        ),
        pytest.param(
            {"cfg": "configMap: {name: Cfg}"},
            "",
            "ConfigMap name 'Cfg' is not a Kubernetes name",
            "configMap",
            id="configmap-upper-case",
        ),
    ],
)
def test_what_the_iso_builder_refuses_validate_refuses_at_the_vm(
    git_repo: GitRepo, volumes: dict[str, str], objects: str, fragment: str, field: str
) -> None:
    text = vm(volumes) + objects
    commit(git_repo, text)
    out, code = validate(git_repo)
    assert code == 1, out
    assert f"vm.yaml:{line_of(text, field)}:" in out, out
    assert fragment in out


SSH = """\
      accessCredentials:
        - sshPublicKey:
            source: {secret: {secretName: keys}}
            propagationMethod: {noCloud: {}}
"""


def test_ssh_keys_that_are_not_utf8_are_refused_at_validate(git_repo: GitRepo) -> None:
    text = vm({"cidata": "cloudInitNoCloud: {userData: '#cloud-config'}"}, credentials=SSH) + secret(
        "keys", f"data:\n  key1: {b64(b'ssh-ed25519 AAAA' + bytes([0x80]))}\n"
    )
    commit(git_repo, text)
    out, code = validate(git_repo)
    assert code == 1
    assert f"vm.yaml:{line_of(text, 'secretName: keys')}:" in out
    assert "Secret default/keys key key1: not UTF-8 text" in out


BAD_KEYS = ["'..'", "'.'", "''", "a/b", "../x", "..data", "'a b'", "'k\\u0000'"]


@pytest.mark.parametrize("key", BAD_KEYS)
def test_secret_keys_that_are_no_file_name_are_refused_at_the_secret(git_repo: GitRepo, key: str) -> None:
    objects = secret("cfg", f'stringData:\n  {key}: "x"\n')
    text = vm({"cfg": "secret: {secretName: cfg}"}) + objects
    commit(git_repo, text)
    out, code = validate(git_repo)
    assert code == 1, out
    assert f"vm.yaml:{len(text.splitlines())}:" in out, out
    assert "is no file name" in out
    assert "Secret cfg" in out


@pytest.mark.parametrize("key", ["'..'", "''", "a/b", "../x"])
def test_config_map_keys_that_are_no_file_name_are_refused_at_the_config_map(
    git_repo: GitRepo, key: str
) -> None:
    objects = config_map("cfg", f'data:\n  {key}: "x"\n')
    text = vm({"cfg": "configMap: {name: cfg}"}) + objects
    commit(git_repo, text)
    out, code = validate(git_repo)
    assert code == 1, out
    assert f"vm.yaml:{len(text.splitlines())}:" in out, out
    assert "ConfigMap cfg: key" in out
    assert "is no file name" in out


@pytest.mark.parametrize("value", ["null", "{a: 1}", "1", "[x, y]", "true"])
def test_config_map_values_that_are_not_strings_are_refused(git_repo: GitRepo, value: str) -> None:
    text = vm({"cfg": "configMap: {name: cfg}"}) + config_map("cfg", f"data:\n  app.conf: {value}\n")
    commit(git_repo, text)
    out, code = validate(git_repo)
    assert code == 1, out
    assert f"vm.yaml:{len(text.splitlines())}:" in out, out
    assert "ConfigMap cfg: data.app.conf must be a string" in out
    assert "{'a': 1}" not in out


@pytest.mark.parametrize(
    ("kind", "body", "fragment"),
    [
        (
            "configMap",
            "binaryData:\n  blob: '!!not base64!!'\n",
            "ConfigMap cfg: binaryData.blob is not valid base64",
        ),
        ("secret", "data:\n  blob: '%%%'\n", "Secret cfg: data.blob is not valid base64"),
        (
            "configMap",
            "data: {a: x}\nbinaryData: {a: eA==}\n",
            "ConfigMap cfg: key a is in both data and binaryData",
        ),
        ("configMap", "data: [a, b]\n", "ConfigMap cfg: data must be a mapping"),
    ],
)
def test_encodings_of_config_objects_are_checked_at_validate(
    git_repo: GitRepo, kind: str, body: str, fragment: str
) -> None:
    source = "configMap: {name: cfg}" if kind == "configMap" else "secret: {secretName: cfg}"
    obj = config_map("cfg", body) if kind == "configMap" else secret("cfg", body)
    commit(git_repo, vm({"cfg": source}) + obj)
    out, code = validate(git_repo)
    assert code == 1, out
    assert fragment in out


HOST = """\
allowedDirectories: [/var/lib/reconciler]
images:
  fedora: /var/lib/reconciler/images/fedora.qcow2
"""


def test_two_volumes_rendering_to_one_file_are_refused(git_repo: GitRepo, tmp_path: Path) -> None:
    (tmp_path / "host.yaml").write_text(HOST)
    text = vm({"root": "containerDisk: {image: fedora}", "root.overlay": "emptyDisk: {capacity: 1Gi}"})
    commit(git_repo, text)
    out, code = validate(git_repo, "--host-config", str(tmp_path / "host.yaml"))
    assert code == 1, out
    assert f"vm.yaml:{line_of(text, 'emptyDisk')}:" in out
    assert "'root.overlay.qcow2' is also the file of spec.template.spec.volumes[0].containerDisk" in out


def test_plan_refuses_what_validate_refuses_before_touching_the_host(git_repo: GitRepo) -> None:
    commit(git_repo, vm(CLOUD_INIT) + secret("cloud", "strinData:\n  userdata: x\n"))
    b = run_cli("plan", "--connect", "test:///default", "--repo", str(git_repo.path))
    assert_typed_error(b, "Secret cloud has no key userdata or userData")


def test_a_valid_build_secret_still_validates(git_repo: GitRepo) -> None:
    commit(
        git_repo,
        vm(CLOUD_INIT, credentials=SSH)
        + secret("cloud", "stringData:\n  userdata: '#cloud-config'\n")
        + secret("keys", "stringData:\n  k: ssh-ed25519 AAAA\n"),
    )
    out, code = validate(git_repo)
    assert code == 0, out
    assert "valid, 1 VM" in out


# -- host paths -------------------------------------------------------------------------


def host_validate(git_repo: GitRepo, tmp_path: Path, host: str) -> tuple[str, int]:
    (tmp_path / "host.yaml").write_text(host)
    commit(git_repo, vm({"cidata": "cloudInitNoCloud: {userData: x}"}))
    return validate(git_repo, "--host-config", str(tmp_path / "host.yaml"))


@pytest.mark.parametrize(
    ("allowed", "fragment"),
    [
        ("/proc/self/root", "is inside /proc, the host's own system"),
        ("/etc/libvirt", "is inside /etc, the host's own system"),
        ("/usr", "is inside /usr, the host's own system"),
        ("/sys/fs", "is inside /sys, the host's own system"),
        ("/dev/shm", "is inside /dev, the host's own system"),
    ],
)
def test_allowed_directories_in_system_trees_are_refused(
    git_repo: GitRepo, tmp_path: Path, allowed: str, fragment: str
) -> None:
    out, code = host_validate(git_repo, tmp_path, f"allowedDirectories: [{allowed}]\n")
    assert code == 1
    assert "host.yaml:1:" in out
    assert fragment in out


@pytest.mark.parametrize("target", ["/", "/etc", "/proc/self/root"])
def test_allowed_directories_resolving_to_root_or_a_system_tree_are_refused(
    git_repo: GitRepo, tmp_path: Path, target: str
) -> None:
    link = tmp_path / "vms"
    link.symlink_to(target)
    out, code = host_validate(git_repo, tmp_path, f"allowedDirectories: [{link}]\n")
    assert code == 1, out
    assert "host.yaml:1:" in out
    assert f"{link} resolves to /" in out


def test_provision_allows_nothing_under_a_directory_resolving_to_root(tmp_path: Path) -> None:
    (tmp_path / "root").symlink_to("/")
    code = textwrap.dedent(f"""
        from reconciler.settings.host import HostConfig
        from reconciler.host.provision import resolved_path
        from reconciler.host.payload import ProvisionError
        host = HostConfig(allowed_dirs=({str(tmp_path / "root")!r},))
        try:
            resolved_path({str(tmp_path / "root/etc/shadow")!r}, host, "vm/web")
        except ProvisionError as err:
            print("refused:", err)
        """)
    b = run_python(code)
    assert_typed_error(b, "refused: vm/web:", "is outside the allowed directories", code=0)


def outside_secret(tmp_path: Path) -> Path:
    outside = tmp_path / "outside.yaml"
    outside.write_text(f"token: {TOKEN}\ntoken: again\n")
    return outside


@pytest.mark.parametrize("option", ["--host-config", "--host-facts"])
def test_a_committed_symlink_out_of_the_repository_is_not_read_by_validate(
    git_repo: GitRepo, tmp_path: Path, option: str
) -> None:
    commit(git_repo, vm({"cidata": "cloudInitNoCloud: {userData: x}"}))
    (git_repo.path / "hosts").mkdir()
    (git_repo.path / "hosts/host.yaml").symlink_to(outside_secret(tmp_path))
    git_repo.commit("link")
    b = run_cli("validate", option, "hosts/host.yaml", cwd=git_repo.path)
    assert_typed_error(b, "hosts/host.yaml: a symlink leading outside the repository")
    assert TOKEN not in b.output


@pytest.mark.parametrize("option", ["--host-config", "--config"])
def test_the_pr_flow_never_follows_a_committed_symlink_out_of_the_repository(
    git_repo: GitRepo, tmp_path: Path, option: str
) -> None:
    commit(git_repo, vm({"cidata": "cloudInitNoCloud: {userData: x}"}))
    (git_repo.path / "hosts").mkdir()
    (git_repo.path / "hosts/host.yaml").symlink_to(outside_secret(tmp_path))
    git_repo.commit("link")
    b = run_cli("diff", "--base", "HEAD~1", "--head", "HEAD", option, "hosts/host.yaml", cwd=git_repo.path)
    assert_typed_error(b, "a symlink leading outside the repository")
    assert TOKEN not in b.output


def test_a_symlink_inside_the_repository_is_read(git_repo: GitRepo) -> None:
    git_repo.write("vms/vm.yaml", vm({"cidata": "cloudInitNoCloud: {userData: x}"}))
    git_repo.write("hosts/real.yaml", "name: h1\n")
    (git_repo.path / "hosts/host.yaml").symlink_to("real.yaml")
    git_repo.commit("link")
    b = run_cli("validate", "--path", "vms", "--host-config", "hosts/host.yaml", cwd=git_repo.path)
    assert_typed_error(b, "valid, 1 VM", code=0)


@pytest.mark.parametrize("command", ["validate", "diff"])
def test_a_duplicate_key_names_the_key_never_its_values(
    git_repo: GitRepo, tmp_path: Path, command: str
) -> None:
    commit(git_repo, vm({"cidata": "cloudInitNoCloud: {userData: x}"}))
    host = outside_secret(tmp_path)
    extra = ("--base", "HEAD") if command == "diff" else ()
    b = run_cli(command, "--repo", str(git_repo.path), *extra, "--host-config", str(host))
    assert_typed_error(b, f"{host}:2:1: duplicate key 'token'")
    assert TOKEN not in b.output
    assert "again" not in b.output


# -- output channels -------------------------------------------------------------------

HOSTILE_REV = (
    "r1\\e[31mRED\\r\\n## Heading\\n@admin [click](https://evil.example) <b>x</b> | www.evil.example |"
)
PINNED = f"""\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata:
  name: small
spec:
  cpu: {{guest: 1}}
  memory: {{guest: 64Mi}}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Halted
  instancetype:
    kind: VirtualMachineInstancetype
    name: small
    revisionName: "{HOSTILE_REV}"
  template:
    spec:
      domain:
        devices: {{}}
"""


@pytest.fixture
def hostile_revision(git_repo: GitRepo) -> GitRepo:
    commit(git_repo, vm({"cidata": "cloudInitNoCloud: {userData: x}"}, name="other"))
    git_repo.write("pinned.yaml", PINNED)
    git_repo.commit("hostile revisionName")
    return git_repo


def assert_inert(text: str) -> None:
    """No terminal control and no line the commit made: the name stays on its line."""
    assert ESC not in text
    assert "\r" not in text
    for line in text.splitlines():
        assert not line.startswith("## Heading"), line
        assert not line.startswith("@admin"), line


def test_validate_prints_a_hostile_revision_name_as_inert_text(hostile_revision: GitRepo) -> None:
    b = run_cli("validate", "--repo", str(hostile_revision.path))
    assert_typed_error(b, "valid, 2 VMs", "revisionName r1\\x1b[31mRED\\r\\n## Heading", code=0)
    assert_inert(b.output)


def test_validate_json_carries_the_revision_name_printable(hostile_revision: GitRepo) -> None:
    b = run_cli("validate", "--repo", str(hostile_revision.path), "-o", "json")
    assert_typed_error(b, code=0)
    doc = json.loads(b.proc.stdout)
    (warning,) = [w for w in doc["warnings"] if "revisionName" in w]
    assert warning.isprintable()
    assert "\\x1b" in warning


def diff(repo: GitRepo, fmt: str) -> str:
    b = run_cli("diff", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "-o", fmt)
    assert_typed_error(b, code=2)
    return b.proc.stdout


def test_the_diff_text_shows_a_hostile_revision_name_inert(hostile_revision: GitRepo) -> None:
    out = diff(hostile_revision, "text")
    assert "revisionName r1\\x1b[31mRED\\r\\n## Heading" in out
    assert_inert(out)


def test_the_markdown_comment_gets_no_heading_mention_link_or_html_from_a_commit(
    hostile_revision: GitRepo,
) -> None:
    out = diff(hostile_revision, "markdown")
    assert_inert(out)
    assert re.search(r"(?<![\w`])@admin", out) is None  # no mention
    assert "https://evil" not in out  # no autolink
    assert "www.evil" not in out
    assert "<b>x</b>" not in out
    assert "[click](" not in out  # no link
    assert "\\#\\# Heading" in out  # shown, escaped


def test_the_json_report_keeps_the_revision_name_printable(hostile_revision: GitRepo) -> None:
    doc = json.loads(diff(hostile_revision, "json"))
    text = json.dumps(doc, ensure_ascii=False)
    assert ESC not in text
    assert "\\u001b" not in text


def json_strings(doc: object, key: str = "") -> Iterator[tuple[str, str]]:
    """Every string of a JSON document, with the key that holds it."""
    if isinstance(doc, str):
        yield key, doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield from json_strings(v, k)
    elif isinstance(doc, list):
        for v in doc:
            yield from json_strings(v, key)


def test_every_string_of_the_json_report_is_clean(hostile_revision: GitRepo) -> None:
    """Names, paths, annotations and revision names from the commit, with control
    characters, bidi overrides, newlines and a URL's credentials: each string of the
    report is printable (a ``specDiff`` line by line) and carries no credentials."""
    annotation = f"a\\u202eevil\\e[2J\\nforged line\\t https://u:{TOKEN}@h.example/x"
    hostile_revision.write(
        "pinned.yaml",
        PINNED.replace("  name: web\n", f'  name: web\n  annotations:\n    note: "{annotation}"\n'),
    )
    hostile_revision.write("vms/x\x1b[2J\u202ey\u2066.yaml", vm({}, name="odd"))
    hostile_revision.git("add", "-A")
    hostile_revision.git("commit", "-q", "--amend", "--no-edit")
    doc = json.loads(diff(hostile_revision, "json"))
    strings = list(json_strings(doc))
    assert {k for k, _ in strings} >= {"sourcePath", "specDiff", "subject", "ref"}
    for key, text in strings:
        lines = text.split("\n") if key == "specDiff" else [text]
        assert all(line.isprintable() for line in lines), (key, text)
        assert TOKEN not in text, key
    shown = json.dumps(doc, ensure_ascii=False)
    assert "vms/x\\\\x1b[2J\\\\u202ey\\\\u2066.yaml" in shown  # the path, as its escapes
    assert "a\\\\u202eevil\\\\e[2J" in shown  # the annotation, in the spec diff (ESC as go-yaml writes it)
    assert "revisionName r1\\\\x1b[31mRED" in shown  # the warning


@pytest.mark.parametrize(
    "name",
    [
        "vms/#@admin [x](https://e.example).yaml",
        "vms/\x1b[2J.yaml",
        "vms/a\u202eb.yaml",
        "vms/`code`<i>.yaml",
    ],
)
def test_a_hostile_file_name_in_an_error_stays_inert_in_the_markdown(git_repo: GitRepo, name: str) -> None:
    commit(git_repo, vm({"cidata": "cloudInitNoCloud: {userData: x}"}))
    git_repo.write(
        name, "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: bad}\nspec: []\n"
    )
    git_repo.commit("bad file")
    b = run_cli("diff", "--repo", str(git_repo.path), "--base", "HEAD~1", "--head", "HEAD", "-o", "markdown")
    assert_typed_error(b, code=1)
    out = b.proc.stdout
    assert_inert(out)
    assert "\u202e" not in out
    error_lines = [line for line in out.splitlines() if line.startswith("- ")]
    assert error_lines
    assert all(line.startswith("- `") and line.endswith("`") for line in error_lines), error_lines


LONG = 50_000  # characters of one committed value an error quotes


@pytest.fixture
def long_values(git_repo: GitRepo) -> GitRepo:
    """Two VMs whose errors quote a value 50,000 characters long: an image-map name (a
    render error) and a hostDisk path (outside the allowed directories)."""
    commit(git_repo, vm({"root": "containerDisk: {image: base}"}, name="fine"))
    image = vm({"root": f"containerDisk: {{image: img{'x' * LONG}END}}"}, name="image")
    disk = vm({"root": f"hostDisk: {{type: Disk, path: /srv/{'p' * LONG}END}}"}, name="disk")
    git_repo.write("long.yaml", image + "---\n" + disk)
    git_repo.commit("long values")
    return git_repo


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(("validate",), id="validate"),
        pytest.param(("validate", "-o", "json"), id="validate-json"),
        pytest.param(("plan", "--connect", "test:///default", "-j1"), id="plan"),
        pytest.param(("diff", "--base", "HEAD~1", "--head", "HEAD"), id="diff-text"),
        pytest.param(("diff", "--base", "HEAD~1", "--head", "HEAD", "-o", "json"), id="diff-json"),
        pytest.param(("diff", "--base", "HEAD~1", "--head", "HEAD", "-o", "markdown"), id="diff-markdown"),
    ],
)
def test_an_error_quoting_a_long_value_shows_it_cut(long_values: GitRepo, command: tuple[str, ...]) -> None:
    """Each error names its VM and shows the value's start, its length and its end, never
    the 50,000 characters: the output stays a few KB whatever the commit holds."""
    b = run_cli(*command, "--repo", str(long_values.path))
    assert_typed_error(
        b, "vm/image", "vm/disk", f"{LONG + 8} chars", "xxxxEND", f"{LONG + 10} chars", "ppppEND"
    )
    assert "x" * 1000 not in b.output
    assert "p" * 1000 not in b.output
    assert len(b.output) < 8000, len(b.output)


# -- credentials in the source URL --------------------------------------------------------


@pytest.fixture
def credential_daemon(tmp_path: Path) -> tuple[Path, Path]:
    state = tmp_path / "state"
    config = tmp_path / "config.yaml"
    config.write_text(
        f'source: {{repo: "https://user:{TOKEN}@127.0.0.1:9/r.git"}}\n'
        f'hosts: [{{connect: "test:///default"}}]\nstateDir: {state}\n'
    )
    return config, state


def test_run_once_never_prints_or_stores_the_credentials_of_the_source(
    credential_daemon: tuple[Path, Path],
) -> None:
    config, state = credential_daemon
    b = run_cli("run", "--once", "--config", str(config), "--log-format", "json")
    assert_typed_error(b, "SourceFailed: https://127.0.0.1:9/r.git: git clone failed")
    assert TOKEN not in b.output
    assert "user:" not in b.output
    for line in b.proc.stderr.splitlines():
        if line.startswith("{"):
            json.loads(line)  # JSON log lines, each whole
    stored = "".join(p.read_text(errors="replace") for p in state.rglob("*") if p.is_file())
    assert "r.git" in stored
    assert TOKEN not in stored
    s = run_cli("status", "--config", str(config), "-o", "json")
    assert TOKEN not in s.output
    assert "Traceback" not in s.output


def test_health_and_status_documents_are_served_without_credentials() -> None:
    code = textwrap.dedent(f"""
        import json, urllib.request
        from reconciler.daemon.http import HttpServer
        url = "https://user:{TOKEN}@git.example/r.git"
        info = {{"message": url + ": fetch failed", "hosts": [{{"name": "h", "error": "\\x1b[31m" + url}}]}}
        s = HttpServer("127.0.0.1:0", secret=lambda: b"", on_push=lambda: None,
                       health=lambda: (True, info), metrics=lambda: (b"", "text/plain"),
                       status=lambda: {{"source": {{"repo": url}}, **info}})
        s.start()
        for path in ("/healthz", "/api/status"):
            body = urllib.request.urlopen("http://" + s.address + path, timeout=10).read().decode()
            json.loads(body)
            print(path, body)
        s.close()
        """)
    b = run_python(code)
    assert_typed_error(b, "/healthz", "/api/status", "https://git.example/r.git", code=0)
    assert TOKEN not in b.output
    assert "\\\\x1b[31m" in b.proc.stdout  # shown as an escape, inside JSON


# -- the webhook listener -----------------------------------------------------------------

LISTENER = """
import socket, time
from reconciler.daemon.http import HttpServer
dropped, hooks = [], []
s = HttpServer("127.0.0.1:0", secret=lambda: b"s3cret", on_push=lambda: None,
               health=lambda: (True, {}), metrics=lambda: (b"", "text/plain"),
               on_webhook=hooks.append, on_dropped=lambda: dropped.append(1))
s.start()
host, port = s.address.rsplit(":", 1)

def send(raw, read=True):
    c = socket.create_connection((host, int(port)))
    c.sendall(raw)
    if not read:
        c.close()
        return ""
    c.settimeout(10)
    out = b""
    while b"\\r\\n" not in out:
        got = c.recv(65536)
        if not got:
            break
        out += got
    c.close()
    return out.split(b"\\r\\n")[0].decode("latin-1")
"""


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        pytest.param(
            "POST /hooks/git HTTP/1.1\r\nContent-Length: 2\r\nX-Hub-Signature-256: sha256=\xe9\xe9\r\n\r\n{}",
            "401",
            id="non-ascii-signature",
        ),
        pytest.param(
            "POST /hooks/git HTTP/1.1\r\nContent-Length: 2\r\nX-Hub-Signature-256: sha\xff=00\r\n\r\n{}",
            "401",
            id="non-ascii-algorithm",
        ),
        pytest.param(
            "POST /hooks/git HTTP/1.1\r\nContent-Length: 2\r\nX-Gitlab-Token: s3cr\xe9t\r\n\r\n{}",
            "401",
            id="non-ascii-gitlab-token",
        ),
        pytest.param(
            "POST /hooks/git HTTP/1.1\r\nContent-Length: 2\r\nX-Hub-Signature-256: md5=abc\r\n\r\n{}",
            "401",
            id="wrong-algorithm",
        ),
        pytest.param("POST /hooks/git HTTP/1.1\r\nContent-Length: -5\r\n\r\n", "413", id="negative-length"),
        pytest.param(
            "POST /hooks/git HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", "413", id="huge-length"
        ),
        pytest.param(
            "POST /hooks/git HTTP/1.1\r\nContent-Length: x\r\n\r\n", "413", id="length-not-a-number"
        ),
        pytest.param("BREW /hooks/git HTTP/1.1\r\n\r\n", "405", id="unknown-method"),
        pytest.param("GET / HTTP/1.1\r\nX: " + "a" * 70000 + "\r\n\r\n", "431", id="header-too-long"),
        pytest.param("GET /\x1b[2J HTTP/1.1\r\n\r\n", "404", id="escape-in-path"),
    ],
)
def test_a_malformed_request_gets_a_4xx_and_one_log_line(request_bytes: str, status: str) -> None:
    code = LISTENER + textwrap.dedent(f"""
        print("status", send({request_bytes!r}.encode("latin-1")))
        time.sleep(0.2)
        print("dropped", len(dropped), "hooks", hooks)
        s.close()
        """)
    b = run_python(code)
    assert_typed_error(b, code=0)
    first = next(line for line in b.proc.stdout.splitlines() if line.startswith("status"))
    assert f" {status} " in first + " ", first
    assert ESC not in b.output
    logged = [line for line in b.output.splitlines() if "[warning" in line]
    assert len(logged) == (0 if status == "404" else 1), logged


@pytest.mark.parametrize("line", ["garbage", "GET / HTTP/9.9", "GET / HTTP/1.1 extra", "\x00\xff"])
def test_a_bad_request_line_gets_400_and_one_line(line: str) -> None:
    code = LISTENER + textwrap.dedent(f"""
        c = socket.create_connection((host, int(port)))
        c.sendall({line!r}.encode("latin-1") + b"\\r\\n\\r\\n")
        c.settimeout(10)
        reply = b""
        while b"</html>" not in reply:
            got = c.recv(4096)
            if not got:
                break
            reply += got
        print("reply", reply.decode())
        c.close()
        time.sleep(0.2)
        s.close()
        """)
    b = run_python(code)
    assert_typed_error(b, "Error code: 400", code=0)
    assert b.output.count("http request refused") == 1


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("POST /hooks/git HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc", id="short-body"),
        pytest.param("POST /hooks/git HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", id="gone-before-reply"),
        pytest.param("GET /healthz HTTP/1.1\r\n", id="no-end-of-headers"),
        pytest.param("GET /healthz HTTP/1.1\r\nHost: x", id="cut-in-a-header"),
    ],
)
def test_clients_that_drop_their_connection_cost_a_count_only(raw: str) -> None:
    """100 clients that go away mid-request: each is a count (dropped, or a rejected
    webhook with its one line), none a traceback, and the listener still answers."""
    code = LISTENER + textwrap.dedent(f"""
        for _ in range(100):
            send({raw!r}.encode(), read=False)
        deadline = time.monotonic() + 20
        while len(dropped) + len(hooks) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        print("dropped", len(dropped), "hooks", len(hooks))
        print("alive", send(b"GET /healthz HTTP/1.1\\r\\n\\r\\n"))
        s.close()
        """)
    # Each handler thread reserves an 8 MiB stack of address space: 100 clients in flight
    # at once (the listener accepts a burst at once) pass the default 512 MiB bound, and
    # 1 GiB beside the child's preloaded package, without using the memory.
    b = run_python(code, memory=4 * MEMORY_BYTES)
    assert_typed_error(b, "alive HTTP/1.1 200", code=0)
    counts = re.search(r"dropped (\d+) hooks (\d+)", b.proc.stdout)
    assert counts is not None
    assert int(counts[1]) + int(counts[2]) >= 100, b.proc.stdout
    assert "http request failed" not in b.output
    assert len([line for line in b.output.splitlines() if "[warning" in line]) == int(counts[2])


# -- revisionName: git:<commit> ------------------------------------------------------------

IT = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata:
  name: small
spec:
  cpu: {{guest: 1}}
  memory: {{guest: {memory}}}
"""


def pinned_vm(name: str, commit_sha: str) -> str:
    return (
        f"---\napiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: {name}\nspec:\n"
        "  runStrategy: Halted\n"
        f"  instancetype: {{kind: VirtualMachineInstancetype, name: small, revisionName: 'git:{commit_sha}'}}\n"
        "  template:\n    spec:\n      domain:\n        devices: {}\n"
    )


@pytest.fixture
def pins(git_repo: GitRepo) -> GitRepo:
    git_repo.write("it.yaml", IT.format(memory="64Mi"))
    first = git_repo.commit("it")
    git_repo.write("it.yaml", IT.format(memory="128Mi"))
    git_repo.write("vms.yaml", "".join(pinned_vm(f"vm{i}", first[:12]) for i in range(50)))
    git_repo.commit("pinned")
    return git_repo


def test_validate_reads_git_pins_from_the_repository(pins: GitRepo) -> None:
    b = run_cli("validate", "--repo", str(pins.path))
    assert_typed_error(b, "valid, 50 VMs", code=0)
    assert "not supplied" not in b.output


def test_plan_reads_git_pins_as_validate_does(pins: GitRepo) -> None:
    b = run_cli("plan", "--connect", "test:///default", "--repo", str(pins.path), "-j1")
    assert_typed_error(b, "Plan: 50 to create", code=2)
    assert "not supplied" not in b.output


def test_diff_reads_git_pins_as_validate_does(pins: GitRepo) -> None:
    """A ref diffed with itself changes nothing: the pinned VMs use the revision of their
    pin on both sides, and the repository's instancetype is the same object at both."""
    b = run_cli("diff", "--repo", str(pins.path), "--base", "HEAD", "--head", "HEAD")
    assert_typed_error(b, "0 created, 0 deleted, 0 changed, 50 unchanged", code=0)
    assert "not supplied" not in b.output
    assert "instancetype/preference change" not in b.output


def test_a_pinned_vm_sees_the_repository_instancetype_change_as_a_revision_change(pins: GitRepo) -> None:
    """The repository's instancetype moves under VMs pinned to an older commit: a change of
    the repository's object (64Mi at base's pin, 128Mi then 256Mi), each VM unchanged."""
    pins.write("it.yaml", IT.format(memory="256Mi"))
    pins.commit("grow")
    b = run_cli("diff", "--repo", str(pins.path), "--base", "HEAD~1", "--head", "HEAD")
    assert_typed_error(b, "50 unchanged, 1 instancetype/preference change", "-    guest: 128Mi", code=2)
    assert "+    guest: 256Mi" in b.output
    assert "64Mi" not in b.output


def test_a_changed_pin_wins_over_the_capture_of_the_base(pins: GitRepo) -> None:
    head = pins.git("rev-parse", "HEAD")
    pins.write("vms.yaml", "".join(pinned_vm(f"vm{i}", head[:12]) for i in range(50)))
    pins.commit("repin")
    b = run_cli("diff", "--repo", str(pins.path), "--base", "HEAD~1", "--head", "HEAD")
    assert_typed_error(b, "50 changed", "memory.guest: 64Mi → 128Mi", code=2)
    assert "not supplied" not in b.output


def test_pinning_more_trees_than_the_budget_is_an_error_at_a_vm(git_repo: GitRepo) -> None:
    shas = []
    for i in range(40):
        git_repo.write("it.yaml", IT.format(memory=f"{64 + i}Mi"))
        shas.append(git_repo.commit(f"it {i}"))
    git_repo.write("vms.yaml", "".join(pinned_vm(f"vm{i}", sha[:12]) for i, sha in enumerate(shas)))
    git_repo.commit("pins")
    b = run_cli("validate", "--repo", str(git_repo.path), "-j1")
    assert_typed_error(b, "vms.yaml:", "more than 32 distinct trees are pinned in this revision")


def test_a_pin_of_an_unknown_commit_is_an_error_at_its_vm(git_repo: GitRepo) -> None:
    git_repo.write("it.yaml", IT.format(memory="64Mi"))
    git_repo.write("vms.yaml", pinned_vm("vm0", "deadbeefdead"))
    git_repo.commit("pins")
    b = run_cli("validate", "--repo", str(git_repo.path))
    assert_typed_error(
        b,
        "vms.yaml:8:65: vm/vm0: instancetype small: revision git:deadbeefdead: ",
        "cannot resolve ref 'deadbeefdead'",
    )
    assert b.output.count("deadbeefdead'") == 1  # one error, naming the pin and the cause
    assert "not supplied" not in b.output


def test_a_pin_whose_commit_fails_to_build_is_one_error_at_its_vm(git_repo: GitRepo) -> None:
    git_repo.write("it.yaml", "kind: [unclosed\n")
    broken = git_repo.commit("broken")
    git_repo.write("it.yaml", IT.format(memory="64Mi"))
    git_repo.write("vms.yaml", pinned_vm("vm0", broken[:12]))
    git_repo.commit("pins")
    b = run_cli("validate", "--repo", str(git_repo.path))
    assert_typed_error(
        b, f"vms.yaml:8:65: vm/vm0: instancetype small: revision git:{broken[:12]}: it.yaml:2:1: invalid YAML"
    )
    assert len([line for line in b.output.splitlines() if "vms.yaml" in line]) == 1, b.output
    assert "not supplied" not in b.output
