"""Derive manifest.json for the dumps of Python processes that end themselves.

Reads every dump with its own minimal `struct` minidump reader (never dumpkit): header,
stream directory, exception record and its full context (the exit code of an exit dump is in
RCX at ntdll!RtlExitUserProcess, in RDX at ntdll!NtTerminateProcess with RCX = -1), threads,
modules (with their VS_FIXEDFILEINFO version), memory lists. The breakpoint address is named
from ntdll.dll's own export table (the Wine PE DLL the process mapped: same size and
timestamp as the dump's module, checked). The ground truth of the Python side is the
program's own `MARKER {json}` line, that of the reason the runtime's stderr lines, both from
logs/NAME.log as printed. A delay-load failure (0xC06Dxxxx, raised by __delayLoadHelper2 with
one parameter, the address of its DelayLoadInfo) gets the DelayLoadInfo as read from the
dump, its szDll / szProcName strings from the importing image file (bin/NAME: the module the
pointer lies in, RVA -> file offset through its section table).

Usage: facts.py --logs logs --images DIR --wine-dlls DIR --raw-dumps DIR --full-dumps DIR
                --manifest manifest.json [--only NAME,...] FOLDER
--only: recompute these runs' entries; every other entry is kept as the existing manifest has
it (build.sh NAME... passes it: the others' raw dumps may not be in this machine's cache).
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import lzma
import os
import re
import struct
import sys
from typing import Any, Dict, List, Optional, Tuple

STREAM_NAMES = {
    3: "ThreadList", 4: "ModuleList", 5: "MemoryList", 6: "Exception", 7: "SystemInfo",
    9: "Memory64List", 15: "MiscInfo", 16: "MemoryInfoList", 17: "ThreadInfoList",
    21: "SystemMemoryInfo", 24: "ThreadNames", 0xFFF0: "Wine(0xfff0)",
}
CODES = {
    0x80000003: "breakpoint", 0xC0000005: "access_violation", 0xC00000FD: "stack_overflow",
    0xC0000409: "fail_fast",
    # VcppException(ERROR_SEVERITY_ERROR, ERROR_MOD_NOT_FOUND / ERROR_PROC_NOT_FOUND): the
    # delay-load helper's (MSVC delayimp.lib, mingw-w64 libmingwex delayimp.o)
    0xC06D007E: "delay_load_module_not_found", 0xC06D007F: "delay_load_procedure_not_found",
}
WIN32_ERRORS = {126: "ERROR_MOD_NOT_FOUND", 127: "ERROR_PROC_NOT_FOUND"}
# CONTEXT (AMD64) offsets of the integer registers
REGISTERS = ["rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
             "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"]
EXIT_FUNCTIONS = ("RtlExitUserProcess", "NtTerminateProcess")


def u16(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<H", b, o)[0])


def u32(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<I", b, o)[0])


def u64(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<Q", b, o)[0])


class Minidump:
    """Just enough of the minidump format for the facts below."""

    def __init__(self, data: bytes) -> None:
        if data[:4] != b"MDMP":
            raise ValueError("not a minidump")
        self.data = data
        count, dir_rva = u32(data, 8), u32(data, 12)
        self.timestamp = u32(data, 20)
        self.flags = u64(data, 24)
        self.streams: List[Tuple[int, int, int]] = [
            struct.unpack_from("<III", data, dir_rva + 12 * i) for i in range(count)]
        self.ranges: List[Tuple[int, int, int]] = []  # (address, size, file offset)
        self.full = False
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
        self.sorted = sorted(self.ranges)
        self.starts = [r[0] for r in self.sorted]

    def stream(self, kind: int) -> Optional[Tuple[int, int]]:
        for k, size, rva in self.streams:
            if k == kind:
                return size, rva
        return None

    def read(self, address: int, size: int) -> Optional[bytes]:
        i = bisect.bisect_right(self.starts, address) - 1
        for j in range(i, max(i - 8, -1), -1):  # a few back: normal dumps have overlaps
            start, dsize, offset = self.sorted[j]
            if start <= address and address + size <= start + dsize:
                return self.data[offset + address - start: offset + address - start + size]
        return None

    def string(self, rva: int) -> str:
        return self.data[rva + 4: rva + 4 + u32(self.data, rva)].decode("utf-16-le")

    def context(self, rva: int) -> Dict[str, int]:
        d = self.data
        regs = {name: u64(d, rva + 0x78 + 8 * i) for i, name in enumerate(REGISTERS)}
        regs["rip"] = u64(d, rva + 0xF8)
        regs["eflags"] = u32(d, rva + 0x44)
        return regs

    def exception(self) -> Dict[str, Any]:
        s = self.stream(6)
        if s is None:
            return {}
        _, rva = s
        d = self.data
        n = u32(d, rva + 8 + 24)
        return {
            "thread_id": u32(d, rva),
            "code": u32(d, rva + 8),
            "flags": u32(d, rva + 12),
            "address": u64(d, rva + 24),
            "parameters": [u64(d, rva + 8 + 32 + 8 * i) for i in range(min(n, 15))],
            "context_size": u32(d, rva + 8 + 152),
            "context": self.context(u32(d, rva + 8 + 156)),
        }

    def threads(self) -> List[Dict[str, Any]]:
        s = self.stream(3)
        out: List[Dict[str, Any]] = []
        if s is None:
            return out
        _, rva = s
        d = self.data
        for i in range(u32(d, rva)):
            o = rva + 4 + 48 * i
            start, ssize = u64(d, o + 24), u32(d, o + 32)
            ctx = self.context(u32(d, o + 44))
            out.append({
                "tid": u32(d, o), "suspend_count": u32(d, o + 4), "priority": u32(d, o + 12),
                "teb": u64(d, o + 16), "stack_start": start, "stack_size": ssize,
                "stack_end": start + ssize,
                "rip": ctx["rip"], "rsp": ctx["rsp"], "rbp": ctx["rbp"],
            })
        return out

    def modules(self) -> List[Dict[str, Any]]:
        s = self.stream(4)
        out: List[Dict[str, Any]] = []
        if s is None:
            return out
        _, rva = s
        d = self.data
        for i in range(u32(d, rva)):
            o = rva + 4 + 108 * i
            path = self.string(u32(d, o + 20))
            ffi = o + 24
            ms, ls = u32(d, ffi + 8), u32(d, ffi + 12)
            version = None
            if u32(d, ffi) == 0xFEEF04BD:
                version = "%d.%d.%d.%d" % (ms >> 16, ms & 0xFFFF, ls >> 16, ls & 0xFFFF)
            out.append({
                "name": path.replace("/", "\\").split("\\")[-1], "path": path,
                "base": u64(d, o), "size": u32(d, o + 8), "checksum": u32(d, o + 12),
                "timestamp": u32(d, o + 16), "file_version": version,
            })
        return out


class PeFile:
    """Header, sections and export table of a PE32+ image file."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as f:
            self.data = d = f.read()
        pe = u32(d, 0x3C)
        if d[pe:pe + 4] != b"PE\0\0":
            raise ValueError("not a PE file: %s" % path)
        self.timestamp = u32(d, pe + 8)
        nsections, opt_size = u16(d, pe + 6), u16(d, pe + 20)
        opt = pe + 24
        self.size_of_image = u32(d, opt + 56)
        self.sections = []
        for i in range(nsections):
            o = opt + opt_size + 40 * i
            vsize, va, rawsize, rawptr = struct.unpack_from("<IIII", d, o + 8)
            self.sections.append((va, max(vsize, rawsize), rawptr, rawsize))
        export_rva = u32(d, opt + 112)
        self.exports: Dict[str, int] = {}
        if export_rva:
            e = self.offset(export_rva)
            n_names, funcs, names, ords = (u32(d, e + 24), u32(d, e + 28), u32(d, e + 32),
                                           u32(d, e + 36))
            for i in range(n_names):
                name_at = self.offset(u32(d, self.offset(names) + 4 * i))
                name = d[name_at:d.index(b"\0", name_at)].decode("ascii")
                ordinal = u16(d, self.offset(ords) + 2 * i)
                self.exports[name] = u32(d, self.offset(funcs) + 4 * ordinal)

    def offset(self, rva: int) -> int:
        for va, size, rawptr, _ in self.sections:
            if va <= rva < va + size:
                return rawptr + rva - va
        raise ValueError("RVA 0x%x in no section" % rva)


def load_dump(path: str) -> bytes:
    if path.endswith(".xz"):
        with lzma.open(path) as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def version_string(pe_path: str) -> Optional[str]:
    """The FileVersion string of a PE's version resource (a plain UTF-16 scan)."""
    try:
        with open(pe_path, "rb") as f:
            blob = f.read()
    except OSError:
        return None
    key = "FileVersion\0".encode("utf-16-le")
    at = blob.find(key)
    if at < 0:
        return None
    o = at + len(key)
    o += (-o) % 4
    end = o
    while end + 1 < len(blob) and blob[end:end + 2] != b"\0\0":
        end += 2
    return blob[o:end].decode("utf-16-le")


def parse_log(path: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {"marker": None, "markers": [], "dumper_line": None, "stdout": [],
                           "stderr": []}
    section = None
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for line in text.splitlines():
        if line in ("== stdout", "== stderr"):
            section = line[3:]
            continue
        if re.match(r"^(elapsed_seconds|raw_bytes|raw_full_bytes|xz_seconds|exit_code|"
                    r"stderr_utf16le_spans|stderr_lines) ", line):
            parts = line.split()
            for k, v in zip(parts[::2], parts[1::2]):
                out[k] = float(v) if "." in v else int(v)
            section = None
        elif line.startswith(("program ", "interpreter ")) and section is None:
            key, value = line.split(" ", 1)
            out[key] = value
        elif "TRIM {" in line:
            out["trim"] = json.loads(line[line.index("TRIM {") + 5:])
        elif section == "stdout":
            if line.startswith("MARKER "):
                out["markers"].append(json.loads(line[7:]))
                out["marker"] = out["markers"][-1]
            elif line.startswith("dumper:"):
                out["dumper_line"] = line
            else:
                out["stdout"].append(line)
        elif section == "stderr":
            out["stderr"].append(line)
    while out["stderr"] and not out["stderr"][-1]:
        out["stderr"].pop()
    return out


def reasons(stderr: List[str]) -> Dict[str, Any]:
    """The lines a runtime printed about why the process ends."""
    found: Dict[str, Any] = {}
    for line in stderr:
        if line.startswith("Fatal Python error: ") and "fatal_python_error" not in found:
            found["fatal_python_error"] = line
            m = re.match(r"^Fatal Python error: (?:(\w+): )?(.*)$", line)
            if m:
                found["fatal_python_error_function"] = m.group(1)
                found["fatal_python_error_message"] = m.group(2)
        elif line.startswith("Python runtime state: "):
            found["python_runtime_state"] = line[len("Python runtime state: "):]
        elif line.startswith("Assertion failed: "):
            found["assertion_failed"] = line
        elif line.startswith("OMP: "):
            found.setdefault("omp", []).append(line)
        elif re.match(r"^\w*(Error|Exception|Warning): ", line):
            found.setdefault("exception_lines", []).append(line)
    return found


def stack_lines(program: str) -> Dict[str, List[Dict[str, Any]]]:
    """The program's `# stack` / `# stack(main)` lines, in file order."""
    marks: Dict[str, List[Dict[str, Any]]] = {"crash_thread": [], "main_thread": []}
    function = "<module>"
    with open(program, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = re.match(r"\s*def (\w+)\(", line)
            if m:
                function = m.group(1)
            elif line and not line[0].isspace() and line.strip():
                function = "<module>"
            text = line.rstrip()
            key = ("crash_thread" if text.endswith("# stack")
                   else "main_thread" if text.endswith("# stack(main)") else None)
            if key:
                marks[key].append({"function": function, "line": number,
                                   "source": text.split("  #")[0].strip()})
    return marks


def module_at(modules: List[Dict[str, Any]], address: int) -> Optional[str]:
    for m in modules:
        if m["base"] <= address < m["base"] + m["size"]:
            return "%s+0x%x" % (m["name"], address - m["base"])
    return None


def module_of(modules: List[Dict[str, Any]], address: int) -> Optional[Dict[str, Any]]:
    return next((m for m in modules if m["base"] <= address < m["base"] + m["size"]), None)


def image_string(md: Minidump, modules: List[Dict[str, Any]], address: int,
                 folder: str) -> Dict[str, Any]:
    """The NUL-terminated string at `address`: from the image file of the module it lies in
    (FOLDER/bin/NAME, checked against the module's timestamp and size), and from the dump's
    memory if the dump has those bytes."""
    out: Dict[str, Any] = {"address": address, "at": module_at(modules, address)}
    m = module_of(modules, address)
    out["module"] = m["name"] if m else None
    raw = md.read(address, 1)
    if raw is not None:
        text = b""
        while raw not in (None, b"\0") and len(text) < 512:
            text += raw
            raw = md.read(address + len(text), 1)
        out["in_dump"] = text.decode("latin-1") if raw == b"\0" else None
    else:
        out["in_dump"] = None
    out["text"] = None
    if m is not None:
        path = os.path.join(folder, "bin", m["name"])
        if os.path.isfile(path):
            pe = PeFile(path)
            out["image_file"] = os.path.relpath(path, folder)
            out["image_file_matches_module"] = (pe.timestamp == m["timestamp"]
                                                and pe.size_of_image == m["size"])
            at = pe.offset(address - m["base"])
            out["file_offset"] = at
            out["text"] = pe.data[at:pe.data.index(b"\0", at)].decode("latin-1")
    if out["text"] is None:
        out["text"] = out["in_dump"]
    return out


def delay_load_facts(md: Minidump, exc: Dict[str, Any], modules: List[Dict[str, Any]],
                     crash: Optional[Dict[str, Any]], folder: str) -> Optional[Dict[str, Any]]:
    """The DelayLoadInfo a 0xC06Dxxxx exception's parameter[0] points to (x64 layout: cb @0,
    pidd @8, ppfn @0x10, szDll @0x18, dlp.fImportByName @0x20, dlp.szProcName/dwOrdinal
    @0x28, hmodCur @0x30, pfnCur @0x38, dwLastError @0x40; 0x48 bytes)."""
    code = exc.get("code") or 0
    if code >> 16 != 0xC06D or not exc.get("parameters"):
        return None
    p = exc["parameters"][0]
    info = md.read(p, 0x48)
    facts: Dict[str, Any] = {
        "parameter_count": len(exc["parameters"]),
        "info_address": p,
        "info_in_dump": info is not None,
        "info_in_crash_thread_stack": crash is not None
        and crash["stack_start"] <= p and p + 0x48 <= crash["stack_end"],
        "info_offset_from_rsp": p - exc["context"]["rsp"],
        "code_error": code & 0xFFFF,
        "code_error_name": WIN32_ERRORS.get(code & 0xFFFF),
    }
    if info is None:
        return facts
    cb, pidd, ppfn, sz_dll, by_name, proc, hmod, pfn, last_error = struct.unpack_from(
        "<I4xQQQI4xQQQI", info, 0)
    hmod_module = module_of(modules, hmod) if hmod else None
    facts.update({
        "cb": cb,
        "pidd": pidd, "pidd_at": module_at(modules, pidd),
        "ppfn": ppfn, "ppfn_at": module_at(modules, ppfn),
        "szDll": sz_dll,
        "dll": image_string(md, modules, sz_dll, folder),
        "fImportByName": by_name,
        "szProcName" if by_name else "dwOrdinal": proc,
        "procedure": image_string(md, modules, proc, folder) if by_name else None,
        "hmodCur": hmod,
        "hmodCur_module": None if hmod_module is None else {
            "name": hmod_module["name"], "path": hmod_module["path"],
            "is_module_base": hmod_module["base"] == hmod,
            "file_version": hmod_module["file_version"]},
        "pfnCur": pfn,
        "dwLastError": last_error,
        "dwLastError_name": WIN32_ERRORS.get(last_error),
        "code_error_equals_last_error": code & 0xFFFF == last_error,
    })
    facts["dll_name"] = facts["dll"]["text"]
    facts["procedure_name"] = facts["procedure"]["text"] if by_name else None
    facts["importer"] = facts["dll"]["module"]
    return facts


def exit_facts(exc: Dict[str, Any], modules: List[Dict[str, Any]],
               args: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """An exit dump: the breakpoint sits on ntdll's exit function; its code from the context."""
    if exc.get("code") != 0x80000003:
        return None
    ntdll = next((m for m in modules if m["name"].lower() == "ntdll.dll"), None)
    if ntdll is None:
        return None
    pe = PeFile(os.path.join(args.wine_dlls, "ntdll.dll"))
    same = pe.timestamp == ntdll["timestamp"] and pe.size_of_image == ntdll["size"]
    rva = exc["address"] - ntdll["base"]
    via = next((n for n in EXIT_FUNCTIONS if pe.exports.get(n) == rva), None)
    ctx = exc["context"]
    facts: Dict[str, Any] = {
        "ntdll_file_matches_module": same,
        "via": via,
        "at": "ntdll.dll!%s" % via if via else module_at(modules, exc["address"]),
        "rip_is_function_entry": ctx["rip"] == exc["address"],
    }
    if via == "RtlExitUserProcess":
        facts["exit_code"] = ctx["rcx"] & 0xFFFFFFFF
        facts["exit_code_from"] = "rcx"
    elif via == "NtTerminateProcess":
        facts["exit_code"] = ctx["rdx"] & 0xFFFFFFFF
        facts["exit_code_from"] = "rdx"
        facts["process_handle"] = ctx["rcx"]
    if "exit_code" in facts:
        facts["exit_code_hex"] = "0x%08X" % facts["exit_code"]
    return facts


def dump_facts(name: str, path: str, args: argparse.Namespace) -> Dict[str, Any]:
    raw = load_dump(path)
    md = Minidump(raw)
    log = parse_log(os.path.join(args.logs, name + ".log"))
    marker = log["marker"] or {}
    minor = re.search(r"_py3(\d+)$", name)
    assert minor, name
    python_minor = "3.%s" % minor.group(1)
    scenario = re.sub(r"(_full)?_py3\d+$", "", name)
    program = log.get("program") or "src/%s.py" % scenario
    exc = md.exception()
    ctx = exc.get("context", {})
    threads = md.threads()
    modules = md.modules()
    crash = next((t for t in threads if t["tid"] == exc.get("thread_id")), None)
    pydll = "python3%s.dll" % minor.group(1)
    pymod = next((m for m in modules if m["name"].lower() == pydll), None)
    image_dir = os.path.join(args.images, "Python3%s" % minor.group(1))
    code = exc.get("code")
    facts: Dict[str, Any] = {
        "file": os.path.basename(path),
        "name": name,
        "scenario": scenario,
        "python_minor": python_minor,
        "program": program,
        "interpreter_folder": log.get("interpreter"),
        "dump_type": "full" if md.full else "normal",
        "size_bytes": os.path.getsize(path),
        "dump_bytes": len(raw),
        "dump_sha256": hashlib.sha256(raw).hexdigest(),
        "trimmed": None,
        "seconds_to_run_and_dump": log.get("elapsed_seconds"),
        "header_flags": md.flags,
        "header_timestamp": md.timestamp,
        "streams": [STREAM_NAMES.get(k, "0x%x" % k) for k, _, _ in md.streams],
        "exception_code": code,
        "exception_code_hex": "0x%08X" % code if code is not None else None,
        "exception_kind": CODES.get(code or 0),
        "exception_flags": exc.get("flags"),
        "exception_address": exc.get("address"),
        "exception_address_at": module_at(modules, exc.get("address", 0)),
        "exception_parameters": exc.get("parameters"),
        "exception_context_size": exc.get("context_size"),
        "context": ctx,
        "ending": None,
    }
    if "trim" in log:
        full_path = os.path.join(args.full_dumps, name + ".dmp")
        facts["trimmed"] = dict(log["trim"], raw_dump_in_cache=os.path.exists(full_path))
    ending = exit_facts(exc, modules, args)
    if ending is not None:
        facts["ending"] = dict(kind="process_exit", **ending)
    elif code is not None:
        facts["ending"] = {"kind": "exception", "code_hex": "0x%08X" % code}
    delay = delay_load_facts(md, exc, modules, crash, args.folder)
    if delay is not None:
        facts["delay_load"] = delay
    if code == 0xC0000005 and len(exc.get("parameters", [])) > 1:
        facts["access"] = {"kind": {0: "read", 1: "write", 8: "execute"}.get(exc["parameters"][0]),
                           "address": exc["parameters"][1]}
    overlapping, prev_end = 0, -1
    for start, size, _ in md.sorted:
        overlapping += start < prev_end
        prev_end = max(prev_end, start + size)
    facts.update({
        "crash_thread_tid": exc.get("thread_id"),
        "main_thread_tid": threads[0]["tid"] if threads else None,
        "crash_thread_is_main": bool(threads) and exc.get("thread_id") == threads[0]["tid"],
        "threads": threads,
        "crash_thread_stack_in_dump": None if crash is None else {
            "start": crash["stack_start"], "end": crash["stack_end"], "size": crash["stack_size"],
            "contains_rsp": crash["stack_start"] <= ctx.get("rsp", -1) < crash["stack_end"],
        },
        "memory_ranges": len(md.ranges),
        "memory_bytes": sum(r[1] for r in md.ranges),
        "overlapping_ranges": overlapping,
        "modules": modules,
        "python_dlls": [{"name": m["name"], "path": m["path"], "base": m["base"],
                         "size": m["size"], "timestamp": m["timestamp"],
                         "file_version": m["file_version"]}
                        for m in modules if re.match(r"^python3\d+\.dll$", m["name"].lower())],
    })
    if crash is not None:
        teb = md.read(crash["teb"], 0x1480)
        if teb is not None:
            base, limit, dealloc = u64(teb, 8), u64(teb, 0x10), u64(teb, 0x1478)
            facts["teb"] = {"address": crash["teb"], "stack_base": base, "stack_limit": limit,
                            "deallocation_stack": dealloc, "reserve": base - dealloc}
    facts.update({
        "python_version": marker.get("python"),
        "python_exe_path": marker.get("executable"),
        "python_dll_path": pymod["path"] if pymod else None,
        "python_dll_timestamp": pymod["timestamp"] if pymod else None,
        "python_dll_file_version": pymod["file_version"] if pymod else None,
        "python_dll_version_string": version_string(os.path.join(image_dir, pydll)),
        "marker": log["marker"],
        "dumper_line": log["dumper_line"],
        "stdout": log["stdout"],
        "stderr": log["stderr"],
        "stderr_lines": log.get("stderr_lines"),
        "stderr_written_as_utf16le": bool(log.get("stderr_utf16le_spans")),
        "reason_lines": reasons(log["stderr"]),
        "stack_marks": stack_lines(os.path.join(args.folder, program)),
        "marker_crash_native_id_is_dump_crash_tid": marker.get("crash_native_id") == exc.get("thread_id")
        if marker else None,
        "marker_main_native_id_is_first_thread": (bool(threads)
                                                  and marker.get("main_native_id") == threads[0]["tid"])
        if marker else None,
    })
    m = re.search(r"with code (\d+) ", log["dumper_line"] or "")
    if m and ending is not None:
        facts["exit_code_equals_dumper_line"] = int(m.group(1)) == ending.get("exit_code")
    raw_path = os.path.join(args.raw_dumps, name + ".dmp")
    facts["raw_dump_in_cache"] = os.path.exists(raw_path) or bool(
        facts["trimmed"] and facts["trimmed"]["raw_dump_in_cache"])
    return facts


def check_facts(name: str, args: argparse.Namespace) -> Dict[str, Any]:
    log = parse_log(os.path.join(args.logs, name + ".log"))
    marker = log["marker"] or {}
    found = reasons(log["stderr"])
    outcome = "exit code %s" % log.get("exit_code")
    if found.get("fatal_python_error"):
        outcome += ", " + found["fatal_python_error"]
    elif found.get("exception_lines"):
        outcome += ", " + found["exception_lines"][-1]
    elif log["stderr"]:
        outcome += ", stderr ends: " + log["stderr"][-1]
    minor = name.rsplit("_py3", 1)[1]
    return {"name": name, "scenario": marker.get("scenario"),
            "python_minor": "3.%s" % minor, "program": log.get("program"),
            "interpreter_folder": log.get("interpreter"),
            "dump_written": False, "exit_code": log.get("exit_code"), "outcome": outcome,
            "marker": log["marker"], "seconds": log.get("elapsed_seconds"),
            "stderr_lines": log.get("stderr_lines"),
            "stdout": log["stdout"][-6:], "stderr_last_lines": log["stderr"][-6:],
            "reason_lines": found}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for option in ("--logs", "--images", "--wine-dlls", "--raw-dumps", "--full-dumps",
                   "--manifest"):
        ap.add_argument(option, required=True)
    ap.add_argument("--only", default=None)
    ap.add_argument("folder")
    args = ap.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    kept: Dict[str, Dict[str, Any]] = {}
    if only is not None and os.path.exists(args.manifest):
        with open(args.manifest, encoding="utf-8") as f:
            old = json.load(f)
        kept = {e["name"]: e for e in old["dumps"] + old["checks"]}
    dumps, checks = [], []
    files = {}
    for f in sorted(os.listdir(args.folder)):
        m = re.match(r"^(.*?)(\.trimmed)?\.dmp(\.xz)?$", f)
        if m:
            files[m.group(1)] = os.path.join(args.folder, f)
    for log in sorted(os.listdir(args.logs)):
        name = log[:-4]
        if only is not None and name not in only and name in kept:
            (dumps if name in files else checks).append(kept[name])
        elif name in files:
            dumps.append(dump_facts(name, files[name], args))
        else:
            checks.append(check_facts(name, args))
    key = lambda d: (d["scenario"] or "", int(d["python_minor"].split(".")[1]), d["name"])
    dumps.sort(key=key)
    checks.sort(key=lambda d: (d["name"].rsplit("_py3", 1)[0], int(d["python_minor"][2:])))
    with open(args.manifest, "w", encoding="utf-8") as f:
        json.dump({"schema": 1, "dumps": dumps, "checks": checks}, f, indent=1)
        f.write("\n")
    for d in dumps:
        e = d["ending"] or {}
        print("%-34s %-6s %8d B %s at %s tid %s%s" % (
            d["file"], d["dump_type"], d["size_bytes"], d["exception_code_hex"],
            e.get("at") or d["exception_address_at"], d["crash_thread_tid"],
            " exit %s" % e["exit_code_hex"] if "exit_code_hex" in e else ""))
    for c in checks:
        print("%-34s no dump: %s" % (c["name"], c["outcome"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
