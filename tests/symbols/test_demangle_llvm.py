"""The MSVC demangler against LLVM's (pycxxfilt: LLVM's demanglers as a Python module) on
every decorated name in the real binaries the repository holds: the exports of every DLL,
PYD and EXE, and the public symbols, procedures and labels of every PDB, under tests/,
sample_dumps/ and ../shared/. pycxxfilt ships wheels for CPython 3.11+ only; elsewhere
these tests skip.

One deliberate difference, as dumpkit.symbols.msvc documents: a back-reference to an
anonymous namespace is written `anonymous namespace' each time, as Microsoft's undname
and WinDbg write it, where LLVM writes the namespace's raw key (0xaa65ea30)."""

from __future__ import annotations

import lzma
import os
import re
import struct
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from dumpkit.pe import PEImage
from dumpkit.symbols import demangle
from dumpkit.symbols.pdb.msf import MsfFile, PdbFile
from dumpkit.symbols.pdb.records import PROC_KINDS, S_PUB32
from dumpkit.symbols.pdb.streams import read_dbi

from tests.support.samples import REAL_DUMPS, ROOT, SAMPLES

pycxxfilt = pytest.importorskip("pycxxfilt", reason="pycxxfilt (LLVM's demanglers) needs CPython 3.11+")

SEARCHED = (ROOT / "tests", SAMPLES, ROOT / "windbg_scripts", REAL_DUMPS.parent)
MSVC_PDB = ROOT / "tests" / "symbols" / "msvc" / "attach_amd64.pdb"

S_LABEL32 = 0x1105
# CodeView records that carry a name, and where it starts after the record's length and
# kind: S_LABEL32 (offset, segment, flags), S_PUB32 (flags, offset, segment), and the
# procedures (parent, end, next, length, debug start/end, type, offset, segment, flags).
_NAME_AT = {S_LABEL32: 7, S_PUB32: 10, **dict.fromkeys(PROC_KINDS, 35)}
# Linker- and compiler-made names that carry a decorated name after a prefix: an import
# thunk (__imp_?f@@YAXXZ) and a catch funclet's label (__catch$?f@@YAXXZ$0).
_CARRIERS = ("__imp_", "__catch$")


def _files(*suffixes: str) -> List[Path]:
    found = set()
    for top in SEARCHED:
        if top.is_dir():
            found.update(p for p in top.rglob("*") if p.is_file() and p.name.lower().endswith(suffixes))
    return sorted(found)


def _decorated(name: str) -> Optional[str]:
    for prefix in ("",) + _CARRIERS:
        if name.startswith(prefix + "?"):
            return name[len(prefix) :]
    return None


def _record_names(raw: bytes, start: int) -> Iterator[str]:
    pos = start
    while pos + 4 <= len(raw):
        length, kind = struct.unpack_from("<HH", raw, pos)
        if length < 2:
            break
        at = _NAME_AT.get(kind)
        if at is not None:
            body = raw[pos + 4 : pos + 2 + length]
            yield body[at:].split(b"\0", 1)[0].decode("utf-8", "replace")
        pos += 2 + length


def _pdb_names(path: Path) -> Iterator[str]:
    msf = MsfFile(PdbFile(str(path)), str(path))
    try:
        dbi = read_dbi(msf)
        if dbi.records_stream is not None:
            stream = msf.stream(dbi.records_stream)
            yield from _record_names(stream.read(0, stream.size), 0)
        for module in dbi.modules:
            if module.stream is not None and module.symbols_size > 4:
                stream = msf.stream(module.stream)
                yield from _record_names(stream.read(0, min(module.symbols_size, stream.size)), 4)
    finally:
        msf.close()


def _export_names(path: Path) -> List[str]:
    if path.name.endswith(".xz"):
        image = PEImage.from_bytes(lzma.decompress(path.read_bytes()), path.name)
    else:
        image = PEImage.from_file(str(path))
    try:
        return [name for _, name in image.exports()]
    finally:
        image.close()


@lru_cache(maxsize=1)
def corpus() -> Dict[str, str]:
    """Every decorated name found -> the first file it was found in."""
    names: Dict[str, str] = {}
    sources: List[Tuple[Path, List[str]]] = [(p, list(_pdb_names(p))) for p in _files(".pdb")]
    sources += [(p, _export_names(p)) for p in _files(".dll", ".pyd", ".exe", ".dll.xz")]
    for path, found in sources:
        for name in found:
            decorated = _decorated(name)
            if decorated is not None:
                names.setdefault(decorated, os.path.relpath(path, ROOT))
    return names


def llvm(name: str) -> Optional[str]:
    """pycxxfilt's reading, with the anonymous-namespace difference the module docstring names
    written dumpkit's way."""
    try:
        text = pycxxfilt.msvc_demangle(name)
    except ValueError:
        return None
    if text is None:
        return None
    for key in set(re.findall(r"\?A(0x[0-9a-f]+)@", name)):
        text = re.sub(r"(?<![\w`])" + key + r"(?=::)", "`anonymous namespace'", text)
    return text


def test_the_corpus_holds_the_real_msvc_pdbs_names():
    if not MSVC_PDB.exists():
        pytest.skip("tests/symbols/msvc/attach_amd64.pdb not present")
    names = corpus()
    # 172 publics, 17 import thunks and 2 catch-funclet labels, 189 different names
    from_msvc = [n for n, where in names.items() if where.endswith("attach_amd64.pdb")]
    assert len(from_msvc) >= 189
    assert "?_OptionsStorage@?1??__local_stdio_printf_options@@9@4_KA" in names


def test_every_decorated_name_reads_as_llvm_reads_it():
    wrong = []
    names = corpus()
    for name, where in sorted(names.items()):
        ours = demangle(name)
        theirs = llvm(name)
        if (ours.full if ours else None) != theirs:
            wrong.append(f"{name} ({where})\n  llvm:    {theirs}\n  dumpkit: {ours.full if ours else None}")
        elif ours is not None:
            assert ours.qualified in ours.full, name
    assert not wrong, f"{len(wrong)} of {len(names)} differ:\n" + "\n".join(wrong[:10])
