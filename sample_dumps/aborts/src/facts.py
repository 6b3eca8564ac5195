"""Derive manifest.json for the abort dumps from the logs, the programs, shardlib.dll and the dumps.

Its own minimal `struct` readers (never dumpkit): the minidump (stream directory, exception
with its context, threads, modules, MemoryList / Memory64List) and the PE file of shardlib.dll
(sections, exports, imports, .pdata/.xdata, the C++ ThrowInfo chain). The program's own
`MARKER {json}` line is the ground truth of the Python side; the `# stack` lines of the
program are listed next to it. What the dumps are checked for:

- every dump: written at the process's own exit (0x80000003 at ntdll!RtlExitUserProcess), the
  exit code (RCX in the exception context), the exiting thread = the MARKER's thread;
- tf_check_failed: where the "Check failed: ..." text TensorFlow built is in the dump's memory
  (heap / stack / image), which words of the dying thread's stack hold its address, and which
  heap objects (a std::string) and stack objects (the LogMessage's stringbuf) hold it;
- cxx_terminate: the EXCEPTION_RECORD of the C++ exception (0xE06D7363) still on the dying
  thread's stack, its ThrowInfo followed through shardlib.dll to the TypeDescriptor's
  decorated name, and the thrown object read from the dump;
- assert_ucrt: the "Assertion failed" line and the wide strings _wassert was given.

Usage: facts.py --logs logs --dumps CACHE/dumps --dll bin/shardlib.dll [--images CACHE/images]
                --requirements requirements-tf.txt --manifest manifest.json FOLDER
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import mmap
import os
import re
import struct
import sys
from typing import Any, Dict, List, Optional, Tuple

STREAM_NAMES = {
    3: "ThreadList", 4: "ModuleList", 5: "MemoryList", 6: "Exception", 7: "SystemInfo",
    9: "Memory64List", 15: "MiscInfo", 16: "MemoryInfoList", 0xFFF0: "Wine(0xfff0)",
}
CXX_EXCEPTION = 0xE06D7363
CXX_MAGIC = 0x19930520
BREAKPOINT = 0x80000003


def u16(b: Any, o: int) -> int:
    return int(struct.unpack_from("<H", b, o)[0])


def u32(b: Any, o: int) -> int:
    return int(struct.unpack_from("<I", b, o)[0])


def u64(b: Any, o: int) -> int:
    return int(struct.unpack_from("<Q", b, o)[0])


class Minidump:
    """Just enough of the minidump format for the facts below."""

    def __init__(self, data: Any) -> None:
        if data[:4] != b"MDMP":
            raise ValueError("not a minidump")
        self.data = data
        count, dir_rva = u32(data, 8), u32(data, 12)
        self.timestamp = u32(data, 20)
        self.flags = u64(data, 24)
        self.streams = [struct.unpack_from("<III", data, dir_rva + 12 * i) for i in range(count)]
        self.ranges: List[Tuple[int, int, int]] = []  # (address, size, file offset)
        self.full = False
        self.modules: List[Dict[str, Any]] = []
        self.threads: Dict[int, Dict[str, int]] = {}
        self.exception: Dict[str, Any] = {}
        for kind, size, rva in self.streams:
            if kind == 5:
                for i in range(u32(data, rva)):
                    start, dsize, drva = struct.unpack_from("<QII", data, rva + 4 + 16 * i)
                    self.ranges.append((start, dsize, drva))
            elif kind == 9:
                self.full = True
                n, offset = u64(data, rva), u64(data, rva + 8)
                for i in range(n):
                    start, dsize = struct.unpack_from("<QQ", data, rva + 16 + 16 * i)
                    self.ranges.append((start, dsize, offset))
                    offset += dsize
            elif kind == 4:
                for i in range(u32(data, rva)):
                    o = rva + 4 + 108 * i
                    name_rva = u32(data, o + 20)
                    name = bytes(data[name_rva + 4:name_rva + 4 + u32(data, name_rva)]).decode("utf-16-le")
                    self.modules.append({"path": name, "base": u64(data, o), "size": u32(data, o + 8),
                                         "timestamp": u32(data, o + 16)})
            elif kind == 3:
                for i in range(u32(data, rva)):
                    o = rva + 4 + 48 * i
                    tid = u32(data, o)
                    self.threads[tid] = {"tid": tid, "teb": u64(data, o + 16),
                                         "stack_start": u64(data, o + 24),
                                         "stack_size": u32(data, o + 32),
                                         "context_rva": u32(data, o + 44)}
            elif kind == 6:
                tid = u32(data, rva)
                r = rva + 8
                nparams = u32(data, r + 24)
                self.exception = {
                    "tid": tid, "code": u32(data, r), "flags": u32(data, r + 4),
                    "address": u64(data, r + 16),
                    "parameters": [u64(data, r + 32 + 8 * i) for i in range(nparams)],
                    "context_rva": u32(data, rva + 8 + 152 + 4),
                }
        self.ranges.sort()

    def stream_names(self) -> List[str]:
        return [STREAM_NAMES.get(k, hex(k)) for k, _, _ in self.streams]

    def context(self, rva: int) -> Dict[str, int]:
        names = ["rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
                 "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"]
        regs = {n: u64(self.data, rva + 0x78 + 8 * i) for i, n in enumerate(names)}
        regs["rip"] = u64(self.data, rva + 0xF8)
        return regs

    def read(self, address: int, size: int) -> Optional[bytes]:
        for start, rsize, offset in self.ranges:
            if start <= address and address + size <= start + rsize:
                return bytes(self.data[offset + address - start:offset + address - start + size])
        return None

    def module_at(self, address: int) -> Optional[Dict[str, Any]]:
        for m in self.modules:
            if m["base"] <= address < m["base"] + m["size"]:
                return m
        return None

    def where(self, address: int) -> str:
        m = self.module_at(address)
        if m:
            return "%s+0x%x" % (m["path"].split("\\")[-1], address - m["base"])
        for t in self.threads.values():
            if t["stack_start"] <= address < t["stack_start"] + t["stack_size"]:
                return "stack of thread %d" % t["tid"]
        return "heap or other non-image memory"

    def find(self, needle: bytes, images: bool = False) -> List[int]:
        """Addresses of `needle` in the dump's memory (outside module images unless asked)."""
        hits = []
        for start, size, offset in self.ranges:
            if not images and self.module_at(start):
                continue
            chunk = self.data[offset:offset + size]
            pos = chunk.find(needle)
            while pos >= 0:
                hits.append(start + pos)
                pos = chunk.find(needle, pos + 1)
        return hits

    def words_equal(self, values: List[int], lo: int, hi: int) -> List[Tuple[int, int]]:
        """(address, value) of every aligned qword in [lo, hi) equal to one of `values`."""
        found = []
        for start, size, offset in self.ranges:
            a, b = max(start, lo), min(start + size, hi)
            if a >= b:
                continue
            a += (-a) % 8
            for v in values:
                pat = struct.pack("<Q", v)
                chunk = self.data[offset + a - start:offset + b - start]
                pos = chunk.find(pat)
                while pos >= 0:
                    if pos % 8 == 0:
                        found.append((a + pos, v))
                    pos = chunk.find(pat, pos + 1)
        return sorted(found)


class PE:
    """The PE file of shardlib.dll: sections, exports, imports, unwind data."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        pe = u32(data, 0x3C)
        nsec, opt_size = u16(data, pe + 6), u16(data, pe + 20)
        self.timestamp = u32(data, pe + 8)
        opt = pe + 24
        self.image_base = u64(data, opt + 24)
        self.size_of_image = u32(data, opt + 56)
        self.dirs = [struct.unpack_from("<II", data, opt + 112 + 8 * i) for i in range(16)]
        self.sections = []
        for i in range(nsec):
            o = opt + opt_size + 40 * i
            name = data[o:o + 8].rstrip(b"\0").decode()
            vsize, va, rawsize, rawptr = struct.unpack_from("<IIII", data, o + 8)
            self.sections.append((name, va, max(vsize, rawsize), rawptr))

    def off(self, rva: int) -> int:
        for _, va, size, raw in self.sections:
            if va <= rva < va + size:
                return raw + rva - va
        raise ValueError("rva 0x%x in no section" % rva)

    def section_of(self, rva: int) -> Optional[str]:
        return next((n for n, va, size, _ in self.sections if va <= rva < va + size), None)

    def cstr(self, rva: int) -> str:
        o = self.off(rva)
        return bytes(self.data[o:self.data.find(b"\0", o)]).decode("latin-1")

    def wstr(self, rva: int) -> str:
        o = self.off(rva)
        end = o
        while self.data[end:end + 2] != b"\0\0":
            end += 2
        return self.data[o:end].decode("utf-16-le")

    def exports(self) -> Dict[str, int]:
        rva, _ = self.dirs[0]
        o = self.off(rva)
        n_names, funcs, names, ords = u32(self.data, o + 24), u32(self.data, o + 28), u32(self.data, o + 32), u32(self.data, o + 36)
        out = {}
        for i in range(n_names):
            name = self.cstr(u32(self.data, self.off(names) + 4 * i))
            ordinal = u16(self.data, self.off(ords) + 2 * i)
            out[name] = u32(self.data, self.off(funcs) + 4 * ordinal)
        return out

    def imports(self) -> Dict[str, List[str]]:
        rva, _ = self.dirs[1]
        out: Dict[str, List[str]] = {}
        o = self.off(rva)
        while u32(self.data, o + 12):
            dll = self.cstr(u32(self.data, o + 12))
            thunk = self.off(u32(self.data, o) or u32(self.data, o + 16))
            names = []
            while u64(self.data, thunk):
                names.append(self.cstr((u64(self.data, thunk) & 0x7FFFFFFF) + 2))
                thunk += 8
            out[dll] = names
            o += 20
        return out

    def func_info(self, func_rva: int) -> Dict[str, Any]:
        """The FuncInfo (C++ EH data, __CxxFrameHandler3) of the function at `func_rva`."""
        rva, size = self.dirs[3]
        o = self.off(rva)
        for i in range(size // 12):
            begin, end, unwind = struct.unpack_from("<III", self.data, o + 12 * i)
            if begin == func_rva:
                break
        else:
            raise ValueError("no .pdata entry for 0x%x" % func_rva)
        u = self.off(unwind)
        flags, ncodes = self.data[u] >> 3, self.data[u + 2]
        h = u + 4 + 2 * (ncodes + (ncodes & 1))
        handler_rva, fi_rva = u32(self.data, h), u32(self.data, h + 4)
        fi = self.off(fi_rva)
        return {"function_rva": func_rva, "unwind_flags": flags, "handler_rva": handler_rva,
                "func_info_rva": fi_rva, "magic": hex(u32(self.data, fi)),
                "max_state": u32(self.data, fi + 4), "eh_flags": u32(self.data, fi + 36),
                "eh_flags_noexcept_bit": bool(u32(self.data, fi + 36) & 4)}

    def throw_info(self, rva: int) -> Dict[str, Any]:
        """ThrowInfo -> CatchableTypeArray -> CatchableType -> TypeDescriptor (x64: RVAs)."""
        o = self.off(rva)
        attrs, unwind, fwd, cta = struct.unpack_from("<IiiI", self.data, o)
        n = u32(self.data, self.off(cta))
        types = []
        for i in range(n):
            ct = u32(self.data, self.off(cta) + 4 + 4 * i)
            c = self.off(ct)
            props, td, mdisp, pdisp, vdisp, size, copy = struct.unpack_from("<IIiiiII", self.data, c)
            types.append({"catchable_type_rva": ct, "properties": props, "type_descriptor_rva": td,
                          "size_or_offset": size,
                          "decorated_name": self.cstr(td + 16),
                          "type_descriptor_section": self.section_of(td)})
        return {"throw_info_rva": rva, "throw_info_section": self.section_of(rva),
                "attributes": attrs, "catchable_type_array_rva": cta, "catchable_types": types}


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def open_dump(path: str) -> Tuple[Any, Any]:
    if path.endswith(".xz"):
        data = lzma.decompress(open(path, "rb").read())
        return data, None
    f = open(path, "rb")
    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), f


def parse_log(path: str) -> Dict[str, Any]:
    lines = open(path, "rb").read().decode("utf-8", "replace").replace("\r", "").split("\n")
    out: Dict[str, Any] = {"program_output": [], "marker": None}
    keys = ("elapsed_seconds", "raw_bytes", "raw_sha256", "xz_seconds", "trimmed_bytes", "exit_code")
    for line in lines:
        if line.startswith("MARKER "):
            out["marker"] = json.loads(line[len("MARKER "):])
        elif line.startswith("trim_full TRIM "):
            out["trimmed"] = json.loads(line[len("trim_full TRIM "):])
        elif line.split(" ")[0] in keys:
            words = line.split()
            for k, v in zip(words[0::2], words[1::2]):
                out[k] = float(v) if "." in v else (v if k.endswith("sha256") else int(v))
        elif line.startswith("dumper: "):
            out["dumper_line"] = line
        elif line.strip():
            out["program_output"].append(line)
    out["assertion_lines"] = [l for l in out["program_output"] if "Assertion failed" in l]
    return out


def stack_marks(program: str) -> List[Dict[str, Any]]:
    marks = []
    for i, line in enumerate(open(program, encoding="utf-8").read().split("\n"), 1):
        if line.rstrip().endswith("# stack"):
            marks.append({"line": i, "text": line.strip()})
    return marks


def image_cstr(mod: Dict[str, Any], address: int, images: Optional[str]) -> Optional[str]:
    """The C string at `address` in a module's image file, found under --images."""
    if not images:
        return None
    path = mod["path"]
    for marker, folder in (("\\Python311\\", "Python311-tf"), ("\\Python312\\", "Python312"),
                           ("\\Python313\\", "Python313"), ("C:\\scripts\\", "scripts")):
        if marker.lower() in path.lower():
            rest = path[path.lower().index(marker.lower()) + len(marker):]
            candidate = os.path.join(images, folder, *rest.split("\\"))
            if os.path.exists(candidate):
                with open(candidate, "rb") as f:
                    view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                    try:
                        return PE(view).cstr(address - mod["base"])  # type: ignore[arg-type]
                    finally:
                        view.close()
    return None


def tf_text_facts(md: Minidump, tid: int, rsp: int, stack_end: int, text: bytes,
                  images: Optional[str]) -> Dict[str, Any]:
    """Where `text` is, and what on the dying thread's stack leads to it."""
    copies = []
    for a in md.find(text):
        where = md.where(a)
        before = md.read(a - 16, 16)
        copies.append({"address": a, "where": where,
                       "nul_terminated": md.read(a + len(text), 1) == b"\0",
                       "bytes_before": before.hex() if before else None})
    holders = []  # non-image words holding a copy's address (std::string objects, stringbufs)
    addresses = [c["address"] for c in copies]
    for a, v in md.words_equal(addresses, 0, 1 << 64):
        if md.module_at(a):
            continue
        obj = md.read(a, 32)
        h: Dict[str, Any] = {"address": a, "holds": v, "where": md.where(a)}
        if obj:
            # an MSVC std::string {char *ptr (in a 16-byte union); size_t size, capacity}
            size_, cap = u64(obj, 16), u64(obj, 24)
            if size_ == len(text) and cap >= size_:
                h["msvc_std_string"] = {"size": size_, "capacity": cap}
        holders.append(h)
    on_stack = []
    wanted = addresses + [h["address"] for h in holders if not (rsp <= h["address"] < stack_end)]
    for a, v in md.words_equal(wanted, rsp, stack_end):
        on_stack.append({"address": a, "value": v,
                         "points_to": "text" if v in addresses else "heap object holding the text's address",
                         "offset_from_rsp": a - rsp})
    # the LogMessage's stringbuf (MSVC basic_streambuf: vptr, _Gfirst, _Pfirst, _IGfirst,
    # _IPfirst, _Gnext, _Pnext, ...): found by its _IGfirst/_IPfirst pointing back at
    # _Gfirst/_Pfirst, so without knowing the text's address (a normal dump has no heap)
    stringbufs = []
    for a in range(rsp + (-rsp) % 8, stack_end - 64, 8):
        w = md.read(a, 64)
        if not w or u64(w, 24) != a + 8 or u64(w, 32) != a + 16 or u64(w, 8) != u64(w, 16):
            continue
        buf, pnext, vptr = u64(w, 8), u64(w, 48), u64(w, 0)
        sb: Dict[str, Any] = {"streambuf_address": a, "vptr": vptr, "vptr_at": md.where(vptr),
                              "buffer": buf, "pnext": pnext, "written": pnext - buf,
                              "buffer_in_dump": md.read(buf, 1) is not None,
                              "buffer_is_the_text": buf in addresses}
        # tsl::internal::LogMessage's own fields after the stream: fname_ (a pointer into the
        # module's .rdata), line_ and severity_ (two ints; FATAL = 3)
        for b in range(a, a + 0x100, 8):
            f = md.read(b, 16)
            if not f:
                break
            fname, line, severity = u64(f, 0), u32(f, 8), u32(f, 12)
            mod = md.module_at(fname)
            if mod and 0 < line < 100000 and severity == 3:
                sb["log_message_fields"] = {"fname_address": b, "fname": fname, "fname_at": md.where(fname),
                                            "fname_text": image_cstr(mod, fname, images),
                                            "line": line, "severity": severity}
                break
        stringbufs.append(sb)
    return {"text": text.decode(), "copies": copies, "holders": holders,
            "dying_stack_words": on_stack, "stringbufs_on_stack": stringbufs}


def cxx_facts(md: Minidump, rsp: int, stack_end: int, pe: PE) -> Dict[str, Any]:
    """The 0xE06D7363 EXCEPTION_RECORD(s) on the dying thread's stack and what they point to."""
    records = []
    for start, size, offset in md.ranges:
        a, b = max(start, rsp), min(start + size, stack_end)
        if a >= b:
            continue
        chunk = bytes(md.data[offset + a - start:offset + b - start])
        pos = chunk.find(struct.pack("<I", CXX_EXCEPTION))
        while pos >= 0:
            rec = chunk[pos:pos + 0x38]
            if len(rec) == 0x38 and (a + pos) % 4 == 0 and u32(rec, 0x18) == 4 and u64(rec, 0x20) == CXX_MAGIC:
                obj, ti, base = u64(rec, 0x28), u64(rec, 0x30), u64(chunk, pos + 0x38) if len(chunk) >= pos + 0x40 else None
                r: Dict[str, Any] = {"address": a + pos, "flags": u32(rec, 4),
                                     "exception_address": u64(rec, 0x10),
                                     "exception_address_at": md.where(u64(rec, 0x10)),
                                     "magic": hex(CXX_MAGIC), "object": obj, "object_at": md.where(obj),
                                     "throw_info": ti, "throw_info_at": md.where(ti), "image_base": base}
                mod = md.module_at(ti)
                if mod and mod["path"].lower().endswith("shardlib.dll") and base == mod["base"]:
                    r["throw_info_chain"] = pe.throw_info(ti - base)
                    raw = md.read(obj, 16)
                    if raw:
                        what, code = u64(raw, 0), struct.unpack_from("<i", raw, 8)[0]
                        wmod = md.module_at(what)
                        r["thrown_object"] = {"what": what, "what_at": md.where(what), "code": code,
                                              "what_text": pe.cstr(what - wmod["base"]) if wmod is mod else None}
                records.append(r)
            pos = chunk.find(struct.pack("<I", CXX_EXCEPTION), pos + 1)
    return {"records_on_stack": records}


def assert_facts(md: Minidump, rsp: int, stack_end: int, pe: PE, dll_base: Optional[int]) -> Dict[str, Any]:
    """The wide strings handed to _wassert (in shardlib.dll's .rdata) and stack words holding them."""
    data = pe.data
    out: Dict[str, Any] = {}
    for key, text in (("message", "index >= 0 && index < count"), ("file", "C:\\src\\shardlib\\shardlib.cpp")):
        raw = text.encode("utf-16-le") + b"\0\0"
        pos = data.find(raw)
        rva = None
        if pos >= 0:
            for name, va, size, rawptr in pe.sections:
                if rawptr <= pos < rawptr + size:
                    rva = va + pos - rawptr
        entry: Dict[str, Any] = {"text": text, "rva": rva, "section": pe.section_of(rva) if rva else None}
        if rva is not None and dll_base is not None:
            entry["address"] = dll_base + rva
            entry["dying_stack_words"] = [a for a, _ in md.words_equal([dll_base + rva], rsp, stack_end)]
        out[key] = entry
    return out


def requirements(path: str) -> List[str]:
    return [l.split()[0] for l in open(path) if l.strip() and not l.startswith("#")]


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", required=True)
    ap.add_argument("--dumps", required=True, help="the cache folder with the raw dumps")
    ap.add_argument("--dll", required=True)
    ap.add_argument("--requirements", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--images", help="the cache's images folder (Python311-tf, ...), to read "
                    "strings the dumps point to in module images")
    ap.add_argument("folder")
    args = ap.parse_args(argv)
    dll_bytes = open(args.dll, "rb").read()
    pe = PE(dll_bytes)
    exports = pe.exports()
    dll = {"file": os.path.relpath(args.dll, args.folder), "sha256": hashlib.sha256(dll_bytes).hexdigest(),
           "bytes": len(dll_bytes), "timestamp": pe.timestamp, "size_of_image": pe.size_of_image,
           "exports": {k: hex(v) for k, v in sorted(exports.items())}, "imports": pe.imports(),
           "load_shard_func_info": pe.func_info(exports["load_shard"]),
           "load_shard_checked_has_eh_data": False}
    try:
        pe.func_info(exports["load_shard_checked"])
        dll["load_shard_checked_has_eh_data"] = True
    except (ValueError, struct.error):
        pass
    dumps: List[Dict[str, Any]] = []
    full_offsets: Dict[str, List[Dict[str, Any]]] = {}  # scenario -> the full dump's stack words
    checks: List[Dict[str, Any]] = []
    for log_name in sorted(os.listdir(args.logs)):
        if not log_name.endswith(".log"):
            continue
        name = log_name[:-4]
        log = parse_log(os.path.join(args.logs, log_name))
        marker = log["marker"] or {}
        scenario = marker.get("scenario", name.split("_py")[0])
        program = os.path.join(args.folder, "src", scenario + ".py")
        base = {"name": name, "scenario": scenario, "program": os.path.relpath(program, args.folder),
                "python_minor": name.rsplit("_py", 1)[1][0] + "." + name.rsplit("_py", 1)[1][1:],
                "python_version": marker.get("python"), "marker": marker,
                "stack_marks": stack_marks(program), "program_output": log["program_output"],
                "seconds_to_run_and_dump": log.get("elapsed_seconds")}
        if "exit_code" in log:  # a check scenario: no dumper, no dump
            base.update({"kind": "check", "exit_code": log["exit_code"]})
            checks.append(base)
            continue
        raw = os.path.join(args.dumps, name + ".dmp")
        committed = next((f for f in (name + ".dmp", name + ".dmp.xz")
                          if os.path.exists(os.path.join(args.folder, f))), None)
        full = "trimmed" in log
        entry = dict(base)
        entry.update({"kind": "full" if full else "normal",
                      "file": committed,
                      "committed_bytes": os.path.getsize(os.path.join(args.folder, committed)) if committed else None,
                      "raw_dump": raw if os.path.exists(raw) else None,
                      "raw_bytes": log.get("raw_bytes"), "raw_sha256": log.get("raw_sha256")})
        if full:
            entry["trimmed"] = log["trimmed"]
            entry["trimmed_dump"] = os.path.join(args.dumps, name + ".trimmed.dmp")
            entry["trimmed_bytes"] = log.get("trimmed_bytes")
            entry["not_committed_because"] = ("a trimmed full-memory dump of a TensorFlow process is "
                                              "still over a gigabyte (TensorFlow's image and heap)")
        path = raw if os.path.exists(raw) else (os.path.join(args.folder, committed) if committed else None)
        if path is None:
            print("facts.py: no dump for %s" % name, file=sys.stderr)
            return 1
        data, handle = open_dump(path)
        sha = hashlib.sha256(data).hexdigest() if path.endswith(".xz") else sha256_file(path)
        if log.get("raw_sha256") and sha != log["raw_sha256"]:
            print("facts.py: %s does not match the log's raw_sha256" % path, file=sys.stderr)
            return 1
        if committed and committed.endswith(".xz") and path == raw:
            if hashlib.sha256(lzma.decompress(open(os.path.join(args.folder, committed), "rb").read())).hexdigest() != sha:
                print("facts.py: %s is not the raw dump" % committed, file=sys.stderr)
                return 1
        md = Minidump(data)
        exc = md.exception
        ctx = md.context(exc["context_rva"])
        tid = exc["tid"]
        thread = md.threads[tid]
        stack_end = thread["stack_start"] + thread["stack_size"]
        ntdll = next(m for m in md.modules if m["path"].lower().endswith("\\ntdll.dll"))
        shard = next((m for m in md.modules if m["path"].lower().endswith("shardlib.dll")), None)
        entry.update({
            "streams": md.stream_names(), "header_flags": md.flags, "header_timestamp": md.timestamp,
            "full_memory": md.full,
            "exception_code": exc["code"], "exception_code_hex": "0x%08X" % exc["code"],
            "exception_flags": exc["flags"], "exception_address": exc["address"],
            "exception_address_at": md.where(exc["address"]),
            "exception_parameters": exc["parameters"],
            "exit_code": ctx["rcx"] & 0xFFFFFFFF,
            "rip": ctx["rip"], "rsp": ctx["rsp"], "rcx": ctx["rcx"],
            "ntdll_base": ntdll["base"],
            "thread_id": tid, "thread_count": len(md.threads),
            "marker_thread_is_exit_thread": marker.get("crash_native_id") == tid,
            "exit_thread_is_main": marker.get("main_native_id") == tid,
            "dying_stack": {"rsp": ctx["rsp"], "end": stack_end,
                            "dumped_start": thread["stack_start"], "dumped_bytes": thread["stack_size"]},
            "memory_ranges": len(md.ranges), "memory_bytes": sum(r[1] for r in md.ranges),
            "modules": [{"path": m["path"], "base": m["base"], "size": m["size"],
                         "timestamp": m["timestamp"]} for m in md.modules],
        })
        if scenario == "tf_check_failed":
            entry["tensorflow_version"] = marker.get("tensorflow")
            entry["wheels"] = requirements(args.requirements)
            entry["stderr_fatal_line"] = next((l for l in log["program_output"] if ": F " in l and "] " in l), None)
            m = re.search(r"\] (Check failed: .*)$", entry["stderr_fatal_line"] or "")
            if m:
                facts = tf_text_facts(md, tid, ctx["rsp"], stack_end, m.group(1).encode(), args.images)
                entry["check_text"] = facts
                if md.full:
                    full_offsets[scenario] = facts["dying_stack_words"]
                elif scenario in full_offsets:
                    # the same program's normal dump: the words at the offsets from RSP where the
                    # full dump's stack points to the text, and whether their targets are in it
                    same = []
                    for w in full_offsets[scenario]:
                        raw_word = md.read(ctx["rsp"] + w["offset_from_rsp"], 8)
                        value = u64(raw_word, 0) if raw_word else None
                        same.append({"offset_from_rsp": w["offset_from_rsp"],
                                     "address": ctx["rsp"] + w["offset_from_rsp"], "value": value,
                                     "full_dump_value": w["value"],
                                     "target_in_dump": value is not None and md.read(value, 1) is not None})
                    facts["words_at_full_dump_offsets"] = same
        elif scenario == "cxx_terminate":
            entry["thrown_type"] = ".?AUShardError@@"
            entry["thrown_type_in_dll"] = {"offset": dll_bytes.find(b".?AUShardError@@"),
                                           "section": next((n for n, va, size, rawp in pe.sections
                                                            if rawp <= dll_bytes.find(b".?AUShardError@@") < rawp + size), None)}
            entry["cxx"] = cxx_facts(md, ctx["rsp"], stack_end, pe)
        elif scenario == "assert_ucrt":
            entry["stderr_assertion_line"] = log["assertion_lines"][0] if log["assertion_lines"] else None
            entry["assertion"] = assert_facts(md, ctx["rsp"], stack_end, pe, shard["base"] if shard else None)
        if shard:
            entry["shardlib"] = {"base": shard["base"], "size": shard["size"], "timestamp": shard["timestamp"],
                                 "path": shard["path"], "matches_committed_dll": shard["timestamp"] == pe.timestamp
                                 and shard["size"] == pe.size_of_image}
        if handle:
            data.close()
            handle.close()
        dumps.append(entry)
    manifest = {
        "schema": 1,
        "about": "facts of the abort dumps in this folder, derived by src/facts.py from the logs, "
                 "the programs, bin/shardlib.dll and the dumps (never by dumpkit)",
        "shardlib_dll": dll,
        "dumps": dumps,
        "checks": checks,
    }
    with open(args.manifest, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("facts.py: %d dumps, %d checks -> %s" % (len(dumps), len(checks), args.manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
