"""wording.escape: one function per channel renders text a commit controls as inert text.

Covers: terminal (``printable``: control and bidi characters as escapes), Markdown
(``markdown``: no HTML, emphasis, link, heading, mention or autolink; ``markdown_code``:
a code span whatever the backticks), HTML, Slack, JSON and logs (credentials of URLs
removed, anywhere in the text), ``url``, ``clean_json`` over a document, the log
processor (``log.clean_values``), and ``manifests.locate`` finding a field in the
document it is asked for when a file holds many.
"""

from __future__ import annotations

import json
import re

import pytest

from reconciler import log
from reconciler.manifests import locate
from reconciler.wording import escape

HOSTILE = [
    "\x1b[31mred\x1b[0m",
    "line\r\nforged: line",
    "## Heading",
    "@admin please",
    "[click](https://evil.example)",
    "<script>alert(1)</script>",
    "a | b | c",
    "`code` ``more``",
    "www.evil.example",
    "bidi \u202eevil",
    "*bold* _it_ ~strike~",
    "<!channel> hi",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_printable_leaves_no_control_or_format_character(text: str) -> None:
    assert escape.printable(text).isprintable()


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_makes_no_markup_of_a_commit(text: str) -> None:
    md = escape.markdown(text)
    assert "\n" not in md
    assert "\r" not in md
    assert "<" not in md
    assert ">" not in md
    assert "://" not in md
    assert "www." not in md
    assert re.search(r"@[A-Za-z0-9]", md) is None  # no mention
    ours = re.sub(r"&#?\w+;", "", md)  # the entities escaping made
    assert re.search(r"(?<!\\)[\[\]`*_|#~]", ours) is None  # every special escaped


def test_markdown_keeps_plain_text_as_it_was() -> None:
    plain = "instancetype u1.small: a newer revision is in the repository (1c302d0764bc) (2 VMs: vm/a, ...)"
    assert escape.markdown(plain) == plain


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_code_is_one_code_span(text: str) -> None:
    span = escape.markdown_code(text)
    fence = re.match(r"`+", span)
    assert fence is not None
    inner = span[len(fence[0]) : -len(fence[0])]
    assert span.endswith(fence[0])
    assert fence[0] not in inner
    assert "\n" not in span
    assert re.search(r"(?<!\\)\|", span) is None


@pytest.mark.parametrize("text", HOSTILE)
def test_html_and_slack_leave_no_tag(text: str) -> None:
    assert "<" not in escape.html(text)
    assert '"' not in escape.html(text)
    assert "<" not in escape.slack(text)
    assert escape.slack(text).isprintable()


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("https://user:TOKEN@git.example/r.git", "https://git.example/r.git"),
        ("https://TOKEN@git.example:8443/r.git", "https://git.example:8443/r.git"),
        ("ssh://git:pw@host/r", "ssh://host/r"),
        ("/srv/repo", "/srv/repo"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("https://git.example/r.git", "https://git.example/r.git"),
        ("https://h/r.git?private_token=T0K", "https://h/r.git?private_token=REDACTED"),
        (
            "https://u:T@h/r.git?ref=main&access_token=T&Password=T",
            "https://h/r.git?ref=main&access_token=REDACTED&Password=REDACTED",
        ),
        ("https://h/r.git?ref=main", "https://h/r.git?ref=main"),
    ],
)
def test_url_drops_credentials_only(given: str, shown: str) -> None:
    assert escape.url(given) == shown


def test_credentials_are_removed_anywhere_in_free_text() -> None:
    text = "fatal: unable to access 'https://u:T0K@h/r.git/': x; also \x1bhttps://T2@h2/r"
    clean = escape.log_text(text)
    assert "T0K" not in clean
    assert "T2@" not in clean
    assert "https://h/r.git/" in clean
    assert clean.isprintable()


def test_clean_json_reaches_every_string_of_a_document() -> None:
    doc = {"a": ["https://u:T@h/r", {"b": "\x1b[2J"}], "n": 3, "t": True, "z": None}
    clean = escape.clean_json(doc)
    text = json.dumps(clean)
    assert "u:T" not in text
    assert "\\u001b" not in text
    assert clean["n"] == 3
    assert clean["t"] is True
    assert clean["z"] is None


def test_shortened_cuts_each_overlong_word_to_its_start_its_length_and_its_end() -> None:
    value = "img" + "x" * 5000 + "END"
    said = escape.shortened(f"image {value!r} is not in the host config's image map")
    assert said.startswith("image 'imgxxx")
    assert said.endswith("xxxEND' is not in the host config's image map")
    assert "…[5008 chars]…" in said
    assert len(said) == len("image  is not in the host config's image map") + escape.MAX_QUOTED + len(
        "…[5008 chars]…"
    )
    short = "vm/web: spec.domain: " + "a" * escape.MAX_QUOTED
    assert escape.shortened(short) == short  # at the limit: as it is


def test_clean_json_keeps_the_lines_of_multi_line_values_and_cleans_each() -> None:
    doc = {"specDiff": "+a\u202e\n-b\x1b[2J\n", "vms": [{"specDiff": "x\ry\nz"}], "other": "a\nb"}
    clean = escape.clean_json(doc, lines={"specDiff"})
    assert clean["specDiff"] == "+a\\u202e\n-b\\x1b[2J\n"
    assert clean["vms"][0]["specDiff"] == "x\\ry\nz"
    assert clean["other"] == "a\\nb"  # not a multi-line key: one line


def test_the_log_processor_cleans_every_value_but_keeps_a_traceback_on_its_lines() -> None:
    event = {
        "event": "cloned",
        "repo": "https://u:SECRET@h/r.git",
        "message": "a\nb",
        "exception": "Traceback:\n  line https://u:SECRET@h\n",
        "n": 1,
    }
    out = log.clean_values(None, "info", event)
    assert out["repo"] == "https://h/r.git"
    assert out["message"] == "a\\nb"
    assert out["exception"] == "Traceback:\n  line https://h\n"
    assert out["n"] == 1


def test_xml_comment_cannot_end_the_comment() -> None:
    assert "--" not in escape.xml_comment("--><domain>--")


def test_locate_finds_a_field_in_the_document_it_is_asked_for() -> None:
    docs = "".join(f"---\nkind: VM\nmetadata:\n  name: vm{i}\nspec:\n  a: [1, 2]\n" for i in range(50))
    data = docs.encode()
    # vm7's document starts on line 7*6 + 2; its spec.a[1] two lines and a column further
    start = 7 * 6 + 2
    assert locate(data, start, ("spec", "a", 1)) == (start + 4, 10)
    assert locate(data, 2, ("metadata", "name")) == (4, 3)
    assert locate(data, 10_000, ("spec",)) == (10_000, 1)
    assert locate(b"# comment\nkind: VM\nspec: {}\n", 1, ("spec",)) == (3, 1)
