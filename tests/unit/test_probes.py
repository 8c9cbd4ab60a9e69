"""Probes as KubeVirt defines them: read from the VM, their thresholds, Ready.

Covers: ``render.probes`` (KubeVirt's defaults, a 0 as the default, each action's fields,
a named port resolved through the interfaces' ports; refused at the field: a liveness
probe with ``successThreshold`` other than 1, a negative number, a bad port or scheme, an
exec without a command; through ``validate``, at file:line); the catalog refusing two
actions in one probe (KubeVirt's admission); the probes never change the domain XML;
``model.health.step`` (consecutive successes and failures against the thresholds, a
readiness probe failing and a liveness probe passing until told otherwise, an answer the
host could not get counted neither way, the next run a period after the last was due); ``readiness_of`` (not running, no probe, pending, passed,
failing); the words of answers and of Ready.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any

import pytest

from reconciler import cli
from reconciler.errors import RenderError
from reconciler.model import ExpandedVM, Manifest
from reconciler.model.health import (
    AddressSource,
    Answer,
    GuestAddress,
    Outcome,
    Probe,
    ProbeAction,
    ProbeKind,
    Probes,
    Readiness,
    ReadyKind,
    first_state,
    readiness_of,
    step,
)
from reconciler.render import HostCaps, render_domain
from reconciler.settings.host import HostConfig
from reconciler.wording.health import answer_words, ready_words

if TYPE_CHECKING:
    from tests.helpers.git import GitRepo

SPEC = "spec.template.spec"
HOST = HostConfig(allowed_dirs=("/srv/vms",), volume_dir="/srv/vms/generated")
BASE: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachine",
    "metadata": {"name": "vm1", "namespace": "default"},
    "spec": {
        "runStrategy": "Always",
        "template": {
            "spec": {
                "domain": {
                    "memory": {"guest": "1Gi"},
                    "devices": {"interfaces": [{"name": "default", "masquerade": {}}]},
                },
                "networks": [{"name": "default", "pod": {}}],
            }
        },
    },
}


def vm_with(edit: Any) -> ExpandedVM:
    vm = copy.deepcopy(BASE)
    edit(vm, vm["spec"]["template"]["spec"])
    return ExpandedVM(vm=vm, source=Manifest(vm, "vms/vm1.yaml", 3))


def probes_of(**spec: Any) -> Probes:
    def edit(vm: Any, s: Any) -> None:
        s.update(copy.deepcopy(spec))
        s["domain"]["devices"]["interfaces"][0]["ports"] = [{"name": "http", "port": 8080}]

    return render_domain(vm_with(edit), HOST, HostCaps.default()).probes


def test_defaults_are_kubevirts() -> None:
    got = probes_of(readinessProbe={"guestAgentPing": {}}, livenessProbe={"exec": {"command": ["true"]}})
    assert got.readiness == Probe(ProbeAction.GUEST_AGENT_PING, period_s=10, timeout_s=1, failure_threshold=3)
    assert got.liveness == Probe(ProbeAction.EXEC, command=("true",))
    zeros = {"periodSeconds": 0, "timeoutSeconds": 0, "failureThreshold": 0, "successThreshold": 0}
    assert probes_of(readinessProbe={"guestAgentPing": {}, **zeros}).readiness == got.readiness


def test_each_action_and_its_timing() -> None:
    got = probes_of(
        readinessProbe={
            "httpGet": {"port": "http", "path": "/healthz", "scheme": "HTTPS",
                        "httpHeaders": [{"name": "Host", "value": "web"}]},
            "initialDelaySeconds": 5, "periodSeconds": 2, "timeoutSeconds": 3,
            "failureThreshold": 4, "successThreshold": 2,
        },
        livenessProbe={"tcpSocket": {"port": 22, "host": "10.0.0.9"}},
    )  # fmt: skip
    assert got.readiness == Probe(
        ProbeAction.HTTP_GET, port=8080, path="/healthz", scheme="HTTPS", headers=(("Host", "web"),),
        initial_delay_s=5, period_s=2, timeout_s=3, failure_threshold=4, success_threshold=2,
    )  # fmt: skip
    assert got.liveness == Probe(ProbeAction.TCP_SOCKET, host="10.0.0.9", port=22)


def test_probes_leave_the_domain_alone() -> None:
    plain = render_domain(vm_with(lambda vm, s: None), HOST, HostCaps.default())
    probed = render_domain(
        vm_with(lambda vm, s: s.update(readinessProbe={"guestAgentPing": {}})), HOST, HostCaps.default()
    )
    assert (probed.xml, probed.spec_hash) == (plain.xml, plain.spec_hash)
    assert not plain.probes
    assert probed.probes


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"livenessProbe": {"guestAgentPing": {}, "successThreshold": 2}}, "livenessProbe.successThreshold",
         "must be 1"),
        ({"readinessProbe": {"guestAgentPing": {}, "periodSeconds": -1}}, "readinessProbe.periodSeconds",
         "expected an integer >= 0"),
        ({"readinessProbe": {"tcpSocket": {"port": 70000}}}, "readinessProbe.tcpSocket.port", "between 1 and 65535"),
        ({"readinessProbe": {"tcpSocket": {"port": "ssh"}}}, "readinessProbe.tcpSocket.port",
         "no interface declares a port named 'ssh'"),
        ({"readinessProbe": {"httpGet": {"port": 80, "scheme": "FTP"}}}, "readinessProbe.httpGet.scheme",
         "unsupported value"),
        ({"livenessProbe": {"exec": {"command": []}}}, "livenessProbe.exec.command", "non-empty list"),
    ],
)  # fmt: skip
def test_refused_at_the_field(spec: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(RenderError, match=message) as err:
        probes_of(**spec)
    assert err.value.field == f"{SPEC}.{field}"


def test_refused_at_file_and_line(git_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    git_repo.write(
        "vm.yaml",
        """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Always
  template:
    spec:
      livenessProbe:
        guestAgentPing: {}
        successThreshold: 3
      domain:
        devices: {}
        memory:
          guest: 64Mi
""",
    )
    git_repo.commit("a liveness probe kubevirt refuses")
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("vm.yaml:11:"), out
    assert "successThreshold: must be 1 for a livenessProbe" in out


def test_two_actions_are_refused_by_admission(git_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    vm = copy.deepcopy(BASE)
    vm["spec"]["template"]["spec"]["readinessProbe"] = {"guestAgentPing": {}, "exec": {"command": ["true"]}}
    git_repo.write("vm.json", json.dumps(vm))
    git_repo.write("kustomization.yaml", "resources: [vm.json]\n")
    git_repo.commit("two actions")
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 1
    assert "must have exactly one probe type set" in capsys.readouterr().out


READY = Probe(ProbeAction.GUEST_AGENT_PING, period_s=10, failure_threshold=3, success_threshold=2)
LIVE = Probe(ProbeAction.EXEC, command=("true",), initial_delay_s=30, failure_threshold=2)
OK, BAD = Answer(Outcome.PASSED), Answer(Outcome.NO_AGENT)


def run(probe: Probe, kind: ProbeKind, answers: str) -> list[bool]:
    """``passing`` after each answer of ``answers`` (``+`` passed, ``-`` failed)."""
    state = first_state(kind, probe, 100.0)
    seen = []
    for i, a in enumerate(answers):
        state = step(probe, state, OK if a == "+" else BAD, 100.0 + i)
        seen.append(state.passing)
    return seen


def test_thresholds_count_consecutive_answers() -> None:
    assert run(READY, ProbeKind.READINESS, "+-++---+") == [
        False,
        False,
        False,
        True,
        True,
        True,
        False,
        False,
    ]
    assert run(LIVE, ProbeKind.LIVENESS, "-+--") == [True, True, True, False]


def test_an_answer_the_host_could_not_get_counts_neither_way() -> None:
    state = step(LIVE, first_state(ProbeKind.LIVENESS, LIVE, 0.0), BAD, 0.0)
    after = step(LIVE, state, Answer(Outcome.ERROR), 10.0)
    assert (after.failures, after.successes, after.passing, after.runs) == (1, 0, True, 2)
    assert after.last == Answer(Outcome.ERROR)


def test_first_run_after_the_initial_delay_then_every_period() -> None:
    state = first_state(ProbeKind.LIVENESS, LIVE, 100.0)
    assert (state.next_at, state.passing, state.runs) == (130.0, True, 0)
    state = step(LIVE, state, OK, 131.5)
    assert (state.next_at, state.runs, state.last) == (140.0, 1, OK)
    state = step(LIVE, state, BAD, 152.0)  # an answer later than the next period: the next at once
    assert (state.next_at, state.failures) == (152.0, 1)


def test_readiness_of() -> None:
    pending = first_state(ProbeKind.READINESS, READY, 0.0)
    failing = step(READY, pending, BAD, 1.0)
    passed = step(READY, step(READY, pending, OK, 1.0), OK, 2.0)
    assert readiness_of(False, READY, passed)[1].kind == ReadyKind.NOT_RUNNING
    assert readiness_of(True, None, None) == (True, readiness_of(True, None, None)[1])
    assert readiness_of(True, None, None)[1].kind == ReadyKind.RUNNING
    assert readiness_of(True, READY, pending)[1].kind == ReadyKind.PROBE_PENDING
    ready, why = readiness_of(True, READY, failing)
    assert (ready, why.kind, why.action, why.answer) == (False, ReadyKind.PROBE_FAILED, READY.action, BAD)
    assert readiness_of(True, READY, passed)[:1] == (True,)


def test_words() -> None:
    address = GuestAddress("10.0.0.5", AddressSource.LEASE)
    assert answer_words("guestAgentPing", BAD) == "guestAgentPing: no answer from the guest agent"
    assert answer_words("exec", Answer(Outcome.FAILED, code=1)) == "exec: exit 1"
    assert (
        answer_words("httpGet", Answer(Outcome.FAILED, code=503, address=address))
        == "httpGet 10.0.0.5: HTTP 503"
    )
    assert answer_words("tcpSocket", None) == "tcpSocket: no answer yet"
    pending = first_state(ProbeKind.READINESS, READY, 0.0)
    _, why = readiness_of(True, READY, step(READY, pending, BAD, 1.0))
    assert ready_words(Readiness(False, why, 0.0)) == (
        "not Ready: readiness probe failing (guestAgentPing: no answer from the guest agent)"
    )
