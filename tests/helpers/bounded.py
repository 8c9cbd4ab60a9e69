"""Run one hostile case in a child process with hard bounds on CPU time and memory.

Input: the arguments of ``reconciler`` (``run_cli``) or the source of a Python function
body (``run_python``). Output: the ``CompletedProcess`` and how much the child used
(``Bounded``). The bounds are hang guards, never speed checks: ``resource.setrlimit``
caps the child's CPU seconds (``RLIMIT_CPU``: the kernel kills a spin) and its address
space (``RLIMIT_AS``: a bomb is a ``MemoryError`` or a kill, never the test runner's
memory), and a wall-clock timeout catches a child blocked on I/O (a FIFO). A case passes
when the child ends on its own, under the bounds, and says what was wrong without a
traceback. Runs only the child it starts; touches no file but those the case names.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CPU_SECONDS = 30  # a hang guard for one case
MEMORY_BYTES = 512 * 1024 * 1024  # the address space one case may map
WALL_SECONDS = 90  # a child blocked on I/O uses no CPU: the wall clock catches it
ROOT = Path(__file__).resolve().parents[2]


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


def _limits(cpu_s: int, memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def _run(
    argv: list[str],
    cwd: Path | None,
    env: dict[str, str] | None,
    cpu_s: int,
    memory: int,
    stdin: str | None,
    wall_s: float = 0.0,
) -> Bounded:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=wall_s or max(WALL_SECONDS, 3 * cpu_s),
        preexec_fn=lambda: _limits(cpu_s, memory),
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Bounded(proc, cpu, after.ru_maxrss)


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    cpu_s: int = CPU_SECONDS,
    memory: int = MEMORY_BYTES,
    stdin: str | None = None,
) -> Bounded:
    """``reconciler ARGS`` under the bounds."""
    return _run([sys.executable, "-m", "reconciler.cli", *args], cwd, env, cpu_s, memory, stdin)


def run_python(
    code: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    cpu_s: int = CPU_SECONDS,
    memory: int = MEMORY_BYTES,
) -> Bounded:
    """``python -c CODE`` under the bounds (a library call the CLI does not reach)."""
    return _run([sys.executable, "-c", code], cwd, env, cpu_s, memory, None)


def assert_typed_error(b: Bounded, *fragments: str, code: int = 1) -> None:
    """The child ended by itself with exit ``code``, no traceback, every fragment said."""
    assert not b.killed, f"killed by a bound: {b.proc.returncode}\n{b.output[-2000:]}"
    assert "Traceback" not in b.output, b.output[-4000:]
    assert b.proc.returncode == code, b.output[-4000:]
    for fragment in fragments:
        assert fragment in b.output, (fragment, b.output[-4000:])
