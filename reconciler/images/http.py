"""DataVolume ``source.http``: an image downloaded over HTTP(S), as CDI imports it.

Input: the URL, the credentials (``Auth``: basic auth from the ``secretRef``'s
``accessKeyId``/``secretKey``, ``extraHeaders`` and ``secretExtraHeaders``, the CA
bundle of ``certConfigMap``), the store's room in bytes. Output: the downloaded file
in the directory the store gives; its digest is the sha256 of the bytes served,
known once they are downloaded (``resolve`` has none to give before).

TLS is verified (the system's CAs plus the bundle). The download resumes a partial
file with a ``Range`` request; redirects are followed (at most ``MAX_REDIRECTS``,
never from https to http, credentials dropped when the host changes); a declared
``Content-Length`` over the room is refused before a byte is read; the whole is
bounded in time (``deadline_s``) and size. Progress goes to the log (bytes and
percent, never a header or a credential) and to ``on_bytes`` (the daemon's metric).
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from reconciler.images.safety import CHUNK
from reconciler.images.sources import Auth, ImageError, ImageRef, PullPolicy, Resolved

if TYPE_CHECKING:
    from collections.abc import Callable
    from http.client import HTTPMessage
    from pathlib import Path

log = structlog.get_logger("reconciler.images")

MAX_REDIRECTS = 5
READ_TIMEOUT_S = 60.0
DEADLINE_S = 3600.0
PROGRESS_EVERY_S = 5.0


def shown_url(url: str) -> str:
    """The URL without its query and user info (a signed URL's token stays out of logs)."""
    p = urllib.parse.urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host = f"{host}:{p.port}"
    return urllib.parse.urlunsplit((p.scheme, host, p.path, "", ""))


class _Redirects(urllib.request.HTTPRedirectHandler):
    max_redirections = MAX_REDIRECTS

    def __init__(self, secret_headers: frozenset[str]) -> None:
        self.secret_headers = secret_headers

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: HTTPMessage, newurl: str
    ) -> urllib.request.Request | None:
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if old.scheme == "https" and new.scheme != "https":
            raise ImageError(f"a redirect from https to {new.scheme} is refused")
        if new.scheme not in ("http", "https"):
            raise ImageError(f"a redirect to a {new.scheme or 'relative'} URL is refused")
        out = super().redirect_request(req, fp, code, msg, headers, newurl)
        if out is not None and (old.hostname, old.port) != (new.hostname, new.port):
            for name in list(out.headers):
                if name.lower() in self.secret_headers or name.lower() == "authorization":
                    del out.headers[name]
            for name in list(out.unredirected_hdrs):
                if name.lower() in self.secret_headers or name.lower() == "authorization":
                    del out.unredirected_hdrs[name]
        if out is not None and (rng := req.get_header("Range")):
            out.add_header("Range", rng)
        return out


@dataclass
class HttpSource:
    """The ``http`` source (a ``sources.Resolver``)."""

    room: Callable[[], int]  # bytes the store may still take
    deadline_s: float = DEADLINE_S
    read_timeout_s: float = READ_TIMEOUT_S
    on_bytes: Callable[[int], None] = field(default=lambda n: None)
    clock: Callable[[], float] = time.monotonic

    def resolve(self, ref: ImageRef, policy: PullPolicy, auth: Auth | None) -> Resolved:
        scheme = urllib.parse.urlsplit(ref.ref).scheme
        if scheme not in ("http", "https"):
            raise ImageError(f"an http source's URL must be http:// or https://, not {scheme or 'relative'}")
        return Resolved(ref.ref, "http", "")

    def _opener(self, auth: Auth | None) -> urllib.request.OpenerDirector:
        tls = ssl.create_default_context()
        if auth is not None and auth.ca_bundle:
            tls.load_verify_locations(cadata=auth.ca_bundle)
        secret = frozenset(k.lower() for k in (auth.headers if auth is not None else {}))
        return urllib.request.build_opener(urllib.request.HTTPSHandler(context=tls), _Redirects(secret))

    def _request(self, url: str, auth: Auth | None, offset: int) -> urllib.request.Request:
        req = urllib.request.Request(url, method="GET")
        if auth is not None:
            for k, v in auth.headers.items():
                req.add_header(k, v)
            if auth.username or auth.password:
                token = base64.b64encode(f"{auth.username}:{auth.password}".encode()).decode()
                req.add_header("Authorization", f"Basic {token}")
        if offset:
            req.add_header("Range", f"bytes={offset}-")
        return req

    def fetch(self, resolved: Resolved, dest_dir: Path, auth: Auth | None) -> Path:
        """Download into ``dest_dir/<sha256 of the URL>.part`` (resumed if it is there)."""
        url = resolved.ref
        part = dest_dir / (hashlib.sha256(url.encode()).hexdigest()[:32] + ".part")
        offset = part.stat().st_size if part.is_file() else 0
        started = self.clock()
        try:
            resp = self._opener(auth).open(self._request(url, auth, offset), timeout=self.read_timeout_s)
        except urllib.error.HTTPError as err:
            err.close()
            if err.code == 416 and offset:  # the partial file is whole already, or stale
                part.unlink()
                return self.fetch(resolved, dest_dir, auth)
            raise ImageError(
                f"the server answered {err.code} {err.reason} for {shown_url(url)}",
                transient=err.code >= 500 or err.code in (408, 429),  # the server's trouble: retried
            ) from None
        except (urllib.error.URLError, OSError, ssl.SSLError) as err:
            reason = getattr(err, "reason", err)
            raise ImageError(f"cannot download {shown_url(url)}: {reason}", transient=True) from None
        with resp:
            if resp.status != 206:
                offset = 0  # no range served: from the start
            length = resp.headers.get("Content-Length")
            declared = int(length) + offset if length and length.isdigit() else None
            room = self.room()
            if declared is not None and declared > room:
                part.unlink(missing_ok=True)
                raise ImageError(
                    f"its declared size ({declared} bytes) exceeds what the image store may still take "
                    f"({room} bytes, imageStore.maxBytes)"
                )
            got = self._stream(resp, part, offset, (room, declared), url, started)
            if declared is not None and got != declared:
                raise ImageError(
                    f"the download of {shown_url(url)} ended at {got} of {declared} bytes "
                    "(the next attempt resumes)",
                    transient=True,
                )
        log.info("image downloaded", url=shown_url(url), bytes=got)
        done = dest_dir / (part.stem + ".image")
        part.rename(done)
        return done

    def _stream(
        self, resp: Any, part: Path, offset: int, bounds: tuple[int, int | None], url: str, started: float
    ) -> int:
        """Append ``resp``'s body to ``part`` (from ``offset``) within the store's room and
        the deadline, with progress in the log; the bytes the file holds then."""
        room, declared = bounds
        got = offset
        last = started
        with part.open("ab" if offset else "wb") as out:
            try:
                while chunk := resp.read(CHUNK):
                    got += len(chunk)
                    if got > room:
                        part.unlink(missing_ok=True)
                        raise ImageError(f"the download exceeds the store's room of {room} bytes")
                    out.write(chunk)
                    self.on_bytes(len(chunk))
                    now = self.clock()
                    if now - started > self.deadline_s:
                        raise ImageError(
                            f"the download took longer than {int(self.deadline_s)} s "
                            f"({got} bytes kept; the next attempt resumes)",
                            transient=True,
                        )
                    if now - last >= PROGRESS_EVERY_S:
                        last = now
                        pct = f"{100 * got // declared}%" if declared else "?"
                        log.info("image download", url=shown_url(url), bytes=got, percent=pct)
            except (OSError, ssl.SSLError, http.client.HTTPException) as err:
                raise ImageError(
                    f"the download of {shown_url(url)} broke off after {got} bytes "
                    f"(the next attempt resumes): {err}",
                    transient=True,
                ) from None
        return got


__all__ = ["HttpSource", "shown_url"]
