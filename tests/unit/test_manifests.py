"""YAML parsing and printing shared by every stage.

Covers: document start lines and dropped empty documents; duplicate keys and syntax
errors reported as path:line:col; YAML 1.2 scalars (``yes`` is a string, timestamps stay
text); anchors and merge keys; annotation values kept as text for the overlay engine;
``locate`` of a field; the words documents repeat interned as read, a VM's own text (its
cloud-config, a host path) not; printing: round trip through the printer for arbitrary trees
(hypothesis), quoting of strings a YAML 1.1 reader would misread, literal blocks.
"""

from __future__ import annotations

import sys
import uuid

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import manifests
from reconciler.errors import ManifestError

TWO_DOCS = b"""# preamble
---
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  annotations:
    ratio: 1.50
    flag: false
data:
  on: yes
  when: 2024-01-01
---
# only a comment
---
kind: Thing
base: &b {x: 1}
derived:
  <<: *b
  y: 2
"""


def test_documents_keep_start_lines_and_drop_empty_ones() -> None:
    docs = manifests.parse_documents(TWO_DOCS, "f.yaml")
    assert [(d.path, d.line) for d in docs] == [("f.yaml", 4), ("f.yaml", 17)]
    assert docs[0].obj["data"] == {"on": "yes", "when": "2024-01-01"}
    assert docs[0].obj["metadata"]["annotations"] == {"ratio": 1.5, "flag": False}
    assert docs[1].obj["derived"] == {"x": 1, "y": 2}


def test_parse_objects_keeps_annotation_text() -> None:
    docs = manifests.parse_objects(TWO_DOCS, "f.yaml")
    assert docs[0].obj["metadata"]["annotations"] == {"ratio": "1.50", "flag": "false"}


@pytest.mark.parametrize(
    ("data", "where", "text"),
    [
        (b"a: 1\nb: 2\na: 3\n", (3, 1), "duplicate key 'a'"),
        (b"a:\n  b: [1\n", (3, 1), "invalid YAML"),
        (b"- 1\n- 2\n", (1, 1), "expected a mapping"),
    ],
)
def test_errors_name_file_line_and_column(data: bytes, where: tuple[int, int], text: str) -> None:
    with pytest.raises(ManifestError) as err:
        manifests.parse_documents(data, "vms/web.yaml")
    assert err.value.path == "vms/web.yaml"
    assert (err.value.line, err.value.column) == where
    assert text in str(err.value)
    assert str(err.value).startswith(f"vms/web.yaml:{where[0]}:{where[1]}: ")


def test_locate_finds_nested_fields() -> None:
    assert manifests.locate(TWO_DOCS, 4, ("data", "when")) == (13, 3)
    assert manifests.locate(TWO_DOCS, 17, ("derived", "y")) == (21, 3)
    assert manifests.locate(TWO_DOCS, 4, ("data", "missing")) == (11, 1)


def test_dump_quotes_ambiguous_strings_and_uses_literal_blocks() -> None:
    obj = {
        "a": "yes",
        "b": "0042",
        "c": "1.50",
        "d": "line1\nline2\n",
        "e": "",
        "f": "2024-01-01",
        "g": [],
        "h": {},
    }
    text = manifests.dump_documents([obj, {"k": 1}])
    assert "d: |\n  line1\n  line2\n" in text
    assert text.count("---\n") == 1
    assert list(yaml.safe_load_all(text)) == [obj, {"k": 1}]


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
    st.text(max_size=20),
    st.sampled_from(
        ["yes", "no", "on", "~", "null", "0o17", "1e3", "1:30", "- x", "a: b", "#c", " lead", "é"]
    ),
)
trees = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=8), trees, min_size=1, max_size=5))
def test_printed_yaml_reads_back_the_same_with_yaml_1_1_and_1_2(obj: dict[str, object]) -> None:
    text = manifests.dump_documents([obj])
    assert yaml.safe_load(text) == obj  # YAML 1.1 reader (what the conformance runner uses)
    assert manifests.parse_yaml_value(text, "x.yaml") == [obj]  # our YAML 1.2 reader


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=st.sampled_from("0123456789.eE+-_xob~nulTrueFalsinfNa:<y"), max_size=8))
def test_plain_scalars_resolve_like_ruamel_yaml_1_2(text: str) -> None:
    from ruamel.yaml import YAML  # the reference: ruamel's own YAML 1.2 resolver

    source = f"k: {text}\n"
    try:
        expected = YAML(typ="safe").load(source)
    except Exception:  # not valid YAML for the reference either
        return
    if not isinstance(expected, dict) or not isinstance(
        expected.get("k"), (str, int, float, bool, type(None))
    ):
        return  # timestamps and the like stay text here on purpose
    got = manifests.parse_yaml_value(source, "x.yaml")[0]["k"]
    want = expected["k"]
    if isinstance(want, float) and want != want:  # NaN
        assert isinstance(got, float)
        assert got != got
    else:
        assert (got, type(got)) == (want, type(want))


@pytest.mark.parametrize("obj", [{"0\n": None}, {"a": "0\n"}, {"true\n": "x"}])
def test_a_string_ending_in_a_newline_is_never_printed_as_a_bare_number(obj: dict[str, object]) -> None:
    text = manifests.dump_documents([obj])
    assert yaml.safe_load(text) == obj
    assert manifests.parse_yaml_value(text, "x.yaml") == [obj]


def test_repeated_words_are_interned_as_read_and_a_vms_own_text_is_not() -> None:
    """Interned: a key, a name, a word (one copy however many documents repeat it). Not:
    a multi-line value or a host path (CPython's table of interned strings grows with every
    string it takes and never shrinks), in a mapping or a list alike."""
    tag = uuid.uuid4().hex  # strings no one interned before
    text = (
        f"kind: K{tag}\nname: vm-{tag}\nuserData: |\n  #cloud-config\n  hostname: {tag}\n"
        f"path: /var/lib/{tag}.qcow2\nlist: [w{tag}, /srv/{tag}]\n"
    )
    (doc,) = manifests.parse_yaml_value(text, "vm.yaml")
    assert (doc["kind"], doc["name"], doc["list"][0]) == (f"K{tag}", f"vm-{tag}", f"w{tag}")
    for word in (doc["kind"], doc["name"], doc["list"][0]):
        assert sys.intern("".join(word)) is word  # an equal string made here finds the document's
    for own in (doc["userData"], doc["path"], doc["list"][1]):
        fresh = "".join(own)  # an equal string made here
        assert sys.intern(fresh) is fresh  # the document's was never interned
