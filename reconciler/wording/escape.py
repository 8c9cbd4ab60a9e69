"""Text from a repository made safe to show: one function per channel.

Input: any string a commit, a remote or a request controls (file and directory names,
VM names, refs, revision names, messages quoting them, git's stderr, a repository URL).
Output: the same text with nothing the reader of that channel would act on. Pure.

Errors and warnings quote committed values; ``shortened`` cuts every overlong word of
one (keeping its start and end) wherever a problem is put into words
(``wording.problems``, ``errors``), so no message repeats a value thousands of
characters long.

The channels, each with its one function, used by every place that shows such text:

- terminal (CLI output, plan and diff text): ``printable`` turns control and format
  characters (ESC, CR, LF, bidi overrides, ...) into Python-style escapes (``\\x1b``),
  so a name can neither move the cursor, recolour a line nor forge a new one; ``located``
  is a manifest's ``path:line`` so escaped;
- Markdown (the PR comment): ``markdown`` for running text (printable, then no HTML, no
  emphasis, link, heading or table syntax, no ``@``-mention and no autolink), and
  ``markdown_code`` for a code span (a table cell, a ref, an error line);
- HTML: ``html`` (printable, then ``& < > " '`` as entities); Slack's mrkdwn: ``slack``
  (printable, then ``& < >`` as entities, so no ``<!channel>`` or link is made);
- JSON documents and logs: ``json_text`` and ``log_text`` (printable, credentials in URLs
  removed: the encoder quotes the string, a reader printing it raw stays safe);
  ``clean_json`` applies ``json_text`` to every string of a document (``json_lines`` to
  each line of a multi-line one, such as a unified diff);
- URLs: ``url`` drops the credentials of a URL (``https://user:TOKEN@host/r.git`` is
  ``https://host/r.git``; ``?private_token=T`` and any other credential's query
  parameter is ``?private_token=REDACTED``), and ``without_credentials`` does so inside free text (git's
  messages quote the URL they failed on); both run before anything is logged, stored
  in ``state.json`` or served;
- XML comments: ``xml_comment`` also breaks every ``--`` so that text inside
  ``<!-- ... -->`` can never end the comment (``a--b`` stays well-formed; a crafted
  ``--><domain>`` stays comment text).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Collection

    from reconciler.model import Manifest

# scheme://userinfo@ : the userinfo of any URL in free text (no '/', '@' or space in it)
_USERINFO = re.compile(r"(?i)([a-z][a-z0-9+.-]*://)[^/@\s'\"]+@")
# A query parameter that carries a credential (GitLab's ``private_token``, OAuth's
# ``access_token``, ``token``, ``password``, an API key, a signature): its value is
# replaced wherever a URL is shown, in a URL alone or in free text.
SECRET_PARAMETER = re.compile(
    r"(?i)[\w.-]*(?:token|passw(?:or)?d|secret|credential|auth)[\w.-]*"
    r"|(?:api[_-]?)?key|pwd|pass|sig|signature|x-amz-[\w-]+"
)
_SECRET_QUERY = re.compile(rf"(?i)([?&;](?:{SECRET_PARAMETER.pattern.removeprefix('(?i)')})=)[^&#;\s'\"]*")
REDACTED = "REDACTED"
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~])")
_WORD_JOINER = "\u2060"  # invisible; after '@' it keeps a forge from reading a mention


MAX_QUOTED = 200  # characters of one word (a name, a path, a value) a message shows
_KEPT_TAIL = 24  # the end of a cut word stays (a closing quote, an extension)
_LONG_WORD = re.compile(rf"\S{{{MAX_QUOTED + 1},}}")


def shortened(text: str) -> str:
    """``text`` with every word (a run without white space) longer than ``MAX_QUOTED``
    cut to its start and end around ``…[N chars]…``: a message that quotes a committed
    value (an image-map name thousands of characters long) stays bounded and says so."""
    if len(text) <= MAX_QUOTED:
        return text
    return _LONG_WORD.sub(_cut, text)


def _cut(m: re.Match[str]) -> str:
    word = m.group()
    return f"{word[: MAX_QUOTED - _KEPT_TAIL]}…[{len(word)} chars]…{word[-_KEPT_TAIL:]}"


def printable(text: str) -> str:
    """``text`` with every non-printable character escaped (``\\x1b``, ``\\u202e``)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def located(manifest: Manifest) -> str:
    """``path:line`` of a manifest for messages, the path's control characters escaped."""
    path = printable(manifest.path)
    return f"{path}:{manifest.line}" if manifest.line else path


def os_error(err: OSError) -> str:
    """An operating system error as a line: ``PATH: reason`` (``/x.yaml: No such file or
    directory``), never Python's ``[Errno 2] ...: '/x.yaml'``."""
    reason = err.strerror or str(err)
    if err.filename is None:
        return reason
    where = printable(os.fsdecode(err.filename))
    if err.filename2 is not None:
        where += f" -> {printable(os.fsdecode(err.filename2))}"
    return f"{where}: {reason}"


def url(text: str) -> str:
    """A URL without its credentials: the user and password left out, the value of a
    credential's query parameter (``?private_token=``, ``access_token``, ``password``,
    ...) replaced by ``REDACTED``; any other text as it is. The one function that names
    a repository URL wherever it is shown, logged, stored or served."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return without_credentials(text)
    if parts.scheme and "@" in parts.netloc:
        text = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    return without_credentials(text)


def without_credentials(text: str) -> str:
    """Free text with the credentials of every URL in it removed: the userinfo of
    ``scheme://user:secret@``, the value of each credential's query parameter."""
    if "://" in text:
        text = _USERINFO.sub(r"\1", text)
    if "=" in text:
        text = _SECRET_QUERY.sub(rf"\g<1>{REDACTED}", text)
    return text


def json_text(text: str) -> str:
    """A string value of a JSON document we write or serve (status, state, reports)."""
    return printable(without_credentials(text))


def clean_json(doc: Any, lines: Collection[str] = ()) -> Any:
    """A JSON document (dicts, lists, scalars) with every string through ``json_text``:
    what is stored (``state.json``), served (``/api/status``, ``/healthz``, events) or
    reported (``diff -o json``). The values of the keys in ``lines`` are multi-line text
    (a unified diff): each line goes through ``json_text``, the line breaks are kept."""
    if isinstance(doc, str):
        return json_text(doc)
    if isinstance(doc, dict):
        return {
            k: json_lines(v) if k in lines and isinstance(v, str) else clean_json(v, lines)
            for k, v in doc.items()
        }
    if isinstance(doc, (list, tuple)):
        return [clean_json(v, lines) for v in doc]
    return doc


def json_lines(text: str) -> str:
    """Multi-line text in a JSON document: every line through ``json_text``, joined by LF."""
    return "\n".join(map(json_text, text.split("\n")))


def log_text(text: str) -> str:
    """A string value of a log line (console or JSON): one line, no credentials."""
    return printable(without_credentials(text))


def html(text: str) -> str:
    """Text inside an HTML element or a quoted attribute."""
    safe = printable(text)
    for ch, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&#39;")):
        safe = safe.replace(ch, entity)
    return safe


def slack(text: str) -> str:
    """Text of a Slack message (mrkdwn)."""
    return printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def markdown(text: str) -> str:
    """Running text of a Markdown document (GitHub, GitLab, Gitea): shown as written.

    One line (printable); HTML is entities; ``\\ ` * _ [ ] | # ~`` are backslash-escaped
    (no emphasis, link, heading, table cell or code); ``://`` and ``www.`` are broken with
    an entity so no autolink is made; an ``@`` is followed by an invisible word joiner so
    no one is mentioned."""
    safe = printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    safe = _MD_SPECIAL.sub(r"\\\1", safe)
    safe = safe.replace("://", "&#58;//").replace("www.", "www&#46;")
    return safe.replace("@", "@" + _WORD_JOINER)


def markdown_code(text: str) -> str:
    """``text`` as a Markdown code span, safe inside a table cell or a list item: nothing
    in a code span is markup, a mention or a link."""
    text = printable(text).replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def xml_comment(text: str) -> str:
    """``text`` fit for the inside of an XML comment: printable, no ``--``, no trailing ``-``."""
    safe = re.sub(r"-(?=-)", "-\\\\", printable(text))
    return safe + " " if safe.endswith("-") else safe
