"""The status page served at ``/``: one static HTML document with a small inline script.

Input: nothing (the data comes from ``/api/status``, fetched by the script every
``POLL_MS``). Output: ``PAGE`` (bytes) and the headers it is served with. Pure.

Everything the page shows comes from the JSON document and is put into the page with
``textContent`` (never ``innerHTML``), so names, messages and paths from a commit are
always text; control and format characters are shown as escapes (``\\x1b``, ``\\u202e``)
like ``wording.escape.printable`` does. Links are made only from ``http(s)://``
addresses. A Content-Security-Policy admits this one script (by its hash) and requests to
the page's own origin only: an injected ``<script>`` could not run even if escaping failed.
When the daemon does not answer (a restart, a reload), the page says so and keeps polling.
"""

from __future__ import annotations

import base64
import hashlib
from types import MappingProxyType

POLL_MS = 2000

_SCRIPT = r"""
"use strict";
const POLL_MS = @POLL@;
function show(v) {
  return String(v === null || v === undefined ? "" : v).replace(/(?! )[\p{C}\p{Z}]/gu, (c) => {
    const n = c.codePointAt(0);
    if (n < 0x100) return "\\x" + n.toString(16).padStart(2, "0");
    if (n < 0x10000) return "\\u" + n.toString(16).padStart(4, "0");
    return "\\U" + n.toString(16).padStart(8, "0");
  });
}
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "href") { if (/^https?:\/\//.test(v)) e.href = v; }
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : show(k));
  return e;
}
function rev(r) {
  const text = (r && r.revision ? r.revision.slice(0, 12) : "-");
  return r && r.link ? el("a", {href: r.link, class: "rev"}, text) : el("span", {class: "rev"}, text);
}
function table(head, rows) {
  const t = el("table", {}, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))));
  const b = el("tbody");
  for (const r of rows) b.append(el("tr", {}, ...r.map((c) => el("td", {}, c))));
  t.append(b);
  return t;
}
function list(cls, items) {
  return el("ul", {class: cls}, ...items.map((i) => el("li", {}, i)));
}
function vmRow(v) {
  const msg = el("div", {}, v.message);
  if (v.outOfSync.length) msg.append(list("fields", v.outOfSync.map((f) =>
    `${f.path}: ${f.old === "" ? "(none)" : f.old} → ${f.new === "" ? "(none)" : f.new} (${f.class})`)));
  if (v.notes && v.notes.length) msg.append(list("notes", v.notes.map((n) => `${n.notice}: ${n.message}`)));
  if (v.probe) msg.append(el("div", {class: "probe"}, v.probe));
  if (v.address) msg.append(el("div", {class: "address"}, `address ${v.address} (${v.addressSource})`));
  const ready = v.ready === null ? "-" : el("span", {class: "ready " + (v.ready ? "yes" : "no"), title: v.readyReason},
    v.ready ? "Ready" : "not Ready");
  return [v.name, v.runStrategy, v.state, ready, el("span", {class: "sync " + show(v.sync)}, v.sync), v.revision,
          v.restartRequired ? "staged" : "", msg];
}
function host(h) {
  const s = el("section", {class: "host", "data-host": show(h.name)});
  s.append(el("h2", {}, h.name, " ", el("small", {}, h.uri)));
  const line = el("p", {class: "state"}, el("span", {class: "reason " + show(h.reason || "none")}, h.reason || "not yet reconciled"),
    " attempted ", rev(h.attempted), ", applied ", rev(h.applied));
  if (h.commitStatus) line.append(` · commit status ${show(h.commitStatus.context)}: ${show(h.commitStatus.state)}`);
  s.append(line);
  if (!h.reachable) s.append(el("p", {class: "error"}, "unreachable: ", h.error));
  if (h.message) s.append(el("p", {class: "message"}, h.message));
  if (h.pruneRefused) s.append(el("p", {class: "error"}, "prune refused: ", h.pruneRefused));
  if (h.health && h.health.health !== "Healthy")
    s.append(el("p", {class: h.health.health === "Halted" ? "error" : "message"}, "revision ", show(h.health.health), ": ", h.health.message));
  if (h.errors.length) s.append(el("h3", {}, "errors"), list("errors", h.errors));
  if (h.warnings.length) s.append(el("h3", {}, "warnings"), list("warnings", h.warnings));
  s.append(table(["VM", "strategy", "power", "ready", "sync", "revision", "restart", "message"], h.vms.map(vmRow)));
  return s;
}
function render(d) {
  const m = el("div");
  const head = el("p", {class: "summary"}, "source ", d.source.repo, d.source.path ? ` (${show(d.source.path)})` : "",
    " · attempted ", rev(d.attempted), " · applied ", rev(d.applied), d.applied.at ? ` at ${show(d.applied.at)}` : "");
  if (d.reason) head.append(" · ", el("span", {class: "reason " + show(d.reason)}, d.reason));
  if (d.reconciling) head.append(" · reconciling ", d.reconciling.slice(0, 12));
  m.append(head);
  if (d.message) m.append(el("p", {class: "message"}, d.message));
  if (d.rollback) m.append(el("p", {class: "error"}, `rollback ${show(d.rollback.decision)}: `, d.rollback.why));
  for (const h of d.hosts) m.append(host(h));
  m.append(el("h2", {}, "last reconciles"), table(["started", "revision", "result", "ms", "message"],
    d.history.map((e) => [e.startedAt, rev(e), e.result, String(e.durationMs), e.message])));
  document.getElementById("main").replaceChildren(m);
  document.getElementById("updated").textContent = "updated " + show(d.generatedAt);
}
async function poll() {
  const live = document.getElementById("live");
  try {
    const r = await fetch("api/status", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
    live.textContent = "live";
    live.className = "ok";
  } catch (e) {
    live.textContent = "daemon not answering (" + show(e.message) + "): retrying";
    live.className = "down";
  }
  setTimeout(poll, POLL_MS);
}
poll();
""".replace("@POLL@", str(POLL_MS))

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border-bottom:1px solid #ddd;padding:2px 8px;text-align:left;
vertical-align:top}.ok{color:#060}.down,.error,.Failed,.OutOfSync,.CrashLoopBackOff,.ready.no{color:#b00}
.rev{font-family:monospace}ul.fields{margin:0;padding-left:1.2em;font-family:monospace;font-size:12px}
.Succeeded,.Synced{color:#060}small{color:#666}
"""

SCRIPT_HASH = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
CSP = (
    f"default-src 'none'; script-src 'sha256-{SCRIPT_HASH}'; style-src 'unsafe-inline'; connect-src 'self'; "
    "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = MappingProxyType({"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store",
           "Referrer-Policy": "no-referrer"})  # fmt: skip

PAGE = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>reconciler</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{_STYLE}</style></head>
<body><h1>reconciler <small id="live">loading</small> <small id="updated"></small></h1>
<noscript><p>This page updates itself with a small script; without it, read
<a href="api/status">api/status</a> (JSON).</p></noscript>
<main id="main"></main>
<script>{_SCRIPT}</script>
</body></html>
""".encode()
