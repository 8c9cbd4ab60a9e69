"""The daemon configuration file read: one YAML file, overridden by a few command-line flags.

Input: the path of ``/etc/reconciler/config.yaml`` (or none: ``$RECONCILER_CONFIG``,
else that file) and the ``run`` flags (``Overrides``).
Output: a frozen ``DaemonConfig`` (its records are ``config/daemon.py``'s). Reads the
config file and the small files it names (webhook secret, a separate host config, the
age key file of SOPS decryption, which must be its owner's alone); never touches git,
libvirt or the network. Unknown keys and bad values raise ``ConfigError(msg, path,
line, col)`` with the position ruamel kept, so a typo is reported as
``config.yaml:12:5: ...``.

Layout (every key optional except a source repository, from the file or ``--repo``)::

    source:
      repo: https://git.example.com/infra/vms.git   # or a local path
      branch: main
      path: overlays/prod
      credentials: {sshKeyFile: ..., knownHostsFile: ..., username: ..., passwordFile: ...}
      verify: {mode: ssh, keys: /etc/reconciler/allowed_signers}
    connect: qemu:///system          # one host ...
    host: {name: host1, ...}         # ... with its host config (rendering)
    hosts:                           # ... or several
      - {connect: qemu+ssh://root@host2/system, host: {name: host2}}
    policy: {prune: false, maxPrunePercent: 30, selfHeal: true, rollout: Stage, instancetypeRevisions: pin}
    # maxPrune: a count beside the share; pruneWindow (1h): the guard counts the prunes of
    # the window against the managed domains at its start (commits in a row cannot dilute it).
    # allowRollback: true (default) applies a head that does not descend from the last
    # applied commit, with a warning; false refuses it until confirmRollback names it.
    intervals: {fetch: 60s, resync: 30s}   # each from 100ms to 7d
    listen: 127.0.0.1:9469
    webhook: {secretFile: /etc/reconciler/webhook.secret}
    decryption: {ageKeyFile: /etc/reconciler/age.key}   # SOPS files (mode 0600); gnupgHome: PGP
    notify: {commitStatus: {tokenFile: ...}, webhooks: [...], slack: [...], alertmanager: [...]}
    stateDir: /var/lib/reconciler
    log: {format: auto, level: info}
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.config.daemon import (
    DEFAULT_CONFIG,
    DEFAULT_URI,
    LOG_FORMATS,
    LOG_LEVELS,
    VERIFY_MODES,
    DaemonConfig,
    HostEntry,
    Overrides,
    Policy,
    parse_listen,
)
from reconciler.config.host import host_config_from_obj, load_host_config
from reconciler.config.keys import read_age_key_file
from reconciler.config.notify import parse_notify
from reconciler.errors import ConfigError
from reconciler.manifests import config as files
from reconciler.model.identifiers import is_remote_url
from reconciler.model.rollout import OnFailure, Pacing, valid_limit
from reconciler.model.units import parse_duration, positive_duration
from reconciler.settings.host import HostConfig
from reconciler.source.settings import Credentials, SourceConfig, Verify

if TYPE_CHECKING:
    from reconciler.model import RestartWindow


class _Reader(files.ConfigReader):
    null_is_absent = True

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.base = Path(path).parent if path else Path.cwd()

    def section(self, parent: Any, key: Any, where: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
        """``parent[key]`` (or ``parent`` itself when ``key`` is None) as a checked mapping."""
        node = parent[key] if key is not None else parent
        return self.mapping(node, where, allowed, parent, key) or {}

    def nonempty(self, node: Mapping[str, Any], key: str, where: str) -> str | None:
        v = self.string(node, key, where)
        if v is not None and not v.strip():
            raise self.fail(f"{where}.{key}: must not be empty", node, key)
        return v

    def file(self, node: Mapping[str, Any], key: str, where: str, must_exist: bool = True) -> str | None:
        v = self.nonempty(node, key, where)
        if v is None:
            return None
        p = Path(v) if Path(v).is_absolute() else self.base / v
        if must_exist and not p.is_file():
            raise self.fail(f"{where}.{key}: {v} is not a readable file", node, key)
        return str(p)

    def duration(self, node: Mapping[str, Any], key: str, where: str) -> float | None:
        if key not in node:
            return None
        try:
            return positive_duration(node[key], 0.1, 7 * 86400.0)  # 1ms: 50 reconciles a second
        except ValueError as err:
            raise self.fail(f"{where}.{key}: {err}", node, key) from err


_TOP = (
    "source",
    "connect",
    "host",
    "hostFile",
    "hosts",
    "policy",
    "intervals",
    "listen",
    "webhook",
    "decryption",
    "notify",
    "stateDir",
    "log",
)


def _source(r: _Reader, top: Mapping[str, Any]) -> SourceConfig | None:
    if "source" not in top:
        return None
    s = r.section(top, "source", "source", ("repo", "branch", "path", "credentials", "verify"))
    repo = r.nonempty(s, "repo", "source")
    if repo is None:
        raise r.fail("source.repo: required (a local path or a remote URL)", top, "source", at_key=True)
    if not is_remote_url(repo) and not Path(repo).is_absolute():
        repo = str(r.base / repo)
    branch = r.nonempty(s, "branch", "source") or ""
    path = (r.string(s, "path", "source") or "").strip("/")
    if path.startswith("..") or "/../" in f"/{path}/":
        raise r.fail(f"source.path: {path!r} must stay inside the repository", s, "path")
    creds = Credentials()
    if "credentials" in s:
        c = r.section(
            s,
            "credentials",
            "source.credentials",
            ("sshKeyFile", "knownHostsFile", "username", "passwordFile"),
        )
        creds = Credentials(
            ssh_key_file=r.file(c, "sshKeyFile", "source.credentials") or "",
            known_hosts_file=r.file(c, "knownHostsFile", "source.credentials") or "",
            username=r.nonempty(c, "username", "source.credentials") or "",
            password_file=r.file(c, "passwordFile", "source.credentials") or "",
        )
        if (creds.ssh_key_file or creds.password_file) and not is_remote_url(repo):
            raise r.fail(
                "source.credentials: only a remote repository takes credentials",
                s,
                "credentials",
                at_key=True,
            )
    verify = None
    if "verify" in s:
        v = r.section(s, "verify", "source.verify", ("mode", "keys"))
        mode = r.string(v, "mode", "source.verify", VERIFY_MODES)
        keys = r.file(v, "keys", "source.verify")
        if mode is None or keys is None:
            raise r.fail(
                "source.verify: needs both mode (gpg|ssh) and keys (a file)", s, "verify", at_key=True
            )
        verify = Verify(mode, keys)
    return SourceConfig(repo, branch, path, creds, verify)


def _host_entry(r: _Reader, node: Mapping[str, Any], where: str, uri_key_required: bool) -> HostEntry:
    uri = r.nonempty(node, "connect", where)
    if uri is None and uri_key_required:
        raise r.fail(f"{where}.connect: required (a libvirt URI)", node)
    if "host" in node and "hostFile" in node:
        raise r.fail(f"{where}: give host or hostFile, not both", node, "hostFile", at_key=True)
    config = HostConfig()
    if "host" in node:
        config = host_config_from_obj(node["host"], r.path, os.path.realpath)
    elif "hostFile" in node:
        hf = r.file(node, "hostFile", where)
        assert hf is not None
        config = load_host_config(files.read_existing_config_file(hf), hf, os.path.realpath)
    return HostEntry(uri or DEFAULT_URI, config)


def _hosts(r: _Reader, top: Mapping[str, Any]) -> tuple[HostEntry, ...] | None:
    if "hosts" in top:
        if any(k in top for k in ("connect", "host", "hostFile")):
            raise r.fail(
                "hosts: give either hosts or connect/host/hostFile, not both", top, "hosts", at_key=True
            )
        items = top["hosts"]
        if not isinstance(items, list) or not items:
            raise r.fail("hosts: expected a non-empty list", top, "hosts")
        out: list[HostEntry] = []
        for i, _ in enumerate(items):
            m = r.section(items, i, f"hosts[{i}]", ("connect", "host", "hostFile"))
            out.append(_host_entry(r, m, f"hosts[{i}]", uri_key_required=True))
        uris = [h.uri for h in out]
        names = [h.config.name for h in out]
        for i, h in enumerate(out):
            if uris.index(h.uri) != i:
                raise r.fail(f"hosts[{i}].connect: {h.uri} is listed twice", items[i], "connect")
            if names.index(h.config.name) != i:
                raise r.fail(
                    f"hosts[{i}]: host name {h.config.name!r} is used twice (set host.name per host)",
                    items,
                    i,
                )
        return tuple(out)
    if any(k in top for k in ("connect", "host", "hostFile")):
        return (_host_entry(r, top, "config", uri_key_required=False),)
    return None


_ROLLBACK_KEYS = ("allowRollback", "confirmRollback")


_POLICY_KEYS = (
    "prune", "maxPrunePercent", "maxPrune", "pruneWindow", "selfHeal", "rollout",
    "instancetypeRevisions", "owner", "confirmPrune", "restartWindows", *_ROLLBACK_KEYS,
    "maxUnavailable", "progressDeadline", "onFailure",
)  # fmt: skip


def _policy(r: _Reader, top: Mapping[str, Any]) -> Policy:
    if "policy" not in top:
        return Policy()
    p = r.section(top, "policy", "policy", _POLICY_KEYS)
    kw: dict[str, Any] = {}
    if (b := r.boolean(p, "prune", "policy")) is not None:
        kw["prune"] = b
    if (b := r.boolean(p, "selfHeal", "policy")) is not None:
        kw["self_heal"] = b
    for key, name, most in (("maxPrunePercent", "max_prune_percent", 100), ("maxPrune", "max_prune", None)):
        if key in p:
            v = p[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (most is not None and v > most):
                what = f"an integer from 0 to {most}" if most is not None else "a count (an integer from 0)"
                raise r.fail(f"policy.{key}: {v!r} is not {what}", p, key)
            kw[name] = v
    if "pruneWindow" in p:
        try:
            kw["prune_window_s"] = parse_duration(p["pruneWindow"])
        except ValueError as err:
            raise r.fail(f"policy.pruneWindow: {err}", p, "pruneWindow") from err
    if (s := r.string(p, "rollout", "policy", ("Stage", "Restart"))) is not None:
        kw["rollout"] = s
    if (s := r.string(p, "instancetypeRevisions", "policy", ("pin", "follow"))) is not None:
        kw["instancetype_revisions"] = s
    if (s := r.nonempty(p, "owner", "policy")) is not None:
        kw["owner"] = s
    if "confirmPrune" in p:
        kw["confirm_prune"] = _commit(r, p, "confirmPrune", nonempty=True)
    if "restartWindows" in p:
        kw["restart_windows"] = _restart_windows(r, p)
    if (b := r.boolean(p, "allowRollback", "policy")) is not None:
        kw["allow_rollback"] = b
    if "confirmRollback" in p:
        kw["confirm_rollback"] = _commit(r, p, "confirmRollback")
    if any(k in p for k in ("maxUnavailable", "progressDeadline", "onFailure")):
        kw["pacing"] = _pacing(r, p)
    return Policy(**kw)


def _commit(r: _Reader, p: Mapping[str, Any], key: str, nonempty: bool = False) -> str:
    """``policy.<key>``: a commit sha, 7 to 40 hex digits, as a string (digits alone, unquoted,
    read as a number), in lower case; ``nonempty``: blank says so first."""
    v = p[key]
    if not isinstance(v, str):
        raise r.fail(f"policy.{key}: {v!r} is not a string: quote the commit sha ('0123456')", p, key)
    if nonempty:
        r.nonempty(p, key, "policy")
    if not re.fullmatch(r"[0-9a-fA-F]{7,40}", v):
        raise r.fail(f"policy.{key}: {v!r} is not a commit sha (7 to 40 hex digits)", p, key)
    return v.lower()


def _pacing(r: _Reader, p: Mapping[str, Any]) -> Pacing:
    """``policy.maxUnavailable`` (a count or a percentage), ``progressDeadline`` (a
    duration) and ``onFailure`` (halt | revert): how restarts are paced (plan/pace.py)."""
    kw: dict[str, Any] = {}
    if "maxUnavailable" in p:
        v = p["maxUnavailable"]
        text = str(v) if isinstance(v, int) and not isinstance(v, bool) else v
        if not isinstance(text, str) or not valid_limit(text):
            raise r.fail(
                f"policy.maxUnavailable: {v!r} is not a count or a percentage (2, '25%')", p, "maxUnavailable"
            )
        kw["max_unavailable"] = text
    if "progressDeadline" in p:
        try:
            kw["progress_deadline_s"] = parse_duration(p["progressDeadline"])
        except ValueError as err:
            raise r.fail(f"policy.progressDeadline: {err}", p, "progressDeadline") from err
        if kw["progress_deadline_s"] <= 0:
            raise r.fail("policy.progressDeadline: must be longer than 0s", p, "progressDeadline")
    if (s := r.string(p, "onFailure", "policy", tuple(OnFailure))) is not None:
        kw["on_failure"] = OnFailure(s)
    return Pacing(**kw)


def _restart_windows(r: _Reader, p: Mapping[str, Any]) -> tuple[RestartWindow, ...]:
    from reconciler.settings import windows

    items = p["restartWindows"]
    if not isinstance(items, list):
        raise r.fail(
            "policy.restartWindows: expected a list of {schedule, duration, timeZone}", p, "restartWindows"
        )
    out = []
    for i, item in enumerate(items):
        where = f"policy.restartWindows[{i}]"
        if not isinstance(item, Mapping):
            raise r.fail(f"{where}: expected a mapping {{schedule, duration, timeZone}}", p, "restartWindows")
        w = r.section(items, i, where, ("schedule", "duration", "timeZone"))
        schedule, duration = w.get("schedule"), w.get("duration")
        if schedule is None or duration is None:
            raise r.fail(f"{where}: schedule and duration are required", items, i)
        try:
            out.append(windows.window(str(schedule), duration, str(w.get("timeZone") or "UTC")))
        except windows.WindowError as err:
            raise r.fail(f"{where}.{err.key}: {err}", w, err.key) from err
    return tuple(out)


def parse_config(data: bytes, path: str, read_keys: bool = True) -> DaemonConfig:
    """Validate the bytes of a config file. Relative file names are relative to ``path``'s
    directory. ``read_keys`` False: the age key file is not read (nor required to exist)."""
    obj = files.load_config_yaml(data, path)
    r = _Reader(path)
    if obj is None:
        obj = {}
    if not isinstance(obj, Mapping):
        raise ConfigError("expected a mapping at the top level", path, 1, 1)
    top = r.section(obj, None, "config", _TOP)
    kw: dict[str, Any] = {"path": path}
    source = _source(r, top)
    kw["source"] = source or SourceConfig("")
    if (hosts := _hosts(r, top)) is not None:
        kw["hosts"] = hosts
    kw["policy"] = _policy(r, top)
    if "intervals" in top:
        iv = r.section(top, "intervals", "intervals", ("fetch", "resync"))
        if (d := r.duration(iv, "fetch", "intervals")) is not None:
            kw["fetch_interval_s"] = d
        if (d := r.duration(iv, "resync", "intervals")) is not None:
            kw["resync_interval_s"] = d
    if "listen" in top:
        v = top["listen"]
        if v in (None, "", False):
            kw["listen"] = ""
        else:
            if not isinstance(v, str):
                raise r.fail("listen: expected HOST:PORT (or false to disable)", top, "listen")
            try:
                parse_listen(v)
            except ValueError as err:
                raise r.fail(f"listen: {err}", top, "listen") from err
            kw["listen"] = v
    if "webhook" in top:
        w = r.section(top, "webhook", "webhook", ("secretFile",))
        sf = r.file(w, "secretFile", "webhook")
        if sf is None:
            raise r.fail("webhook.secretFile: required", top, "webhook", at_key=True)
        secret = files.read_existing_config_file(sf).strip()
        if not secret:
            raise r.fail(f"webhook.secretFile: {sf} is empty", w, "secretFile")
        kw["webhook_secret"] = secret
    if "decryption" in top:
        kw.update(_decryption(r, top, kw["source"].repo, read_keys))
    if "notify" in top:
        kw["notify"] = parse_notify(r, top, kw["source"].repo)
    if (sd := r.nonempty(top, "stateDir", "config")) is not None:
        if not Path(sd).is_absolute():
            raise r.fail(f"stateDir: {sd!r} must be an absolute path", top, "stateDir")
        kw["state_dir"] = sd
    if "log" in top:
        lg = r.section(top, "log", "log", ("format", "level"))
        if (s := r.string(lg, "format", "log", LOG_FORMATS)) is not None:
            kw["log_format"] = s
        if (s := r.string(lg, "level", "log", LOG_LEVELS)) is not None:
            kw["log_level"] = s
    return DaemonConfig(**kw)


def _decryption(r: _Reader, top: Mapping[str, Any], repo: str, read_keys: bool) -> dict[str, Any]:
    """``decryption``: the age key file (never inside ``repo``), and its keys when ``read_keys``."""
    dec = r.section(top, "decryption", "decryption", ("ageKeyFile", "gnupgHome"))
    key_file = r.file(dec, "ageKeyFile", "decryption", must_exist=read_keys)
    home = r.nonempty(dec, "gnupgHome", "decryption")
    if key_file is None:
        raise r.fail("decryption.ageKeyFile: required (an age key file, mode 0600)", top, "decryption")
    if repo and not is_remote_url(repo) and Path(key_file).resolve().is_relative_to(Path(repo).resolve()):
        raise r.fail(
            f"decryption.ageKeyFile: {key_file} is inside the repository: keys come from the host, "
            "never from git",
            dec,
            "ageKeyFile",
        )
    kw: dict[str, Any] = {"age_key_file": key_file}
    try:
        if read_keys:
            kw["keys"] = read_age_key_file(key_file, gnupg_home=home)
    except ConfigError as err:
        raise r.fail(f"decryption.ageKeyFile: {err.message}", dec, "ageKeyFile") from err
    return kw


def apply_overrides(config: DaemonConfig, o: Overrides) -> DaemonConfig:
    """Flags win over the file."""
    src = config.source
    if o.repo is not None:
        repo = o.repo if is_remote_url(o.repo) else str(Path(o.repo).resolve())
        src = dataclasses.replace(src, repo=repo)
    if o.branch is not None:
        src = dataclasses.replace(src, branch=o.branch)
    if o.path is not None:
        src = dataclasses.replace(src, path=o.path.strip("/"))
    hosts = config.hosts
    if o.host_config is not None:
        hc = load_host_config(files.read_existing_config_file(o.host_config), o.host_config, os.path.realpath)
        hosts = tuple(dataclasses.replace(h, config=hc) for h in hosts[:1])
    if o.connect is not None:
        hosts = (HostEntry(o.connect, hosts[0].config if len(hosts) == 1 else HostConfig()),)
    policy = config.policy if o.prune is None else dataclasses.replace(config.policy, prune=o.prune)
    if o.owner:
        policy = dataclasses.replace(policy, owner=o.owner)
    return dataclasses.replace(
        config,
        source=src,
        hosts=hosts,
        policy=policy,
        state_dir=o.state_dir if o.state_dir is not None else config.state_dir,
        listen=o.listen if o.listen is not None else config.listen,
    )


def default_config() -> str:
    """The configuration read when no ``--config`` is given: ``$RECONCILER_CONFIG``, else
    /etc/reconciler/config.yaml."""
    return os.environ.get("RECONCILER_CONFIG") or DEFAULT_CONFIG


def load_config(path: str | None, overrides: Overrides | None = None) -> DaemonConfig:
    """Read ``path`` (the default file may be missing when the flags name a repository),
    the flags (``overrides``; None: none) on top."""
    overrides = overrides if overrides is not None else Overrides()
    file = path or default_config()
    try:
        data = files.read_config_file(file)
    except FileNotFoundError:
        if path is not None or overrides.repo is None:
            raise ConfigError(
                "config file not found (give --config FILE, or --repo to run without one)", file
            ) from None
        config = DaemonConfig(source=SourceConfig(""))
    except OSError as err:
        raise ConfigError(f"cannot read config: {err.strerror}", file) from err
    else:
        config = parse_config(data, file, overrides.read_keys)
    config = apply_overrides(config, overrides)
    if not config.source.repo:
        raise ConfigError("no source repository: set source.repo or pass --repo", config.path or file)
    if overrides.listen is not None and overrides.listen:
        try:
            parse_listen(overrides.listen)
        except ValueError as err:
            raise ConfigError(f"--listen: {err}", "") from err
    return config
