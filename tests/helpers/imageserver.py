"""A local HTTP server for image downloads, in-process (stdlib ``http.server`` in a thread).

``image_server()`` is a context manager giving an ``ImageServer`` on ``127.0.0.1`` (a
free port): ``server.files[path] = bytes`` serves them, with ``Range: bytes=N-``
answered 206; ``server.redirects[path] = location`` answers 302; ``server.cut[path] =
n`` breaks the first answer for ``path`` off after ``n`` bytes (a resumable download's
first attempt); ``server.declared[path] = n`` sends ``Content-Length: n`` and no body;
``server.basic[path] = (user, password)`` asks for basic auth; ``server.requests``
records each request's path and headers. ``server.url(path)`` is the full URL.
"""

from __future__ import annotations

import base64
import contextlib
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator


@dataclass
class ImageServer:
    port: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)
    cut: dict[str, int] = field(default_factory=dict)
    declared: dict[str, int] = field(default_factory=dict)
    basic: dict[str, tuple[str, str]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _handler(server: ImageServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def do_GET(self) -> None:
            path = self.path
            server.requests.append((path, dict(self.headers.items())))
            if path in server.redirects:
                self.send_response(302)
                self.send_header("Location", server.redirects[path])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if path in server.basic:
                user, password = server.basic[path]
                want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
                if self.headers.get("Authorization") != want:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            if path in server.declared:
                self.send_response(200)
                self.send_header("Content-Length", str(server.declared[path]))
                self.end_headers()
                self.close_connection = True
                return
            body = server.files.get(path)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = 0
            rng = self.headers.get("Range", "")
            if rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[6:-1])
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            part = body[start:]
            self.send_header("Content-Length", str(len(part)))
            self.end_headers()
            if path in server.cut:
                self.wfile.write(part[: server.cut.pop(path)])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(part)

    return Handler


@contextlib.contextmanager
def image_server() -> Iterator[ImageServer]:
    state = ImageServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
