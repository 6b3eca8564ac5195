"""Derive manifest.json for the dumps of hung Python processes.

Reads every dump with its own minimal `struct` minidump reader (never dumpkit): header,
stream directory, comment stream, threads (registers, suspend count, stack), modules,
memory lists (a read may span adjacent ranges). The ground truth is the program's own
`MARKER {json}` line (logs/RUN.log): every thread's native id, name, PyThreadState address,
Python stack, what it waits on and who holds it, and the objects' addresses. This reader
then says what of it the dump holds, decoded from the dump's memory:

- each Python lock by its id(): _thread.lock (3.8-3.12: lock_lock pointer at +16, `locked`
  char at +32; 3.13: a PyMutex byte at +16, bit 0 locked, bit 1 waiters parked) and
  _thread.RLock (lock_lock at +16; owner and count: an unsigned long each at +24/+28 in
  3.8-3.12, where an unsigned long is 4 bytes; 3.13: owner an 8-byte PyThread_ident_t at
  +24, count at +32); under lock_lock, its NRMUTEX (Python/thread_nt.h: mutex, condition
  variable, int locked; with Python/condvar.h's types, which the bytes show are the emulated
  ones up to 3.12, a CRITICAL_SECTION and {semaphore handle, waiter count}, and the native
  SRWLOCK and CONDITION_VARIABLE, 8 bytes each, in 3.13); its bytes compared with what the
  process read of them;
- each CRITICAL_SECTION of storage.dll (winnt.h RTL_CRITICAL_SECTION: DebugInfo,
  LockCount, RecursionCount, OwningThread = the owner's thread id, LockSemaphore, SpinCount);
- the GIL (struct _gil_runtime_state, pycore_gil.h, the same head in 3.8-3.13: unsigned
  long interval, the last holder's PyThreadState *, int locked, unsigned long
  switch_number; then the condition variable and mutex, emulated up to 3.12 as above,
  native in 3.13): found by scanning python3X.dll's writable sections for an interval equal
  to the switch interval the program printed (5000 microseconds) followed by a plausible
  holder and lock state; its holder named by the PyThreadState addresses in the MARKER; for
  3.13 checked against the offsets the interpreter publishes (_Py_DebugOffsets at
  _PyRuntime);
- in each PyThreadState, the offsets that hold the thread's own id (checks the MARKER's
  tstate addresses and shows where a reader finds the id);
- per thread, which of those objects its stack memory points at (the words of the stack
  the dump holds), and the instruction pointer named by the exports of the module's file.

Usage: facts.py --logs logs --raw-dumps DIR --full-dumps DIR --wine-dlls DIR --manifest manifest.json FOLDER
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
    9: "Memory64List", 11: "CommentStreamW", 12: "HandleData", 15: "MiscInfo",
    16: "MemoryInfoList", 17: "ThreadInfoList", 21: "SystemMemoryInfo", 24: "ThreadNames",
    0xFFF0: "Wine(0xfff0)", 0: "Unused",
}
IMAGE_SCN_MEM_WRITE = 0x80000000
USER_TOP = 0x7FFFFFFFFFFF


def u8(b: bytes, o: int) -> int:
    return b[o]


def u16(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<H", b, o)[0])


def u32(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<I", b, o)[0])


def i32(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<i", b, o)[0])


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
        ranges: List[Tuple[int, int, int]] = []  # (address, size, file offset)
        self.full = False
        for kind, _size, rva in self.streams:
            if kind == 5:
                for i in range(u32(data, rva)):
                    start, dsize, drva = struct.unpack_from("<QII", data, rva + 4 + 16 * i)
                    ranges.append((start, dsize, drva))
            elif kind == 9:
                self.full = True
                n, offset = u64(data, rva), u64(data, rva + 8)
                for i in range(n):
                    start, dsize = struct.unpack_from("<QQ", data, rva + 16 + 16 * i)
                    ranges.append((start, dsize, offset))
                    offset += dsize
        self.ranges = sorted(ranges)
        self.starts = [r[0] for r in self.ranges]

    def stream(self, kind: int) -> Optional[Tuple[int, int]]:
        for k, size, rva in self.streams:
            if k == kind:
                return size, rva
        return None

    def _piece(self, address: int) -> Optional[Tuple[int, int, int]]:
        """The range holding `address` (the latest-starting one: amended ranges overlap)."""
        i = bisect.bisect_right(self.starts, address) - 1
        for j in range(i, max(i - 16, -1), -1):
            start, size, offset = self.ranges[j]
            if start <= address < start + size:
                return start, size, offset
        return None

    def read(self, address: int, size: int) -> Optional[bytes]:
        """`size` bytes at `address`, across adjacent ranges; None if any byte is missing."""
        out = b""
        while size > 0:
            piece = self._piece(address)
            if piece is None:
                return None
            start, psize, offset = piece
            take = min(size, start + psize - address)
            out += self.data[offset + address - start: offset + address - start + take]
            address += take
            size -= take
        return out

    def string(self, rva: int) -> str:
        return self.data[rva + 4: rva + 4 + u32(self.data, rva)].decode("utf-16-le")

    def comment(self) -> Optional[str]:
        s = self.stream(11)
        return None if s is None else self.data[s[1]: s[1] + s[0]].decode("utf-16-le").rstrip("\0")

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
            ctx = u32(d, o + 44)
            out.append({
                "tid": u32(d, o), "suspend_count": u32(d, o + 4), "priority": u32(d, o + 12),
                "teb": u64(d, o + 16), "stack_start": start, "stack_size": ssize,
                "rip": u64(d, ctx + 0xF8), "rsp": u64(d, ctx + 0x98),
            })
        return out

    def thread_names(self) -> Dict[int, str]:
        s = self.stream(24)
        out: Dict[int, str] = {}
        if s is None:
            return out
        _, rva = s
        for i in range(u32(self.data, rva)):
            tid, name_rva = struct.unpack_from("<IQ", self.data, rva + 4 + 12 * i)
            out[tid] = self.string(name_rva)
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
            out.append({
                "name": path.replace("/", "\\").split("\\")[-1], "path": path,
                "base": u64(d, o), "size": u32(d, o + 8), "timestamp": u32(d, o + 16),
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
        self.sections = []  # (name, rva, virtual size, raw offset, characteristics)
        for i in range(nsections):
            o = opt + opt_size + 40 * i
            name = d[o:o + 8].rstrip(b"\0").decode("ascii", "replace")
            vsize, va, _rawsize, rawptr = struct.unpack_from("<IIII", d, o + 8)
            self.sections.append((name, va, vsize, rawptr, u32(d, o + 36)))
        export_rva = u32(d, opt + 112)
        self.exports: Dict[str, int] = {}
        if export_rva:
            e = self.offset(export_rva)
            n_names, funcs, names, ords = (u32(d, e + 24), u32(d, e + 28), u32(d, e + 32), u32(d, e + 36))
            for i in range(n_names):
                name_at = self.offset(u32(d, self.offset(names) + 4 * i))
                name = d[name_at:d.index(b"\0", name_at)].decode("ascii")
                ordinal = u16(d, self.offset(ords) + 2 * i)
                self.exports[name] = u32(d, self.offset(funcs) + 4 * ordinal)
        self.by_rva = sorted((rva, name) for name, rva in self.exports.items())

    def offset(self, rva: int) -> int:
        for _name, va, size, rawptr, _ in self.sections:
            if va <= rva < va + max(size, 1):
                return rawptr + rva - va
        raise ValueError("RVA 0x%x in no section" % rva)

    def nearest_export(self, rva: int) -> Optional[str]:
        i = bisect.bisect_right([r for r, _ in self.by_rva], rva) - 1
        if i < 0:
            return None
        start, name = self.by_rva[i]
        return "%s+0x%x" % (name, rva - start)

    def writable(self) -> List[Tuple[int, int]]:
        return [(va, size) for _n, va, size, _r, ch in self.sections if ch & IMAGE_SCN_MEM_WRITE]


def unwind_tables_in_dump(md: Minidump, modules: List[Dict[str, Any]]) -> List[str]:
    """The modules whose exception directory (.pdata) the dump's memory holds whole, read
    through the PE header in the dump: what a stack walk needs of an image, when the image
    itself is not at hand (a MiniDumpNormal holds neither; capture keeps them since
    2026-12)."""
    out = []
    for m in modules:
        head = md.read(m["base"], 0x400)
        if head is None or head[:2] != b"MZ":
            continue
        pe = u32(head, 0x3C)
        if pe + 24 + 112 + 4 * 8 > len(head) or head[pe:pe + 4] != b"PE\0\0":
            continue
        rva, size = u32(head, pe + 24 + 112 + 3 * 8), u32(head, pe + 24 + 112 + 3 * 8 + 4)
        if size and md.read(m["base"] + rva, size) is not None:
            out.append(m["name"].lower())
    return sorted(out)


def load_dump(path: str) -> bytes:
    if path.endswith(".xz"):
        with lzma.open(path) as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def module_file(module: Dict[str, Any], wine_dlls: str) -> Optional[str]:
    """The module's file on this machine: Wine's own DLLs, or the Z: path (Wine maps Z: to /)."""
    path = module["path"].replace("/", "\\")
    if path.lower().startswith("c:\\windows\\"):
        candidate = os.path.join(wine_dlls, module["name"].lower())
    elif path[:2].lower() == "z:":
        candidate = path[2:].replace("\\", "/")
    else:
        return None
    return candidate if os.path.isfile(candidate) else None


class Images:
    """Module files, opened once and only when they are the build the dump loaded."""

    def __init__(self, wine_dlls: str) -> None:
        self.wine_dlls = wine_dlls
        self.cache: Dict[Tuple[str, int], Optional[PeFile]] = {}

    def get(self, module: Dict[str, Any]) -> Optional[PeFile]:
        key = (module["path"], module["timestamp"])
        if key not in self.cache:
            path = module_file(module, self.wine_dlls)
            pe = PeFile(path) if path else None
            same = pe is not None and pe.timestamp == module["timestamp"] and pe.size_of_image == module["size"]
            self.cache[key] = pe if same else None
        return self.cache[key]


def place(modules: List[Dict[str, Any]], images: Images, address: int) -> Optional[str]:
    for m in modules:
        if m["base"] <= address < m["base"] + m["size"]:
            rva = address - m["base"]
            pe = images.get(m)
            near = pe.nearest_export(rva) if pe else None
            return "%s!%s" % (m["name"], near) if near else "%s+0x%x" % (m["name"], rva)
    return None


# ------------------------------------------------------------------------- log and MARKER
def parse_log(path: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {"marker": None, "stdout": [], "stderr": [], "dumps": {}, "trim": {},
                           "raw_bytes": {}}
    section = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f.read().splitlines():
            if line in ("== stdout", "== stderr", "== run"):
                section = line[3:]
                continue
            m = re.match(r"^(python|script|interpreter|marker_seconds) (.*)$", line)
            if m and section == "run":
                out[m.group(1)] = m.group(2)
            elif line.startswith("dump ") and section == "run":
                d = json.loads(line.split(" ", 2)[2])
                out["dumps"][d["file"]] = d
            elif line.startswith(("raw_bytes ", "raw_full_bytes ")) and section == "run":
                _, name, size = line.split()
                out["raw_bytes"][name] = int(size)
            elif line.startswith("trim_full ") and section == "run":
                _, name, rest = line.split(" ", 2)
                out["trim"][name] = json.loads(rest[rest.index("{"):])
            elif section == "stdout":
                if line.startswith("MARKER "):
                    out["marker"] = json.loads(line[7:])
                else:
                    out["stdout"].append(line)
            elif section == "stderr":
                out["stderr"].append(line)
    return out


# ------------------------------------------------------------------------------- CPython
def lock_object(md: Minidump, address: int, rlock: bool, minor: int, live_hex: Optional[str]) -> Dict[str, Any]:
    """A _thread.lock or _thread.RLock read from the dump, as its version lays it out."""
    raw = md.read(address, 48)
    facts: Dict[str, Any] = {"address": address, "in_dump": raw is not None}
    if raw is None:
        return facts
    facts["ob_type"] = u64(raw, 8)
    if live_hex:
        live = bytes.fromhex(live_hex)
        size = 40 if rlock else (24 if minor >= 13 else 33)
        facts["same_bytes_as_the_process_read_after_refcount"] = raw[8:size] == live[8:size]
    if minor >= 13 and not rlock:
        facts.update(mutex_byte=u8(raw, 16), locked=bool(raw[16] & 1), waiters_parked=bool(raw[16] & 2))
        return facts
    facts["lock_lock"] = u64(raw, 16)
    if rlock and minor >= 13:
        facts.update(owner=u64(raw, 24), count=u32(raw, 32))
    elif rlock:
        facts.update(owner=u32(raw, 24), count=u32(raw, 28))
    else:
        facts["locked"] = bool(raw[32])
    mutex = md.read(facts["lock_lock"], 64) if facts["lock_lock"] else None
    facts["nrmutex_in_dump"] = mutex is not None
    if mutex is not None and minor >= 13:
        facts["nrmutex"] = {"srwlock": u64(mutex, 0), "condition_variable": u64(mutex, 8), "locked": i32(mutex, 16)}
    elif mutex is not None:
        facts["nrmutex"] = {
            "critical_section": critical_section(mutex[:40]),
            "cv_semaphore": u64(mutex, 40),
            "cv_waiting": i32(mutex, 48),
            "locked": i32(mutex, 56),
        }
    return facts


def critical_section(raw: bytes) -> Dict[str, Any]:
    return {
        "debug_info": u64(raw, 0), "lock_count": i32(raw, 8), "recursion_count": i32(raw, 12),
        "owning_thread": u64(raw, 16), "lock_semaphore": u64(raw, 24), "spin_count": u64(raw, 32),
    }


def find_gil(md: Minidump, pydll: Dict[str, Any], pe: PeFile, interval: int,
             tstates: Dict[int, str], minor: int) -> List[Dict[str, Any]]:
    """Candidates for struct _gil_runtime_state in python3X.dll's writable sections."""
    found = []
    for va, size in pe.writable():
        base = pydll["base"] + va
        data = md.read(base, size)
        if data is None:  # only parts may be there (a Python-aware minidump): page by page
            pages = []
            for p in range(0, size, 0x1000):
                chunk = md.read(base + p, min(0x1000, size - p))
                pages.append(chunk if chunk is not None else b"\xff" * min(0x1000, size - p))
            data = b"".join(pages)
        for o in range(0, len(data) - 120, 8):
            if u32(data, o) != interval or u32(data, o + 4) != 0:
                continue
            holder, locked = u64(data, o + 8), i32(data, o + 16)
            if locked not in (-1, 0, 1) or holder > USER_TOP or holder % 8:
                continue
            gil = {
                "address": base + o,
                "rva": va + o,
                "interval_us": interval,
                "last_holder": holder,
                "last_holder_is": tstates.get(holder),
                "locked": locked,
                "switch_number": u32(data, o + 20),
            }
            if minor >= 13:
                gil.update(cond=u64(data, o + 24), mutex_srwlock=u64(data, o + 32))
            else:
                gil.update(cond_semaphore=u64(data, o + 24), cond_waiting=i32(data, o + 32),
                           mutex=critical_section(data[o + 40:o + 80]))
            found.append(gil)
    return found


def debug_offsets_313(md: Minidump, runtime: int) -> Optional[Dict[str, Any]]:
    """3.13's _Py_DebugOffsets at _PyRuntime: the interpreter's GIL where it says it is."""
    head = md.read(runtime, 8 * 40)
    if head is None or head[:8] != b"xdebugpy":
        return None
    words = struct.unpack_from("<40Q", head)
    # cookie, version, free_threaded, runtime_state{size, finalizing, interpreters_head},
    # interpreter_state{size, id, next, threads_head, gc, imports_modules, sysdict,
    # builtins, ceval_gil, gil_runtime_state, gil_runtime_state_enabled,
    # gil_runtime_state_locked, gil_runtime_state_holder}
    version, interpreters_head = words[1], words[5]
    gil_state, locked_at, holder_at = words[15], words[17], words[18]
    interp_raw = md.read(runtime + interpreters_head, 8)
    interp = u64(interp_raw, 0) if interp_raw else None
    facts: Dict[str, Any] = {
        "py_version_hex": "0x%08x" % version,
        "interpreter": interp,
        "offset_gil_runtime_state": gil_state,
        "offset_locked": locked_at,
        "offset_holder": holder_at,
    }
    if interp:
        facts["gil_address"] = interp + gil_state
        locked = md.read(interp + locked_at, 4)
        holder = md.read(interp + holder_at, 8)
        facts["locked"] = i32(locked, 0) if locked else None
        facts["holder"] = u64(holder, 0) if holder else None
    return facts


def tstate_id_offsets(md: Minidump, tstate: int, tid: int) -> Optional[List[int]]:
    raw = md.read(tstate, 0x200)
    if raw is None:
        return None
    return [o for o in range(0, 0x200, 4) if u32(raw, o) == tid]


def stack_mentions(md: Minidump, thread: Dict[str, Any], wanted: Dict[int, str]) -> Dict[str, int]:
    """Which of the `wanted` addresses the thread's stack (as the dump holds it) has as words."""
    raw = md.read(thread["stack_start"], thread["stack_size"]) if thread["stack_size"] else None
    seen: Dict[str, int] = {}
    if raw is None:
        return seen
    for (word,) in struct.iter_unpack("<Q", raw[: len(raw) & ~7]):
        name = wanted.get(word)
        if name:
            seen[name] = seen.get(name, 0) + 1
    return seen


# ------------------------------------------------------------------------------- a dump
def dump_facts(path: str, run: str, log: Dict[str, Any], args: argparse.Namespace,
               images: Images) -> Dict[str, Any]:
    raw = load_dump(path)
    md = Minidump(raw)
    file = os.path.basename(path)
    name = re.sub(r"(\.trimmed)?\.dmp(\.xz)?$", "", file)
    marker = log["marker"] or {}
    minor = int(log["python"].split(".")[1])
    threads = md.threads()
    modules = md.modules()
    names = md.thread_names()
    by_tid = {t["native_id"]: t for t in marker.get("threads", [])}
    tstates = {t["tstate"]: t["name"] for t in marker.get("threads", []) if t.get("tstate")}
    pydll = next((m for m in modules if re.match(r"^python3\d+\.dll$", m["name"].lower())), None)
    taken = log["dumps"].get(name + ".dmp", {})
    facts: Dict[str, Any] = {
        "file": file,
        "name": name,
        "run": run,
        "scenario": marker.get("scenario"),
        "python_minor": "3.%d" % minor,
        "python_version": marker.get("python"),
        "dump_type": "full" if md.full else "normal",
        "tool": taken.get("tool"),
        "tool_said": taken.get("said"),
        "tool_seconds": taken.get("seconds"),
        "process_running_after_the_dump": taken.get("process_running_after"),
        "size_bytes": os.path.getsize(path),
        "dump_bytes": len(raw),
        "dump_sha256": hashlib.sha256(raw).hexdigest(),
        "raw_dump_bytes": log["raw_bytes"].get(name + ".dmp"),
        "trimmed": log["trim"].get(name + ".dmp"),
        "raw_dump_in_cache": os.path.exists(os.path.join(args.full_dumps if md.full else args.raw_dumps,
                                                         name + ".dmp")),
        "header_flags": md.flags,
        "header_timestamp": md.timestamp,
        "streams": [STREAM_NAMES.get(k, "0x%x" % k) for k, _, _ in md.streams],
        "has_exception": md.stream(6) is not None,
        "has_handle_data": md.stream(12) is not None,
        "has_thread_names": md.stream(24) is not None,
        "comment": md.comment(),
        "memory_ranges": len(md.ranges),
        "memory_bytes": sum(r[1] for r in md.ranges),
        "unwind_tables_in_dump": unwind_tables_in_dump(md, modules),
        "pid": marker.get("pid"),
        "python_dll": pydll,
    }
    # the objects of interest: their addresses, for the stack scan and the decoding below
    wanted: Dict[int, str] = {}
    for n, t in ((t["name"], t) for t in marker.get("threads", [])):
        if t.get("tstate"):
            wanted[t["tstate"]] = "tstate of %s" % n
    objects: Dict[str, Any] = {}
    for lock_name, lock in (marker.get("locks") or {}).items():
        rlock = lock["type"].endswith("RLock")
        objects[lock_name] = dict(type=lock["type"], **lock_object(md, lock["address"], rlock, minor, lock["bytes"]))
        wanted[lock["address"]] = lock_name
        if objects[lock_name].get("lock_lock"):
            wanted[objects[lock_name]["lock_lock"]] = lock_name + " (its NRMUTEX)"
    for cs_name, cs in (marker.get("critical_sections") or {}).items():
        raw_cs = md.read(cs["address"], 40)
        objects[cs_name] = {"type": "CRITICAL_SECTION", "address": cs["address"], "dll": cs["dll"],
                            "rva": cs["rva"], "in_dump": raw_cs is not None}
        if raw_cs is not None:
            objects[cs_name].update(critical_section(raw_cs))
            objects[cs_name]["owning_thread_is"] = by_tid.get(objects[cs_name]["owning_thread"], {}).get("name")
            objects[cs_name]["same_bytes_as_the_process_read"] = raw_cs.hex() == cs["bytes"]
        wanted[cs["address"]] = cs_name
    for t in marker.get("threads", []):
        w = t.get("waits_on") or {}
        labels = {  # what each address in a wait is, in words
            "tstate_lock": "%s's _tstate_lock (%s's join waits on it)" % (w.get("thread"), t["name"]),
            "handle": "%s's _ThreadHandle (%s's join waits on it)" % (w.get("thread"), t["name"]),
            "waiter_lock": "the waiter lock %s sleeps on (in %s.not_empty)" % (t["name"], w.get("object")),
            "condition_lock": "%s.mutex (the queue's lock, free)" % w.get("object"),
            "address": "the queue %s" % w.get("object"),
            "condition": "%s.not_empty (a threading.Condition)" % w.get("object"),
        }
        for key in ("tstate_lock", "waiter_lock", "condition_lock"):
            if w.get(key):
                label = labels[key]
                objects[label] = dict(type="_thread.lock", **lock_object(md, w[key], False, minor, w.get(key + "_bytes")))
                wanted[w[key]] = label
                if objects[label].get("lock_lock"):
                    wanted[objects[label]["lock_lock"]] = label + " (its NRMUTEX)"
        for key in {"join": ("handle",), "queue": ("address", "condition")}.get(w.get("kind"), ()):
            if w.get(key):  # objects not decoded here: whether the dump holds their head
                objects[labels[key]] = {"address": w[key], "in_dump": md.read(w[key], 16) is not None}
                wanted[w[key]] = labels[key]
    # the GIL
    gil: Dict[str, Any] = {"ground_truth": marker.get("gil")}
    pe = images.get(pydll) if pydll else None
    interval = round(marker.get("switch_interval", 0.005) * 1e6)
    if pydll and pe:
        candidates = find_gil(md, pydll, pe, interval, tstates, minor)
        gil["candidates"] = candidates
        runtime = pe.exports.get("_PyRuntime")
        if runtime is not None:
            gil["_PyRuntime"] = pydll["base"] + runtime
            for c in candidates:
                c["offset_from__PyRuntime"] = c["address"] - gil["_PyRuntime"]
            if minor >= 13:
                gil["debug_offsets"] = debug_offsets_313(md, pydll["base"] + runtime)
        if len(candidates) == 1:
            c = candidates[0]
            gil["holder"] = c["last_holder_is"] if c["locked"] == 1 else None
            gil["locked"] = c["locked"]
            wanted[c["address"]] = "the GIL"
    facts["gil"] = gil
    facts["objects"] = objects
    # the threads
    out_threads = []
    for t in threads:
        m = by_tid.get(t["tid"], {})
        entry = {
            "tid": t["tid"],
            "name": m.get("name"),
            "name_in_dump": names.get(t["tid"]),
            "suspend_count": t["suspend_count"],
            "teb": t["teb"],
            "stack_start": t["stack_start"],
            "stack_size": t["stack_size"],
            "rip": t["rip"],
            "rip_at": place(modules, images, t["rip"]),
            "rsp": t["rsp"],
            "in_marker": bool(m),
            "tstate": m.get("tstate"),
            "waits_on": m.get("waits_on"),
            "holds": m.get("holds"),
            "python_frames": m.get("frames"),
            "stack_points_at": stack_mentions(md, t, wanted),
        }
        if m.get("tstate"):
            entry["tstate_thread_id_offsets"] = tstate_id_offsets(md, m["tstate"], t["tid"])
        out_threads.append(entry)
    facts["threads"] = out_threads
    facts["marker_threads_in_dump"] = sorted(by_tid) == sorted(t["tid"] for t in threads if t["tid"] in by_tid)
    facts["threads_not_in_marker"] = [t["tid"] for t in threads if t["tid"] not in by_tid]
    facts["deadlock"] = marker.get("deadlock")
    facts["marker"] = marker
    facts["stdout"] = log["stdout"]
    facts["stderr"] = log["stderr"]
    return facts


def summary(d: Dict[str, Any]) -> str:
    waits = []
    for t in d["threads"]:
        w = t.get("waits_on") or {}
        if w:
            waits.append("%s->%s(%s)" % (t["name"], w.get("object") or w.get("thread") or w.get("kind"),
                                          w.get("held_by")))
    gil = d["gil"]
    return "%-40s %-6s %-7s %9d B  gil=%s/%s  %s" % (
        d["file"], d["dump_type"], d["tool"], d["size_bytes"], gil.get("locked"), gil.get("holder"),
        " ".join(waits))


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for option in ("--logs", "--raw-dumps", "--full-dumps", "--wine-dlls", "--manifest"):
        ap.add_argument(option, required=True)
    ap.add_argument("folder")
    args = ap.parse_args(argv)
    images = Images(args.wine_dlls)
    dumps = []
    for log_name in sorted(os.listdir(args.logs)):
        run = log_name[:-4]
        log = parse_log(os.path.join(args.logs, log_name))
        for f in sorted(os.listdir(args.folder)):
            stem = re.sub(r"(\.trimmed)?\.dmp\.xz$", "", f)
            if f.endswith(".dmp.xz") and stem in (run, run.replace("_py", "_full_py")):
                dumps.append(dump_facts(os.path.join(args.folder, f), run, log, args, images))
    order = ("lock_deadlock", "gil_held", "queue_wait", "cs_deadlock")
    dumps.sort(key=lambda d: (order.index(d["scenario"]), int(d["python_minor"][2:]), d["name"]))
    with open(args.manifest, "w", encoding="utf-8") as f:
        json.dump({"schema": 1, "dumps": dumps}, f, indent=1)
        f.write("\n")
    for d in dumps:
        print(summary(d))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
