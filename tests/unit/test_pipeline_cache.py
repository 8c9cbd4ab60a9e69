"""The per-VM expansion/render cache of ``desired_state`` (what the daemon keeps).

Covers: a cached run gives exactly what an uncached run gives; after a commit to one
VM only that VM is computed again; an instancetype edit or another host config
recomputes every VM; VMs that left git are forgotten (two revisions later, the one
eviction rule of ``context.py``); the daemon's lean cache
(``keep_expanded=False``) gives the same rendering (its XML packed) and warnings without
expanded VMs, and its mapped work hands back no expanded VM (a serial map, which returns
every VM's result before the memos take them, never holds the whole fleet's expanded trees).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler import render, source
from reconciler.context import Context
from reconciler.desired import PipelineCache, desired_state
from reconciler.settings.host import HostConfig
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from tests.helpers.git import GitRepo

CATALOG = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: small
spec:
  cpu:
    guest: {cpus}
  memory:
    guest: 1Gi
"""

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: {strategy}
  instancetype:
    name: small
  template:
    spec:
      domain:
        devices: {{}}
"""

CAPS = render.HostCaps.default()


def _fleet(repo: GitRepo, cpus: int = 1, a: str = "Always", b: str = "Always") -> str:
    repo.write("catalog.yaml", CATALOG.format(cpus=cpus))
    repo.write("vms/a.yaml", VM.format(name="a", strategy=a))
    repo.write("vms/b.yaml", VM.format(name="b", strategy=b))
    return repo.commit()


CONTEXT = Context()  # the overlay build's cache, which hands out unchanged documents again


def _desired(repo: GitRepo, host: HostConfig, cache: PipelineCache | None):  # type: ignore[no-untyped-def]
    return desired_state(source.read_snapshot(repo.path), "", host, CAPS, cache=cache, context=CONTEXT)


def test_cached_equals_uncached_and_only_the_touched_vm_is_recomputed(git_repo: GitRepo) -> None:
    host = HostConfig()
    cache = PipelineCache()
    _fleet(git_repo)
    first = _desired(git_repo, host, cache)
    assert (cache.hits, cache.misses) == (0, 2)

    _fleet(git_repo, b="Halted")
    second = _desired(git_repo, host, cache)
    assert (cache.hits, cache.misses) == (1, 3)
    by_name = {d.name: d for d in second.rendered}
    assert by_name["a"] is next(d for d in first.rendered if d.name == "a")  # reused
    assert str(by_name["b"].run_strategy) == "Halted"
    assert second.rendered == _desired(git_repo, host, None).rendered


def test_catalog_or_host_change_recomputes_everything(git_repo: GitRepo) -> None:
    host = HostConfig()
    cache = PipelineCache()
    _fleet(git_repo, cpus=1)
    _desired(git_repo, host, cache)

    _fleet(git_repo, cpus=2)
    after = _desired(git_repo, host, cache)
    assert cache.hits == 0
    assert all('<vcpu placement="static">2</vcpu>' in d.xml for d in after.rendered), after.rendered[0].xml
    assert after.rendered == _desired(git_repo, host, None).rendered

    other = HostConfig(name="elsewhere")
    _desired(git_repo, other, cache)
    assert cache.hits == 0


def test_vms_leaving_git_are_forgotten(git_repo: GitRepo) -> None:
    cache = PipelineCache()
    _fleet(git_repo)
    _desired(git_repo, HostConfig(), cache)
    git_repo.remove("vms/b.yaml")
    git_repo.commit()
    d = _desired(git_repo, HostConfig(), cache)
    assert [r.name for r in d.rendered] == ["a"]
    _desired(git_repo, HostConfig(), cache)
    assert len(cache.memo) == 1


def test_without_expanded_vms_the_rendering_and_warnings_are_the_same(git_repo: GitRepo) -> None:
    _fleet(git_repo)
    git_repo.write("catalog.yaml", CATALOG.format(cpus=1) + "  schedulerName: custom\n")
    git_repo.commit()
    host = HostConfig()
    full = _desired(git_repo, host, None)
    lean = PipelineCache(keep_expanded=False)
    for _ in range(2):  # a miss, then a hit
        got = _desired(git_repo, host, lean)
        assert got.expanded == ()
        assert got.rendered == tuple(r.packed() for r in full.rendered)  # the same, its XML packed
        assert [r.xml for r in got.rendered] == [r.xml for r in full.rendered]
        assert all(isinstance(r.xml_data, bytes) for r in got.rendered)
        assert got.warnings == full.warnings
        assert any("schedulerName is accepted but has no effect" in w for w in map(words, got.warnings)), (
            got.warnings
        )
    assert lean.hits == 2
    assert all(m.expanded is None for m in lean.memo.values())


class RecordingMapper:
    """The serial loop, keeping what each mapped call handed back."""

    spreads = False

    def __init__(self) -> None:
        self.results: list[Any] = []

    def map(self, fn: Any, items: Any) -> list[Any]:
        out = [fn(x) for x in items]
        self.results.extend(out)
        return out


def test_the_lean_caches_mapped_work_hands_back_no_expanded_vm(git_repo: GitRepo) -> None:
    _fleet(git_repo)
    repo = source.read_snapshot(git_repo.path)
    for keep, held in ((True, 2), (False, 0)):
        mapper = RecordingMapper()
        context = Context(mapper=mapper)
        cache = PipelineCache(keep_expanded=keep)
        got = desired_state(repo, "", HostConfig(), CAPS, cache=cache, context=context)
        assert len(got.rendered) == 2
        assert len(mapper.results) == 2
        assert sum(r[0] is not None for r in mapper.results) == held
