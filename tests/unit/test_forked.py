"""The CLI's forked mapper returns exactly what a loop in this process returns.

Covers: results in order, computed by several processes; few items stay here; an item
a child cannot give back (it raised, its result does not pickle, the child died) is
computed again here; an error is raised as a loop raises it and no child is left;
``workers``; the serial mapper of ``context`` is the loop itself.
"""

from __future__ import annotations

import argparse
import os

import pytest

from reconciler.cli import common, forked
from reconciler.context import SERIAL

ITEMS = list(range(3 * forked.MIN_SHARE + 7))
PARENT = os.getpid()


def square_with_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def in_child() -> bool:
    return os.getpid() != PARENT


def test_the_forked_and_the_serial_mapper_give_the_loop() -> None:
    assert forked.ForkedMapper(2).map(lambda x: x * x, ITEMS) == [x * x for x in ITEMS]
    assert SERIAL.map(lambda x: x * x, ITEMS) == [x * x for x in ITEMS]
    assert forked.ForkedMapper(2).spreads
    assert not forked.ForkedMapper(1).spreads
    assert not SERIAL.spreads


def test_results_in_order_and_computed_by_several_processes() -> None:
    got = forked.map_forked(square_with_pid, ITEMS, 3)
    assert [v for v, _ in got] == [x * x for x in ITEMS]
    pids = {pid for _, pid in got}
    assert os.getpid() in pids
    assert len(pids) == 3  # the parent's share and two children's


def test_few_items_stay_in_this_process() -> None:
    got = forked.map_forked(square_with_pid, ITEMS[: forked.MIN_SHARE + 1], 4)
    assert {pid for _, pid in got} == {os.getpid()}


def test_items_a_child_raised_on_are_computed_by_the_parent() -> None:
    def fn(x: int) -> tuple[int, bool]:
        if in_child() and x % 10 == 0:
            raise LookupError(str(x))  # what a child cannot do, the parent does
        return x, in_child()

    got = forked.map_forked(fn, ITEMS, 2)
    assert [v for v, _ in got] == ITEMS
    second = got[len(ITEMS) // 2 :]
    assert all(not child for v, child in second if v % 10 == 0)
    assert any(child for v, child in second if v % 10 != 0)


def test_a_result_that_does_not_pickle_is_computed_by_the_parent() -> None:
    def fn(x: int) -> object:
        return (lambda: x) if in_child() else x  # a lambda does not pickle

    assert forked.map_forked(fn, ITEMS, 2) == ITEMS


def test_a_child_that_dies_leaves_its_share_to_the_parent() -> None:
    def fn(x: int) -> int:
        if in_child():
            os._exit(3)
        return x + 1

    assert forked.map_forked(fn, ITEMS, 3) == [x + 1 for x in ITEMS]


def test_an_error_is_raised_as_a_loop_raises_it_and_no_child_is_left(monkeypatch: pytest.MonkeyPatch) -> None:
    pids: list[int] = []
    fork = os.fork

    def recording_fork() -> int:
        pid = fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recording_fork)

    def fn(x: int) -> int:
        if x in (5, len(ITEMS) - 1):
            raise ValueError(f"bad item {x}")
        return x

    with pytest.raises(ValueError, match="bad item 5"):
        forked.map_forked(fn, ITEMS, 3)
    assert len(pids) == 2
    for pid in pids:  # every child was reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)

    def late(x: int) -> int:
        if x == len(ITEMS) - 1:
            raise ValueError("bad last item")
        return x

    with pytest.raises(ValueError, match="bad last item"):  # a child's failure, raised here
        forked.map_forked(late, ITEMS, 2)


def test_jobs_default_to_one_process() -> None:
    # bench/jobs: on the 2-core machine shared with other work, -j2 lost more often than it won
    assert common.jobs(argparse.Namespace(jobs=None)) == forked.DEFAULT_JOBS == 1
    assert common.jobs(common_parser().parse_args([])) == 1
    assert common.jobs(common_parser().parse_args(["-j", "3"])) == 3


def common_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    common.add_jobs_arg(p)
    return p
