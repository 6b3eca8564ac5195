"""Derive manifest.json for the CPython 3.9-3.13 dumps from the logs, the programs and the dumps.

Reads every dump with its own minimal `struct` minidump reader (never dumpkit): header,
stream directory, exception, threads (with their registers), modules (with the file
version of their VS_FIXEDFILEINFO), memory lists (MemoryList / Memory64List), and from
memory the crashing thread's TEB (full dumps). The ground truth of the Python side is the
program's own `MARKER {json}` line, copied as it is; the `# stack` lines of the program are
listed next to it. Logs also give the dumper's line, run time and sizes.

Usage: facts.py --logs logs --full-dumps DIR --images DIR --manifest manifest.json FOLDER
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
FATAL = {0xC00000FD: "stack_overflow", 0xC0000005: "access_violation"}


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
        self.version = u32(data, 4) & 0xFFFF
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

    def context(self, size: int, rva: int) -> Dict[str, int]:
        d = self.data
        return {"rip": u64(d, rva + 0xF8), "rsp": u64(d, rva + 0x98), "rbp": u64(d, rva + 0xA0)}

    def exception(self) -> Dict[str, Any]:
        s = self.stream(6)
        if s is None:
            return {}
        _, rva = s
        d = self.data
        n = u32(d, rva + 8 + 24)
        params = [u64(d, rva + 8 + 32 + 8 * i) for i in range(min(n, 15))]
        ctx_size, ctx_rva = u32(d, rva + 8 + 152), u32(d, rva + 8 + 156)
        return {
            "thread_id": u32(d, rva),
            "code": u32(d, rva + 8),
            "flags": u32(d, rva + 12),
            "address": u64(d, rva + 24),
            "parameters": params,
            "context_size": ctx_size,
            **self.context(ctx_size, ctx_rva),
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
            ctx = self.context(u32(d, o + 40), u32(d, o + 44))
            out.append({
                "tid": u32(d, o), "suspend_count": u32(d, o + 4), "priority": u32(d, o + 12),
                "teb": u64(d, o + 16), "stack_start": start, "stack_size": ssize,
                "stack_end": start + ssize, **ctx,
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
    out: Dict[str, Any] = {"marker": None, "dumper_line": None, "output": []}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f.read().splitlines():
            if line.startswith("MARKER "):
                out["marker"] = json.loads(line[7:])
            elif line.startswith("dumper:"):
                out["dumper_line"] = line
                out["output"].append(line)
            elif "TRIM {" in line:
                out["trim"] = json.loads(line[line.index("TRIM {") + 5:])
            elif re.match(r"^(elapsed_seconds|raw_bytes|raw_full_bytes|xz_seconds) ", line):
                parts = line.split()
                for k, v in zip(parts[::2], parts[1::2]):
                    out[k] = float(v) if "." in v else int(v)
            else:
                out["output"].append(line)
    return out


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
            if text.endswith("# stack"):
                marks["crash_thread"].append({"function": function, "line": number,
                                              "source": text.split("  #")[0].strip()})
            elif text.endswith("# stack(main)"):
                marks["main_thread"].append({"function": function, "line": number,
                                             "source": text.split("  #")[0].strip()})
    return marks


def module_at(modules: List[Dict[str, Any]], address: int) -> Optional[str]:
    for m in modules:
        if m["base"] <= address < m["base"] + m["size"]:
            return "%s+0x%x" % (m["name"], address - m["base"])
    return None


def dump_facts(name: str, path: str, args: argparse.Namespace) -> Dict[str, Any]:
    raw = load_dump(path)
    md = Minidump(raw)
    log = parse_log(os.path.join(args.logs, name + ".log"))
    marker = log["marker"] or {}
    scenario = marker.get("scenario") or name.rsplit("_py", 1)[0].replace("_full", "")
    minor = re.search(r"_py3(\d+)$", name)
    python_minor = "3.%s" % minor.group(1) if minor else None
    program = os.path.join(args.folder, "src", scenario + ".py")
    exc = md.exception()
    threads = md.threads()
    modules = md.modules()
    crash = next((t for t in threads if t["tid"] == exc.get("thread_id")), None)
    pydll = "python3%s.dll" % minor.group(1) if minor else None
    pymod = next((m for m in modules if m["name"].lower() == pydll), None)
    image_dir = os.path.join(args.images, "Python3%s" % minor.group(1)) if minor else None
    overlapping = 0
    prev_end = -1
    for start, size, _ in md.sorted:
        if start < prev_end:
            overlapping += 1
        prev_end = max(prev_end, start + size)
    facts: Dict[str, Any] = {
        "file": os.path.basename(path),
        "name": name,
        "scenario": scenario,
        "python_minor": python_minor,
        "program": "src/%s.py" % scenario,
        "dump_type": "full" if md.full else "normal",
        "size_bytes": os.path.getsize(path),
        "dump_bytes": len(raw),
        "dump_sha256": hashlib.sha256(raw).hexdigest(),
        "trimmed": None,
        "seconds_to_run_and_dump": log.get("elapsed_seconds"),
        "header_flags": md.flags,
        "header_timestamp": md.timestamp,
        "streams": [STREAM_NAMES.get(k, "0x%x" % k) for k, _, _ in md.streams],
    }
    if "trim" in log:
        full_path = os.path.join(args.full_dumps, name + ".dmp")
        facts["trimmed"] = dict(log["trim"], raw_dump_in_cache=os.path.exists(full_path))
    code = exc.get("code")
    facts.update({
        "exception_code": code,
        "exception_code_hex": "0x%08X" % code if code is not None else None,
        "exception_kind": FATAL.get(code or 0),
        "exception_flags": exc.get("flags"),
        "exception_address": exc.get("address"),
        "exception_address_at": module_at(modules, exc.get("address", 0)),
        "exception_parameters": exc.get("parameters"),
        "exception_context_size": exc.get("context_size"),
        "rip": exc.get("rip"),
        "rsp": exc.get("rsp"),
        "crash_thread_tid": exc.get("thread_id"),
        "main_thread_tid": threads[0]["tid"] if threads else None,
        "crash_thread_is_main": bool(threads) and exc.get("thread_id") == threads[0]["tid"],
        "threads": threads,
        "crash_thread_stack_in_dump": None if crash is None else {
            "start": crash["stack_start"], "end": crash["stack_end"], "size": crash["stack_size"],
            "contains_rsp": crash["stack_start"] <= exc.get("rsp", -1) < crash["stack_end"],
        },
        "memory_ranges": len(md.ranges),
        "memory_bytes": sum(r[1] for r in md.ranges),
        "overlapping_ranges": overlapping,
        "modules": modules,
    })
    if code == 0xC00000FD and crash is not None and len(exc["parameters"]) > 1:
        facts["stack_used_at_overflow"] = crash["stack_end"] - exc["parameters"][1]
    if code == 0xC0000005 and len(exc.get("parameters", [])) > 1:
        facts["access"] = {"kind": {0: "read", 1: "write", 8: "execute"}.get(exc["parameters"][0]),
                           "address": exc["parameters"][1]}
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
        "python_dll_version_string": version_string(os.path.join(image_dir, pydll))
        if image_dir and pydll else None,
        "marker": marker,
        "dumper_line": log["dumper_line"],
        "program_output": log["output"],
        "stack_marks": stack_lines(program),
        "marker_crash_native_id_is_dump_crash_tid": marker.get("crash_native_id") == exc.get("thread_id"),
        "marker_main_native_id_is_first_thread": bool(threads)
        and marker.get("main_native_id") == threads[0]["tid"],
    })
    nl = next((m for m in modules if m["name"].lower() == "nativelib.dll"), None)
    if nl is not None:
        facts["nativelib"] = {"base": nl["base"], "size": nl["size"], "timestamp": nl["timestamp"],
                              "path": nl["path"]}
    return facts


def check_facts(name: str, args: argparse.Namespace) -> Dict[str, Any]:
    log = parse_log(os.path.join(args.logs, name + ".log"))
    marker = log["marker"] or {}
    text = "\n".join(log["output"])
    outcome = "ran to completion"
    m = re.findall(r"^(\w*Error): (.*)$", text, re.M)
    if m:
        outcome = "%s: %s" % m[-1]
    return {"name": name, "scenario": marker.get("scenario"),
            "python_minor": "3.%s" % name.rsplit("_py3", 1)[1],
            "program": "src/%s.py" % marker.get("scenario"),
            "dump_written": False, "outcome": outcome, "marker": marker,
            "seconds": log.get("elapsed_seconds"), "program_output": log["output"][-6:]}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", required=True)
    ap.add_argument("--full-dumps", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("folder")
    args = ap.parse_args(argv)
    dumps, checks = [], []
    files = {}
    for f in sorted(os.listdir(args.folder)):
        m = re.match(r"^(.*?)(\.trimmed)?\.dmp(\.xz)?$", f)
        if m:
            files[m.group(1)] = os.path.join(args.folder, f)
    for log in sorted(os.listdir(args.logs)):
        name = log[:-4]
        if name in files:
            dumps.append(dump_facts(name, files[name], args))
        else:
            checks.append(check_facts(name, args))
    key = lambda d: (d["scenario"] or "", int(d["python_minor"].split(".")[1]), d["name"])
    dumps.sort(key=key)
    checks.sort(key=key)
    with open(args.manifest, "w", encoding="utf-8") as f:
        json.dump({"schema": 1, "dumps": dumps, "checks": checks}, f, indent=1)
        f.write("\n")
    for d in dumps:
        print("%-32s %-6s %8d B %s at %s tid %s" % (
            d["file"], d["dump_type"], d["size_bytes"], d["exception_code_hex"],
            d["exception_address_at"], d["crash_thread_tid"]))
    for c in checks:
        print("%-32s no dump: %s" % (c["name"], c["outcome"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
