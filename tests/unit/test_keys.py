"""A VM's identity (model/keys.py): domain name and subject derived in one place, and a
libvirt domain name read back into the key it stands for."""

from __future__ import annotations

import pytest

from reconciler.model import ExpandedVM, LiveDomain, Manifest, PowerState, VMKey


@pytest.mark.parametrize(
    ("key", "domain"),
    [
        (VMKey("default", "web"), "web"),
        (VMKey("", "web"), "web"),  # no namespace: default
        (VMKey("team", "web"), "team_web"),
    ],
)
def test_domain_name_and_subject(key: VMKey, domain: str) -> None:
    assert key.domain == domain
    assert key.subject == f"vm/{domain}"
    assert str(key) == key.subject
    assert VMKey.from_domain(domain) == key


@pytest.mark.parametrize("domain", ["web", "team_web", "my_old_vm", "_x", "x_", "default_x", "a.b-c"])
def test_every_domain_name_reads_back_to_itself(domain: str) -> None:
    assert VMKey.from_domain(domain).domain == domain


def test_a_domain_in_default_named_with_an_underscore_is_no_namespace() -> None:
    assert VMKey.from_domain("default_x") == VMKey("default", "default_x")


def test_the_expanded_vm_and_the_live_domain_carry_the_same_key() -> None:
    obj = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "web", "namespace": "team"},
    }
    vm = ExpandedVM(vm=obj, source=Manifest(obj, "vms/web.yaml", 1))
    live = LiveDomain(name="team_web", uuid="", state=PowerState.SHUTOFF, persistent_xml="")
    assert vm.key == live.key == VMKey("team", "web")
    assert (vm.name, vm.namespace, vm.subject) == ("web", "team", "vm/team_web")
