"""HTTP as pip would do it, and no further: pip's proxy, CA bundle, client certificate and
trusted hosts (dumpkit.images.fetch.pipconfig), credentials sent only to the host that
carried them, redirects followed only within one host, every body bounded and checked
complete. `file:` URLs (an index on a local disk, as pip allows) are read in place.

A remote file is read by ranges where the server answers them (206 with the range asked
for), so a wheel's zip directory and one member's headers cost kilobytes, not the wheel;
`RemoteFile.ranged` says whether it could."""

from __future__ import annotations

import base64
import os
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import BinaryIO, Callable, Dict, Optional, Tuple

from dumpkit.images.fetch.errors import FetchError
from dumpkit.images.fetch.pipconfig import IndexConfig, public

USER_AGENT = "dumpkit (image fetcher; pip configuration)"
_CHUNK = 1 << 20
MAX_PAGE = 64 << 20  # an index page: TensorFlow's JSON page is a few MB

Progress = Callable[[int], None]  # called with the bytes received so far


class _SameHostRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is followed only to the same scheme, host and port: an index or file
    server that sends dumpkit elsewhere is refused (credentials and trust stay put)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        old = urllib.parse.urlsplit(req.full_url)
        new = urllib.parse.urlsplit(urllib.parse.urljoin(req.full_url, newurl))
        if (old.scheme, old.netloc.lower()) != (new.scheme, new.netloc.lower()):
            raise FetchError(
                f"{public(req.full_url)} redirects to another host ({new.scheme}://{new.hostname}); refused"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class Client:
    """One run's HTTP client over pip's settings."""

    def __init__(self, config: IndexConfig):
        self.config = config
        handlers: list = [_SameHostRedirects()]
        if config.proxy:
            handlers.append(urllib.request.ProxyHandler({"http": config.proxy, "https": config.proxy}))
        self._verified = self._context(verify=True)
        self._unverified = self._context(verify=False) if config.trusted_hosts else None
        handlers.append(urllib.request.HTTPSHandler(context=self._verified))
        self._opener = urllib.request.build_opener(*handlers)
        self._trusted_opener = None
        if self._unverified is not None:
            self._trusted_opener = urllib.request.build_opener(
                *(h for h in handlers if not isinstance(h, urllib.request.HTTPSHandler)),
                urllib.request.HTTPSHandler(context=self._unverified),
            )
        self.offline_hosts: Dict[str, str] = {}  # host -> why it could not be reached

    def _context(self, verify: bool) -> ssl.SSLContext:
        # pip checks against its --cert bundle when given, else the system's trust store
        ctx = ssl.create_default_context(cafile=self.config.cert) if verify else ssl._create_unverified_context()
        if self.config.client_cert:
            ctx.load_cert_chain(self.config.client_cert)
        return ctx

    def _headers(self, url: str, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        headers = {"User-Agent": USER_AGENT}
        headers.update(extra or {})
        auth = self._credentials(url)
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        return headers

    def _credentials(self, url: str) -> Optional[Tuple[str, str]]:
        """The credentials of the index on `url`'s scheme and host, else ~/.netrc's (as
        pip's requests session reads it); never sent to any other host."""
        parts = urllib.parse.urlsplit(url)
        for idx in self.config.indexes:
            if idx.username is None:
                continue
            own = urllib.parse.urlsplit(idx.url)
            if (own.scheme, own.netloc.lower()) == (parts.scheme, parts.netloc.lower()):
                return idx.username, idx.password or ""
        if parts.scheme == "https" and parts.hostname:
            try:
                import netrc

                found = netrc.netrc().authenticators(parts.hostname)
            except (OSError, netrc.NetrcParseError):
                found = None
            if found and found[0]:
                return found[0], found[2] or ""
        return None

    def open(self, url: str, headers: Optional[Dict[str, str]] = None):
        """The response to GET `url`; FetchError with one line when there is none."""
        parts = urllib.parse.urlsplit(url)
        host = parts.netloc.lower()
        if host in self.offline_hosts:
            raise FetchError(self.offline_hosts[host], offline=True)
        trusted = (parts.hostname or "").lower() in self.config.trusted_hosts or host in self.config.trusted_hosts
        if parts.scheme == "http" and not trusted and not _loopback(parts.hostname or ""):
            raise FetchError(f"{public(url)}: plain http, and pip does not trust {parts.hostname} (trusted-host)")
        if parts.scheme not in ("http", "https"):
            raise FetchError(f"{public(url)}: not an http(s) URL")
        opener = self._trusted_opener if trusted and self._trusted_opener is not None else self._opener
        req = urllib.request.Request(url, headers=self._headers(url, headers))
        try:
            return opener.open(req, timeout=self.config.timeout)
        except urllib.error.HTTPError as e:
            e.close()
            raise FetchError(f"{public(url)}: HTTP {e.code}", status=e.code) from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, ssl.SSLError):
                raise FetchError(f"{public(url)}: certificate not accepted ({reason.reason or reason})") from None
            why = f"{parts.scheme}://{parts.hostname}: unreachable ({reason})"
            if isinstance(reason, (socket.gaierror, ConnectionRefusedError, socket.timeout, OSError)):
                self.offline_hosts[host] = why
                raise FetchError(why, offline=True) from None
            raise FetchError(why) from None
        except (socket.timeout, TimeoutError):
            why = f"{parts.scheme}://{parts.hostname}: no answer within {self.config.timeout:.0f} s"
            self.offline_hosts[host] = why
            raise FetchError(why, offline=True) from None
        except (OSError, ValueError) as e:
            raise FetchError(f"{public(url)}: {e}") from None

    def page(self, url: str, accept: str) -> Tuple[bytes, str, str]:
        """(body, content type, final URL) of an index page, at most MAX_PAGE bytes."""
        if url.startswith("file:"):
            path = file_path(url)
            folder = path if os.path.isdir(path) else None
            target = os.path.join(folder, "index.html") if folder else path
            try:
                with open(target, "rb") as f:
                    body = f.read(MAX_PAGE + 1)
            except OSError as e:
                raise FetchError(f"{url}: {e.strerror or e}") from None
            if len(body) > MAX_PAGE:
                raise FetchError(f"{url}: index page larger than {MAX_PAGE:,} bytes; refused")
            return body, "text/html", url.rstrip("/") + "/"
        with self.open(url, {"Accept": accept}) as resp:
            body = _read_all(resp, url, MAX_PAGE)
            return body, resp.headers.get("Content-Type", ""), resp.geturl()


def _loopback(host: str) -> bool:
    """pip's secure origins take plain http from this machine itself (localhost, 127/8, ::1)."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def file_path(url: str) -> str:
    return urllib.request.url2pathname(urllib.parse.urlsplit(url).path)


def _read_all(resp, url: str, limit: int, out: Optional[BinaryIO] = None, progress: Optional[Progress] = None) -> bytes:
    """The whole body (into `out` when given, else returned), at most `limit` bytes, as
    long as its Content-Length says: a body cut short or too long is refused."""
    header = resp.headers.get("Content-Length")
    length = int(header) if header is not None and header.strip().isdigit() else None
    if length is not None and length > limit:
        raise FetchError(f"{public(url)} is {length:,} bytes, more than the limit of {limit:,}; not fetched")
    parts = []
    total = 0
    while True:  # bounded: stops past `limit`
        try:
            chunk = resp.read(_CHUNK)
        except (OSError, ValueError) as e:
            raise FetchError(
                f"{public(url)}: connection lost after {total:,} bytes ({e or type(e).__name__})"
            ) from None
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise FetchError(f"{public(url)} sent more than the limit of {limit:,} bytes; not fetched")
        if out is not None:
            out.write(chunk)
        else:
            parts.append(chunk)
        if progress is not None:
            progress(total)
    if length is not None and total != length:
        raise FetchError(f"{public(url)}: connection lost after {total:,} of {length:,} bytes")
    return b"".join(parts)


class RemoteFile:
    """Random access to a file behind a URL: HTTP ranges where the server answers them,
    else (the first read finds out) the whole body once, bounded, into a temporary file
    beside the cache; `file:` URLs in place. Every read counts into `received`."""

    def __init__(self, client: Client, url: str, size: Optional[int], limit: int, spool_dir: str):
        self.client = client
        self.url = url
        self.limit = limit
        self._size = size
        self._spool_dir = spool_dir
        self._local: Optional[BinaryIO] = None
        self._spooled: Optional[str] = None
        self.ranged = True
        self.received = 0
        self.progress: Optional[Progress] = None
        if url.startswith("file:"):
            try:
                self._local = open(file_path(url), "rb")
            except OSError as e:
                raise FetchError(f"{url}: {e.strerror or e}") from None
            self._size = os.fstat(self._local.fileno()).st_size
            self.ranged = False

    @property
    def size(self) -> int:
        if self._size is None:
            self.read_tail(1)
        assert self._size is not None
        return self._size

    def read_tail(self, n: int) -> bytes:
        """The last `n` bytes (or all, when the file is shorter)."""
        if self._local is None and self._size is None:
            return self._ranged(f"bytes=-{n}", None, n)
        start = max(0, self.size - n)
        return self.read(start, self.size - start)

    def read(self, offset: int, n: int) -> bytes:
        if n <= 0:
            return b""
        if offset < 0 or (self._size is not None and offset + n > self._size):
            raise FetchError(f"{public(self.url)}: read past the end of the file (at {offset:,} +{n:,})")
        if self._local is not None:
            self._local.seek(offset)
            data = self._local.read(n)
            if len(data) != n:
                raise FetchError(f"{public(self.url)}: file ends before {offset + n:,}")
            return data
        return self._ranged(f"bytes={offset}-{offset + n - 1}", offset, n)

    def _ranged(self, spec: str, offset: Optional[int], n: int) -> bytes:
        if self.received + n > self.limit:
            raise FetchError(f"{public(self.url)}: reading it would pass the limit of {self.limit:,} bytes; stopped")
        with self.client.open(self.url, {"Range": spec, "Accept-Encoding": "identity"}) as resp:
            if resp.status != 206:
                # no ranges here: the whole body, once, then reads are local
                self.ranged = False
                self._spool(resp)
                return self.read_tail(n) if offset is None else self.read(offset, n)
            start, end, total = _content_range(resp.headers.get("Content-Range", ""), self.url)
            if offset is not None and start != offset:
                raise FetchError(f"{public(self.url)}: asked for bytes from {offset:,}, the server sent from {start:,}")
            if self._size is not None and total is not None and total != self._size:
                raise FetchError(f"{public(self.url)}: its size changed ({self._size:,} -> {total:,} bytes)")
            if total is not None:
                self._size = total
            data = _read_all(resp, self.url, end - start + 1)
            if len(data) != end - start + 1:
                raise FetchError(f"{public(self.url)}: range cut short ({len(data):,} of {end - start + 1:,} bytes)")
            self.received += len(data)
            return data

    def _spool(self, resp) -> None:
        import tempfile

        os.makedirs(self._spool_dir, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=".dumpkit-partial-", dir=self._spool_dir)
        self._spooled = path
        try:
            with os.fdopen(fd, "w+b") as out:
                _read_all(resp, self.url, self.limit - self.received, out, self.progress)
        except BaseException:
            self.close()  # a body refused leaves nothing behind
            raise
        self.received += os.path.getsize(path)
        self._local = open(path, "rb")
        self._size = os.fstat(self._local.fileno()).st_size

    def stream_to(self, offset: int, n: int, out: BinaryIO, progress: Optional[Progress] = None) -> None:
        """Bytes offset..offset+n written to `out` in chunks (one ranged request; a member
        of hundreds of MB is not held in memory)."""
        if self._local is not None:
            self._local.seek(offset)
            left = n
            while left > 0:  # bounded by n
                chunk = self._local.read(min(_CHUNK, left))
                if not chunk:
                    raise FetchError(f"{public(self.url)}: file ends before {offset + n:,}")
                out.write(chunk)
                left -= len(chunk)
            return
        if self.received + n > self.limit:
            raise FetchError(f"{public(self.url)}: reading it would pass the limit of {self.limit:,} bytes; stopped")
        with self.client.open(
            self.url, {"Range": f"bytes={offset}-{offset + n - 1}", "Accept-Encoding": "identity"}
        ) as resp:
            if resp.status != 206:
                self.ranged = False
                self._spool(resp)
                self.stream_to(offset, n, out, progress)
                return
            start, end, _ = _content_range(resp.headers.get("Content-Range", ""), self.url)
            if start != offset or end != offset + n - 1:
                raise FetchError(f"{public(self.url)}: asked for {offset:,}-{offset + n - 1:,}, got {start:,}-{end:,}")
            before = out.tell()
            _read_all(resp, self.url, n, out, progress)
            if out.tell() - before != n:
                raise FetchError(f"{public(self.url)}: range cut short")
            self.received += n

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
            self._local = None
        if self._spooled is not None:
            try:
                os.unlink(self._spooled)
            except OSError:
                pass
            self._spooled = None


def _content_range(header: str, url: str) -> Tuple[int, int, Optional[int]]:
    """(first, last, total) of a `bytes first-last/total` Content-Range."""
    unit, _, rest = header.strip().partition(" ")
    span, _, total = rest.partition("/")
    first, _, last = span.partition("-")
    if unit != "bytes" or not first.isdigit() or not last.isdigit() or int(last) < int(first):
        raise FetchError(f"{public(url)}: a range answer without a usable Content-Range ({header[:80]!r})")
    return int(first), int(last), int(total) if total.isdigit() else None
