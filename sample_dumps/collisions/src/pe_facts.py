"""PE facts that decide whether runtime DLLs collide, read with struct only (never dumpkit).

For each .dll/.pyd/.exe given (or each one inside a given folder or .whl): the linker version
of the optional header (MajorLinkerVersion.MinorLinkerVersion: 14.40+ = Visual Studio 2022
17.10 or newer), the COFF timestamp, the file version of VS_FIXEDFILEINFO, the DLLs it imports
(normal and delay-load), and the functions it imports from msvcp140.dll (names, or #ordinal).
`mutex_break` says whether the module has the shape of the VS 17.10 std::mutex break: linked
by 14.40+, imports `_Mtx_lock` but not `_Mtx_init_in_situ` (its std::mutex objects were built
by the constexpr constructor and never initialised by msvcp140.dll).

Usage: pe_facts.py [--json] [--all-imports] PATH...   (PATH: a PE file, a folder, a .whl)
"""

from __future__ import annotations

import json
import os
import struct
import sys
import zipfile
from typing import Any, Dict, Iterator, List, Optional, Tuple

PE_SUFFIXES = (".dll", ".pyd", ".exe")


class PE:
    def __init__(self, data: bytes) -> None:
        if data[:2] != b"MZ":
            raise ValueError("no MZ header")
        self.data = data
        pe = struct.unpack_from("<I", data, 0x3C)[0]
        if data[pe:pe + 4] != b"PE\0\0":
            raise ValueError("no PE signature")
        self.machine, nsec, self.timestamp = struct.unpack_from("<HHI", data, pe + 4)
        opt_size = struct.unpack_from("<H", data, pe + 20)[0]
        opt = pe + 24
        magic = struct.unpack_from("<H", data, opt)[0]
        self.pe32plus = magic == 0x20B
        self.linker = (data[opt + 2], data[opt + 3])
        dd = opt + (112 if self.pe32plus else 96)
        ndirs = struct.unpack_from("<I", data, dd - 4)[0]
        self.dirs = [struct.unpack_from("<II", data, dd + 8 * i) for i in range(min(ndirs, 16))]
        self.sections = []
        for i in range(nsec):
            o = opt + opt_size + 40 * i
            name = data[o:o + 8].rstrip(b"\0").decode("ascii", "replace")
            vsize, va, rsize, raw = struct.unpack_from("<IIII", data, o + 8)
            self.sections.append((name, va, max(vsize, rsize), raw, rsize))

    def off(self, rva: int) -> Optional[int]:
        for _, va, size, raw, rsize in self.sections:
            if va <= rva < va + size:
                if rva - va >= rsize:
                    return None
                return raw + rva - va
        return None

    def cstr(self, rva: int) -> str:
        o = self.off(rva)
        if o is None:
            return "?"
        end = self.data.index(b"\0", o)
        return self.data[o:end].decode("ascii", "replace")

    def _thunks(self, rva: int) -> Iterator[str]:
        width, fmt, flag = (8, "<Q", 1 << 63) if self.pe32plus else (4, "<I", 1 << 31)
        o = self.off(rva)
        while o is not None:
            v = struct.unpack_from(fmt, self.data, o)[0]
            if v == 0:
                return
            yield "#%d" % (v & 0xFFFF) if v & flag else self.cstr((v & 0x7FFFFFFF) + 2)
            o += width

    def imports(self) -> Dict[str, List[str]]:
        """{dll name as written: [function, ...]}; delay-load imports too (marked 'delay:')."""
        out: Dict[str, List[str]] = {}
        if len(self.dirs) > 1 and self.dirs[1][0]:
            o = self.off(self.dirs[1][0])
            while o is not None:
                ilt, _, _, name, iat = struct.unpack_from("<IIIII", self.data, o)
                if not name:
                    break
                out[self.cstr(name)] = list(self._thunks(ilt or iat))
                o += 20
        if len(self.dirs) > 13 and self.dirs[13][0]:
            o = self.off(self.dirs[13][0])
            while o is not None:
                attrs, name, _, _, int_rva = struct.unpack_from("<IIIII", self.data, o)
                if not name:
                    break
                out["delay:" + self.cstr(name)] = list(self._thunks(int_rva))
                o += 32
        return out

    def exports(self) -> Dict[str, int]:
        """{exported name: RVA} (forwarders included as their RVA)."""
        out: Dict[str, int] = {}
        if not self.dirs or not self.dirs[0][0]:
            return out
        o = self.off(self.dirs[0][0])
        if o is None:
            return out
        _, nnames, funcs, names, ordinals = struct.unpack_from("<IIIII", self.data, o + 20)
        fo, no, oo = self.off(funcs), self.off(names), self.off(ordinals)
        if fo is None or no is None or oo is None:
            return out
        for i in range(nnames):
            name = self.cstr(struct.unpack_from("<I", self.data, no + 4 * i)[0])
            idx = struct.unpack_from("<H", self.data, oo + 2 * i)[0]
            out[name] = struct.unpack_from("<I", self.data, fo + 4 * idx)[0]
        return out

    def tail_jump(self, rva: int) -> Optional[int]:
        """The target of a function that is only `[xor edx,edx;] jmp rel32` (an export that
        forwards to an internal function, as msvcp140's _Mtx_lock does), else None."""
        o = self.off(rva)
        if o is None:
            return None
        code = self.data[o:o + 7]
        skip = 2 if code[:2] == b"\x33\xd2" else 0
        if code[skip:skip + 1] != b"\xe9":
            return None
        rel = struct.unpack_from("<i", code, skip + 1)[0]
        return rva + skip + 5 + rel

    def file_version(self) -> Optional[str]:
        """VS_FIXEDFILEINFO's dwFileVersionMS/LS, found in the resource section."""
        if len(self.dirs) < 3 or not self.dirs[2][0]:
            return None
        o = self.off(self.dirs[2][0])
        if o is None:
            return None
        at = self.data.find(struct.pack("<I", 0xFEEF04BD), o, o + self.dirs[2][1])
        if at < 0:
            return None
        ms, ls = struct.unpack_from("<II", self.data, at + 8)
        return "%d.%d.%d.%d" % (ms >> 16, ms & 0xFFFF, ls >> 16, ls & 0xFFFF)


def facts(data: bytes, all_imports: bool = False) -> Dict[str, Any]:
    pe = PE(data)
    imports = pe.imports()
    msvcp: List[str] = []
    for dll, funcs in imports.items():
        if dll.split(":")[-1].lower() == "msvcp140.dll":
            msvcp += funcs
    linker = "%d.%d" % pe.linker
    out: Dict[str, Any] = {
        "machine": "0x%x" % pe.machine,
        "timestamp": pe.timestamp,
        "linker_version": linker,
        "file_version": pe.file_version(),
        "imported_dlls": sorted(imports),
        "msvcp140_imports": sorted(msvcp),
        "imports_Mtx_lock": "_Mtx_lock" in msvcp,
        "imports_Mtx_init_in_situ": "_Mtx_init_in_situ" in msvcp,
        "mutex_break": pe.linker >= (14, 40) and pe.linker[0] == 14
        and "_Mtx_lock" in msvcp and "_Mtx_init_in_situ" not in msvcp,
    }
    if all_imports:
        out["imports"] = imports
    return out


def walk(path: str) -> Iterator[Tuple[str, bytes]]:
    if path.endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if name.lower().endswith(PE_SUFFIXES):
                    yield "%s!%s" % (os.path.basename(path), name), z.read(name)
    elif os.path.isdir(path):
        for root, _, files in os.walk(path):
            for f in sorted(files):
                if f.lower().endswith(PE_SUFFIXES):
                    p = os.path.join(root, f)
                    with open(p, "rb") as fh:
                        yield p, fh.read()
    else:
        with open(path, "rb") as fh:
            yield path, fh.read()


def main(argv: List[str]) -> int:
    as_json = "--json" in argv
    all_imports = "--all-imports" in argv
    paths = [a for a in argv if not a.startswith("--")]
    if not paths:
        print(__doc__)
        return 2
    results = {}
    for p in paths:
        for name, data in walk(p):
            try:
                results[name] = facts(data, all_imports)
            except (ValueError, struct.error) as e:
                results[name] = {"error": str(e)}
    if as_json:
        print(json.dumps(results, indent=1))
        return 0
    for name, f in results.items():
        if "error" in f:
            print("%s: %s" % (name, f["error"]))
            continue
        mtx = [x for x in f["msvcp140_imports"] if x.startswith("_Mtx") or x.startswith("_Cnd")]
        print("%s: linker %s, file version %s, msvcp140 imports %d%s%s" % (
            name, f["linker_version"], f["file_version"], len(f["msvcp140_imports"]),
            (" " + ",".join(mtx)) if mtx else "",
            "  <- MUTEX BREAK SHAPE" if f["mutex_break"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
