"""The package index pip is configured for, read from pip's own configuration at run time.

dumpkit names no index of its own: the index URLs, proxy, certificates, trusted hosts and
timeout are what `pip config list` and `PIP_*` variables say, read through pip's own
Configuration class (its files, in its order, and its environment variables), and pip's
own default index when none is set. Without pip importable, only the `PIP_*` variables
are read, and a missing index-url is said, not guessed.

Credentials in an index URL (`https://user:token@host/simple`) are split off here: they
travel only in an Authorization header to that host, and `public()` is what every line of
output shows."""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import field
from typing import Callable, List, Optional, Tuple

from dumpkit.records import record

# pip's precedence: its environment variables, then a command's section, then [global].
_SECTIONS = (":env:", "install", "download", "global")
DEFAULT_TIMEOUT = 15.0  # seconds; pip's own default


@record
class Index:
    """One index: its URL without credentials, and the credentials it carried."""

    url: str  # the simple API's base, no userinfo, ends without '/'
    username: Optional[str] = None
    password: Optional[str] = field(default=None, repr=False)  # never shown

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.url).netloc.lower()


@record
class IndexConfig:
    """What pip would use to reach its indexes."""

    indexes: Tuple[Index, ...]  # index-url first, then each extra-index-url
    proxy: Optional[str] = None
    cert: Optional[str] = None  # a CA bundle (pip's --cert); None: the system's store
    client_cert: Optional[str] = None
    trusted_hosts: Tuple[str, ...] = ()  # pip skips TLS checks (and allows http) for these
    timeout: float = DEFAULT_TIMEOUT
    problem: Optional[str] = None  # why there is no index (no pip, no-index), else None


def public(url: str) -> str:
    """`url` without userinfo, query or fragment (a mirror may sign its file URLs with a
    token in the query): what output may show of an index or file URL."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query="", fragment=""))


def split_credentials(url: str) -> Index:
    parts = urllib.parse.urlsplit(url.strip())
    user = password = None
    netloc = parts.netloc
    if "@" in netloc:
        info, netloc = netloc.rsplit("@", 1)
        user, _, pw = info.partition(":")
        user, password = urllib.parse.unquote(user), urllib.parse.unquote(pw) if pw else None
    clean = urllib.parse.urlunsplit(parts._replace(netloc=netloc)).rstrip("/")
    return Index(clean, user or None, password)


def _pip_lookup() -> Tuple[Optional[Callable[[str], Optional[str]]], Optional[str]]:
    """A function giving pip's value for an option (None when unset), and pip's default
    index; (None, None) without pip."""
    try:
        from pip._internal.configuration import Configuration, ConfigurationError
        from pip._internal.models.index import PyPI
    except Exception:  # pip absent or its internals moved: say so rather than guess
        return None, None
    config = Configuration(isolated=False)
    try:
        config.load()
    except ConfigurationError:
        return None, PyPI.simple_url

    def value(option: str) -> Optional[str]:
        for section in _SECTIONS:
            try:
                got = config.get_value(f"{section}.{option}")
            except ConfigurationError:
                continue
            if got is not None:
                return str(got)
        return None

    return value, PyPI.simple_url


def _env_lookup(option: str) -> Optional[str]:
    return os.environ.get("PIP_" + option.upper().replace("-", "_")) or None


def _truthy(text: Optional[str]) -> bool:
    return (text or "").strip().lower() in ("1", "yes", "true", "on")


def read_pip_config(
    lookup: Optional[Callable[[str], Optional[str]]] = None, default: Optional[str] = None
) -> IndexConfig:
    """pip's index settings; `lookup`/`default` stand in for pip's in tests."""
    if lookup is None:
        lookup, default = _pip_lookup()
    missing_pip = lookup is None
    get = lookup or _env_lookup
    if _truthy(get("no-index")):
        return IndexConfig((), problem="pip is configured with no-index")
    urls: List[str] = []
    main = get("index-url") or default
    if main:
        urls.append(main)
    urls += (get("extra-index-url") or "").split()
    try:
        timeout = float(get("timeout") or get("default-timeout") or DEFAULT_TIMEOUT)
    except ValueError:
        timeout = DEFAULT_TIMEOUT
    problem = None
    if not urls:
        problem = "pip is not importable here and PIP_INDEX_URL is not set: no package index to ask"
    elif missing_pip and not get("index-url"):
        problem = "pip is not importable here: only the PIP_EXTRA_INDEX_URL indexes are asked"
    seen: List[str] = []
    indexes: List[Index] = []
    for u in urls:
        idx = split_credentials(u)
        if idx.url not in seen:
            seen.append(idx.url)
            indexes.append(idx)
    return IndexConfig(
        indexes=tuple(indexes),
        proxy=get("proxy"),
        cert=get("cert"),
        client_cert=get("client-cert"),
        trusted_hosts=tuple(h.lower() for h in (get("trusted-host") or "").split()),
        timeout=max(1.0, timeout),
        problem=problem,
    )
