"""The operating system: the Windows release a version number means, the build string,
and what Wine says of itself."""

from __future__ import annotations

from typing import Optional

from dumpkit.target import SystemInfo


_SERVER_BY_BUILD = (
    (26100, "Windows Server 2025"),
    (20348, "Windows Server 2022"),
    (17763, "Windows Server 2019"),
    (14393, "Windows Server 2016"),
)


def os_name(major: int, minor: int, build: int, product_type: int = 1) -> str:
    """Marketing name from the version numbers. product_type 1 = workstation, 2 = domain
    controller, 3 = server. Windows 11 reports 10.0 like Windows 10; build 22000 is its
    first release."""
    server = product_type not in (0, 1)
    if (major, minor) == (10, 0):
        if server:
            for first, name in _SERVER_BY_BUILD:
                if build == first:
                    return name
            return f"Windows Server (build {build})"
        return "Windows 11" if build >= 22000 else "Windows 10"
    names = {
        (6, 3): ("Windows 8.1", "Windows Server 2012 R2"),
        (6, 2): ("Windows 8", "Windows Server 2012"),
        (6, 1): ("Windows 7", "Windows Server 2008 R2"),
        (6, 0): ("Windows Vista", "Windows Server 2008"),
        (5, 2): ("Windows XP x64 / Server 2003", "Windows Server 2003"),
        (5, 1): ("Windows XP", "Windows XP"),
        (5, 0): ("Windows 2000", "Windows 2000 Server"),
    }
    pair = names.get((major, minor))
    if pair:
        return pair[1] if server else pair[0]
    return f"Windows NT {major}.{minor}"


def os_build(system: SystemInfo, build_string: Optional[str]) -> str:
    text = f"{system.os_major}.{system.os_minor}.{system.os_build}"
    csd = (system.csd_version or "").strip()
    if csd.isdigit():
        text += f".{csd}"  # newer writers put the update build revision (UBR) here
    elif csd:
        text += f" {csd}"
    if build_string and not build_string.rstrip().endswith(text):
        text += f" ({build_string})"
    return text


def wine_description(wine: str, system: SystemInfo) -> str:
    parts = [p.strip() for p in wine.split(" / ")]
    version = parts[0]
    if version.lower().startswith("wine-"):
        version = version[5:]
    host = " ".join(parts[1:3]).strip()
    claimed = os_name(system.os_major, system.os_minor, system.os_build, system.product_type)
    return (
        f"Wine {version}"
        + (f" on {host}" if host else "")
        + f": the program ran under Wine, not Windows (the Wine prefix reports {claimed}, "
        f"{system.os_major}.{system.os_minor}.{system.os_build})"
    )
