"""Commands on a host: plan, apply, host-facts, run (the daemon), status.

Input: parsed arguments (and the daemon's config file, a saved plan). Output: plans,
results and status rows on stdout, a saved plan (``plan --out FILE``), prompts and
errors on stderr, an exit code. ``apply`` applies the plan it showed (or the one
saved), only with consent and only while the host still matches it; it never plans
twice.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.cli.common import (
    EXIT_CHANGES,
    EXIT_ERROR,
    EXIT_OK,
    default_uri,
    fetched_source,
    locate_repo,
    note_work_tree,
    out_problem,
    print_data,
    read_host_config,
    run_context,
    say_error,
    sops_keys,
)
from reconciler.cli.shown import apply_shown, show

if TYPE_CHECKING:  # heavy imports stay lazy: each command imports what it runs
    import argparse
    from collections.abc import Callable, Mapping, Sequence

    from reconciler.config.daemon import DaemonConfig, HostEntry
    from reconciler.context import Context
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import RestartWindow, SourceSnapshot
    from reconciler.plan.planned import PlannedRevision
    from reconciler.settings.targets import HostTarget


def daemon_config_from(args: argparse.Namespace) -> DaemonConfig:
    """The configuration plan/apply act with: the daemon's file (``--config``) with the
    flags given on top, or the flags alone; ``targets`` merges the flags and resolves it."""
    from reconciler.config import daemon as cfg_mod
    from reconciler.config import daemon_file, targets

    flags = targets.PolicyFlags(
        prune=bool(args.prune),
        max_prune_percent=args.max_prune_percent,
        no_self_heal=bool(args.no_self_heal),
        rollout=args.rollout,
        owner=args.owner or "",
        confirm_prune=args.confirm_prune or "",
        restart_windows=restart_windows(args.restart_window or []),
    )
    if args.config:
        cfg = daemon_file.load_config(
            args.config, cfg_mod.Overrides(connect=args.connect, host_config=args.host_config)
        )
    else:
        entry = cfg_mod.HostEntry(args.connect or default_uri(), read_host_config(args.host_config))
        repo, path = locate_repo(args.repo or ".", args.path)
        cfg = cfg_mod.DaemonConfig(source=cfg_mod.SourceConfig(repo=repo, path=path), hosts=(entry,))
    return targets.with_flags(cfg, flags)


def _daemon_state(args: argparse.Namespace, cfg: DaemonConfig) -> dict[str, Any]:
    """With ``--config``: the daemon's state file (its prune guard's memory), else nothing."""
    if not args.config:
        return {}
    from reconciler.status import state as state_store

    return state_store.read_checked(cfg.state_dir)[0]


def _guarded(target: HostTarget, recorded: Mapping[str, Any]) -> HostTarget:
    """The prune guard as the daemon keeps it for this host (its window's managed set, a
    recorded refusal): ``plan --config`` refuses what the daemon refuses."""
    from reconciler.status import state as state_store

    replace = dataclasses.replace
    h = state_store.host_state(recorded, target.config.name)
    window = h.get("prune_window")
    managed = window.get("managed") if isinstance(window, dict) else h.get("managed")
    refused = h.get("prune_refused")
    policy = target.policy
    if isinstance(managed, list) and all(isinstance(n, str) for n in managed):
        policy = replace(policy, prune_base=frozenset(managed))
    if (
        isinstance(refused, dict)
        and isinstance(refused.get("revision"), str)
        and isinstance(refused.get("limit"), int)
    ):
        policy = replace(policy, prune_held=(refused["revision"], refused["limit"]))
    return replace(target, policy=policy)


def vm_name(value: str) -> str:
    """``vm/web``, ``vm/team_web`` or ``web``: the VM's domain name."""
    return value.removeprefix("vm/")


def restart_windows(values: Sequence[str]) -> tuple[RestartWindow, ...]:
    from reconciler.errors import ConfigError
    from reconciler.settings import windows

    try:
        return tuple(windows.parse_annotation(v) for v in values)
    except ValueError as err:
        raise ConfigError(f"--restart-window: {err}", "") from err


def _plan_or_apply(args: argparse.Namespace, dry_run: bool) -> int:
    """Plan each host; ``plan`` shows (and with ``--out`` saves) the plans, ``apply``
    applies each plan it showed, with consent, while the host still matches it."""
    from reconciler.plan import output as planout

    if not dry_run and args.plan_file:
        from reconciler.cli.saved_plan import apply_saved

        return apply_saved(args)
    if dry_run and args.out and (problem := out_problem(args.out)):
        say_error(problem)
        return EXIT_ERROR
    context = run_context(args)
    cfg = daemon_config_from(args)
    src = _source(args, cfg)
    keys = sops_keys(sealed_ok=False, configured=cfg.keys)
    text = args.output == "text"
    say = print if text else (lambda *_a, **_k: None)
    docs = []
    planned_all: list[PlannedRevision] = []
    code = EXIT_OK
    recorded = _daemon_state(args, cfg)
    for entry in cfg.hosts:
        target = _guarded(_host_target(args, cfg, entry, src), recorded)
        outcome, doc, planned = _one_host(args, dry_run, target, src, context, keys, say, text)
        docs.append(doc)
        planned_all += [planned] if planned is not None else []
        # An error stays; changes (2) only after hosts without any (0).
        code = EXIT_ERROR if EXIT_ERROR in (code, outcome) else max(code, outcome)
    note_work_tree(src.repo, src.ref, src.path, src.snapshot.files)
    if dry_run and args.out:
        from reconciler.cli.saved_plan import save

        code = save(args.out, planned_all, code, say)
    if not text:
        print_data(planout.plans_document(docs), args.output)
    return code


@dataclasses.dataclass(frozen=True, slots=True)
class _Source:
    """The revision plan/apply read: the repository, the entry path in it, the ref and
    its snapshot, and the repository's identity (the owner's name) now and before."""

    repo: str
    path: str
    ref: str
    snapshot: SourceSnapshot
    identity: str
    formerly: str


def _source(args: argparse.Namespace, cfg: DaemonConfig) -> _Source:
    """The flags' repository (``--repo``, ``--path``, ``--ref``), else the config's (a
    remote one fetched as the daemon does), read at the ref."""
    from reconciler import source
    from reconciler.model.identifiers import is_remote_url

    local = not is_remote_url(cfg.source.repo)
    repo, path = locate_repo(
        args.repo or (cfg.source.repo if local else "."), cfg.source.path if args.path is None else args.path
    )
    # The owner names the repository, the same from every clone (a remote source: its URL).
    identity = source.repository_identity(repo) if local else ""
    formerly = source.former_identity(repo) if local else ""
    ref = args.ref or "HEAD"
    if not local and args.repo is None:  # the config's remote source, fetched as the daemon does
        repo, head = fetched_source(cfg.source)
        ref = args.ref or head
    return _Source(repo, path, ref, source.read_snapshot(repo, ref), identity, formerly)


def _host_target(args: argparse.Namespace, cfg: DaemonConfig, entry: HostEntry, src: _Source) -> HostTarget:
    """One host's target with the flags' restarts and roll-forwards."""
    from reconciler.config import targets

    return targets.host_target(
        cfg,
        entry,
        restart_now=args.restart_now,
        restart_staged=args.rollout == "Restart",
        repository=src.identity,
        formerly=src.formerly,
        roll_forward=frozenset(vm_name(v) for v in args.roll_forward or ()),
    )


def _one_host(
    args: argparse.Namespace,
    dry_run: bool,
    target: HostTarget,
    src: _Source,
    context: Context,
    keys: Keys | None,
    say: Callable[..., None],
    text: bool,
) -> tuple[int, dict[str, Any], PlannedRevision | None]:
    """Plan one host and show it, then apply it (``apply``): the host's exit code, its
    plan document, and its plan to save (``plan``; None: none)."""
    from reconciler.desired import PipelineCache
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.plan import output as planout
    from reconciler.reconcile import plan_revision
    from reconciler.wording import problems

    with Hypervisor(target.uri) as hv:
        planned = plan_revision(
            src.snapshot, src.path, target, hv, cache=PipelineCache(), context=context, keys=keys
        )
        show(say, planned, "plan" if dry_run else "apply", args.verbose)
        plan = planned.plan
        if plan.errors:
            for e in plan.errors:
                say_error(problems.words(e))
            return EXIT_ERROR, planout.plan_document(plan, target, planned.host), None
        if dry_run:
            return _plan_code(planned), planout.plan_document(plan, target, planned.host), planned
        outcome, results = apply_shown(args, planned, hv, say, text)
        return outcome, planout.plan_document(plan, target, planned.host, results), None


def _plan_code(planned: PlannedRevision) -> int:
    """``plan``'s exit code for a host: 1 an error, 2 a difference (a change, drift
    reported only, a refused prune), else 0."""
    from reconciler.reconcile import planned_status

    plan = planned.plan
    status = planned_status(planned)
    drift = any(c.drift for c in plan.changes)  # reported only (selfHeal off) is still a difference
    if status.reason != "Succeeded":
        say_error(status.message or str(status.reason))
        return EXIT_ERROR
    if plan.has_changes or drift or plan.prune_refused is not None:
        return EXIT_CHANGES  # a refused prune is a difference held back: 2, as a change (README)
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    return _plan_or_apply(args, dry_run=True)


def cmd_apply(args: argparse.Namespace) -> int:
    return _plan_or_apply(args, dry_run=False)


def cmd_host_facts(args: argparse.Namespace) -> int:
    """Read the host's facts and write them as JSON (``--host-facts FILE`` reads them back)."""
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.hostfacts import facts_to_json

    config = read_host_config(args.host_config)
    with Hypervisor(args.connect) as hv:
        images = (img.path for img in config.images.values())
        facts = hv.host_facts(images, config.allowed_dirs, devices=bool(config.host_devices))
        text = facts_to_json(facts)
    if args.out is None or args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from reconciler.daemon.main import main
    from reconciler.model.identifiers import is_remote_url

    if args.repo and not is_remote_url(args.repo):  # a directory inside the work tree: its top
        args.repo, path = locate_repo(args.repo, args.path)
        args.path = path or args.path
    return main(args)


def cmd_status(args: argparse.Namespace) -> int:
    from reconciler.cli.host_status import print_status, status_hosts, status_rows
    from reconciler.config import daemon as daemon_config
    from reconciler.config import daemon_file
    from reconciler.model.results import Reason
    from reconciler.status import STATE_FILE
    from reconciler.status import state as state_store

    cfg = None
    if args.config or Path(daemon_file.default_config()).exists():
        cfg = daemon_file.load_config(
            args.config, daemon_config.Overrides(repo=".", state_dir=args.state_dir)
        )
    state_dir = args.state_dir or (cfg.state_dir if cfg else daemon_config.DEFAULT_STATE_DIR)
    state, problem = state_store.read_checked(state_dir)
    if not state:  # the live rows still print; the daemon's view (sync, messages) is missing
        why = problem or "missing (has the daemon run with this state directory?)"
        say_error(f"warning: {Path(state_dir) / STATE_FILE}: {why}; showing libvirt's view only")
    hosts = status_hosts(args.connect, cfg, state)
    rows, unreachable = status_rows(hosts, state, args.all)
    print_status(args.output, state, hosts, rows, unreachable)
    if not state:
        return EXIT_ERROR
    if state.get("reason") not in (None, "", str(Reason.SUCCEEDED)):  # BuildFailed, ApplyFailed, ...
        return EXIT_ERROR
    return EXIT_ERROR if unreachable and len(unreachable) == len(hosts) else EXIT_OK
