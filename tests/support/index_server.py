"""A package index and a python.org release folder on 127.0.0.1, for --fetch-images tests.

`/simple/<project>/` answers the JSON simple API (PEP 691, with PEP 700's upload times)
when asked for it, else PEP 503 HTML; `/files/<name>` and `/ftp/python/<ver>/<name>` serve
bytes with HTTP range requests (206 + Content-Range), as the public index's file host and
python.org do. What a hostile or broken server does is switched on per file: no ranges, a
redirect to another host, a body cut short, a Content-Length that lies. Every request is
logged (path, Range, Authorization) so tests can say what was asked and sent."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple, Union

Body = Union[bytes, Path]


class IndexServer:
    def __init__(self) -> None:
        self.projects: Dict[str, List[Tuple[str, Optional[str]]]] = {}  # project -> (filename, upload-time)
        self.files: Dict[str, Body] = {}  # URL path -> body
        self.no_ranges: Set[str] = set()
        self.redirect: Dict[str, str] = {}  # URL path -> Location
        self.cut: Set[str] = set()  # bodies cut short (the connection drops)
        self.html_only = False
        self.auth: Optional[Tuple[str, str]] = None  # required on /simple/
        self.log: List[Tuple[str, Optional[str], Optional[str]]] = []  # (path, Range, Authorization)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                server.log.append((self.path, self.headers.get("Range"), self.headers.get("Authorization")))
                path = self.path.split("?", 1)[0]
                if path in server.redirect:
                    self._send(302, b"", {"Location": server.redirect[path]})
                elif path.startswith("/simple/"):
                    self._simple(path)
                elif path in server.files:
                    self._file(path)
                else:
                    self._send(404, b"not here")

            def _send(self, code: int, body: bytes, headers: Optional[Dict[str, str]] = None) -> None:
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _simple(self, path: str) -> None:
                if server.auth is not None:
                    want = "Basic " + base64.b64encode(":".join(server.auth).encode()).decode()
                    if self.headers.get("Authorization") != want:
                        self._send(401, b"who are you", {"WWW-Authenticate": 'Basic realm="index"'})
                        return
                name = path[len("/simple/") :].strip("/")
                if name not in server.projects:
                    self._send(404, b"no such project")
                    return
                files = server.projects[name]
                if "json" in self.headers.get("Accept", "") and not server.html_only:
                    doc = {
                        "meta": {"api-version": "1.1"},
                        "name": name,
                        "files": [
                            {"filename": f, "url": f"/files/{f}", "hashes": {}, **({"upload-time": t} if t else {})}
                            for f, t in files
                        ],
                    }
                    self._send(200, json.dumps(doc).encode(), {"Content-Type": "application/vnd.pypi.simple.v1+json"})
                else:
                    links = "".join(f'<a href="../../files/{f}">{f}</a>\n' for f, _ in files)
                    self._send(200, f"<html><body>{links}</body></html>".encode(), {"Content-Type": "text/html"})

            def _file(self, path: str) -> None:
                body = server.files[path]
                data = body.read_bytes() if isinstance(body, Path) else body
                rng = self.headers.get("Range")
                if path in server.cut:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 3])
                    self.close_connection = True
                    return
                if rng and path not in server.no_ranges and rng.startswith("bytes="):
                    first, _, last = rng[len("bytes=") :].partition("-")
                    if not first:
                        start, end = max(0, len(data) - int(last)), len(data) - 1
                    else:
                        start, end = int(first), min(int(last) if last else len(data) - 1, len(data) - 1)
                    self._send(206, data[start : end + 1], {"Content-Range": f"bytes {start}-{end}/{len(data)}"})
                    return
                self._send(200, data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    scheme = "http"

    def use_tls(self, cert: str, key: str) -> None:
        """Serve https with this certificate (before __enter__)."""
        import ssl

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.scheme = "https"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.httpd.server_address[1]}"

    def add_wheel(self, project: str, filename: str, body: Body, uploaded: Optional[str] = None) -> str:
        self.projects.setdefault(project, []).append((filename, uploaded))
        self.files[f"/files/{filename}"] = body
        return f"/files/{filename}"

    def __enter__(self) -> "IndexServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
