# PYTHON_ARGCOMPLETE_OK
"""Command line: build / expand / render / validate / diff / plan / apply / run / status.

Input: argv. Output: text on stdout, errors on stderr, exit codes: 0 no changes (or
success), 2 changes, 1 error (a usage error too) — so CI can tell drift from
breakage. I/O shell only: every decision is made by the stages it calls.
"""

from __future__ import annotations

import argparse
import difflib
import gc
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from reconciler.errors import ReconcilerError

if TYPE_CHECKING:  # heavy imports stay lazy: each command imports what it runs
    from reconciler.catalog import Catalog
    from reconciler.config import DaemonConfig
    from reconciler.hostconfig import HostConfig
    from reconciler.hostfacts import HostFacts
    from reconciler.model import Manifest, RestartWindow, RevisionInfo, VMStatus

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CHANGES = 2
DEFAULT_URI = "test:///default"


def _err(msg: str) -> None:
    print(f"reconciler: {msg}", file=sys.stderr)


# -- shared option groups -------------------------------------------------------------


def _warn_once(warnings: Sequence[str]) -> None:
    """One stderr line per distinct cause, with the VMs it concerns."""
    from reconciler import warngroup

    for w in warngroup.group(warnings):
        _err(f"warning: {w}")


def _add_source_args(p: argparse.ArgumentParser, config: bool = False) -> None:
    """``config``: --repo and --path default to the --config file's source (plan, apply)."""
    also = ", or the --config file's source" if config else ""
    p.add_argument(
        "--repo", default=None if config else ".", help=f"git repository (default: current directory{also})"
    )
    p.add_argument("--ref", default="HEAD", help="commit, branch or tag to read (default: HEAD)")
    p.add_argument(
        "--path",
        default=None if config else "",
        help=f"entry directory inside the repository (default: its root{also})",
    )


def _add_facts_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host-facts",
        default=None,
        metavar="FILE",
        help="check every VM against a host's facts (from `reconciler host-facts`), as plan does there",
    )


def _reader(args: argparse.Namespace) -> Callable[[str], bytes]:
    """Reads the files VMs came from (to point at a field's line)."""
    from reconciler import source

    if args.files:
        from reconciler import limits

        return lambda name: limits.read_regular_file(name)
    return source.read_snapshot(args.repo, args.ref).files.read


def _add_host_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--connect",
        default=None,
        help=f"libvirt URI (default: the --config hosts, else LIBVIRT_DEFAULT_URI, else {DEFAULT_URI})",
    )
    p.add_argument(
        "--config", default=None, help="the daemon's configuration: plan/apply its hosts with its policy"
    )
    p.add_argument("--host-config", default=None, help="host configuration YAML")
    p.add_argument("--prune", action="store_true", help="undefine managed domains whose VM left git")
    p.add_argument(
        "--max-prune-percent",
        type=_percent,
        default=None,
        help="refuse a prune of more than this share of managed domains (default: 30, or the config's)",
    )
    p.add_argument(
        "--rollout",
        choices=("Stage", "Restart"),
        default=None,
        help="restart-class changes: Stage (RestartRequired) or Restart (default: the host config's)",
    )
    p.add_argument("--no-self-heal", action="store_true", help="report drift only, do not revert it")
    p.add_argument(
        "--owner",
        default=None,
        help="owner identity in the ownership mark (default: REPO#PATH, as the daemon's)",
    )
    p.add_argument(
        "--confirm-prune",
        default=None,
        metavar="REVISION",
        help="let the prunes of this revision past the maxPrunePercent guard",
    )
    p.add_argument(
        "--restart-window",
        action="append",
        default=None,
        metavar="'SCHEDULE; DURATION[; TZ]'",
        help="restart-class changes under rollout Restart wait for this window (repeatable)",
    )
    p.add_argument("--restart-now", action="store_true", help="restart at once, whatever the restart windows")


# -- build ----------------------------------------------------------------------------


def cmd_build(args: argparse.Namespace) -> int:
    """Print DIR's overlay output like ``kustomize build DIR``; on error nothing on stdout.

    The root everything must stay inside is ``--root``, else the enclosing git work
    tree's top level, else the filesystem root — then only kustomize's own rule holds
    (plain files in or below the kustomization that names them).
    """
    from reconciler import manifests, overlays
    from reconciler.dirview import DirView

    if args.ref:
        return _build_committed(args)
    given = Path(args.dir).absolute()
    target = given.resolve()
    if not target.is_dir():
        _err(f"{args.dir}: not a directory")
        return EXIT_ERROR
    # The root is found from the path as given: a committed symlink cannot carry the
    # build (and the root with it) outside the work tree.
    root = Path(args.root).resolve() if args.root else _build_root(given).resolve()
    if root != target and root not in target.parents:
        _err(f"{args.dir}: resolves to {target}, outside the root {root} (a symlink?)")
        return EXIT_ERROR
    entry = target.relative_to(root).as_posix()
    docs = overlays.build(DirView(root), "" if entry == "." else entry)
    sys.stdout.write(manifests.dump_documents(m.obj for m in docs))
    return EXIT_OK


def _build_committed(args: argparse.Namespace) -> int:
    """``build --ref REF DIR``: DIR as committed at REF in the repository holding it."""
    from reconciler import manifests, overlays, source

    given = Path(args.dir).absolute()
    root = _build_root(given)
    if not (root / ".git").exists():
        _err(f"{args.dir}: not inside a git work tree (--ref reads a commit)")
        return EXIT_ERROR
    entry = given.relative_to(root).as_posix() if given != root else ""
    snapshot = source.read_snapshot(root, args.ref)
    docs = overlays.build(snapshot.files, "" if entry == "." else entry)
    sys.stdout.write(manifests.dump_documents(m.obj for m in docs))
    return EXIT_OK


def _build_root(target: Path) -> Path:
    for parent in (target, *target.parents):
        if (parent / ".git").exists():
            return parent
    return Path(target.anchor or "/")


# -- expand ---------------------------------------------------------------------------


def _host_config(path: str | None) -> HostConfig:
    """The host configuration of ``--host-config`` (the demo one when not given)."""
    from reconciler import hostconfig

    if path:
        return hostconfig.load_host_config(Path(path).read_bytes(), path)
    return hostconfig.HostConfig()


def _host_facts(path: str | None) -> HostFacts | None:
    """The facts file of ``--host-facts`` (written by ``reconciler host-facts``), if given."""
    from reconciler import hostfacts

    if not path:
        return None
    return hostfacts.facts_from_json(Path(path).read_bytes(), path)


def _load_catalog(args: argparse.Namespace) -> tuple[Catalog, dict[str, dict[str, RevisionInfo]]]:
    """The catalog of ``-f FILE...`` or of ``--repo/--ref/--path``, with ``git:`` revision pins.

    Raises ManifestError (file:line) for a broken input.
    """
    from reconciler import catalog as catalog_stage
    from reconciler import limits, manifests, source
    from reconciler.expand.pins import git_pins
    from reconciler.reconcile import build_catalog_at, git_catalog_at

    if args.files:
        docs: list[Manifest] = []
        sources: dict[str, bytes] = {}
        for name in args.files:
            sources[name] = limits.read_regular_file(name)
            docs.extend(manifests.parse_documents(sources[name], name))
        return catalog_stage.build_catalog(docs, sources.__getitem__), {}
    snapshot = source.read_snapshot(args.repo, args.ref)
    cat = build_catalog_at(snapshot.files, args.path)
    problems: list[str] = []
    pins = git_pins(cat, git_catalog_at(args.repo, args.path), problems)
    for problem in problems:
        _err(problem)
    return cat, pins


def cmd_expand(args: argparse.Namespace) -> int:
    """Print every VirtualMachine expanded; a VM that fails goes to stderr only (exit 1)."""
    import json

    from reconciler import expand, manifests
    from reconciler.errors import ManifestError

    try:
        cat, pinned = _load_catalog(args)
    except ManifestError as err:
        _err(str(err))
        return EXIT_ERROR
    expanded, errors = expand.expand_all(cat, pinned)
    _warn_once([*cat.warnings, *(w for vm in expanded for w in vm.warnings)])
    for error in errors:
        _err(str(error))
    objs = [vm.vm for vm in expanded]
    if args.output == "json":
        doc = objs[0] if len(objs) == 1 else {"apiVersion": "v1", "kind": "List", "items": objs}
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    elif objs:
        sys.stdout.write(manifests.dump_documents(objs))
    return EXIT_ERROR if errors else EXIT_OK


# -- render ---------------------------------------------------------------------------


def cmd_render(args: argparse.Namespace) -> int:
    """Print each VM's domain XML, preceded by comments naming the volumes it needs."""
    from reconciler import expand
    from reconciler import render as render_stage
    from reconciler.errors import ManifestError
    from reconciler.escape import xml_comment
    from reconciler.reconcile import unrunnable

    try:
        host = _host_config(args.host_config)
        facts = _host_facts(args.host_facts)
        cat, pinned = _load_catalog(args)
    except (OSError, ManifestError) as err:
        _err(str(err))
        return EXIT_ERROR
    warnings = list(cat.warnings)
    expanded, errors = expand.expand_all(cat, pinned)
    failed = bool(errors)
    for error in errors:
        _err(str(error))
    caps = facts.caps if facts is not None else render_stage.HostCaps.default()
    out: list[str] = []
    for vm in expanded:
        try:
            rendered = render_stage.render_domain(vm, host, caps)
        except ReconcilerError as err:
            _err(f"{vm.source.where()}: {err}")
            failed = True
            continue
        if facts is not None:
            problems = unrunnable(vm, rendered, host, facts, _reader(args))
            for problem in problems:
                _err(problem)
            if problems:
                failed = True
                continue
        warnings += rendered.warnings
        head = f"{rendered.subject} from {rendered.source_path}: runStrategy {rendered.run_strategy}"
        out.append(f"<!-- {xml_comment(head)} -->\n")
        for vol in rendered.volumes:
            out.append(f"<!-- {xml_comment('volume: ' + render_stage.describe_volume(vol))} -->\n")
        out.append(rendered.xml)
    _warn_once(warnings)
    sys.stdout.write("".join(out))
    return EXIT_ERROR if failed else EXIT_OK


# -- validate / diff --------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    """Build, expand and render one revision; print every error with file:line (exit 1)."""
    from reconciler import render, source
    from reconciler.reconcile import desired_state

    host = _host_config(args.host_config)
    facts = _host_facts(args.host_facts)
    snapshot = source.read_snapshot(args.repo, args.ref)
    _note_work_tree(args.repo, args.ref, args.path)
    caps = facts.caps if facts is not None else render.HostCaps.default()
    desired = desired_state(snapshot, args.path, host, caps, facts=facts)
    if args.output != "text":
        doc = {
            "revision": snapshot.commit,
            "entry": args.path,
            "valid": not desired.all_errors,
            "vms": sorted(d.name for d in desired.rendered),
            "errors": list(desired.all_errors),
            "warnings": list(desired.warnings),
        }
        _print_data(doc, args.output)
        return EXIT_ERROR if desired.all_errors else EXIT_OK
    _warn_once(desired.warnings)
    for e in desired.all_errors:
        print(e)
    where = f"{args.ref} ({snapshot.commit[:12]})" + (f", entry {args.path}" if args.path else "")
    if desired.all_errors:
        n = len(desired.all_errors)
        _err(f"{where}: {n} error{'s' if n != 1 else ''}")
        return EXIT_ERROR
    print(f"{where}: valid, {len(desired.rendered)} VM{'s' if len(desired.rendered) != 1 else ''}")
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    """What merging --head into --base does to the VMs; exit 0 none, 2 changes, 1 error in head."""
    from reconciler import prdiff, render, source

    host = _host_config(args.host_config)
    facts = _host_facts(args.host_facts)
    base = source.read_snapshot(args.repo, args.base)
    head = source.read_snapshot(args.repo, args.head)
    _note_work_tree(args.repo, args.head, args.path)
    caps = facts.caps if facts is not None else render.HostCaps.default()
    result = prdiff.diff_snapshots(base, head, args.path, host, caps, facts)
    if args.format == "json":
        sys.stdout.write(prdiff.format_json(result))
    elif args.format == "markdown":
        sys.stdout.write(prdiff.format_markdown(result))
    else:
        color = not args.no_color and not os.environ.get("NO_COLOR") and sys.stdout.isatty()
        sys.stdout.write(prdiff.format_text(result, color=color, verbose=args.verbose))
    if args.format != "text":
        for e in result.errors:
            _err(e)
    return result.exit_code


# -- plan / apply ---------------------------------------------------------------------


def _daemon_config(args: argparse.Namespace) -> DaemonConfig:
    """The configuration plan/apply act with: the daemon's file (``--config``) with the
    flags given on top, or the flags alone; ``targets.host_target`` resolves it."""
    from dataclasses import replace

    from reconciler import config as cfg_mod

    windows = _restart_windows(args.restart_window or [])
    if args.config:
        cfg = cfg_mod.load_config(
            args.config, cfg_mod.Overrides(connect=args.connect, host_config=args.host_config)
        )
        policy = cfg.policy
        if args.prune:
            policy = replace(policy, prune=True)
        if args.max_prune_percent is not None:
            policy = replace(policy, max_prune_percent=args.max_prune_percent)
        if args.no_self_heal:
            policy = replace(policy, self_heal=False)
        if args.rollout is not None:
            policy = replace(policy, rollout=args.rollout)
        if args.owner:
            policy = replace(policy, owner=args.owner)
        if args.confirm_prune:
            policy = replace(policy, confirm_prune=args.confirm_prune.lower())
        if windows:
            policy = replace(policy, restart_windows=windows)
        return replace(cfg, policy=policy)
    policy = cfg_mod.Policy(
        prune=bool(args.prune),
        max_prune_percent=30 if args.max_prune_percent is None else args.max_prune_percent,
        self_heal=not args.no_self_heal,
        rollout=args.rollout,  # None: the host config's rollout, as the daemon reads it
        owner=args.owner or "",
        confirm_prune=(args.confirm_prune or "").lower(),
        restart_windows=windows,
    )
    entry = cfg_mod.HostEntry(args.connect or _default_uri(), _host_config(args.host_config))
    return cfg_mod.DaemonConfig(
        source=cfg_mod.SourceConfig(repo=args.repo or ".", path=args.path or ""),
        hosts=(entry,),
        policy=policy,
    )


def _restart_windows(values: Sequence[str]) -> tuple[RestartWindow, ...]:
    from reconciler import windows
    from reconciler.errors import ConfigError

    try:
        return tuple(windows.parse_annotation(v) for v in values)
    except ValueError as err:
        raise ConfigError(f"--restart-window: {err}", "") from err


def _percent(value: str) -> int:
    """--max-prune-percent: as the config's policy.maxPrunePercent, an integer from 0 to 100."""
    if not value.isdigit() or int(value) > 100:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer from 0 to 100")
    return int(value)


def _plan_or_apply(args: argparse.Namespace, dry_run: bool) -> int:
    from reconciler import planout, source, targets
    from reconciler.config import is_remote_url
    from reconciler.hypervisor import Hypervisor
    from reconciler.model import Action
    from reconciler.plan import format_plan, summary_line
    from reconciler.reconcile import reconcile_once
    from reconciler.status import format_table, vm_statuses

    cfg = _daemon_config(args)
    repo = args.repo or (cfg.source.repo if not is_remote_url(cfg.source.repo) else ".")
    path = cfg.source.path if args.path is None else args.path
    snapshot = source.read_snapshot(repo, args.ref)
    _note_work_tree(repo, args.ref, path)
    text = args.output == "text"
    say = print if text else (lambda *_a, **_k: None)
    docs = []
    code = EXIT_OK
    for entry in cfg.hosts:
        target = targets.host_target(cfg, entry, restart_now=args.restart_now)
        with Hypervisor(target.uri) as hv:
            name = target.policy.host or hv.hostname()
            verb = "plan" if dry_run else "apply"
            say(f"{verb}: host {name} at {target.uri}, revision {snapshot.commit[:12]}, entry {path or '.'}")
            if targets.in_memory(target.uri):
                say(
                    f"  note: {target.uri} is {targets.TEST_DRIVER_NOTE}; give --connect or --config for a real host"
                )
            say(f"  {targets.describe(target)}")
            plan, status = reconcile_once(snapshot, path, target, hv, dry_run=True)
            say(format_plan(plan, verbose=args.verbose))
            say(summary_line(plan, applied=False))
            results = None
            if plan.errors:
                for e in plan.errors:
                    _err(e)
                code = EXIT_ERROR
            elif not dry_run and plan.has_changes:
                deletes = [c.name for c in plan.changes if c.action == Action.DELETE]
                question = f"delete {len(deletes)} domain(s) ({', '.join(deletes[:5])})?"
                if deletes and not args.yes and not _confirm(question):
                    _err("not applied: deletions need a yes (answer yes, or pass --yes)")
                    docs.append(planout.plan_document(plan, target, name))
                    code = EXIT_ERROR
                    continue
                progress = _progress() if text and sys.stdout.isatty() else None
                plan, status = reconcile_once(snapshot, path, target, hv, progress=progress)
                results = status.results
                say()
                say(format_table(vm_statuses(plan, status.results, hv.list_domains(), name)))
                say(summary_line(plan, applied=True, results=status.results))
            elif not dry_run:
                results = ()
            docs.append(planout.plan_document(plan, target, name, results))
            if plan.errors:
                continue
            if status.reason != "Succeeded":
                _err(status.message or str(status.reason))
                code = EXIT_ERROR
                continue
            drift = any(c.drift for c in plan.changes)  # reported only (selfHeal off) is still a difference
            if dry_run and (plan.has_changes or drift) and code == EXIT_OK:
                code = EXIT_CHANGES
    if not text:
        _print_data({"plans": docs}, args.output)
    return code


def _print_data(doc: object, fmt: str) -> None:
    """``-o json`` / ``-o yaml`` of a plain document."""
    import json

    if fmt == "yaml":
        from reconciler.manifests import dump_documents

        sys.stdout.write(dump_documents([json.loads(json.dumps(doc))]))
    else:
        print(json.dumps(doc, indent=2))


def _confirm(question: str) -> bool:
    """Ask on a terminal; anywhere else (CI, scripts) the answer is yes, as before."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return True
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    try:
        return input().strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _progress() -> Callable[[int, int, str], None]:
    def show(done: int, total: int, what: str) -> None:
        print(f"  [{done}/{total}] {what}", flush=True)

    return show


def _note_work_tree(repo: str, ref: str, path: str) -> None:
    """Say when the work tree holds edits the command does not read (it reads commits)."""
    import subprocess

    if ref != "HEAD":
        return
    try:
        out = subprocess.run(
            ["git", "-C", repo, "status", "--porcelain", "--untracked-files=normal", "--", path or "."],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return  # not a work tree (a bare mirror): nothing to say
    changed = [line[3:] for line in out.splitlines() if line.strip()]
    if changed:
        first = ", ".join(changed[:3]) + (", …" if len(changed) > 3 else "")
        _err(
            f"note: {len(changed)} uncommitted change(s) under {path or '.'} are not read ({first}): "
            "this reads the commit HEAD; commit them to include them (`reconciler build DIR` reads the work tree)"
        )


def cmd_plan(args: argparse.Namespace) -> int:
    return _plan_or_apply(args, dry_run=True)


def cmd_apply(args: argparse.Namespace) -> int:
    return _plan_or_apply(args, dry_run=False)


# -- run / status ---------------------------------------------------------------------


def cmd_host_facts(args: argparse.Namespace) -> int:
    """Read the host's facts and write them as JSON (``--host-facts FILE`` reads them back)."""
    from reconciler.hostfacts import facts_to_json
    from reconciler.hypervisor import Hypervisor

    config = _host_config(args.host_config)
    with Hypervisor(args.connect) as hv:
        text = facts_to_json(hv.host_facts(img.path for img in config.images.values()))
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from reconciler import daemon

    return daemon.main(args)


def cmd_status(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict

    from reconciler import config as daemon_config
    from reconciler import state_store
    from reconciler.errors import HypervisorError
    from reconciler.hypervisor import Hypervisor
    from reconciler.status import STATE_FILE, format_table, live_rows, summary_lines

    cfg = None
    if args.config or Path(daemon_config.DEFAULT_CONFIG).exists():
        cfg = daemon_config.load_config(
            args.config, daemon_config.Overrides(repo=".", state_dir=args.state_dir)
        )
    state_dir = args.state_dir or (cfg.state_dir if cfg else daemon_config.DEFAULT_STATE_DIR)
    state, problem = state_store.read_checked(state_dir)
    if not state:  # the live rows still print; the daemon's view (sync, messages) is missing
        why = problem or "missing (has the daemon run with this state directory?)"
        _err(f"warning: {Path(state_dir) / STATE_FILE}: {why}; showing libvirt's view only")
    # Hosts: --connect, else the config file's, else those the daemon recorded, else the demo driver.
    hosts: list[tuple[str, str]] = []
    if args.connect:
        hosts = [(state_store.host_name_for(args.connect, cfg, state), args.connect)]
    elif cfg is not None:
        hosts = [(h.config.name, h.uri) for h in cfg.hosts]
    elif state.get("hosts"):
        hosts = [(name, str(h.get("uri", ""))) for name, h in sorted(state["hosts"].items())]
    else:
        hosts = [("", DEFAULT_URI)]
    recorded = state.get("vms", [])
    rows: list[VMStatus] = []
    unreachable = []
    for name, uri in hosts:
        try:
            with Hypervisor(uri) as hv:
                host = name or hv.hostname()
                rows.extend(live_rows(recorded, hv.list_domains(), host, args.all))
        except HypervisorError as err:
            unreachable.append(f"{uri}: {err}")
            rows.extend(live_rows(recorded, None, name or uri))
    if args.output in ("json", "yaml"):
        out = {
            "attempted_revision": state.get("attempted_revision", ""),
            "applied_revision": state.get("applied_revision", ""),
            "reason": state.get("reason", ""),
            "message": state.get("message", ""),
            "failed_commit": state.get("failed_commit", ""),
            "hosts": state.get("hosts", {}),
            "unreachable": unreachable,
            "vms": [asdict(r) for r in rows],
            "history": state.get("history", []),
        }
        if args.output == "yaml":
            _print_data(out, "yaml")
        else:
            print(json.dumps(out, indent=2, sort_keys=True))
    else:
        from reconciler import targets

        print("status: " + ", ".join(f"host {name or '?'} at {uri}" for name, uri in hosts))
        for _, uri in hosts:
            if targets.in_memory(uri):
                print(f"  note: {uri} is {targets.TEST_DRIVER_NOTE}: it shows no daemon's domains")
        print(format_table(rows))
        lines = summary_lines(state) + [f"unreachable: {u}" for u in unreachable]
        if lines:
            print()
            print("\n".join(lines))
    if not state:
        return EXIT_ERROR
    return EXIT_ERROR if unreachable and len(unreachable) == len(hosts) else EXIT_OK


# -- parser ---------------------------------------------------------------------------

DESCRIPTION = """\
Run KubeVirt VirtualMachines on plain libvirt hosts, GitOps-style: a git repository
of VM, instancetype and preference YAML (with kustomize overlays) is built, expanded
like KubeVirt does, rendered to libvirt domain XML and converged onto each host.

  reconciler validate --path overlays/prod           check a revision (CI)
  reconciler diff --base origin/main --path overlays/prod   what a pull request changes
  reconciler plan --config /etc/reconciler/config.yaml      what the daemon would do now
  reconciler run --config /etc/reconciler/config.yaml       the daemon
"""
EXIT_CODES = "exit codes: 0 success / no change, 2 changes (plan, diff), 1 error or usage error"
LOG_LEVELS = ("debug", "info", "warning", "error")  # as the daemon config's log.level
LOG_FORMATS = ("auto", "console", "json")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Epilogs as written; every option's default shown unless its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or not action.option_strings
            or default in (None, False, "", [], argparse.SUPPRESS)
        ):
            return text
        return f"{text} (default: {default})".strip()


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors exiting 1 (2 means "changes") and "did you mean"."""

    def error(self, message: str) -> NoReturn:
        hint = _did_you_mean(self, message)
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}{hint}\n")


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    words: list[str] = []
    wrong = ""
    if message.startswith("unrecognized arguments: "):
        wrong = message.split(": ", 1)[1].split()[0].split("=")[0]
        for action in parser._actions:
            words += action.option_strings
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    words += [o for a in sub._actions for o in a.option_strings]
    elif "invalid choice: " in message:
        wrong = message.split("invalid choice: ", 1)[1].split(" ", 1)[0].strip("'")
        for action in parser._actions:
            if action.choices:
                words += [str(c) for c in action.choices]
    close = difflib.get_close_matches(wrong, sorted(set(words)), n=1) if wrong else []
    return f"; did you mean {close[0]}?" if close else ""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("libvirt-gitops-reconciler")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        print(f"reconciler {_version()}")
        parser.exit(EXIT_OK)


def _globals(suppress: bool) -> _Parser:
    """Flags accepted before or after the subcommand."""
    g = _Parser(add_help=False)
    default = argparse.SUPPRESS if suppress else None
    g.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=default if suppress else "auto",
        help="log lines: auto (console on a terminal, JSON otherwise), console or json",
    )
    g.add_argument(
        "--log-level", choices=LOG_LEVELS, default=default if suppress else "info", help="least level logged"
    )
    g.add_argument(
        "--no-color",
        action="store_true",
        default=default if suppress else False,
        help="no ANSI colours (also when NO_COLOR is set or output is not a terminal)",
    )
    return g


def _default_uri() -> str:
    return os.environ.get("LIBVIRT_DEFAULT_URI") or DEFAULT_URI


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="reconciler",
        description=DESCRIPTION,
        epilog=EXIT_CODES + '\nshell completion: eval "$(register-python-argcomplete reconciler)"',
        formatter_class=_Formatter,
        parents=[_globals(suppress=False)],
    )
    parser.add_argument("--version", action=_VersionAction, help="print the installed version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    common = _globals(suppress=True)

    def command(name: str, text: str, examples: str, codes: str = EXIT_CODES) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=text,
            description=text,
            epilog=f"examples:\n{examples}\n\n{codes}",
            formatter_class=_Formatter,
            parents=[common],
        )

    p = command(
        "build",
        "overlay output, like `kustomize build DIR` (reads the work tree)",
        "  reconciler build overlays/prod",
        "exit codes: 0 built, 1 error",
    )
    p.add_argument("dir", help="kustomization directory (or a directory of YAML files)")
    p.add_argument(
        "--ref",
        default=None,
        help="build DIR as committed at this ref of its repository (default: the work tree as it is)",
    )
    p.add_argument(
        "--root", default=None, help="read nothing outside this directory (default: the git work tree)"
    )
    p.set_defaults(func=cmd_build)

    p = command(
        "expand",
        "print VMs with instancetype, preference, presets and defaults applied",
        "  reconciler expand --path overlays/prod\n  reconciler expand -f vm.yaml -f catalog.yaml -o json",
        "exit codes: 0 expanded, 1 error",
    )
    _add_source_args(p)
    p.add_argument(
        "-f", "--file", action="append", dest="files", default=[], help="YAML file(s) instead of a repo"
    )
    p.add_argument("--output", "-o", choices=("yaml", "json"), default="yaml", help="output format")
    p.set_defaults(func=cmd_expand)

    p = command(
        "render",
        "print the libvirt domain XML of each VM",
        "  reconciler render --path overlays/prod --host-config /etc/reconciler/host.yaml",
        "exit codes: 0 rendered, 1 error",
    )
    _add_source_args(p)
    p.add_argument(
        "-f", "--file", action="append", dest="files", default=[], help="YAML file(s) instead of a repo"
    )
    p.add_argument("--host-config", default=None, help="host configuration YAML")
    _add_facts_arg(p)
    p.set_defaults(func=cmd_render)

    p = command(
        "validate",
        "check a revision: build, expand, render; exit 1 on any error",
        "  reconciler validate --path overlays/prod\n"
        "  reconciler validate --ref origin/main --path overlays/prod --host-facts hosts/h1.json",
        "exit codes: 0 valid, 1 error",
    )
    _add_source_args(p)
    p.add_argument("--host-config", default=None, help="host configuration YAML")
    _add_facts_arg(p)
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format")
    p.set_defaults(func=cmd_validate)

    p = command(
        "diff",
        "what merging HEAD into BASE does to the VMs (no host needed)",
        "  reconciler diff --base origin/main --path overlays/prod\n"
        "  reconciler diff --base origin/main --head HEAD -o markdown > comment.md",
        "exit codes: 0 no change, 2 changes, 1 error in head or a usage error",
    )
    p.add_argument("--repo", default=".", help="git repository (default: current directory)")
    p.add_argument("--base", required=True, help="ref the change is merged into (e.g. origin/main)")
    p.add_argument("--head", default="HEAD", help="ref with the change (default: HEAD)")
    p.add_argument("--path", default="", help="entry directory inside the repository (default: its root)")
    p.add_argument("--host-config", default=None, help="host configuration YAML to render with")
    _add_facts_arg(p)
    p.add_argument(
        "-o",
        "--output",
        "--format",
        dest="format",
        choices=("text", "markdown", "json"),
        default="text",
        help="output format",
    )
    p.add_argument(
        "-v", "--verbose", action="store_true", help="text: also the libvirt XML path behind each field"
    )
    p.set_defaults(func=cmd_diff)

    for name, func, text, examples, codes in (
        (
            "plan",
            cmd_plan,
            "what apply would do on a host, with the policy the daemon would use",
            "  reconciler plan --config /etc/reconciler/config.yaml\n"
            "  reconciler plan --connect qemu:///system --host-config host.yaml --path overlays/prod --prune",
            "exit codes: 0 no change, 2 changes, 1 error or a usage error",
        ),
        (
            "apply",
            cmd_apply,
            "converge a host to a revision: the plan first, then each change, then a summary",
            "  reconciler apply --connect qemu:///system --host-config host.yaml --path overlays/prod\n"
            "  reconciler apply --config /etc/reconciler/config.yaml --prune --yes",
            "exit codes: 0 applied, 1 error or a usage error",
        ),
    ):
        p = command(name, text, examples, codes)
        _add_source_args(p, config=True)
        _add_host_args(p)
        p.add_argument("-v", "--verbose", action="store_true", help="also list unchanged domains")
        p.add_argument(
            "-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format"
        )
        if name == "apply":
            p.add_argument(
                "-y", "--yes", action="store_true", help="delete without asking (on a terminal it asks)"
            )
        p.set_defaults(func=func)

    p = command(
        "host-facts",
        "write what a libvirt host offers as JSON (for --host-facts in CI)",
        "  reconciler host-facts --connect qemu:///system -o hosts/h1.json",
        "exit codes: 0 written, 1 error",
    )
    p.add_argument(
        "--connect", default=_default_uri(), help="libvirt URI (LIBVIRT_DEFAULT_URI, else test:///default)"
    )
    p.add_argument(
        "--host-config", default=None, help="host configuration YAML (its image files are checked too)"
    )
    p.add_argument("--output", "-o", default="-", help="file to write (default: standard output)")
    p.set_defaults(func=cmd_host_facts)

    p = command(
        "run",
        "the daemon: watch the repository and converge the hosts",
        "  reconciler run --config /etc/reconciler/config.yaml\n"
        "  reconciler run --repo examples/repo --path overlays/dev --once",
        "exit codes: 0 stopped cleanly (--once: applied), 1 error",
    )
    p.add_argument(
        "--config", default=None, help="daemon configuration YAML (default /etc/reconciler/config.yaml)"
    )
    p.add_argument("--repo", default=None, help="local repository path or remote URL (overrides source.repo)")
    p.add_argument("--branch", default=None, help="branch to follow (overrides source.branch)")
    p.add_argument("--path", default=None, help="entry directory in the repository (overrides source.path)")
    p.add_argument("--connect", default=None, help="one libvirt URI (overrides connect/hosts)")
    p.add_argument("--host-config", default=None, help="host configuration YAML (overrides host)")
    p.add_argument("--state-dir", default=None, help="state directory (default /var/lib/reconciler)")
    p.add_argument("--listen", default=None, help="HOST:PORT for /healthz, /metrics, /hooks/git ('' = off)")
    p.add_argument(
        "--prune", action="store_true", default=None, help="undefine managed domains whose VM left git"
    )
    p.add_argument("--once", action="store_true", help="reconcile once and exit")
    p.add_argument(
        "--show-plans", action="store_true", help="print every plan that changes something, and the VM table"
    )
    p.set_defaults(func=cmd_run)

    p = command(
        "status",
        "table of managed VMs per host, from libvirt and the daemon's state file",
        "  reconciler status\n  reconciler status --connect qemu:///system -o json",
        "exit codes: 0 shown, 1 state file missing or unreadable, or every host unreachable",
    )
    p.add_argument(
        "--config", default=None, help="daemon configuration (default /etc/reconciler/config.yaml if present)"
    )
    p.add_argument(
        "--connect", default=None, help="libvirt URI (default: the hosts of the config or state file)"
    )
    p.add_argument(
        "--state-dir", default=None, help="the daemon's state directory (default /var/lib/reconciler)"
    )
    p.add_argument("--all", action="store_true", help="also list unmanaged domains")
    p.add_argument(
        "--output", "-o", choices=("table", "text", "json", "yaml"), default="table", help="output format"
    )
    p.set_defaults(func=cmd_status)
    return parser


# Commands that log nothing (they print): start-up without the logging library.
_QUIET = frozenset({"build", "expand", "render", "validate", "diff"})


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    if os.environ.get("_ARGCOMPLETE"):  # shell completion (register-python-argcomplete reconciler)
        import argcomplete

        argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `reconciler`: help, not an error
        parser.print_help()
        return EXIT_OK
    collecting = gc.isenabled()
    if args.command in _QUIET:
        # One short run building large acyclic trees (a fleet's documents, domains): the
        # cyclic collector would only rescan them, a third of the run at 5000 VMs.
        gc.disable()
    else:
        from reconciler.log import setup_logging

        setup_logging(args.log_format, args.log_level, color=not args.no_color)
    try:
        code: int = args.func(args)
    except ReconcilerError as err:
        _err(str(err))
        return EXIT_ERROR
    except BrokenPipeError:  # `reconciler status | head`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except (OSError, ValueError) as err:
        _err(str(err))
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    finally:
        if collecting:
            gc.enable()
    return code


if __name__ == "__main__":
    sys.exit(main())
