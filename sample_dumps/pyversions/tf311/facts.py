#!/usr/bin/env python3
"""facts.json for tf_nest_flatten_py311, read from the raw dump with struct alone (not dumpkit).

    python3 facts.py --dump RAW.dmp --log logs/NAME.log --script .../tf_nest_flatten.py \
        --images /work/tf311-cache/images --dump-name NAME.dmp -o facts.json

From the dump: header, stream list, the exception record (code, flags, address, parameters)
and the crashing thread's context (rip, rsp), the thread list (ids, TEBs, stack ranges), the
module list (name, path, base, size, timestamp, file version), MiscInfo's process id, the
memory ranges; from the log: the program's MARKER line, the dumper's line, the run time; from
the script: the Python frames its "# stack" lines mark (outermost first); from the images
folder: which module file of the dump is there, checked by its own PE timestamp and size.
"""

import argparse
import ast
import hashlib
import json
import os
import re
import struct
import sys
from typing import Dict, List, Optional, Tuple

STREAM_NAMES = {
    3: "ThreadList", 4: "ModuleList", 5: "MemoryList", 6: "Exception", 7: "SystemInfo",
    9: "Memory64List", 15: "MiscInfo", 16: "MemoryInfoList", 17: "ThreadInfoList",
    24: "ThreadNames", 0: "Unused", 0xFFF0: "Wine private (0xfff0)",
}
SCRIPT_DIR_WINDOWS = "C:\\scripts"


class Dump:
    def __init__(self, data: bytes) -> None:
        sig, ver, count, rva, _checksum, stamp, flags = struct.unpack_from("<4sIIIIIQ", data, 0)
        if sig != b"MDMP":
            raise ValueError("not a minidump")
        self.data, self.version, self.timestamp, self.flags = data, ver & 0xFFFF, stamp, flags
        self.streams: List[Tuple[int, int, int]] = []
        for i in range(count):
            kind, size, srva = struct.unpack_from("<III", data, rva + 12 * i)
            self.streams.append((kind, size, srva))
        self.ranges: List[Tuple[int, int, int]] = []  # (start, size, rva)
        mem = self.stream(5)
        if mem:
            (n,) = struct.unpack_from("<I", data, mem[1])
            for i in range(n):
                start, size, mrva = struct.unpack_from("<QII", data, mem[1] + 4 + 16 * i)
                self.ranges.append((start, size, mrva))

    def stream(self, kind: int) -> Optional[Tuple[int, int]]:
        for k, size, rva in self.streams:
            if k == kind:
                return size, rva
        return None

    def string(self, rva: int) -> str:
        (n,) = struct.unpack_from("<I", self.data, rva)
        return self.data[rva + 4 : rva + 4 + n].decode("utf-16-le")

    def threads(self) -> List[dict]:
        size_rva = self.stream(3)
        if not size_rva:
            return []
        rva = size_rva[1]
        (n,) = struct.unpack_from("<I", self.data, rva)
        out = []
        for i in range(n):
            tid, suspend, pclass, prio, teb, st_start, st_size, st_rva, ctx_size, ctx_rva = (
                struct.unpack_from("<IIIIQQIIII", self.data, rva + 4 + 48 * i)
            )
            rip, rsp = self.context_rip_rsp(ctx_rva)
            out.append({
                "tid": tid, "teb": hex(teb), "suspend_count": suspend,
                "stack_start": hex(st_start), "stack_end": hex(st_start + st_size),
                "stack_bytes_in_dump": st_size, "context_size": ctx_size,
                "rip": hex(rip), "rsp": hex(rsp),
            })
        return out

    def context_rip_rsp(self, ctx_rva: int) -> Tuple[int, int]:
        # x64 CONTEXT: Rsp at 0x98, Rip at 0xF8
        (rsp,) = struct.unpack_from("<Q", self.data, ctx_rva + 0x98)
        (rip,) = struct.unpack_from("<Q", self.data, ctx_rva + 0xF8)
        return rip, rsp

    def modules(self) -> List[dict]:
        size_rva = self.stream(4)
        if not size_rva:
            return []
        rva = size_rva[1]
        (n,) = struct.unpack_from("<I", self.data, rva)
        out = []
        for i in range(n):
            o = rva + 4 + 108 * i
            base, size, checksum, stamp, name_rva = struct.unpack_from("<QIIII", self.data, o)
            vs = struct.unpack_from("<13I", self.data, o + 24)
            fv = None
            if vs[0] == 0xFEEF04BD:
                fv = "%d.%d.%d.%d" % (vs[2] >> 16, vs[2] & 0xFFFF, vs[3] >> 16, vs[3] & 0xFFFF)
            path = self.string(name_rva)
            out.append({
                "name": re.split(r"[\\/]", path)[-1], "path": path, "base": hex(base),
                "size": size, "end": hex(base + size), "timestamp": "0x%08x" % stamp,
                "checksum": "0x%08x" % checksum, "file_version": fv,
            })
        return out

    def exception(self) -> dict:
        size_rva = self.stream(6)
        if not size_rva:
            return {}
        rva = size_rva[1]
        tid, _align, code, flags, _rec, addr, nparams, _unused = struct.unpack_from(
            "<IIIIQQII", self.data, rva
        )
        params = struct.unpack_from("<15Q", self.data, rva + 40)[:nparams]
        ctx_size, ctx_rva = struct.unpack_from("<II", self.data, rva + 40 + 120)
        rip, rsp = self.context_rip_rsp(ctx_rva)
        return {
            "thread_id": tid, "code": code, "flags": flags, "address": addr,
            "parameters": list(params), "context_size": ctx_size, "rip": rip, "rsp": rsp,
        }

    def process_id(self) -> Optional[int]:
        misc = self.stream(15)
        if not misc:
            return None
        size, flags1, pid = struct.unpack_from("<III", self.data, misc[1])
        return pid if flags1 & 1 else None


def marked_stack(path: str, tag: str = "stack") -> List[dict]:
    """The frames the script's "# stack" lines put on the Python stack, outermost first:
    each marked line is a call site in its enclosing def (or <module>); the chain starts at
    the marked function no marked line calls and follows the calls."""
    source = open(path, encoding="utf-8").read()
    lines = source.splitlines()
    marked = {i + 1 for i, t in enumerate(lines) if re.search(r"#\s*" + tag + r"\s*$", t)}
    sites: Dict[str, Tuple[int, List[str]]] = {}
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.FunctionDef)):
            continue
        owner = "<module>" if isinstance(node, ast.Module) else node.name
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef):
                continue
            for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1):
                if line in marked:
                    calls = [ast.unparse(n.func) for n in ast.walk(stmt)
                             if isinstance(n, ast.Call) and n.lineno == line]
                    sites[owner] = (line, calls)
    called = {c for _, cs in sites.values() for c in cs}
    current = next((f for f in sites if f not in called), None)
    chain, seen = [], set()
    name = os.path.basename(path)
    while current in sites and current not in seen:
        seen.add(current)
        line, calls = sites[current]
        chain.append({
            "function": current, "file": SCRIPT_DIR_WINDOWS + "\\" + name, "line": line,
            "calls": calls, "source": lines[line - 1].split("#")[0].strip(),
        })
        current = next((c for c in calls if c in sites), None)
    return chain


def read_log(path: str) -> dict:
    out: dict = {"marker": None, "dumper_line": None, "elapsed_seconds": None, "lines": []}
    for line in open(path, encoding="utf-8", errors="replace").read().splitlines():
        out["lines"].append(line)
        if line.startswith("MARKER "):
            out["marker"] = json.loads(line[len("MARKER "):])
        elif line.startswith("dumper:"):
            out["dumper_line"] = line
        elif line.startswith("elapsed_seconds "):
            out["elapsed_seconds"] = float(line.split()[1])
    return out


def pe_stamp_size(path: str) -> Optional[Tuple[int, int]]:
    with open(path, "rb") as f:
        head = f.read(4096)
    if head[:2] != b"MZ":
        return None
    (pe,) = struct.unpack_from("<I", head, 0x3C)
    if head[pe : pe + 4] != b"PE\0\0":
        return None
    (stamp,) = struct.unpack_from("<I", head, pe + 8)
    (size_of_image,) = struct.unpack_from("<I", head, pe + 24 + 56)
    return stamp, size_of_image


def image_in_cache(images: str, module: dict) -> Optional[str]:
    """The file under images/ for a module recorded under ...\\Python311\\: same relative
    path, same PE timestamp and SizeOfImage as the dump says."""
    m = re.search(r"\\Programs\\Python\\(Python311)\\(.*)$", module["path"], re.I)
    if not m:
        return None
    rel = os.path.join(m.group(1), *m.group(2).split("\\"))
    full = os.path.join(images, rel)
    if not os.path.isfile(full):
        return None
    got = pe_stamp_size(full)
    if got != (int(module["timestamp"], 16), module["size"]):
        return None
    return rel.replace(os.sep, "/")


def pe_sections(path: str) -> List[Tuple[bytes, int, int, int, int]]:
    """(name, rva, virtual size, raw offset, raw size) of each section of a PE file."""
    with open(path, "rb") as f:
        head = f.read(4096)
    (pe,) = struct.unpack_from("<I", head, 0x3C)
    nsec, = struct.unpack_from("<H", head, pe + 6)
    (opt_size,) = struct.unpack_from("<H", head, pe + 20)
    out = []
    for i in range(nsec):
        o = pe + 24 + opt_size + 40 * i
        name, vsize, rva, rsize, roff = struct.unpack_from("<8sIIII", head, o)
        out.append((name.rstrip(b"\0"), rva, vsize, roff, rsize))
    return out


def image_bytes(path: str, rva: int, n: int) -> Optional[bytes]:
    for _name, srva, vsize, roff, rsize in pe_sections(path):
        if srva <= rva and rva + n <= srva + min(vsize, rsize):
            with open(path, "rb") as f:
                f.seek(roff + rva - srva)
                return f.read(n)
    return None


def stack_return_addresses(d: "Dump", thread: dict, module: dict, image: Optional[str],
                           top: int = 4) -> List[dict]:
    """The values most often stored in the crashing thread's captured stack that point into
    `module`, with, when the image is at hand, what the 5 bytes before each are: a direct
    `call rel32` (E8) and its target (so a return address of a recursion shows as a call
    site into the function it sits in)."""
    start = int(thread["stack_start"], 16)
    rng = next((r for r in d.ranges if r[0] == start), None)
    if rng is None:
        return []
    mem = d.data[rng[2] : rng[2] + rng[1]]
    base, size = int(module["base"], 16), module["size"]
    counts: Dict[int, int] = {}
    for (v,) in struct.iter_unpack("<Q", mem[: len(mem) // 8 * 8]):
        if base <= v < base + size:
            counts[v] = counts.get(v, 0) + 1
    out = []
    for v, n in sorted(counts.items(), key=lambda kv: -kv[1])[:top]:
        entry = {"value": hex(v), "at": "%s+0x%x" % (module["name"], v - base), "count": n}
        if image:
            before = image_bytes(image, v - base - 5, 5)
            if before and before[0] == 0xE8:
                (rel,) = struct.unpack_from("<i", before, 1)
                entry["preceded_by"] = "call rel32 -> %s+0x%x" % (module["name"], v - base + rel)
            else:
                entry["preceded_by"] = "not a direct call (%s)" % (before.hex() if before else "not in the image")
                text = image_bytes(image, v - base, 40)
                if text and b"\0" in text:
                    text = text.split(b"\0")[0]
                    if text and all(32 <= c < 127 for c in text):
                        entry["points_at_string"] = text.decode("ascii")
        out.append(entry)
    return out


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--script", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--dump-name", required=True)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)

    data = open(a.dump, "rb").read()
    d = Dump(data)
    log = read_log(a.log)
    exc = d.exception()
    threads = d.threads()
    modules = d.modules()
    for m in modules:
        m["image_in_cache"] = image_in_cache(a.images, m)

    def where(address: int) -> Optional[str]:
        for m in modules:
            base = int(m["base"], 16)
            if base <= address < base + m["size"]:
                return "%s+0x%x" % (m["name"], address - base)
        return None

    crash = next((t for t in threads if t["tid"] == exc.get("thread_id")), None)
    stack = None
    if crash:
        s, e = int(crash["stack_start"], 16), int(crash["stack_end"], 16)
        stack = {"start": crash["stack_start"], "end": crash["stack_end"], "size": e - s,
                 "contains_rsp": s <= exc["rsp"] < e}
    used = None
    if exc.get("code") == 0xC00000FD and crash and len(exc["parameters"]) > 1:
        used = int(crash["stack_end"], 16) - exc["parameters"][1]
    starts = sorted((r[0], r[0] + r[1]) for r in d.ranges)
    overlapping, reach = 0, 0
    for s, e in starts:
        if s < reach:
            overlapping += 1
        reach = max(reach, e)
    marker = log["marker"] or {}
    py = next((m for m in modules if m["name"].lower() == "python311.dll"), None)
    exe = next((m for m in modules if m["name"].lower() == "python.exe"), None)
    tfpyd = next((m for m in modules if m["name"].lower() == "_pywrap_tensorflow_internal.pyd"), None)
    facts = {
        "schema": 1,
        "scenario": "tf_nest_flatten_py311",
        "program": "sample_dumps/python/src/tf_nest_flatten.py (reused as is)",
        "dump_name": a.dump_name,
        "bundle": a.dump_name.replace(".dmp", ".dkb"),
        "dump_type": "normal (MiniDumpNormal, first chance, sample_dumps/bin/dumper.exe)",
        "dump_bytes": len(data),
        "dump_sha256": hashlib.sha256(data).hexdigest(),
        "header_version": d.version,
        "header_flags": hex(d.flags),
        "header_timestamp": d.timestamp,
        "streams": [STREAM_NAMES.get(k, hex(k)) for k, _, _ in d.streams],
        "seconds_to_run_and_dump": log["elapsed_seconds"],
        "exception_code": exc.get("code"),
        "exception_code_hex": "0x%08X" % exc["code"] if exc else None,
        "exception_flags": exc.get("flags"),
        "exception_address": hex(exc["address"]) if exc else None,
        "exception_address_at": where(exc["address"]) if exc else None,
        "exception_parameters": [hex(p) for p in exc.get("parameters", [])],
        "exception_context_size": exc.get("context_size"),
        "rip": hex(exc["rip"]) if exc else None,
        "rip_at": where(exc["rip"]) if exc else None,
        "rsp": hex(exc["rsp"]) if exc else None,
        "crash_thread_tid": exc.get("thread_id"),
        "process_id": d.process_id(),
        "threads": [t["tid"] for t in threads],
        "thread_details": threads,
        "main_thread_tid": threads[0]["tid"] if threads else None,
        "crash_thread_stack_in_dump": stack,
        "stack_used_at_overflow": used,
        "memory_ranges": len(d.ranges),
        "memory_bytes": sum(r[1] for r in d.ranges),
        "overlapping_ranges": overlapping,
        "python_version": marker.get("python"),
        "python_exe_path": exe["path"] if exe else None,
        "python_dll_path": py["path"] if py else None,
        "python_dll_file_version": py["file_version"] if py else None,
        "python_dll_timestamp": py["timestamp"] if py else None,
        "tensorflow_pyd": ({k: tfpyd[k] for k in ("path", "base", "size", "timestamp", "file_version")}
                           if tfpyd else None),
        "script_path": SCRIPT_DIR_WINDOWS + "\\" + os.path.basename(a.script),
        "marker": marker or None,
        "dumper_line": log["dumper_line"],
        "expected_class": "recursion",
        "recursion_kind": "extension",
        "extension": "tensorflow",
        "extension_module": "_pywrap_tensorflow_internal.pyd",
        "python_api": "tf.nest.flatten",
        # the pybind11 function tf.nest.flatten calls (tensorflow/python/util/nest_util.py:
        # `return _pywrap_utils.Flatten(structure, expand_composites)`, in 2.13 and 2.18)
        "python_binding": "_pywrap_utils.Flatten",
        "depth_built": marker.get("depth"),
        "numpy_version": marker.get("numpy"),
        "tensorflow_version": marker.get("tensorflow"),
        "python_stack_expected": marked_stack(a.script),
        "crash_stack_values_into_tensorflow_pyd": (
            stack_return_addresses(d, crash, tfpyd, os.path.join(a.images, tfpyd["image_in_cache"])
                                   if tfpyd.get("image_in_cache") else None)
            if crash and tfpyd else None),
        "module_count": len(modules),
        "modules": modules,
    }
    with open(a.output, "w") as f:
        json.dump(facts, f, indent=1)
        f.write("\n")
    print("facts.json: %s at %s, tid %s, %d threads, %d modules, %d bytes" % (
        facts["exception_code_hex"], facts["exception_address_at"], facts["crash_thread_tid"],
        len(threads), len(modules), len(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
