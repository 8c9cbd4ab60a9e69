"""What every command shares: exit codes, messages on stderr, the source and host
arguments, the readers of the host config and host facts, data output.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # heavy imports stay lazy: each command imports what it runs
    from collections.abc import Callable, Iterable

    from reconciler.context import Context
    from reconciler.hostfacts import HostFacts
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import Problem
    from reconciler.settings.host import HostConfig
    from reconciler.source.settings import SourceConfig


EXIT_OK = 0


EXIT_ERROR = 1


EXIT_CHANGES = 2


DEFAULT_URI = "test:///default"


def say_error(msg: str) -> None:
    print(f"reconciler: {msg}", file=sys.stderr)


def warn_once(warnings: Iterable[Problem]) -> None:
    """One stderr line per distinct cause, with the VMs it concerns."""
    from reconciler.wording import problems

    for w in problems.group(warnings):
        say_error(f"warning: {w}")


def add_source_args(p: argparse.ArgumentParser, config: bool = False) -> None:
    """``config``: --repo and --path default to the --config file's source (plan, apply)."""
    also = ", or the --config file's source" if config else ""
    p.add_argument(
        "--repo",
        default=None if config else ".",
        help=f"git repository, or a directory inside its work tree (default: the current directory{also})",
    )
    p.add_argument(
        "--ref", default=None if config else "HEAD", help="commit, branch or tag to read (default: HEAD)"
    )
    p.add_argument(
        "--path",
        default=None,
        help="entry directory, relative to the repository's top (default: the directory --repo names "
        f"inside it, so its top when run there{also})",
    )


def locate_repo(repo: str, path: str | None) -> tuple[str, str]:
    """The repository and entry a command reads, found as git finds them: ``repo`` may be
    any directory inside a work tree (its top is read); the entry is ``path`` (relative to
    the top) or, when not given, that directory. A remote URL, a bare repository or a
    directory outside any work tree are kept as given (reading them says what is wrong)."""
    from reconciler import source
    from reconciler.model.identifiers import is_remote_url

    if is_remote_url(repo):
        return repo, path or ""
    found = source.work_tree_root(repo)
    if found is None:
        return repo, path or ""
    top, prefix = found
    return top, (prefix if path is None else path.strip("/"))


def out_problem(out: str) -> str:
    """Why ``--out FILE`` cannot be written, said before any work ("" when it can be):
    its directory is missing or is no directory."""
    parent = Path(out).parent
    if not parent.exists():
        return f"--out {out}: the directory {parent} does not exist (nothing was planned): create it first"
    if not parent.is_dir():
        return f"--out {out}: {parent} is not a directory (nothing was planned)"
    return ""


def fetched_source(config: SourceConfig) -> tuple[str, str]:
    """A daemon config's remote source (``source.repo`` a URL) fetched as the daemon
    fetches it (its branch, its credentials), into a temporary mirror removed when the
    command's process ends: (the mirror's git directory, the commit the branch is at)."""
    import atexit
    import shutil
    import tempfile

    from reconciler.source.mirror import GitSource

    tmp = tempfile.mkdtemp(prefix="reconciler-source-")
    atexit.register(shutil.rmtree, tmp, True)
    src = GitSource(config, tmp)
    src.fetch()
    return str(src.git_dir), src.head()


def add_facts_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host-facts",
        default=None,
        metavar="FILE",
        help="check every VM against a host's facts (from `reconciler host-facts`), as plan does there",
    )


def add_jobs_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-j",
        "--jobs",
        type=_jobs,
        default=None,
        metavar="N",
        help="processes parsing, expanding, rendering and comparing VMs (default: 1; "
        "more pay only when cores are free)",
    )


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes (1 or more), got {text!r}")
    return n


def jobs(args: argparse.Namespace) -> int:
    """``--jobs``, else ``forked.DEFAULT_JOBS``."""
    from reconciler.cli import forked

    return int(args.jobs) if args.jobs is not None else forked.DEFAULT_JOBS


def run_context(args: argparse.Namespace) -> Context:
    """The context of one command: the system clock, fresh caches, and the mapper ``-j``
    picks (forked processes for more than one job, else the loop)."""
    from reconciler.cli.forked import ForkedMapper
    from reconciler.context import SERIAL, Context

    n = jobs(args)
    return Context(ForkedMapper(n) if n > 1 else SERIAL)


def source_reader(args: argparse.Namespace) -> Callable[[str], bytes]:
    """Reads the files VMs came from (to point at a field's line)."""
    from reconciler import source

    if args.files:
        from reconciler.manifests import limits

        return lambda name: limits.read_regular_file(name)
    repo, _ = locate_repo(args.repo, args.path)
    return source.read_snapshot(repo, args.ref).files.read


def sops_keys(*, sealed_ok: bool, configured: Keys | None = None) -> Keys | None:
    """The SOPS keys of a command: the daemon config's (``decryption.ageKeyFile``), else
    the environment's, found as ``sops`` finds them. Without any, the repository commands
    (``sealed_ok``) read encrypted files sealed (their values as stand-ins: a change is
    seen, not what it is) and ``plan``/``apply`` refuse them, at their file and line."""
    from reconciler.config.keys import keys_from_environment
    from reconciler.manifests.sops.keys import SEALED

    if configured is not None:
        return configured
    keys = keys_from_environment(os.environ)
    if keys is None and sealed_ok:
        return SEALED
    return keys


def add_host_args(p: argparse.ArgumentParser) -> None:
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
        type=percent,
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
        help="owner identity in the ownership marks (default: the repository, named the same from every "
        "clone, and the entry path, as the daemon derives it)",
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
    p.add_argument(
        "--restart-now",
        action="store_true",
        help="restart running VMs whose changes need a restart (staged ones too), whatever the rollout "
        "and restart windows",
    )
    p.add_argument(
        "--roll-forward",
        action="append",
        default=None,
        metavar="vm/NAME",
        help="this VM takes the repository's instancetype and preference revisions, not the ones its "
        "domain captured (repeatable)",
    )


def inside_its_repository(path: str) -> None:
    """Refuse a file given on the command line that lies in a git work tree but leads
    outside it: a committed symlink (``hosts/host.yaml -> /etc/...``) is never followed out
    of the repository, whatever the command (a PR's CI runs ``diff --host-config`` on it)."""
    from reconciler.errors import ConfigError

    # Lexical (``..`` folded, no link followed): the symlink itself is what is judged, and
    # a file outside every work tree (``../elsewhere/config.yaml``) is no file of one.
    given = Path(os.path.normpath(Path.cwd() / path))
    tree = next((d for d in given.parents if (d / ".git").exists()), None)
    if tree is None:
        return
    real, root = os.path.realpath(given), os.path.realpath(tree)
    if not real.startswith(root.rstrip("/") + "/"):
        raise ConfigError(f"a symlink leading outside the repository {tree}: not read", path)


def read_host_config(path: str | None) -> HostConfig:
    """The host configuration of ``--host-config`` (the demo one when not given)."""
    from reconciler.config import host as hostconfig
    from reconciler.manifests.config import read_existing_config_file
    from reconciler.settings import host as host_settings

    if path:
        inside_its_repository(path)
        return hostconfig.load_host_config(read_existing_config_file(path), path, os.path.realpath)
    return host_settings.HostConfig()


def read_host_facts(path: str | None) -> HostFacts | None:
    """The facts file of ``--host-facts`` (written by ``reconciler host-facts``), if given."""
    from reconciler import hostfacts
    from reconciler.manifests.config import read_existing_config_file
    from reconciler.manifests.limits import MAX_FILE_BYTES as MAX_FACTS_BYTES

    if not path:
        return None
    inside_its_repository(path)
    return hostfacts.facts_from_json(read_existing_config_file(path, MAX_FACTS_BYTES), path)


def print_data(doc: object, fmt: str) -> None:
    """``-o json`` / ``-o yaml`` of a plain document."""
    import json

    if fmt == "yaml":
        from reconciler.manifests import dump_documents

        sys.stdout.write(dump_documents([json.loads(json.dumps(doc))]))
    else:
        print(json.dumps(doc, indent=2))


def terminal() -> bool:
    """Whether someone can be asked: stdin and stderr are terminals (not CI, not a script)."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def ask(question: str) -> bool:
    """Ask on the terminal; only "y" or "yes" is a yes."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    try:
        return input().strip().lower() in ("y", "yes")
    except EOFError:
        return False


def progress_printer() -> Callable[[int, int, str], None]:
    def show(done: int, total: int, what: str) -> None:
        print(f"  [{done}/{total}] {what}", flush=True)

    return show


def note_work_tree(repo: str, ref: str, path: str, files: object = None) -> None:
    """Say when the work tree holds edits the command does not read (it reads commits):
    every file the build read (``files``: the snapshot's view, which remembers what was
    asked of it), wherever it lies, and new YAML files in the directories it listed;
    without that record, the edits under the entry directory."""
    import posixpath
    import subprocess

    if ref != "HEAD":
        return
    consulted: set[str] | None = getattr(files, "consulted", None)
    listed: set[str] = getattr(files, "listed", set())
    scope = "." if consulted is not None else (path or ".")
    try:
        out = subprocess.run(
            ["git", "-C", repo, "status", "--porcelain", "-z", "--untracked-files=all", "--", scope],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return  # not a work tree (a bare mirror): nothing to say
    records = out.split("\0")
    changed: list[str] = []
    i = 0
    while i < len(records):
        record = records[i]
        i += 1
        if len(record) < 4:
            continue
        names = [record[3:]]
        if record[0] in "RC":  # a rename: the old name follows
            names.append(records[i])
            i += 1
        for name in names:
            if (
                consulted is None
                or name in consulted
                or (posixpath.dirname(name) in listed and name.endswith((".yaml", ".yml")))
            ):
                changed.append(name)
                break
    if changed:
        first = ", ".join(changed[:3]) + (", …" if len(changed) > 3 else "")
        where = "to files the build uses" if consulted is not None else f"under {path or '.'}"
        say_error(
            f"note: {len(changed)} uncommitted change(s) {where} are not read ({first}): "
            "this reads the commit HEAD; commit them to include them (`reconciler build DIR` reads the work tree)"
        )


def percent(value: str) -> int:
    """--max-prune-percent: as the config's policy.maxPrunePercent, an integer from 0 to 100."""
    if not value.isdigit() or int(value) > 100:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer from 0 to 100")
    return int(value)


def default_uri() -> str:
    return os.environ.get("LIBVIRT_DEFAULT_URI") or DEFAULT_URI


class Adding(Protocol):
    """What the modules that add subcommands (``repo_args``, ``host_args``, ``images``)
    need of the parser's ``Commands`` (``cli/parser.py``, which imports them): a
    subcommand's parser, made alike."""

    def add(self, name: str, text: str, examples: str, codes: str = ...) -> argparse.ArgumentParser: ...
