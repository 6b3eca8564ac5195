"""A project's files on a package index, through the simple repository API: the JSON form
(PEP 691, asked for first: it carries each file's upload time, PEP 700) or the HTML form
(PEP 503: names and URLs only), whichever the index answers. Only the projects named are
asked for; nothing lists the index."""

from __future__ import annotations

import datetime
import json
import re
import urllib.parse
from html.parser import HTMLParser
from typing import List, Optional, Tuple

from dumpkit.images.fetch.errors import FetchError
from dumpkit.images.fetch.http import Client
from dumpkit.images.fetch.pipconfig import Index, public
from dumpkit.records import record

ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
MAX_FILES = 100_000  # files listed per project (TensorFlow's pages hold a few thousand)


@record
class IndexFile:
    filename: str
    url: str  # absolute; may carry a #sha256=... fragment
    upload_time: Optional[float] = None  # POSIX seconds (PEP 700), when the index says
    size: Optional[int] = None


def normalize(name: str) -> str:
    """PEP 503's normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_files(client: Client, index: Index, project: str) -> List[IndexFile]:
    """The files `index` lists for `project`; [] when it has no such project (404)."""
    url = f"{index.url}/{normalize(project)}/"
    try:
        body, ctype, final = client.page(url, ACCEPT)
    except FetchError as e:
        if str(e).endswith("HTTP 404") or "No such file" in str(e):
            return []
        raise
    if "json" in ctype.split(";", 1)[0]:
        return _from_json(body, final)
    return _from_html(body, final)


def _when(text: object) -> Optional[float]:
    if not isinstance(text, str):
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _from_json(body: bytes, base: str) -> List[IndexFile]:
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise FetchError(f"{public(base)}: not a JSON simple API page ({e})") from None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list):
        raise FetchError(f"{public(base)}: a JSON page without a files list")
    out: List[IndexFile] = []
    for entry in files[:MAX_FILES]:
        if not isinstance(entry, dict):
            continue
        name, url = entry.get("filename"), entry.get("url")
        if not isinstance(name, str) or not isinstance(url, str):
            continue
        size = entry.get("size")
        out.append(
            IndexFile(
                name,
                urllib.parse.urljoin(base, url),
                _when(entry.get("upload-time")),
                size if isinstance(size, int) and size >= 0 else None,
            )
        )
    return out


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: List[Tuple[str, str]] = []  # (href, text)
        self._href: Optional[str] = None
        self._text: List[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a" and len(self.found) < MAX_FILES:
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.found.append((self._href, "".join(self._text).strip()))
            self._href = None


def _from_html(body: bytes, base: str) -> List[IndexFile]:
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    out = []
    for href, text in parser.found:
        url = urllib.parse.urljoin(base, href)
        name = text or urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        out.append(IndexFile(name, url))
    return out
