"""Errors of patches, replacements and generators name the object, the field path and the
file:line, never a value (tests/libvirt/test_secret_leaks.py holds the property over
every command; these are the words, case by case).

Covers: a JSON 6902 ``test`` that fails, a path through a missing member, an index into
a string, a ``move`` from nowhere; a replacement index out of range; a replacement of a
Secret's value into a VM is refused (a Secret's metadata may go anywhere, its values to
Secrets only); an env file that is not UTF-8; a Secret's record printed by mistake.
"""

from __future__ import annotations

import pytest

from reconciler import overlays
from reconciler.errors import OverlayError
from tests.helpers.files import MemView

VALUE = "s3cr3t-Value-9xQ"
SECRET = f"""apiVersion: v1
kind: Secret
metadata: {{name: db, labels: {{tier: db}}}}
stringData: {{password: {VALUE}, path: a/b}}
"""
VM = "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: web}\nspec: {}\n"


def build(kustomization: str, **files: str) -> None:
    view = MemView({"kustomization.yaml": kustomization, "secret.yaml": SECRET, "vm.yaml": VM, **files})
    overlays.build(view, "", overlays.OverlayCache())


@pytest.mark.parametrize(
    ("op", "says"),
    [
        (
            "{op: test, path: /stringData/password, value: x}",
            "operation 1 (test /stringData/password): the value at /stringData/password is not the one tested",
        ),
        ("{op: replace, path: /data/x/y, value: x}", "path /data/x/y: no member 'data' at /"),
        (
            "{op: replace, path: /stringData/password/0, value: x}",
            "/stringData/password is a string, not a map or a list",
        ),
        (
            "{op: move, from: /stringData/nope, path: /stringData/x}",
            "from /stringData/nope: no member 'nope'",
        ),
    ],
)
def test_json6902_failures_are_worded_in_the_patchs_terms(op: str, says: str) -> None:
    kust = f"resources: [secret.yaml]\npatches:\n  - target: {{kind: Secret}}\n    patch: '[{op}]'\n"
    with pytest.raises(OverlayError) as err:
        build(kust)
    assert says in str(err.value)
    assert str(err.value).startswith("kustomization.yaml:3:5: JSON 6902 patch failed on Secret")
    assert VALUE not in str(err.value)


def test_a_replacement_index_out_of_range_names_the_field_not_the_value() -> None:
    kust = (
        "resources: [secret.yaml]\nreplacements:\n"
        "  - source: {kind: Secret, name: db, fieldPath: stringData.path, options: {delimiter: /, index: 5}}\n"
        "    targets: [{select: {kind: Secret}, fieldPaths: [metadata.labels.x]}]\n"
    )
    with pytest.raises(
        OverlayError, match=r"options.index 5 is out of bounds for the value at stringData.path"
    ):
        build(kust)


def test_a_secrets_value_goes_to_secrets_only_its_metadata_anywhere() -> None:
    into_vm = (
        "resources: [secret.yaml, vm.yaml]\nreplacements:\n"
        "  - source: {{kind: Secret, name: db, fieldPath: {field}}}\n"
        "    targets: [{{select: {{kind: VirtualMachine}}, fieldPaths: [metadata.labels.x], "
        "options: {{create: true}}}}]\n"
    )
    with pytest.raises(OverlayError) as err:
        build(into_vm.format(field="stringData.password"))
    assert "a Secret's values go to Secrets only" in err.value.message
    assert (err.value.path, err.value.line) == ("kustomization.yaml", 3)
    assert VALUE not in str(err.value)
    build(into_vm.format(field="metadata.labels.tier"))  # not a value: copied as kustomize does


def test_an_env_file_that_is_not_utf8_names_no_byte() -> None:
    kust = "secretGenerator:\n  - {name: g, envs: [e.env]}\n"
    view = MemView({"kustomization.yaml": kust})
    view.files["e.env"] = b"A=\xfe\xff\n"
    with pytest.raises(OverlayError) as err:
        overlays.build(view, "", overlays.OverlayCache())
    assert err.value.message == "env file is not valid UTF-8"


def test_a_secrets_record_printed_by_mistake_holds_no_value() -> None:
    view = MemView({"kustomization.yaml": "resources: [secret.yaml]\n", "secret.yaml": SECRET})
    (secret,) = overlays.build(view, "", overlays.OverlayCache())
    shown = repr(secret) + str(secret) + repr([secret])
    assert VALUE not in shown
    assert "Secret 'db' data: [], stringData: [password, path]; values redacted, at secret.yaml:1" in shown
