"""The caller-owned context: the one eviction rule, the mapper, and the identity promise
the caches rest on (``reconciler/context.py``).

Covers: a store keeps what either of its last two runs used and drops the rest when a
run ends; its bound; identity keys hit only for the very object; the serial mapper is
the loop; a context holds one cache per kind and shares them with another mapper; the
overlay build hands out the same ``Manifest`` for an unchanged document and a new one
for a changed document; the pipeline cache hits for an unchanged VM and misses for a
changed document, catalog, host config or pin; revisions built alternately through one
context give exactly what cold builds give.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler import overlays, prdiff, render, source
from reconciler.context import SERIAL, Context, Holding, RevisionCache
from reconciler.desired import Desired, PipelineCache, desired_state
from reconciler.desired.pins import pins_from_live
from reconciler.settings.host import HostConfig

if TYPE_CHECKING:
    from reconciler.model import RevisionInfo, VMKey
    from tests.helpers.git import GitRepo

CAPS = render.HostCaps.default()

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


def _commit(repo: GitRepo, cpus: int = 1, b: str = "Always") -> str:
    repo.write("catalog.yaml", CATALOG.format(cpus=cpus))
    repo.write("vms/a.yaml", VM.format(name="a", strategy="Always"))
    repo.write("vms/b.yaml", VM.format(name="b", strategy=b))
    return repo.commit()


def _outcome(d: Desired) -> tuple[object, ...]:
    return (
        d.revision,
        [(r.name, r.xml, r.spec_hash) for r in d.rendered],
        [vm.vm for vm in d.expanded],
        d.errors,
        d.warnings,
        d.host_errors,
    )


# -- the one eviction rule --------------------------------------------------------------------


def test_a_store_keeps_what_its_last_two_runs_used() -> None:
    store: RevisionCache[str, int] = RevisionCache()
    store.put("a", 1)
    store.put("b", 2)
    store.end_run()  # run 1 used a and b
    assert store.get("a") == 1
    store.end_run()  # run 2 used a; b was used by run 1: both kept
    assert sorted(store.keys()) == ["a", "b"]
    store.end_run()  # run 3 used nothing: b (last used by run 1) goes, a (run 2) stays
    assert store.keys() == ["a"]
    store.end_run()
    assert store.keys() == []
    assert (store.hits, store.misses) == (1, 0)


def test_a_store_past_its_bound_keeps_the_current_run() -> None:
    store: RevisionCache[int, int] = RevisionCache(bound=4)
    for i in range(3):
        store.put(i, i)
    store.end_run()
    store.get(0)
    store.put(10, 10)
    store.put(11, 11)  # the fifth entry: only what this run used is kept
    assert sorted(store.keys()) == [0, 10, 11]
    for i in range(20, 30):  # the current run alone fills it: it starts again
        store.put(i, i)
    assert len(store) <= 4


def test_identity_keys_hit_only_for_the_very_object() -> None:
    store: RevisionCache[object, str] = RevisionCache()
    doc = {"kind": "VirtualMachine"}
    store.put_same(doc, "checked")
    assert store.get_same(doc) == "checked"
    assert store.get_same({"kind": "VirtualMachine"}) is None  # equal, but another object
    assert store.get_same(doc, tag="another step") is None
    assert store.each_same("step", [doc, doc], lambda d: str(len(d))) == ["1", "1"]
    assert (store.hits, store.misses) == (2, 3)


def test_records_that_hash_by_identity_key_their_entries_themselves() -> None:
    class Record:  # like the overlay engine's records: equal only to itself
        pass

    store: RevisionCache[object, str] = RevisionCache()
    a, b = Record(), Record()
    assert store.each_same("step", [a, b], lambda r: "a" if r is a else "b") == ["a", "b"]
    assert store.same(a, lambda: "made", tag="other") == "made"
    assert store.each_same("step", [b, a], lambda r: "again") == ["b", "a"]  # found, not made
    assert store.get_same(Record(), tag="step") is None
    assert sorted(store.held(), key=id) == sorted([a, b, a], key=id)  # the records, not their ids
    assert set(store.keys()) == {("step", id(a)), ("step", id(b)), ("other", id(a))}
    store.end_run()
    store.end_run()
    store.end_run()
    assert len(store) == 0
    assert store.held() == []


def test_a_value_holding_its_object_is_kept_as_it_is() -> None:
    class Entry(Holding):  # like the catalog's entry of a document: it holds the document
        __slots__ = ("held",)

        def __init__(self, held: object) -> None:
            self.held = held

    store: RevisionCache[object, Entry] = RevisionCache()
    doc, other = {"kind": "A"}, {"kind": "A"}
    entry = store.same(doc, lambda: Entry(doc))
    assert store.same(doc, lambda: Entry(doc)) is entry
    assert store.get_same(other) is None  # equal, but another object
    kept = store.same(other, lambda: Entry(doc))  # holds another object: kept beside it
    assert store.get_same(other) is kept
    assert [type(v).__name__ for v in store._tags[None].now.values()] == ["Entry", "_Held"]
    assert store.values() == [entry, kept]
    assert sorted(store.held(), key=id) == sorted([doc, other], key=id)


def test_identity_and_content_entries_share_one_eviction_rule_and_bound() -> None:
    store: RevisionCache[object, str] = RevisionCache(bound=5)
    a, b = {"name": "a"}, {"name": "b"}
    store.put("content", "c")
    assert store.each_same("step 1", [a, b], lambda d: f"1{d['name']}") == ["1a", "1b"]
    assert store.same(a, lambda: "2a", tag="step 2") == "2a"  # the same object under another tag
    assert len(store) == 4
    store.end_run()
    assert store.each_same("step 1", [a], lambda d: "made again") == ["1a"]  # found: kept
    assert store.get_same(a, tag="step 2") == "2a"
    store.end_run()
    store.end_run()  # b's step and the content entry were last used two runs ago: gone
    assert store.get("content") is None
    assert store.get_same(b, tag="step 1") is None
    assert store.get_same(a, tag="step 1") == "1a"
    assert len(store) == 2
    c, d, e, f = ({"name": n} for n in "cdef")
    store.end_run()
    store.each_same("step 3", [c, d, e, f], lambda x: x["name"])  # the bound: only this run's kept
    assert len(store) <= 5
    assert store.get_same(f, tag="step 3") == "f"


def test_the_serial_mapper_is_the_loop_and_a_context_holds_one_cache_per_kind() -> None:
    assert SERIAL.map(str, [3, 1, 2]) == ["3", "1", "2"]
    context = Context()
    assert context.mapper is SERIAL
    assert context.cache(overlays.OverlayCache) is context.cache(overlays.OverlayCache)
    other = context.with_mapper(SERIAL)
    assert other.cache(overlays.OverlayCache) is context.cache(overlays.OverlayCache)
    assert other.clock is context.clock
    assert Context().cache(overlays.OverlayCache) is not context.cache(overlays.OverlayCache)


# -- the identity promise ---------------------------------------------------------------------


def test_the_overlay_build_hands_out_the_same_manifest_for_an_unchanged_document(git_repo: GitRepo) -> None:
    first, second = _commit(git_repo), _commit(git_repo, b="Halted")
    cache = overlays.OverlayCache()
    one = {m.name: m for m in overlays.build(source.read_snapshot(git_repo.path, first).files, "", cache)}
    two = {m.name: m for m in overlays.build(source.read_snapshot(git_repo.path, second).files, "", cache)}
    assert two["a"] is one["a"]
    assert two["small"] is one["small"]
    assert two["b"] is not one["b"]
    assert two["b"].obj["spec"]["runStrategy"] == "Halted"
    cold = overlays.build(source.read_snapshot(git_repo.path, first).files, "")
    assert all(c is not one[c.name] and c == one[c.name] for c in cold)  # another cache: equal copies


def test_the_pipeline_cache_hits_only_for_unchanged_inputs(git_repo: GitRepo) -> None:
    first = _commit(git_repo)
    context, cache, host = Context(), PipelineCache(), HostConfig()

    def build(
        commit: str, host: HostConfig = host, pins: dict[VMKey, dict[str, RevisionInfo]] | None = None
    ) -> tuple[Desired, tuple[int, int]]:
        cache.hits = cache.misses = 0
        d = desired_state(
            source.read_snapshot(git_repo.path, commit), "", host, CAPS, pins, cache=cache, context=context
        )
        return d, (cache.hits, cache.misses)

    base, counts = build(first)
    assert counts == (0, 2)
    again, counts = build(first)
    assert counts == (2, 0)  # an unchanged document: the very rendering of before
    assert all(a is b for a, b in zip(again.rendered, base.rendered, strict=True))
    _, counts = build(_commit(git_repo, b="Halted"))
    assert counts == (1, 1)  # a changed document: that VM alone
    bigger = _commit(git_repo, cpus=2, b="Halted")
    _, counts = build(bigger)
    assert counts == (0, 2)  # a changed catalog: every VM
    assert build(bigger)[1] == (2, 0)
    pins = pins_from_live(prdiff.simulated_live(base))  # the revision of small with one CPU
    pinned, counts = build(bigger, pins=pins)
    assert counts == (0, 2)  # other pins: every VM
    assert all('<vcpu placement="static">1</vcpu>' in d.xml for d in pinned.rendered)
    assert build(bigger, pins=pins)[1] == (2, 0)
    _, counts = build(bigger, HostConfig(name="elsewhere"), pins)
    assert counts == (0, 2)  # another host config: every VM


def test_revisions_built_alternately_give_what_cold_builds_give(git_repo: GitRepo) -> None:
    commits = [_commit(git_repo), _commit(git_repo, cpus=2, b="Halted"), _commit(git_repo, b="Halted")]
    host = HostConfig()
    cold = {
        c: _outcome(desired_state(source.read_snapshot(git_repo.path, c), "", host, CAPS)) for c in commits
    }
    context, cache = Context(), PipelineCache()
    for c in [*commits, *commits, commits[0], commits[2], commits[0]]:
        warm = desired_state(
            source.read_snapshot(git_repo.path, c), "", host, CAPS, cache=cache, context=context
        )
        assert _outcome(warm) == cold[c]
    assert cache.hits > 0
