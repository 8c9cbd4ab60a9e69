"""state.json's text, its rows encoded one at a time (``status.state_text``).

Covers: the text is exactly ``json.dumps`` of the whole cleaned document (keys sorted,
compact), whether the rows are in the document or handed over apart, with keys sorted
before and after ``vms``, no rows, and strings that cleaning changes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler.status import state_text
from reconciler.wording.escape import clean_json

ROW = {"subject": "default/a", "name": "a", "message": "in sync \x1b[31mred\x1b[0m", "notes": []}


def whole(doc: dict[str, Any]) -> str:
    return json.dumps(clean_json(doc), separators=(",", ":"), sort_keys=True)


@pytest.mark.parametrize(
    "doc",
    [
        {"version": 1, "applied_at": 3.5, "vms": [ROW, {**ROW, "name": "b"}], "history": [{"m": "x"}]},
        {"vms": [ROW]},
        {"vms": []},
        {"version": 1, "zz": {"k": "https://user:pw@example.com/r"}, "vms": [ROW], "a": None},
        {"version": 1, "last": {"message": "x"}},
    ],
)
def test_the_text_is_the_whole_documents(doc: dict[str, Any]) -> None:
    assert state_text(doc) == whole(doc)
    if "vms" in doc:
        rest = {k: v for k, v in doc.items() if k != "vms"}
        assert state_text(rest, iter(doc["vms"])) == whole(doc)
        assert json.loads(state_text(rest, iter(doc["vms"]))) == json.loads(whole(doc))
