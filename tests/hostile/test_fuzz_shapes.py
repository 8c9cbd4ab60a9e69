"""Fuzzing the pipeline and the config readers with hypothesis-generated YAML shapes.

Covers: a revision (a VM with an instancetype, a preference, a ConfigMap and a Secret
volume, a DataVolume template inferring from a DataSource; a pool; the objects they
name), and a kustomization over it, whose fields are replaced by hostile shapes (a list where a mapping goes, a
mapping where a string goes, infinities, NaN, integers of thousands of digits, deep
nesting, long strings, null) goes through build -> catalog -> expand -> render
(``desired_state``) and ends in a result or in one of our errors, never another
exception; so do the daemon config (``parse_config``), a host config
(``load_host_config``) and a host-facts file (``facts_from_json``, then the revision
checked against the facts read) built the same way.

Each property runs in a child process (``tests.helpers.bounded``) capped at 512 MB of
address space and a CPU budget, so an input that blew up memory or spun would fail the
case instead of the test run; within it, each input is checked against a per-input hang
guard on the process's CPU time (a bound, not a speed goal).
"""

from __future__ import annotations

import pytest

from tests.helpers.bounded import assert_typed_error, run_python

EXAMPLES = 120  # inputs per property (deterministic: derandomized)

# The child: hypothesis, the pipeline and the readers, under the helper's limits.
CHILD = r'''
import json, math, re, sys, time
from hypothesis import HealthCheck, given, settings, strategies as st

from reconciler import render
from reconciler.config.daemon_file import parse_config
from reconciler.config.host import load_host_config
from reconciler.desired import desired_state
from reconciler.errors import ReconcilerError
from reconciler.hostfacts import facts_from_json
from reconciler.model import SourceSnapshot
from tests.helpers.files import MemView

HANG_GUARD_S = 20.0  # CPU seconds one input may take (a hang guard)


def emit(v, depth=0):
    """YAML flow text of a value (JSON-like, with YAML's .inf and .nan)."""
    if isinstance(v, Raw):
        return v.text
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return ".nan"
        if math.isinf(v):
            return ".inf" if v > 0 else "-.inf"
        return repr(v)
    if isinstance(v, str):
        return quoted(v)
    if isinstance(v, list):
        return "[" + ", ".join(emit(x, depth + 1) for x in v) + "]"
    return "{" + ", ".join(f"{quoted(str(k))}: {emit(x, depth + 1)}" for k, x in v.items()) + "}"


def quoted(text):
    """A double-quoted YAML scalar: JSON's escapes, and YAML's for what YAML may not hold raw."""
    return re.sub(r"[\x7f-\x9f\ufeff\ufffe\uffff]", lambda m: f"\\u{ord(m.group()):04x}",
                  json.dumps(text, ensure_ascii=False))


class Raw:
    def __init__(self, text):
        self.text = text


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -0.0, 0.5]),
    st.sampled_from(["", "0", "-1", "1e400", "1e3Ki", "64Mi", "..", "../../etc", "/", "a/b", "UPPER",
                     "\x1b[31mred", "line\nbreak", "Infinity", ".inf", "0x10", "1_000", "yes"]),
    st.text(max_size=40),
)
RARE = st.one_of(
    st.integers(min_value=4290, max_value=5000).map(lambda n: Raw("9" * n)),  # past Python's digit limit
    st.integers(min_value=150, max_value=400).map(lambda n: Raw("[" * n + "]" * n)),  # deep nesting
    st.integers(min_value=1, max_value=3).map(lambda n: Raw("x" * (n * 100_000))),  # long strings
)
TREES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
SHAPES = st.one_of(LEAVES, TREES, TREES, RARE)  # a rare shape in about one value of four


def paths(v, depth, at=()):
    """Paths into ``v`` at least ``depth`` deep (2 in a manifest: replacing a top-level
    field whole would test little more than the kind check)."""
    if len(at) >= depth:
        yield at
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths(x, depth, (*at, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from paths(x, depth, (*at, i))


def replaced(doc, path, value):
    if not path:
        return value
    head, *rest = path
    if isinstance(doc, dict):
        return {k: (replaced(v, rest, value) if k == head else v) for k, v in doc.items()}
    return [replaced(v, rest, value) if i == head else v for i, v in enumerate(doc)]


VM = {
    "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
    "metadata": {"name": "web", "labels": {"app": "web"},
                 "annotations": {"reconciler.kubevirt.io/restart-window": "0 2 * * 6; 2h; UTC"}},
    "spec": {
        "runStrategy": "Always",
        "instancetype": {"name": "small", "kind": "VirtualMachineInstancetype"},
        "preference": {"inferFromVolume": "root"},
        "dataVolumeTemplates": [{"metadata": {"name": "root-dv"},
                                 "spec": {"sourceRef": {"kind": "DataSource", "name": "fedora"},
                                          "storage": {"resources": {"requests": {"storage": "1Gi"}}}}}],
        "template": {"spec": {
            "domain": {"devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}],
                                   "interfaces": [{"name": "default", "masquerade": {}}]}},
            "networks": [{"name": "default", "pod": {}}],
            "volumes": [
                {"name": "root", "dataVolume": {"name": "root-dv"}},
                {"name": "cfg", "configMap": {"name": "cfg"}},
                {"name": "init", "cloudInitNoCloud": {"secretRef": {"name": "init"}}},
            ],
        }},
    },
}
POOL = {
    "apiVersion": "pool.kubevirt.io/v1alpha1", "kind": "VirtualMachinePool", "metadata": {"name": "p"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
             "virtualMachineTemplate": {"metadata": {"labels": {"a": "b"}},
                                        "spec": {"template": {"spec": {"domain": {
                                            "memory": {"guest": "64Mi"}, "devices": {}}}}}}},
}
OTHERS = [
    {"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachineInstancetype",
     "metadata": {"name": "small"}, "spec": {"cpu": {"guest": 1}, "memory": {"guest": "64Mi"}}},
    {"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachinePreference",
     "metadata": {"name": "fedora"}, "spec": {"devices": {"preferredDiskBus": "virtio"}}},
    {"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource", "metadata": {"name": "fedora"},
     "spec": {"source": {"pvc": {"name": "fedora-pvc"}}}},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
     "metadata": {"name": "fedora-pvc", "labels": {
         "instancetype.kubevirt.io/default-preference": "fedora",
         "instancetype.kubevirt.io/default-preference-kind": "VirtualMachinePreference"}},
     "spec": {"resources": {"requests": {"storage": "1Gi"}}}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "init"},
     "stringData": {"userdata": "#cloud-config\n"}},
]
DOCS = [VM, POOL, *OTHERS]
CAPS = render.HostCaps.default()
RENDER_HOST = load_host_config(
    b"images: {'DataSource default/fedora': /var/lib/libvirt/images/fedora.qcow2}\n", "host.yaml"
)


SEEN = {"ours": 0, "through": 0}  # how inputs ended: one of our errors, or a result


def guard(run):
    t0 = time.process_time()
    try:
        got = run()
    except ReconcilerError:
        SEEN["ours"] += 1
    else:
        failed = getattr(got, "errors", ())
        SEEN["ours" if failed else "through"] += 1
    assert time.process_time() - t0 < HANG_GUARD_S


@st.composite
def revisions(draw):
    docs = list(DOCS)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        i = draw(st.integers(min_value=0, max_value=len(docs) - 1))
        where = draw(st.sampled_from(sorted(paths(docs[i], 2), key=str)))
        docs[i] = replaced(docs[i], where, draw(SHAPES))
    return "\n---\n".join(emit(d) for d in docs) + "\n"


SETTINGS = settings(max_examples=int(sys.argv[2]), deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


BASE = SourceSnapshot("mem", "HEAD", "e" * 40, MemView({"vms.yaml": "\n---\n".join(emit(d) for d in DOCS)}))


@SETTINGS
@given(revisions())
def pipeline(text):
    snap = SourceSnapshot("mem", "HEAD", "f" * 40, MemView({"vms.yaml": text}))
    guard(lambda: desired_state(snap, "", RENDER_HOST, CAPS))


CONFIG = {
    "source": {"repo": "/srv/vms", "branch": "main", "path": "prod"},
    "connect": "test:///default",
    "host": {"name": "h1", "claimUnselected": True},
    "policy": {"prune": False, "maxPrunePercent": 30, "rollout": "Restart",
               "restartWindows": [{"schedule": "0 2 * * 6", "duration": "2h", "timeZone": "Europe/Berlin"}]},
    "intervals": {"fetch": "60s", "resync": "30s"},
    "listen": "127.0.0.1:9469",
    "stateDir": "/var/lib/reconciler",
    "log": {"format": "json", "level": "info"},
}


@st.composite
def mutated(draw, base):
    doc = base
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        where = draw(st.sampled_from(sorted(paths(doc, 1), key=str)))
        doc = replaced(doc, where, draw(SHAPES))
    return emit(doc)


KUSTOMIZATION = {
    "apiVersion": "kustomize.config.k8s.io/v1beta1",
    "kind": "Kustomization",
    "resources": ["vms.yaml"],
    "commonAnnotations": {"team": "a"},
    "labels": [{"pairs": {"env": "prod"}, "includeSelectors": False}],
    "patches": [{"target": {"kind": "VirtualMachine", "name": "web"},
                 "patch": "- op: replace\n  path: /spec/runStrategy\n  value: Halted\n"}],
    "configMapGenerator": [{"name": "gen", "literals": ["a=1"]}],
    "images": [],
}


@SETTINGS
@given(mutated(KUSTOMIZATION))
def overlays(text):
    files = {"vms.yaml": "\n---\n".join(emit(d) for d in DOCS), "kustomization.yaml": text}
    snap = SourceSnapshot("mem", "HEAD", "d" * 40, MemView(files))
    guard(lambda: desired_state(snap, "", RENDER_HOST, CAPS))


HOST = {"name": "h1", "claimUnselected": True, "allowedDirectories": ["/var/lib/reconciler"],
        "rollout": "Stage", "storagePool": "default", "dedicatedCpus": "2-3"}


@SETTINGS
@given(mutated(CONFIG))
def configs(text):
    guard(lambda: parse_config(text.encode(), "/etc/reconciler/config.yaml", read_keys=False))


@SETTINGS
@given(mutated(HOST))
def host_configs(text):
    guard(lambda: load_host_config(text.encode(), "host.yaml"))


FACTS = {"version": 1, "host": "h1", "maxVcpus": 8, "hostMemoryKib": 1048576, "networks": [["default", True]],
         "pools": [["default", True]], "hugepagesFree": [[2048, 10]], "mdevs": [["u", "t"]],
         "imageDirs": [["/var/lib/images", ["a.qcow2"]]], "caps": {"arch": "x86_64", "maxCpus": [["pc", 255]]}}


@SETTINGS
@given(mutated(FACTS))
def facts(text):
    text = text.replace(".nan", "NaN").replace("-.inf", "-Infinity").replace(".inf", "Infinity")
    def check():  # the facts read, then every VM of the base revision checked against them
        found = facts_from_json(text, "facts.json")
        return desired_state(BASE, "", RENDER_HOST, CAPS, facts=found)

    guard(check)


{"pipeline": pipeline, "overlays": overlays, "configs": configs, "host_configs": host_configs, "facts": facts}[sys.argv[1]]()
# Inputs both went through and were refused: the generated shapes reach past the first check.
assert SEEN["ours"] and SEEN["through"], SEEN
print("fuzzed", SEEN)
'''


@pytest.mark.parametrize("target", ["pipeline", "overlays", "configs", "host_configs", "facts"])
def test_generated_shapes_end_in_our_errors_within_bounds(target: str) -> None:
    code = CHILD.replace("sys.argv[1]", repr(target)).replace("sys.argv[2]", repr(EXAMPLES))
    b = run_python(code, cpu_s=240)
    assert_typed_error(b, "fuzzed", code=0)
