"""Hostile input, bounded: what a commit, a config file or a facts file can make us do.

Every case runs ``reconciler`` in a child capped at 30 CPU seconds and 512 MB of
address space (``tests.helpers.bounded``): it must end by itself, within those bounds,
with one of our errors naming the file (and line, where the input has lines), never a
traceback, a hang or a MemoryError.

Covers:
- the one bounded reader: ``--host-config``, ``--host-facts``, ``run --config``, a
  config's ``hostFile``, ``webhook.secretFile`` and ``decryption.ageKeyFile`` that are
  ``/dev/zero``, a FIFO, a directory or oversized; a ``state.json`` that is any of
  those is set aside and the daemon carries on;
- durations: ``intervals.resync``/``fetch`` infinite, NaN, ``1ms``, zero, negative,
  longer than a week, 400 digits, a list, a mapping; a SIGHUP reload with ``.inf``
  keeps the running configuration;
- restart windows: time zones that are tzdata directories (``America``), paths or too
  long; schedules that never open (``0 0 31 2 *``), open once in four years, have six
  fields or 4000 characters; durations under a minute or over a year; the same through
  a VM's annotation at ``validate``;
- budgets: pools of 2^31, 100000 and 1001 replicas; a revision of 25 full pools
  (objects) and a pool whose template is 1.4 MB (bytes); a VM naming 200 Secrets and
  a revision of 4097 Secrets; 30000 disks with an unknown field (the schema's problems
  capped and summarised); a 20 MB VM and a 1.6 MB document among small ones (refused
  before they are parsed); a 2 MiB file of small documents (accepted);
- document shapes: ConfigMap ``data: [a, b]`` in validate, plan and diff, and in the
  daemon (BuildFailed, not retried); ``binaryData``/``stringData``/``data`` of the
  wrong type; ``memory.guest: 1e400``, a 4400-digit quantity, ``cores: .inf``; a
  DataSource whose ``spec.source`` or ``metadata`` is a list, reached through
  ``inferFromVolume``; a submodule named in ``resources``; a duplicate key in a host
  config (its values never printed); facts and configs nested 100k deep, a facts value
  of 1e400, a config whose top level is a list.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.helpers.bounded import Bounded, assert_typed_error, run_cli, run_python
from tests.helpers.daemon import vm_rows, wait_for
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.daemon import Daemon
    from tests.helpers.git import GitRepo


def validate(repo: GitRepo, *extra: str) -> Bounded:
    return run_cli("validate", "--repo", str(repo.path), *extra)


def config_file(tmp_path: Path, repo: Path, extra: str = "") -> Path:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        f"source:\n  repo: {repo}\nconnect: test:///default\nstateDir: {tmp_path / 'state'}\n"
        f"listen: false\n{extra}"
    )
    return cfg


def run_once(cfg: Path) -> Bounded:
    return run_cli("run", "--once", "--config", str(cfg), "--log-format", "json")


def bad_file(tmp_path: Path, kind: str, oversize: int = 5 << 20) -> str:
    """A file no reader may read whole: ``/dev/zero``, a FIFO (no writer), a directory,
    or a sparse file past the reader's cap."""
    if kind == "dev-zero":
        return "/dev/zero"
    path = tmp_path / f"bad-{kind}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        with path.open("wb") as f:
            f.truncate(oversize)
    return str(path)


FILE_KINDS = ["dev-zero", "fifo", "directory", "oversized"]
REFUSED = {
    "dev-zero": "not a regular file",
    "fifo": "not a regular file",
    "directory": "not a regular file",
    "oversized": "one file may hold",
}


@pytest.fixture
def repo(git_repo: GitRepo) -> GitRepo:
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    git_repo.commit()
    return git_repo


# -- the one bounded reader ---------------------------------------------------------------


@pytest.mark.parametrize("kind", FILE_KINDS)
@pytest.mark.parametrize("flag", ["--host-config", "--host-facts"])
def test_host_files_that_are_no_regular_file_are_refused(
    repo: GitRepo, tmp_path: Path, flag: str, kind: str
) -> None:
    # A facts file may be as large as any repository file (64 MiB); a config 4 MiB.
    path = bad_file(tmp_path, kind, (65 << 20) if flag == "--host-facts" else (5 << 20))
    assert_typed_error(validate(repo, flag, path), path, REFUSED[kind])


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_a_daemon_config_that_is_no_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = bad_file(tmp_path, kind)
    assert_typed_error(run_cli("run", "--once", "--config", path), path, REFUSED[kind])


@pytest.mark.parametrize(
    ("setting", "kind"),
    [
        ("hostFile: {path}\n", "fifo"),
        ("hostFile: {path}\n", "dev-zero"),
        ("webhook: {{secretFile: {path}}}\n", "dev-zero"),
        ("decryption: {{ageKeyFile: {path}}}\n", "fifo"),
    ],
)
def test_files_a_config_names_are_read_bounded(
    repo: GitRepo, tmp_path: Path, setting: str, kind: str
) -> None:
    path = bad_file(tmp_path, kind)
    cfg = config_file(tmp_path, repo.path, setting.format(path=path))
    b = run_once(cfg)
    assert_typed_error(b, str(cfg))
    assert any(w in b.output for w in ("not a readable file", "not a regular file")), b.output


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "binary"])
def test_a_state_file_no_reader_can_use_is_set_aside(repo: GitRepo, tmp_path: Path, kind: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    target = state / "state.json"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-zero":
        target.symlink_to("/dev/zero")
    elif kind == "directory":
        target.mkdir()
    else:
        target.write_bytes(b"\x00\xff" * 1000)
    b = run_once(config_file(tmp_path, repo.path))
    assert_typed_error(b, "state file", code=b.proc.returncode)
    assert b.proc.returncode in (0, 2), b.output[-2000:]  # applied: nothing stopped the daemon
    doc = json.loads((state / "state.json").read_text())
    assert "web" in vm_rows(doc)


# -- durations ------------------------------------------------------------------------------

BAD_DURATIONS = [
    ".inf",
    ".nan",
    "1ms",
    "0",
    "-5s",
    "100000d",
    "8d",
    "1e400",
    "9" * 400,
    "[1]",
    "{a: 1}",
    "true",
    "10w",
]


@pytest.mark.parametrize("value", BAD_DURATIONS, ids=lambda v: v[:12])
def test_a_daemon_interval_out_of_bounds_is_refused_at_its_line(
    repo: GitRepo, tmp_path: Path, value: str
) -> None:
    cfg = config_file(tmp_path, repo.path, f"intervals:\n  fetch: 30s\n  resync: {value}\n")
    assert_typed_error(run_once(cfg), f"{cfg}:8:11: intervals.resync:")


def test_an_infinite_fetch_interval_is_refused(repo: GitRepo, tmp_path: Path) -> None:
    cfg = config_file(tmp_path, repo.path, "intervals: {fetch: .inf}\n")
    assert_typed_error(run_once(cfg), f"{cfg}:6:", "intervals.fetch:", "not a positive duration")


@pytest.mark.libvirt_test
@pytest.mark.timeout(120)
def test_sighup_with_an_infinite_interval_keeps_the_running_config(
    tmp_path: Path, repo: GitRepo, start: Callable[..., Daemon]
) -> None:
    cfg = config_file(tmp_path, repo.path)
    d = start("--config", str(cfg))
    d.wait_applied(repo.git("rev-parse", "HEAD"))
    cfg.write_text(cfg.read_text() + "intervals: {resync: .inf}\n")
    d.signal(signal.SIGHUP)
    failed = wait_for("reload failure", lambda: d.events("reload failed: keeping the current configuration"))
    assert "intervals.resync" in failed[0]["error"]
    assert not d.events("configuration reloaded")
    repo.write("vms/api.yaml", vm_yaml("api"))
    later = repo.commit("still reconciled with the old config")
    d.wait_applied(later)
    assert d.proc.poll() is None
    assert d.stop() == 0


# -- restart windows ---------------------------------------------------------------------------

BAD_WINDOWS = [
    ("timeZone: America", "timeZone", "is not a time zone"),
    ("timeZone: ../../etc/passwd", "timeZone", "is not a time zone"),
    ("timeZone: /etc/localtime", "timeZone", "is not a time zone"),
    ("timeZone: Europe/Berlin/../../../x", "timeZone", "is not a time zone"),
    (f"timeZone: {'A' * 300}", "timeZone", "is not a time zone"),
    ("timeZone: posixrules", "timeZone", "is not a time zone"),
    ("timeZone: America/", "timeZone", "is not a time zone"),
    ("schedule: '0 0 31 2 *'", "schedule", "does not open every year"),
    ("schedule: '0 0 29 2 *'", "schedule", "does not open every year"),
    ("schedule: '0 0 30 2 *'", "schedule", "does not open every year"),
    ("schedule: '* * * * * *'", "schedule", "is not a cron schedule"),
    (f"schedule: '{'1,' * 2000}1 * * * *'", "schedule", "is not a cron schedule"),
    ("duration: 0s", "duration", "not a positive duration"),
    ("duration: 10s", "duration", "shorter than"),
    ("duration: 400d", "duration", "longer than"),
]


@pytest.mark.parametrize(("field", "key", "said"), BAD_WINDOWS, ids=[w[0][:24] for w in BAD_WINDOWS])
def test_a_restart_window_that_cannot_work_is_refused_at_its_line(
    repo: GitRepo, tmp_path: Path, field: str, key: str, said: str
) -> None:
    window = {"schedule": "schedule: '0 2 * * 6'", "duration": "duration: 2h", "timeZone": "timeZone: UTC"}
    window[key] = field
    cfg = config_file(
        tmp_path, repo.path, "policy:\n  restartWindows:\n    - " + "\n      ".join(window.values()) + "\n"
    )
    b = run_once(cfg)
    assert_typed_error(b, f"{cfg}:", f"policy.restartWindows[0].{key}:", said)
    assert "Errno" not in b.output  # no file name of the tz database


@pytest.mark.parametrize(
    ("annotation", "said"),
    [("0 2 * * 6; 2h; America", "is not a time zone"), ("0 0 31 2 *; 2h", "does not open every year")],
)
def test_a_vm_restart_window_that_cannot_work_is_refused_by_validate(
    git_repo: GitRepo, annotation: str, said: str
) -> None:
    text = vm_yaml("web").replace(
        "  name: web\n",
        f"  name: web\n  annotations:\n    reconciler.kubevirt.io/restart-window: '{annotation}'\n",
    )
    git_repo.write("vms/web.yaml", text)
    git_repo.commit()
    assert_typed_error(validate(git_repo), "vms/web.yaml:", said)


# -- budgets -----------------------------------------------------------------------------------


def pool(name: str, replicas: int, annotation: str = "") -> str:
    extra = f"      annotations: {{note: '{annotation}'}}\n" if annotation else ""
    return f"""\
apiVersion: pool.kubevirt.io/v1alpha1
kind: VirtualMachinePool
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  virtualMachineTemplate:
    metadata:
      labels: {{app: {name}}}
{extra}    spec:
      runStrategy: Always
      template:
        spec:
          domain:
            memory: {{guest: 64Mi}}
            devices: {{}}
"""


@pytest.mark.parametrize("replicas", [2**31, 100_000, 1001])
def test_a_pool_of_too_many_replicas_is_refused_before_they_are_made(
    git_repo: GitRepo, replicas: int
) -> None:
    git_repo.write("vms/pool.yaml", pool("p", replicas))
    git_repo.commit()
    b = validate(git_repo)
    assert_typed_error(b, "vms/pool.yaml:6:", "replicas is more than the 1000 one pool may have")
    assert "MemoryError" not in b.output


def test_full_pools_past_the_revision_object_budget_are_refused(git_repo: GitRepo) -> None:
    git_repo.write("vms/pools.yaml", "---\n".join(pool(f"p{i}", 1000) for i in range(25)))
    git_repo.commit()
    assert_typed_error(validate(git_repo), "vms/pools.yaml:", "more than the 20000 objects")


def test_a_pool_of_a_large_template_is_counted_against_the_revision_bytes(git_repo: GitRepo) -> None:
    git_repo.write("vms/pool.yaml", pool("p", 1000, annotation="x" * 1_400_000))
    git_repo.commit()
    assert_typed_error(validate(git_repo), "vms/pool.yaml:6:", "MiB, the most one revision may hold")


def secret(name: str) -> str:
    return (
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\nstringData:\n  userdata: '#cloud-config'\n"
    )


def test_a_vm_naming_200_secrets_is_refused_without_deriving_their_keys(git_repo: GitRepo) -> None:
    volumes = "".join(f"      - name: s{i}\n        secret: {{secretName: s{i}}}\n" for i in range(200))
    text = vm_yaml("web") + "      volumes:\n" + volumes
    git_repo.write("vms/web.yaml", text)
    git_repo.write("vms/secrets.yaml", "---\n".join(secret(f"s{i}") for i in range(200)))
    git_repo.commit()
    b = validate(git_repo)
    assert_typed_error(b, "vms/web.yaml:", "names 200 Secrets; at most 32 are allowed")
    assert b.cpu_s < 30  # the hang guard: 200 derivations took 16-32 s


def test_a_revision_of_4097_secrets_is_refused(git_repo: GitRepo) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    git_repo.write("vms/secrets.yaml", "---\n".join(secret(f"s{i}") for i in range(4097)))
    git_repo.commit()
    assert_typed_error(validate(git_repo), "vms/secrets.yaml:", "more than the 4096 Secrets")


def disks_vm(count: int, extra: str) -> str:
    head = vm_yaml("web").replace("        devices: {}\n", "")
    return (
        head
        + "        devices:\n          disks:\n"
        + "".join(f"            - name: d{i}\n{extra}" for i in range(count))
    )


def test_thirty_thousand_bad_disks_are_capped_and_summarised(git_repo: GitRepo) -> None:
    git_repo.write("vms/web.yaml", disks_vm(30_000, "              bogus: 1\n"))
    git_repo.commit()
    b = validate(git_repo)
    assert_typed_error(b, "vms/web.yaml:", "unknown field 'bogus'", "(and more than 19 more)")
    assert b.output.count("unknown field") == 1


def test_a_20_mb_vm_is_refused_before_it_is_parsed(git_repo: GitRepo) -> None:
    git_repo.write("vms/web.yaml", disks_vm(400_000, "              disk: {bus: virtio}\n"))
    git_repo.commit()
    assert (git_repo.path / "vms/web.yaml").stat().st_size > 20_000_000
    assert_typed_error(validate(git_repo), "vms/web.yaml:1:1:", "a YAML document of more than 1572864 bytes")


def config_map(name: str, size: int = 100) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: '{'x' * size}'\n"


def test_one_big_document_among_small_ones_is_refused_at_its_line(git_repo: GitRepo) -> None:
    docs = [vm_yaml("web"), config_map("big", 1_600_000), config_map("small")]
    git_repo.write("vms/all.yaml", "---\n".join(docs))
    git_repo.commit()
    line = vm_yaml("web").count("\n") + 2
    assert_typed_error(validate(git_repo), f"vms/all.yaml:{line}:1:", "a YAML document of more than")


def test_a_big_document_on_its_marker_line_is_refused_too(git_repo: GitRepo) -> None:
    big = (
        "--- {apiVersion: v1, kind: ConfigMap, metadata: {name: big}, data: {a: '" + "x" * 1_600_000 + "'}}\n"
    )
    git_repo.write("vms/all.yaml", vm_yaml("web") + big)
    git_repo.commit()
    line = vm_yaml("web").count("\n") + 1
    assert_typed_error(validate(git_repo), f"vms/all.yaml:{line}:1:", "a YAML document of more than")


def test_a_large_file_of_small_documents_is_accepted(git_repo: GitRepo) -> None:
    docs = [vm_yaml("web"), *(config_map(f"c{i}", 1000) for i in range(2000))]
    git_repo.write("vms/all.yaml", "---\n".join(docs))
    git_repo.commit()
    assert (git_repo.path / "vms/all.yaml").stat().st_size > 2 << 20
    b = validate(git_repo)
    assert_typed_error(b, "valid", code=0)


# -- document shapes ---------------------------------------------------------------------------

CM_VOLUME = """\
      volumes:
        - name: cfg
          configMap: {name: cfg}
"""


def cm_repo(git_repo: GitRepo, block: str) -> GitRepo:
    git_repo.write("vms/web.yaml", vm_yaml("web") + CM_VOLUME)
    git_repo.write("vms/cfg.yaml", f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n{block}")
    git_repo.commit()
    return git_repo


@pytest.mark.parametrize("command", ["validate", "plan", "diff"])
def test_a_configmap_whose_data_is_a_list_is_an_error_at_its_line(git_repo: GitRepo, command: str) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    base = git_repo.commit()
    cm_repo(git_repo, "data: [a, b]\n")
    args = {
        "validate": ("validate", "--repo", str(git_repo.path)),
        "plan": ("plan", "--repo", str(git_repo.path), "--connect", "test:///default"),
        "diff": ("diff", "--repo", str(git_repo.path), "--base", base),
    }[command]
    b = run_cli(*args)
    assert_typed_error(b, "vms/cfg.yaml:5:", "ConfigMap cfg: data must be a mapping", code=b.proc.returncode)
    assert b.proc.returncode == 1, b.output


@pytest.mark.parametrize(
    ("kind", "block", "said"),
    [
        ("ConfigMap", "binaryData: just-a-string\n", "binaryData must be a mapping"),
        ("Secret", "stringData: [x]\n", "stringData must be a mapping"),
        ("Secret", "data: 5\n", "data must be a mapping"),
    ],
)
def test_data_blocks_of_the_wrong_type_are_errors_at_their_line(
    git_repo: GitRepo, kind: str, block: str, said: str
) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    git_repo.write("vms/obj.yaml", f"apiVersion: v1\nkind: {kind}\nmetadata:\n  name: obj\n{block}")
    git_repo.commit()
    assert_typed_error(validate(git_repo), "vms/obj.yaml:5:", said)


@pytest.mark.parametrize(
    ("memory", "said"),
    [("1e400", "not a finite number"), ("'" + "1" * 4400 + "'", "too many digits"), (".nan", "not a finite")],
    ids=["1e400", "4400-digits", "nan"],
)
def test_quantities_no_number_holds_are_errors_at_their_line(
    git_repo: GitRepo, memory: str, said: str
) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("web", memory=memory))
    git_repo.commit()
    b = validate(git_repo)
    assert_typed_error(b, "vms/web.yaml:12:", said)
    assert "1" * 100 not in b.output  # the value is shown cut short


def test_infinite_cores_are_an_error_at_their_line(git_repo: GitRepo) -> None:
    text = vm_yaml("web").replace(
        "        devices: {}\n", "        devices: {}\n        cpu: {cores: .inf}\n"
    )
    git_repo.write("vms/web.yaml", text)
    git_repo.commit()
    assert_typed_error(validate(git_repo), "vms/web.yaml:")


DATA_SOURCE_VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Always
  preference: {inferFromVolume: root}
  dataVolumeTemplates:
    - metadata: {name: root-dv}
      spec:
        sourceRef: {kind: DataSource, name: fedora}
        storage: {resources: {requests: {storage: 1Gi}}}
  template:
    spec:
      domain:
        memory: {guest: 64Mi}
        devices: {}
      volumes:
        - name: root
          dataVolume: {name: root-dv}
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataSource
"""


@pytest.mark.parametrize(
    "data_source",
    ["metadata: {name: fedora}\nspec:\n  source: [x]\n", "metadata: {name: fedora}\nspec: {source: 5}\n"],
)
def test_a_data_source_of_the_wrong_shape_infers_nothing(git_repo: GitRepo, data_source: str) -> None:
    git_repo.write("vms/web.yaml", DATA_SOURCE_VM + data_source)
    git_repo.commit()
    assert_typed_error(validate(git_repo), "vms/web.yaml:", "unable to infer defaults from DataSource")


def test_a_submodule_in_resources_is_an_error_at_the_kustomization(git_repo: GitRepo) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    git_repo.write("kustomization.yaml", "resources:\n  - vms/web.yaml\n  - vendored\n")
    git_repo.git("add", "-A")
    git_repo.git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},vendored")
    git_repo.git("commit", "-q", "-m", "a submodule")
    b = validate(git_repo)
    assert_typed_error(b, "kustomization.yaml:3:", "vendored is a git submodule")
    assert "corrupt" not in b.output


@pytest.mark.libvirt_test
@pytest.mark.timeout(120)
def test_a_followed_remote_with_a_submodule_is_build_failed_and_cloned_once(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon]
) -> None:
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    git_repo.write("kustomization.yaml", "resources:\n  - vms/web.yaml\n  - vendored\n")
    git_repo.git("add", "-A")
    git_repo.git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},vendored")
    git_repo.git("commit", "-q", "-m", "a submodule")
    git_repo.git("push", "-q", str(bare), "main")
    head = git_repo.git("rev-parse", "HEAD")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        f"source: {{repo: 'file://{bare}', branch: main}}\nconnect: test:///default\nlisten: false\n"
        f"stateDir: {tmp_path / 'state'}\nintervals: {{fetch: 300ms, resync: 1h}}\n"
    )
    d = start("--config", str(cfg))
    state = d.wait_attempted(head)
    assert state["reason"] == "BuildFailed", state
    assert "vendored is a git submodule" in state["message"]
    d.signal(signal.SIGHUP)  # a reload tries the same commit again: still no clone
    wait_for("a second attempt", lambda: len(d.events("reconciled")) >= 2)
    assert len(d.events("cloned")) == 1
    assert not d.events("mirror is corrupt: cloning again")
    assert d.stop() == 0


def test_a_duplicate_key_in_a_host_config_never_shows_its_values(repo: GitRepo, tmp_path: Path) -> None:
    host = tmp_path / "host.yaml"
    host.write_text("name: first-s3cr3t-value\nclaimUnselected: true\nname: second-s3cr3t-value\n")
    b = validate(repo, "--host-config", str(host))
    assert_typed_error(b, f"{host}:3:1:", "duplicate key 'name'")
    assert "s3cr3t" not in b.output


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"version": 1, "hostMemoryKib": 1e400}', "hostMemoryKib: expected an integer"),
        ('{"version": 1, "hugepagesFree": [[1e400, 1]]}', "hugepagesFree"),
        ("[1]", "not a host-facts file"),
    ],
    ids=["deep", "1e400", "overflow", "list"],
)
def test_a_facts_file_of_the_wrong_shape_is_one_error(
    repo: GitRepo, tmp_path: Path, text: str, said: str
) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(text)
    assert_typed_error(validate(repo, "--host-facts", str(facts)), str(facts), said)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a: " + "[" * 100_000 + "]" * 100_000 + "\n", "invalid YAML"),
        ("- source\n- repo\n", "expected a mapping at the top level"),
        ("source: [x]\n", "source"),
        ("source: {repo: /r}\nhosts: {a: b}\n", "hosts: expected a non-empty list"),
    ],
    ids=["deep", "list", "source-list", "hosts-map"],
)
def test_a_daemon_config_of_the_wrong_shape_is_one_error(tmp_path: Path, text: str, said: str) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text)
    assert_typed_error(run_cli("run", "--once", "--config", str(cfg)), str(cfg), said)


@pytest.mark.libvirt_test
def test_the_daemon_records_build_failed_for_a_configmap_list_and_does_not_retry(
    git_repo: GitRepo, tmp_path: Path
) -> None:
    cm_repo(git_repo, "data: [a, b]\n")
    cfg = config_file(tmp_path, git_repo.path)
    b = run_once(cfg)
    assert "Traceback" not in b.output, b.output[-3000:]
    assert "internal error in the" not in b.output
    doc = json.loads((tmp_path / "state" / "state.json").read_text())
    assert doc["reason"] == "BuildFailed", doc
    assert "ConfigMap cfg: data must be a mapping" in doc["message"]


def test_the_bounds_hold_a_runaway_child() -> None:
    """The bound itself: a child allocating past it fails alone, the suite carries on."""
    b = run_python("x = bytearray(1 << 30)")
    assert b.proc.returncode != 0
    assert "MemoryError" in b.output
