"""Run one hostile case in a child process with hard bounds on CPU time and memory.

Input: the arguments of ``reconciler`` (``run_cli``) or the source of a Python function
body (``run_python``). Output: the ``CompletedProcess`` and how much the child used
(``Bounded``). The bounds are hang guards, never speed checks: ``resource.setrlimit``
caps the child's CPU seconds (``RLIMIT_CPU``: the kernel kills a spin) and its address
space (``RLIMIT_AS``: a bomb is a ``MemoryError`` or a kill, never the test runner's
memory), and a wall-clock timeout catches a child blocked on I/O (a FIFO). A case passes
when the child ends on its own, under the bounds, and says what was wrong without a
traceback. Runs only the child it starts; touches no file but those the case names.

The child is forked from a fork server that imported the package once (``multiprocessing``'s
``forkserver``, single-threaded, preloaded with every ``reconciler`` module): a case costs
a fork instead of an interpreter starting and importing the package (about a second on
the 2-core machine). The child is then what ``python -m reconciler.cli ARGS`` (or
``python -c CODE``) is: the environment and working directory the case gives, its own
standard streams (stdout strict UTF-8, stderr with backslash escapes), an uncaught
exception printed as a traceback with exit code 1, ``SystemExit`` as the exit code, the
interpreter's end (non-daemon threads joined, ``atexit`` functions run) before it exits.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import pkgutil
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

CPU_SECONDS = 30  # a hang guard for one case
MEMORY_BYTES = 512 * 1024 * 1024  # the address space one case may map
WALL_SECONDS = 90  # a child blocked on I/O uses no CPU: the wall clock catches it
ROOT = Path(__file__).resolve().parents[2]
CLI_MAIN = str(ROOT / "reconciler" / "cli" / "__main__.py")  # sys.argv[0] of ``python -m reconciler.cli``
EXTRA_PRELOAD = ("libvirt", "hypothesis", "tests.helpers.files", "tests.helpers.bounded")


@dataclass(frozen=True, slots=True)
class Bounded:
    """A finished child: its output, and whether it stayed within the bounds."""

    proc: subprocess.CompletedProcess[str]
    cpu_s: float  # user + system CPU seconds the child used
    max_rss_kib: int  # its peak resident set

    @property
    def killed(self) -> bool:
        """Killed by a bound (SIGXCPU/SIGKILL) rather than ending on its own."""
        return self.proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL, -signal.SIGSEGV)

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr


@dataclass(frozen=True, slots=True)
class _Case:
    """What the child runs: ``argv`` of the CLI, or ``code`` for ``python -c``."""

    argv: tuple[str, ...]
    code: str
    cwd: str
    env: dict[str, str]
    cpu_s: int
    memory: int
    files: str  # a directory: stdin, stdout, stderr, usage


def _limits(cpu_s: int, memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def _streams(files: Path) -> None:
    """The case's standard streams: files in ``files``, as a child's pipes would be."""
    for fd, name, flags in (
        (0, "stdin", os.O_RDONLY),
        (1, "stdout", os.O_WRONLY),
        (2, "stderr", os.O_WRONLY),
    ):
        opened = os.open(files / name, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's stream
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)  # noqa: SIM115


def _run_case(case: _Case) -> int:
    """The case as the interpreter runs it: its exit code."""
    try:
        if case.argv:
            from reconciler import cli
            from reconciler.daemon import early

            sys.argv = [CLI_MAIN, *case.argv]
            early.install(sys.argv)
            return cli.main(case.argv)
        sys.argv = ["-c"]
        exec(compile(case.code, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as end:
        if end.code is None or isinstance(end.code, int):
            return end.code or 0
        print(end.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _child(case: _Case) -> None:
    """The forked child: limits, environment, streams, the case, the interpreter's end."""
    _limits(case.cpu_s, case.memory)
    files = Path(case.files)
    os.chdir(case.cwd)
    os.environ.clear()
    os.environ.update(case.env)
    _streams(files)
    code = _run_case(case)
    for thread in threading.enumerate():  # the interpreter waits for non-daemon threads
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    (files / "usage").write_text(f"{usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}")
    os._exit(code & 0xFF)


def _server() -> multiprocessing.context.ForkServerContext:
    """The fork server's context, every module of the package preloaded in the server."""
    import reconciler

    ctx = multiprocessing.get_context("forkserver")
    found = pkgutil.walk_packages(reconciler.__path__, "reconciler.")
    ctx.set_forkserver_preload(
        [m.name for m in found if not m.name.endswith("__main__")] + list(EXTRA_PRELOAD)
    )
    return ctx


def _run(
    argv: list[str],
    code: str,
    cwd: Path | None,
    env: dict[str, str] | None,
    cpu_s: int,
    memory: int,
    stdin: str | None,
    wall_s: float = 0.0,
) -> Bounded:
    with tempfile.TemporaryDirectory(prefix="bounded-") as tmp:
        files = Path(tmp)
        (files / "stdin").write_text(stdin or "", encoding="utf-8")
        for name in ("stdout", "stderr"):
            (files / name).touch()
        case = _Case(
            tuple(argv),
            code,
            str(cwd or Path.cwd()),
            {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            cpu_s,
            memory,
            tmp,
        )
        child = _server().Process(target=_child, args=(case,), name="bounded")
        child.start()
        timeout = wall_s or max(WALL_SECONDS, 3 * cpu_s)
        child.join(timeout)
        shown = [sys.executable, "-m", "reconciler.cli", *argv] if argv else [sys.executable, "-c", code]
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(shown, timeout)
        out = (files / "stdout").read_text(encoding="utf-8")
        err = (files / "stderr").read_text(encoding="utf-8", errors="replace")
        used = (files / "usage").read_text().split() if (files / "usage").exists() else ["0", "0"]
        returncode = child.exitcode
        child.close()
    proc = subprocess.CompletedProcess(shown, returncode, out, err)
    return Bounded(proc, float(used[0]), int(used[1]))


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    cpu_s: int = CPU_SECONDS,
    memory: int = MEMORY_BYTES,
    stdin: str | None = None,
) -> Bounded:
    """``reconciler ARGS`` under the bounds."""
    return _run(list(args), "", cwd, env, cpu_s, memory, stdin)


def run_python(
    code: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    cpu_s: int = CPU_SECONDS,
    memory: int = MEMORY_BYTES,
) -> Bounded:
    """``python -c CODE`` under the bounds (a library call the CLI does not reach)."""
    return _run([], code, cwd, env, cpu_s, memory, None)


def assert_typed_error(b: Bounded, *fragments: str, code: int = 1) -> None:
    """The child ended by itself with exit ``code``, no traceback, every fragment said."""
    assert not b.killed, f"killed by a bound: {b.proc.returncode}\n{b.output[-2000:]}"
    assert "Traceback" not in b.output, b.output[-4000:]
    assert b.proc.returncode == code, b.output[-4000:]
    for fragment in fragments:
        assert fragment in b.output, (fragment, b.output[-4000:])
