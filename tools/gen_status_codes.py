#!/usr/bin/env python3
"""Generate dumpkit/analysis/codes/ntstatus.tsv: the names and values of Windows status
codes, of their EXCEPTION_* aliases and of the __fastfail subcodes, read from SDK headers
and from the `ntstatus` package on PyPI.

    apt-get install mingw-w64-x86-64-dev libwine-dev    # the headers read (Debian)
    pip install ntstatus                                # generation only: dumpkit reads the .tsv
    python tools/gen_status_codes.py                    # rewrite the data file
    python tools/gen_status_codes.py --check            # exit 1 if it would change

Sources, in order of precedence (a name keeps the value of the first source defining it;
a later header that disagrees is reported and recorded in the file's header):
  1. tools/status_codes_extra.h  hand declarations checked against the Windows SDK: fixes of
                                 packaged values, newer FAST_FAIL_*, runtime exception codes
  2. mingw-w64's ntstatus.h      every ((NTSTATUS)0x...) define
  3. Wine's ntstatus.h           the names mingw-w64 lacks (e.g. STATUS_FATAL_USER_CALLBACK_EXCEPTION)
  4. ntstatus (PyPI, MIT)        NtStatus: the names no header defines (newer SDKs' codes).
                                 Where it names what the headers name, the values must agree
                                 or generation stops: it checks the headers and they check it.
  5. mingw-w64's winnt.h         FAST_FAIL_* (0..9 and INVALID_FAST_FAIL_CODE)
  6. Wine's winnt.h              FAST_FAIL_* up to 70
  7. mingw-w64's minwinbase.h    EXCEPTION_* = STATUS_* aliases
The package name and version of each source is written into the file's header. Without
dpkg (headers copied from elsewhere) pass them with --mingw-package / --wine-package.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "dumpkit", "analysis", "codes", "ntstatus.tsv")
EXTRA = os.path.join(HERE, "status_codes_extra.h")
MINGW_DIR = "/usr/share/mingw-w64/include"
WINE_DIR = "/usr/include/wine/wine/windows"
MINGW_PACKAGE = "mingw-w64-x86-64-dev"
WINE_PACKAGE = "libwine-dev"

_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)\s+(.*?)\s*(?:/\*.*)?$")
_CAST = re.compile(r"^\(\(\s*(?:NTSTATUS|DWORD)\s*\)\s*(0[xX][0-9A-Fa-f]+|[0-9]+)[uUlL]*\s*\)$")
_NUMBER = re.compile(r"^(0[xX][0-9A-Fa-f]+|[0-9]+)[uUlL]*$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Row:
    kind: str  # "status" | "alias" | "fast_fail"
    name: str
    value: int
    source: str


def defines(path: str) -> Iterator[Tuple[str, str]]:
    """(name, value text) of each object-like #define, first definition of a name only."""
    seen = set()
    with open(path, encoding="latin-1") as f:
        for line in f:
            m = _DEFINE.match(line)
            if m and m.group(1) not in seen:
                seen.add(m.group(1))
                yield m.group(1), m.group(2)


def _number(text: str) -> Optional[int]:
    m = _CAST.match(text) or _NUMBER.match(text)
    return int(m.group(1), 0) if m else None


def read_status(path: str, label: str) -> List[Row]:
    rows = []
    for name, text in defines(path):
        m = _CAST.match(text)
        if m is None or name.startswith("STATUS_SEVERITY_"):  # Wine casts the severities too
            continue
        rows.append(Row("status", name, int(m.group(1), 0), label))
    return rows


def read_fast_fail(path: str, label: str) -> List[Row]:
    rows = []
    for name, text in defines(path):
        value = _number(text)
        if name.startswith("FAST_FAIL_") and value is not None:
            rows.append(Row("fast_fail", name, value, label))
    return rows


def read_aliases(path: str, label: str, status: Dict[str, int]) -> List[Row]:
    rows = []
    for name, text in defines(path):
        if name.startswith("EXCEPTION_") and _NAME.match(text) and text in status:
            rows.append(Row("alias", name, status[text], label))
    return rows


def read_extra(path: str, label: str) -> List[Row]:
    rows = []
    for name, text in defines(path):
        value = _number(text)
        if value is not None:
            rows.append(Row("fast_fail" if name.startswith("FAST_FAIL_") else "status", name, value, label))
    return rows


NTSTATUS_PACKAGE = "ntstatus"


def load_ntstatus() -> Tuple[Any, str]:
    """The ntstatus module and its 'ntstatus VERSION' label; a one-line exit without it."""
    try:
        module = importlib.import_module(NTSTATUS_PACKAGE)
        version = importlib.metadata.version(NTSTATUS_PACKAGE)
    except ImportError:
        raise SystemExit(
            f"the {NTSTATUS_PACKAGE} package is needed to generate the tables: pip install ntstatus"
        ) from None
    return module, f"{NTSTATUS_PACKAGE} {version}"


def package_names(cls: Any) -> Dict[str, int]:
    """Name -> unsigned value of the constants a class of the ntstatus package defines. An
    attribute counts when the constant it holds is named after it: HResult also holds
    HRESULT_FROM_WIN32(...) and HRESULT_FROM_NT(...) of every code (attributes WIN32__* and
    NTSTATUS__*), which are spellings dumpkit computes, not names."""
    names = {}
    for attr, const in vars(cls).items():
        if getattr(const, "name", None) == attr and _NAME.match(attr):
            names[attr] = int(const.unsigned_value) & 0xFFFFFFFF
    return names


NTSTATUS_SOURCE = "ntstatus (PyPI)"  # the rows' source column; the version is in the file's header


def package_rows(names: Dict[str, int], kind: str, label: str, known: Dict[str, Tuple[str, int]]) -> List[Row]:
    """The rows of the package names the headers lack. `known` holds every name the headers
    define, with its kind and value: where the package (`label`, its name and version) names
    one of them too, kind and value must be the same, else generation stops (SystemExit
    listing every disagreement)."""
    wrong = [
        f"{name}: {label} says {kind} 0x{value:08X}, the headers say {known[name][0]} 0x{known[name][1]:08X}"
        for name, value in sorted(names.items())
        if name in known and known[name] != (kind, value)
    ]
    if wrong:
        raise SystemExit(f"{len(wrong)} names disagree between {label} and the headers:\n  " + "\n  ".join(wrong))
    return [Row(kind, name, value, NTSTATUS_SOURCE) for name, value in names.items() if name not in known]


def package_version(package: str) -> str:
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{package} {out.stdout.strip()}" if out.returncode == 0 and out.stdout.strip() else ""


def merge(sources: List[List[Row]]) -> Tuple[List[Row], List[str]]:
    """Rows in precedence order with later duplicates dropped; clashes as text."""
    kept: Dict[Tuple[str, str], Row] = {}
    clashes = []
    for rows in sources:
        for r in rows:
            key = ("fast_fail" if r.kind == "fast_fail" else "status", r.name)
            first = kept.get(key)
            if first is None:
                kept[key] = r
            elif first.value != r.value:
                clashes.append(f"{r.name}: {first.value:#010x} ({first.source}) kept; {r.value:#010x} in {r.source}")
    return list(kept.values()), clashes


def render(rows: List[Row], clashes: List[str], packages: List[str]) -> str:
    order = {"status": 0, "alias": 1, "fast_fail": 2}
    # stable: among rows with one value, the first source's name stays first (the name
    # dumpkit shows for that value)
    rows = sorted(rows, key=lambda r: (order[r.kind], r.value))
    lines = [
        "# Windows status codes, EXCEPTION_* aliases and __fastfail subcodes.",
        "# GENERATED by tools/gen_status_codes.py: do not edit, regenerate.",
        "# Read from (in order of precedence):",
        "#   tools/status_codes_extra.h",
    ]
    lines += [f"#   {p}" for p in packages]
    for c in clashes:
        lines.append(f"# clash: {c}")
    lines.append("# kind\tname\tvalue\tsource")
    for r in rows:
        value = f"0x{r.value:08X}" if r.kind != "fast_fail" or r.value > 0xFFFF else str(r.value)
        lines.append(f"{r.kind}\t{r.name}\t{value}\t{r.source}")
    return "\n".join(lines) + "\n"


def generate(args: argparse.Namespace) -> Tuple[str, List[str]]:
    mingw_pkg = args.mingw_package or package_version(MINGW_PACKAGE)
    wine_pkg = args.wine_package or package_version(WINE_PACKAGE)
    if not mingw_pkg or not wine_pkg:
        raise SystemExit(
            f"cannot tell the versions of {MINGW_PACKAGE} / {WINE_PACKAGE}: install them with apt-get, "
            "or pass --mingw-package 'NAME VERSION' and --wine-package 'NAME VERSION'"
        )
    paths = {
        "mingw": {h: os.path.join(args.mingw, h) for h in ("ntstatus.h", "winnt.h", "minwinbase.h")},
        "wine": {h: os.path.join(args.wine, h) for h in ("ntstatus.h", "winnt.h")},
    }
    for group in paths.values():
        for path in group.values():
            if not os.path.isfile(path):
                raise SystemExit(f"{path}: not found (apt-get install {MINGW_PACKAGE} {WINE_PACKAGE})")
    mingw, wine = paths["mingw"], paths["wine"]
    module, ntstatus_pkg = load_ntstatus()
    extra = read_extra(args.extra, "status_codes_extra.h")
    status, clashes = merge(
        [
            [r for r in extra if r.kind == "status"],
            read_status(mingw["ntstatus.h"], "mingw-w64 ntstatus.h"),
            read_status(wine["ntstatus.h"], "wine ntstatus.h"),
        ]
    )
    known = {r.name: ("status", r.value) for r in status}
    status += package_rows(package_names(module.NtStatus), "status", ntstatus_pkg, known)
    names = {r.name: r.value for r in status}
    rows, more = merge(
        [
            status,
            [r for r in extra if r.kind == "fast_fail"],
            read_fast_fail(mingw["winnt.h"], "mingw-w64 winnt.h"),
            read_fast_fail(wine["winnt.h"], "wine winnt.h"),
            read_aliases(mingw["minwinbase.h"], "mingw-w64 minwinbase.h", names),
        ]
    )
    packages = [
        f"{mingw_pkg}: {', '.join(mingw)}",
        f"{wine_pkg}: {', '.join(wine)}",
        f"{ntstatus_pkg} (PyPI): NtStatus, for the names the headers lack; where both name a code they agree",
    ]
    return render(rows, clashes + more, packages), clashes + more


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mingw", default=MINGW_DIR, help="mingw-w64 include directory")
    ap.add_argument("--wine", default=WINE_DIR, help="Wine's include/windows directory")
    ap.add_argument("--extra", default=EXTRA)
    ap.add_argument("--mingw-package", default="", help="'NAME VERSION' of the mingw-w64 headers")
    ap.add_argument("--wine-package", default="", help="'NAME VERSION' of the Wine headers")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = ap.parse_args(argv)
    text, clashes = generate(args)
    for c in clashes:
        print(f"clash: {c}", file=sys.stderr)
    return write_or_check(text, args.out, args.check)


def write_or_check(text: str, out: str, check: bool) -> int:
    """Write the data file (atomically), or with `check` only say whether it is up to
    date (exit status 1 when not). Shared with tools/gen_win32_errors.py."""
    if check:
        try:
            with open(out, encoding="utf-8") as f:
                same = f.read() == text
        except OSError:
            same = False
        print(f"{out}: {'up to date' if same else 'differs from what the headers give'}")
        return 0 if same else 1
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.replace(tmp, out)
    rows = sum(1 for line in text.splitlines() if not line.startswith("#"))
    print(f"wrote {out}: {rows} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
