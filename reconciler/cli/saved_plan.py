"""Saved plans on the command line: ``plan --out FILE``, ``apply FILE``, ``show FILE``.

Input: parsed arguments, the plans of ``plan`` (to save), a saved plan's file (to apply
or show), this host's own configuration (``--config``, else ``--host-config`` and
``--owner``, as ``plan`` reads them) and the repository (``--repo``, else the
config's local ``source.repo``, else the current directory; never the path the file
names). Output: the file (written atomically, mode 0600, never through a symbolic
link), the plan printed as ``plan`` prints it, results, refusals on stderr, an exit code.

A saved plan is a claim that ``apply FILE`` verifies, host by host, before touching
anything: every path it names lies inside this host's ``allowedDirectories``; the
domains it touches are as they were planned (fingerprints); and the plan made again
here, from the repository at the plan's commit with this host's own configuration
against the host as it is now, is the file's plan (``plan.verify``: any difference is
named, VM by VM, and nothing is applied). What is applied is that plan made here,
with the consent ``apply`` asks for; apply then checks each domain's ownership mark
again as it defines or deletes it (``host.apply``).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    locate_repo,
    print_data,
    read_host_config,
    run_context,
    say_error,
    sops_keys,
)
from reconciler.manifests.limits import read_regular_file
from reconciler.records import dataclass

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from reconciler.config.daemon import DaemonConfig
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import SourceSnapshot
    from reconciler.plan.planned import PlannedRevision
    from reconciler.plan.saved import Saved
    from reconciler.settings.targets import HostTarget

# ``apply FILE`` takes these flags (this host's own configuration and the repository);
# the plan's own flags (policy, host, path) are in the file.
_PLAN_FLAGS = (
    "connect",
    "prune",
    "max_prune_percent",
    "rollout",
    "no_self_heal",
    "confirm_prune",
    "restart_window",
    "restart_now",
    "roll_forward",
    "path",
)


def save(out: str, planned: Sequence[PlannedRevision], code: int, say: Callable[..., None]) -> int:
    """``plan --out FILE``: the plans as a file ``apply FILE`` applies, unless one has errors."""
    from reconciler.plan import saved

    if code == EXIT_ERROR:
        say_error(f"{out}: not written: a plan with errors cannot be applied")
        return code
    write_private(Path(out), saved.dump(planned).encode("utf-8"))
    say(f"\nSaved the plan to {out}; `reconciler apply {out}` applies exactly this plan.")
    return code


def write_private(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a new file (mode 0600) in the same directory,
    renamed over it. A symbolic link (or anything but a regular file) at ``path`` is
    refused, never followed: the rename would replace a link made meanwhile, not its target."""
    from reconciler.plan.saved import SavedPlanError

    def refuse_odd() -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise SavedPlanError(
                f"{path}: a symbolic link: not written (a plan is never written through one)"
            )
        if not stat.S_ISREG(st.st_mode):
            raise SavedPlanError(f"{path}: not a regular file: not written")

    refuse_odd()
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # 0600, O_EXCL
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        refuse_odd()
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _this_host(args: argparse.Namespace) -> tuple[DaemonConfig, str]:
    """This host's own configuration (the daemon's file, or ``--host-config`` and
    ``--owner``) and the repository to read (never the one the file names)."""
    from reconciler.config import daemon as cfg_mod
    from reconciler.config import daemon_file
    from reconciler.model.identifiers import is_remote_url

    if args.config:
        cfg = daemon_file.load_config(args.config, cfg_mod.Overrides(host_config=args.host_config))
        local = not is_remote_url(cfg.source.repo)
        repo = args.repo or (cfg.source.repo if local else ".")
    else:
        repo = args.repo or "."
        cfg = cfg_mod.DaemonConfig(
            source=cfg_mod.SourceConfig(repo=repo),
            hosts=(cfg_mod.HostEntry("", read_host_config(args.host_config)),),
        )
    if args.owner:
        cfg = dataclasses.replace(cfg, policy=dataclasses.replace(cfg.policy, owner=args.owner))
    return cfg, locate_repo(repo, None)[0]


def _target(cfg: DaemonConfig, planned: PlannedRevision, identity: str, formerly: str) -> HostTarget | str:
    """The target this host plans ``planned``'s revision with: its own host config,
    owner and name, with the plan's flags (policy) from the file; or why there is none."""
    from reconciler.config import targets
    from reconciler.config.daemon import HostEntry
    from reconciler.settings.targets import HostTarget

    p = planned.policy
    if len(cfg.hosts) == 1 and not cfg.hosts[0].uri:  # no --config: the host the file names
        entry = HostEntry(planned.uri, cfg.hosts[0].config)
        cfg = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, path=planned.entry))
    else:
        found = [h for h in cfg.hosts if h.uri == planned.uri]
        if not found:
            return f"{planned.uri} is not a host of this configuration"
        entry = found[0]
    cfg = dataclasses.replace(cfg, policy=dataclasses.replace(cfg.policy, rollout=p.rollout.value))
    mine = targets.host_target(
        cfg,
        entry,
        restart_now=p.restart_now,
        restart_staged=p.restart_staged,
        repository=identity,
        formerly=formerly,
        roll_forward=p.roll_forward,
    )
    policy = dataclasses.replace(
        p,
        host=mine.policy.host,
        claim_unselected=mine.policy.claim_unselected,
        owner=mine.policy.owner,
        former_owners=mine.policy.former_owners,
    )
    return HostTarget(planned.uri, mine.config, policy)


@dataclass(frozen=True, slots=True)
class _Here:
    """What a saved plan is verified against here: this host's own configuration, the
    repository (its identity, as ``plan`` names it), ``--ref``'s commit and the SOPS keys."""

    name: str  # the plan's file
    cfg: DaemonConfig
    repo: str
    identity: str
    formerly: str
    head: SourceSnapshot | None
    keys: Keys | None


def apply_saved(args: argparse.Namespace) -> int:
    """``apply FILE``: exactly the saved plan, host by host, once verified (see the
    module doc), or nothing where the host or the repository says otherwise."""
    from reconciler.cli.shown import apply_shown, show
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.plan import output as planout
    from reconciler.plan import saved

    if _plan_flags_given(args):
        return EXIT_ERROR
    name = args.plan_file
    hosts = saved.load(read_regular_file(name), name)
    here = _here(args, name)
    text = args.output == "text"
    say = print if text else (lambda *_a, **_k: None)
    docs = []
    code = EXIT_OK
    for entry in hosts:
        with Hypervisor(entry.planned.uri) as hv:
            show(say, entry.planned, "apply", args.verbose, saved=f"the saved plan {name}")
            planned, moved, refused = _verified(args, entry, here, hv)
            if moved or refused:
                _say_refused(name, planned, moved, refused)
                docs.append(
                    planout.plan_document(entry.planned.plan, _shown_target(entry.planned), planned.host)
                )
                code = EXIT_ERROR
                continue
            outcome, results = apply_shown(args, planned, hv, say, text)
            docs.append(planout.plan_document(planned.plan, _shown_target(planned), planned.host, results))
            code = outcome if code == EXIT_OK else code
    if not text:
        print_data(planout.plans_document(docs), args.output)
    return code


def _plan_flags_given(args: argparse.Namespace) -> bool:
    """Whether the plan's own flags were given (refused: the file carries them)."""
    given = [f"--{f.replace('_', '-')}" for f in _PLAN_FLAGS if getattr(args, f, None)]
    if given:
        say_error(
            f"{' '.join(given)}: a saved plan carries its hosts, revision and policy; apply FILE takes "
            "--yes, this host's own configuration (--config, or --host-config and --owner), "
            "--repo (the repository it is verified against), --ref (the plan must be of its commit), -o and -v"
        )
    return bool(given)


def _here(args: argparse.Namespace, name: str) -> _Here:
    """This host's configuration and repository, as ``apply FILE``'s arguments name them."""
    from reconciler import source
    from reconciler.model.identifiers import is_remote_url

    cfg, repo = _this_host(args)
    identity = source.repository_identity(repo) if not is_remote_url(repo) else ""
    formerly = source.former_identity(repo) if not is_remote_url(repo) else ""  # as plan names them
    head = source.read_snapshot(repo, args.ref) if args.ref else None
    keys = sops_keys(sealed_ok=False, configured=cfg.keys)
    return _Here(name, cfg, repo, identity, formerly, head, keys)


def _verified(
    args: argparse.Namespace, entry: Saved, here: _Here, hv: Hypervisor
) -> tuple[PlannedRevision, list[str], list[str]]:
    """(the plan to apply: the one made here, the file's until then; what changed since
    the plan; why the file is refused), host ``entry`` checked as the module doc says."""
    from reconciler.plan import verify
    from reconciler.plan.planned import changed_since
    from reconciler.reconcile import read_touched

    planned = entry.planned
    target = _target(here.cfg, planned, here.identity, here.formerly)
    if isinstance(target, str):
        refused = [target]
    else:
        refused = list(verify.outside_allowed(entry.doc, target.config.allowed_dirs))
    moved = [] if refused else list(changed_since(planned, read_touched(planned, hv)))
    if here.head is not None and here.head.commit != planned.revision:
        moved.insert(
            0,
            f"{args.ref} of {args.repo or here.repo} is now {here.head.commit[:12]}, "
            f"the plan was made at {planned.revision[:12]}",
        )
    if not refused and not moved and not isinstance(target, str):
        return _planned_again(args, entry, here, hv, target)
    return planned, moved, refused


def _planned_again(
    args: argparse.Namespace, entry: Saved, here: _Here, hv: Hypervisor, target: HostTarget
) -> tuple[PlannedRevision, list[str], list[str]]:
    """The plan made here, from the repository at the plan's commit, and how the file's
    plan differs from it (nothing moved: checked before)."""
    from reconciler import source
    from reconciler.errors import SourceError
    from reconciler.plan import verify
    from reconciler.reconcile import plan_revision

    planned = entry.planned
    try:
        snapshot = source.read_snapshot(here.repo, planned.revision)
    except SourceError:
        return (
            planned,
            [],
            [
                f"revision {planned.revision[:12]} is not a commit of the repository {here.repo}: "
                "give --repo, the repository the plan was made from"
            ],
        )
    again = plan_revision(snapshot, planned.entry, target, hv, context=run_context(args), keys=here.keys)
    return again, [], list(verify.differences(entry.doc, again))  # what is applied: the plan made here


def _say_refused(name: str, planned: PlannedRevision, moved: list[str], refused: list[str]) -> None:
    """Why the file is not applied to ``planned``'s host, line by line, on stderr."""
    if moved:
        say_error(f"{name}: not applied to host {planned.host}: changed since the plan:")
    elif refused:
        say_error(
            f"{name}: not applied to host {planned.host}: the file is not what this host plans "
            f"for revision {planned.revision[:12]} (plan again):"
        )
    for line in moved or refused:
        say_error(f"  {line}")


def _shown_target(planned: PlannedRevision) -> HostTarget:
    from reconciler.settings.targets import HostTarget

    return HostTarget(planned.uri, planned.config, planned.policy)


def cmd_show(args: argparse.Namespace) -> int:
    """``show FILE``: a saved plan as ``plan`` printed it (``-o json``: as ``plan -o json``),
    read and checked as ``apply FILE`` reads it, without a host or a repository."""
    from reconciler.cli.common import EXIT_CHANGES
    from reconciler.cli.shown import show
    from reconciler.plan import output as planout
    from reconciler.plan import saved

    name = args.plan_file
    hosts = saved.load(read_regular_file(name), name)
    text = args.output == "text"
    docs = []
    for entry in hosts:
        planned = entry.planned
        if text:
            show(print, planned, "plan", args.verbose, saved=f"the saved plan {name}")
        docs.append(planout.plan_document(planned.plan, _shown_target(planned), planned.host))
    if not text:
        print_data(planout.plans_document(docs), args.output)
    return EXIT_CHANGES if any(e.planned.plan.has_changes for e in hosts) else EXIT_OK
