"""Derive manifest.json for the runtime-collision dumps from the logs, the dumps and the images.

Reads every dump with its own minimal `struct` minidump reader (never dumpkit): header, streams,
exception record and its context's registers (RCX = the exit code at ntdll!RtlExitUserProcess),
threads, modules (path, base, size, timestamp, VS_FIXEDFILEINFO file version). Each module
path the dump records under C:\\Python3X or C:\\apps\\legacy is mapped back to the interpreter
folder the run used ($COLLISIONS_CACHE/envs/ENV, named in the log) and, through that folder's
.wheels.jsonl (written by install_wheel.py), to the wheel and the file inside it it came from;
pe_facts.py then reads the file itself: linker version, file version, msvcp140.dll imports.
The program's own `MARKER {json}` line is copied as it is; lines starting `prog: ` are the
program's, every other line of output was written by a runtime (OpenMP, cuDNN, Python).

Usage: facts.py --logs logs --envs DIR --raw DIR --manifest manifest.json FOLDER
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import re
import struct
import sys
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pe_facts  # noqa: E402

STREAM_NAMES = {
    3: "ThreadList", 4: "ModuleList", 5: "MemoryList", 6: "Exception", 7: "SystemInfo",
    9: "Memory64List", 15: "MiscInfo", 16: "MemoryInfoList", 17: "ThreadInfoList",
    21: "SystemMemoryInfo", 24: "ThreadNames", 0xFFF0: "Wine(0xfff0)",
}
KINDS = {0x80000003: "breakpoint", 0xC0000005: "access_violation", 0xC0000409: "fail_fast",
         0xC00000FD: "stack_overflow"}
# CONTEXT (x64) offsets of the integer registers
REGS = {"rax": 0x78, "rcx": 0x80, "rdx": 0x88, "rbx": 0x90, "rsp": 0x98, "rbp": 0xA0,
        "rsi": 0xA8, "rdi": 0xB0, "r8": 0xB8, "r9": 0xC0, "r10": 0xC8, "r11": 0xD0,
        "r12": 0xD8, "r13": 0xE0, "r14": 0xE8, "r15": 0xF0, "rip": 0xF8}
# which module names are the collision, per scenario
COLLIDING = {
    "omp_duplicate": [r"libiomp5md\.dll"],
    "omp_single": [r"libiomp5md\.dll"],
    "msvcp140_mutex": [r"msvcp140\.dll"],
    "two_cuda_runtimes": [r"cudart64_\d+\.dll", r"cudnn64_\d+\.dll"],
    "cudnn9_shim_abort": [r"cudnn64_\d+\.dll", r"cudnn_\w+64_\d+\.dll"],
}


def u32(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<I", b, o)[0])


def u64(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<Q", b, o)[0])


class Minidump:
    def __init__(self, data: bytes) -> None:
        if data[:4] != b"MDMP":
            raise ValueError("not a minidump")
        self.data = data
        count, dir_rva = u32(data, 8), u32(data, 12)
        self.timestamp = u32(data, 20)
        self.flags = u64(data, 24)
        self.streams = [struct.unpack_from("<III", data, dir_rva + 12 * i) for i in range(count)]
        self.ranges: List[Tuple[int, int, int]] = []
        for kind, _, rva in self.streams:
            if kind == 5:
                for i in range(u32(data, rva)):
                    self.ranges.append(struct.unpack_from("<QII", data, rva + 4 + 16 * i))
            elif kind == 9:
                n, offset = u64(data, rva), u64(data, rva + 8)
                for i in range(n):
                    start, size = struct.unpack_from("<QQ", data, rva + 16 + 16 * i)
                    self.ranges.append((start, size, offset))
                    offset += size

    def stream(self, kind: int) -> Optional[int]:
        for k, _, rva in self.streams:
            if k == kind:
                return rva
        return None

    def string(self, rva: int) -> str:
        return self.data[rva + 4: rva + 4 + u32(self.data, rva)].decode("utf-16-le")

    def regs(self, rva: int) -> Dict[str, int]:
        return {name: u64(self.data, rva + off) for name, off in REGS.items()}

    def exception(self) -> Dict[str, Any]:
        rva = self.stream(6)
        if rva is None:
            return {}
        d = self.data
        n = u32(d, rva + 8 + 24)
        return {
            "thread_id": u32(d, rva), "code": u32(d, rva + 8), "flags": u32(d, rva + 12),
            "address": u64(d, rva + 24),
            "parameters": [u64(d, rva + 8 + 32 + 8 * i) for i in range(min(n, 15))],
            "context": self.regs(u32(d, rva + 8 + 156)),
        }

    def threads(self) -> List[Dict[str, Any]]:
        rva = self.stream(3)
        out: List[Dict[str, Any]] = []
        if rva is None:
            return out
        d = self.data
        for i in range(u32(d, rva)):
            o = rva + 4 + 48 * i
            regs = self.regs(u32(d, o + 44))
            out.append({"tid": u32(d, o), "teb": u64(d, o + 16), "stack_start": u64(d, o + 24),
                        "stack_size": u32(d, o + 32), "rip": regs["rip"], "rsp": regs["rsp"]})
        return out

    def modules(self) -> List[Dict[str, Any]]:
        rva = self.stream(4)
        out: List[Dict[str, Any]] = []
        if rva is None:
            return out
        d = self.data
        for i in range(u32(d, rva)):
            o = rva + 4 + 108 * i
            path = self.string(u32(d, o + 20))
            ffi = o + 24
            ms, ls = u32(d, ffi + 8), u32(d, ffi + 12)
            version = None
            if u32(d, ffi) == 0xFEEF04BD:
                version = "%d.%d.%d.%d" % (ms >> 16, ms & 0xFFFF, ls >> 16, ls & 0xFFFF)
            out.append({"index": i, "name": path.replace("/", "\\").split("\\")[-1],
                        "path": path, "base": u64(d, o), "size": u32(d, o + 8),
                        "timestamp": u32(d, o + 16), "file_version": version})
        return out


def at(modules: List[Dict[str, Any]], address: int) -> Optional[str]:
    for m in modules:
        if m["base"] <= address < m["base"] + m["size"]:
            return "%s+0x%x" % (m["name"], address - m["base"])
    return None


def parse_log(path: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {"marker": None, "dumper_line": None, "program_lines": [],
                           "runtime_lines": []}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f.read().splitlines():
            if line.startswith("MARKER "):
                out["marker"] = json.loads(line[7:])
            elif line.startswith("dumper:"):
                out["dumper_line"] = line
            elif line.startswith("prog: "):
                out["program_lines"].append(line[6:])
            elif line.startswith("environment "):
                parts = line.split()
                out["environment"] = parts[1]
                out["environment_variables"] = parts[2:]
            elif re.match(r"^(elapsed_seconds|raw_bytes|xz_seconds) ", line):
                parts = line.split()
                for k, v in zip(parts[::2], parts[1::2]):
                    out[k] = float(v) if "." in v else int(v)
            elif line.strip():
                out["runtime_lines"].append(line)
    return out


def load_wheels(folder: str) -> Dict[str, Dict[str, Any]]:
    """{installed path (lower case, relative to folder): {wheel, name, version, sha256, member}}"""
    out: Dict[str, Dict[str, Any]] = {}
    path = os.path.join(folder, ".wheels.jsonl")
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            w = json.loads(line)
            for rel, member in w["pe_files"].items():
                out[rel.lower()] = {"wheel": w["wheel"], "name": w["name"],
                                    "version": w["version"], "sha256": w["sha256"],
                                    "file_in_wheel": member}
    return out


def local_file(dump_path: str, env_dir: str) -> Optional[Tuple[str, str, str]]:
    """(folder, path relative to it, local file) of a module path the dump recorded."""
    p = dump_path.replace("/", "\\")
    m = re.match(r"(?i)^C:\\Python3\d+\\(.*)$", p)
    if m:
        folder = env_dir
    else:
        m = re.match(r"(?i)^C:\\apps\\legacy\\(.*)$", p)
        if not m:
            return None
        folder = env_dir + ".legacy"
    rel = m.group(1)
    local = os.path.join(folder, *rel.split("\\"))
    if not os.path.exists(local):  # the dump may spell a name in another case (MSVCP140.dll)
        d, base = os.path.dirname(local), os.path.basename(local)
        hits = [f for f in os.listdir(d) if f.lower() == base.lower()] if os.path.isdir(d) else []
        if not hits:
            return None
        local = os.path.join(d, hits[0])
    return folder, rel, local


def module_facts(m: Dict[str, Any], env_dir: str, wheels: Dict[str, Dict[str, Dict[str, Any]]],
                 pe_detail: bool) -> Dict[str, Any]:
    out = {k: m[k] for k in ("index", "name", "path", "base", "size", "timestamp", "file_version")}
    found = local_file(m["path"], env_dir)
    if found is None:
        out["origin"] = "wine" if m["path"].lower().startswith("c:\\windows") else None
        return out
    folder, rel, local = found
    with open(local, "rb") as f:
        data = f.read()
    out["image_file"] = local
    out["image_sha256"] = hashlib.sha256(data).hexdigest()
    w = wheels.setdefault(folder, load_wheels(folder)).get(rel.lower())
    out["origin"] = "wheel" if w else "python.org"
    if w:
        out["wheel"] = w
    pf = pe_facts.facts(data)
    out["linker_version"] = pf["linker_version"]
    out["image_file_version"] = pf["file_version"]
    if pe_detail and m["name"].lower() == "msvcp140.dll":
        pe = pe_facts.PE(data)
        exports = pe.exports()
        out["mutex_exports"] = {
            name: {"rva": "0x%x" % exports[name],
                   "tail_jump_to": "0x%x" % t if (t := pe.tail_jump(exports[name])) else None}
            for name in ("_Mtx_lock", "_Mtx_unlock", "_Mtx_init_in_situ") if name in exports}
    if pe_detail:
        out["msvcp140_imports"] = pf["msvcp140_imports"]
        out["imports_Mtx_lock"] = pf["imports_Mtx_lock"]
        out["imports_Mtx_init_in_situ"] = pf["imports_Mtx_init_in_situ"]
        out["mutex_break"] = pf["mutex_break"]
    elif pf["msvcp140_imports"]:
        out["imports_msvcp140"] = True
        out["mutex_break"] = pf["mutex_break"]
    return out


def load_dump(path: str) -> bytes:
    if path.endswith(".xz"):
        with lzma.open(path) as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def describe(name: str, folder: str, logs: str, envs: str, raw: str) -> Dict[str, Any]:
    file = next(f for f in (name + ".dmp.xz", name + ".dmp")
                if os.path.exists(os.path.join(folder, f)))
    data = load_dump(os.path.join(folder, file))
    dump = Minidump(data)
    log = parse_log(os.path.join(logs, name + ".log"))
    marker = log["marker"] or {}
    scenario = marker.get("scenario") or re.sub(r"_py3\d+$", "", name)
    env_dir = os.path.join(envs, log["environment"])
    wheels: Dict[str, Dict[str, Dict[str, Any]]] = {}
    exc = dump.exception()
    mods = dump.modules()
    ctx = exc.get("context", {})
    detail = scenario == "msvcp140_mutex"
    all_mods = [module_facts(m, env_dir, wheels, detail) for m in mods]
    colliding = [m for m in all_mods
                 if any(re.fullmatch(p, m["name"], re.I) for p in COLLIDING.get(scenario, []))]
    out: Dict[str, Any] = {
        "file": file, "name": name, "scenario": scenario,
        "program": "src/%s.py" % scenario,
        "python_version": marker.get("version", "").split()[0] if marker else None,
        "python_sys_version": marker.get("version"),
        "python_exe_path": marker.get("executable"),
        "environment": log["environment"],
        "image_folder": env_dir,
        "environment_variables": log["environment_variables"],
        "dump_type": "full" if dump.flags & 2 else "normal",
        "header_flags": dump.flags,
        "size_bytes": os.path.getsize(os.path.join(folder, file)),
        "dump_bytes": len(data), "dump_sha256": hashlib.sha256(data).hexdigest(),
        "raw_dump": os.path.join(raw, name + ".dmp"),
        "seconds_to_run_and_dump": log.get("elapsed_seconds"),
        "streams": [STREAM_NAMES.get(k, hex(k)) for k, _, _ in dump.streams],
        "exception_code": exc.get("code"),
        "exception_code_hex": "0x%08X" % exc["code"] if exc else None,
        "exception_kind": KINDS.get(exc.get("code", 0)),
        "exception_flags": exc.get("flags"),
        "exception_address": exc.get("address"),
        "exception_address_at": at(mods, exc["address"]) if exc else None,
        "exception_parameters": exc.get("parameters"),
        "exception_thread_tid": exc.get("thread_id"),
        "context": {k: "0x%x" % v for k, v in ctx.items()},
        "threads": dump.threads(),
        "wheels": [],
        "colliding_modules": colliding,
        "modules": [{k: m.get(k) for k in ("index", "name", "path", "base", "size",
                                            "file_version", "origin")} for m in all_mods],
        "marker": log["marker"],
        "dumper_line": log["dumper_line"],
        "program_lines": log["program_lines"],
        "runtime_lines": log["runtime_lines"],
        "stderr_first_line": log["runtime_lines"][0] if log["runtime_lines"] else None,
    }
    # an exit caught by dumper --on-exit: the breakpoint at the exit function's entry
    m = re.search(r"process exit through ntdll!(\w+) with code (\d+)", log["dumper_line"] or "")
    if m:
        out["ended_by"] = "exit"
        out["exit_function"] = "ntdll!" + m.group(1)
        out["exit_code"] = ctx["rcx"] & 0xFFFFFFFF if m.group(1) == "RtlExitUserProcess" \
            else ctx["rdx"] & 0xFFFFFFFF
        out["exit_code_register"] = "rcx" if m.group(1) == "RtlExitUserProcess" else "rdx"
        out["exit_code_matches_dumper_line"] = out["exit_code"] == int(m.group(2))
    else:
        out["ended_by"] = "exception"
        out["exit_code"] = None
    if out["exception_kind"] == "access_violation" and exc["parameters"]:
        out["access"] = {"kind": {0: "read", 1: "write", 8: "execute"}.get(exc["parameters"][0]),
                         "address": exc["parameters"][1] if len(exc["parameters"]) > 1 else None}
    if detail:
        out["modules_with_constexpr_mutex"] = [
            {k: mm.get(k) for k in ("name", "path", "linker_version", "wheel")}
            for mm in all_mods if mm.get("mutex_break")]
        out["modules_importing_msvcp140"] = [
            mm["name"] for mm in all_mods if mm.get("msvcp140_imports") or mm.get("imports_msvcp140")]
    seen = {}
    for mm in all_mods:
        w = mm.get("wheel")
        if w and w["wheel"] not in seen:
            seen[w["wheel"]] = {k: w[k] for k in ("name", "version", "wheel", "sha256")}
    for folder_wheels in wheels.values():  # wheels installed but with no module loaded
        for w in folder_wheels.values():
            if w["wheel"] not in seen:
                seen[w["wheel"]] = {k: w[k] for k in ("name", "version", "wheel", "sha256")}
                seen[w["wheel"]]["loaded"] = False
    out["wheels"] = list(seen.values())
    if marker.get("native_id") is not None and exc:
        out["marker_native_id_is_exception_thread"] = marker["native_id"] == exc["thread_id"]
    return out


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", required=True)
    ap.add_argument("--envs", required=True)
    ap.add_argument("--raw", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("folder")
    a = ap.parse_args(argv)
    names = sorted(f[:-4] for f in os.listdir(a.logs) if f.endswith(".log"))
    dumps = []
    for name in names:
        if not any(os.path.exists(os.path.join(a.folder, name + s)) for s in (".dmp", ".dmp.xz")):
            continue
        dumps.append(describe(name, a.folder, a.logs, a.envs, a.raw))
    with open(a.manifest, "w", encoding="utf-8") as f:
        json.dump({"schema": 1, "dumps": dumps}, f, indent=1)
        f.write("\n")
    for d in dumps:
        print("%-26s %s %s at %s exit %s; %d colliding: %s" % (
            d["name"], d["python_version"], d["exception_code_hex"], d["exception_address_at"],
            d["exit_code"], len(d["colliding_modules"]),
            ", ".join("%s %s" % (m["path"], m["file_version"]) for m in d["colliding_modules"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
