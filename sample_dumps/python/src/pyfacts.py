"""Facts about the Python-process dumps, for tests: written to manifest.json.

Everything here comes from three independent places, never from dumpkit:
- the dump file, parsed with struct (streams, exception, threads, modules, memory; in
  full-memory dumps also the TEB stack bounds and the CPython 3.8 thread states and frames,
  read by following PyThreadState/PyFrameObject pointers from the exported _PyRuntime);
- the program: its MARKER line in logs/NAME.log (versions, depth, thread ids) and the
  lines of src/SCRIPT.py marked "# stack" (the Python frames the crash happens under);
- the extracted images in the cache (python38.dll's export table, to find _PyRuntime).

Usage: pyfacts.py --manifest manifest.json --logs logs --images CACHE/images DUMPDIR
"""

from __future__ import annotations

import argparse
import ast
import bisect
import hashlib
import json
import lzma
import os
import re
import struct
import sys
from typing import Dict, Iterator, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))

# What each program is known to do, from its source (see the docstring of src/SCRIPT.py).
PROGRAMS: Dict[str, dict] = {
    "py_recursion": {"expected_class": "recursion", "recursion_kind": "python"},
    "thread_stack_size": {"expected_class": "recursion", "recursion_kind": "python"},
    "repr_recursion": {"expected_class": "recursion", "recursion_kind": "c_protocol", "protocol": "repr"},
    "json_recursion": {"expected_class": "recursion", "recursion_kind": "c_protocol", "protocol": "json"},
    "pickle_recursion": {"expected_class": "recursion", "recursion_kind": "c_protocol", "protocol": "pickle"},
    "numpy_object_recursion": {
        "expected_class": "recursion",
        "recursion_kind": "extension",
        "extension": "numpy",
        "extension_module": "_multiarray_umath.cp38-win_amd64.pyd",
    },
    # Python code recursing through NumPy's C code (its ndarray.shape setter): two
    # Python calls (reshape, __index__) per level
    "numpy_shape_recursion": {
        "expected_class": "recursion",
        "recursion_kind": "python",
        "extension": "numpy",
        "extension_module": "_multiarray_umath.cp38-win_amd64.pyd",
        "attribute_setter": "numpy.ndarray.shape.__set__",
    },
    # Python code recursing through NumPy's Cython code (numpy.random): the functions each
    # level passes through, as Python's traceback names them (CPython 3.11 on Linux, the
    # same NumPy 1.24.4 source)
    "numpy_cython_recursion": {
        "expected_class": "recursion",
        "recursion_kind": "python",
        "cython_functions": [
            "numpy.random._generator.default_rng",
            "numpy.random._pcg64.PCG64.__init__",
            "numpy.random.bit_generator.BitGenerator.__init__",
            "numpy.random.bit_generator.SeedSequence.__init__",
            "numpy.random.bit_generator.SeedSequence.get_assembled_entropy",
            "numpy.random.bit_generator._coerce_to_uint32_array",
        ],
    },
    "tf_nest_flatten": {
        "expected_class": "recursion",
        "recursion_kind": "extension",
        "extension": "tensorflow",
        "extension_module": "_pywrap_tensorflow_internal.pyd",
        "python_api": "tf.nest.flatten",
        # the pybind11 function tf.nest.flatten calls (TF 2.13's
        # tensorflow/python/util/nest_util.py: `return _pywrap_utils.Flatten(structure, expand_composites)`)
        "python_binding": "_pywrap_utils.Flatten",
    },
    "numpy_strided_av": {"expected_class": "access_violation"},
    "faulthandler_null": {"expected_class": "access_violation"},
}
SCRIPT_DIR_WINDOWS = "C:\\scripts"
STREAM_NAMES = {
    0: "Unused",
    3: "ThreadList",
    4: "ModuleList",
    5: "MemoryList",
    6: "Exception",
    7: "SystemInfo",
    9: "Memory64List",
    15: "MiscInfo",
    16: "MemoryInfoList",
    0xFFF0: "Wine private (0xfff0)",
}
MAX_ITEMS = 1_000_000  # bound for every loop over dump data


def u32(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<I", b, o)[0])


def u64(b: bytes, o: int) -> int:
    return int(struct.unpack_from("<Q", b, o)[0])


class Dump:
    """Just enough of a minidump reader: streams, threads, modules, memory."""

    def __init__(self, data: bytes) -> None:
        if data[:4] != b"MDMP":
            raise ValueError("not a minidump")
        self.data = data
        count, dir_rva = u32(data, 8), u32(data, 12)
        self.flags = u64(data, 24)
        self.streams: List[Tuple[int, int, int]] = []
        for i in range(min(count, 1000)):
            o = dir_rva + 12 * i
            self.streams.append((u32(data, o), u32(data, o + 4), u32(data, o + 8)))
        self.ranges: List[Tuple[int, int, int]] = []  # (start, size, file offset)
        self.full = False
        for kind, _, rva in self.streams:
            if kind == 5:
                for i in range(min(u32(data, rva), MAX_ITEMS)):
                    o = rva + 4 + 16 * i
                    self.ranges.append((u64(data, o), u32(data, o + 8), u32(data, o + 12)))
            elif kind == 9:
                self.full = True
                n, offset = u64(data, rva), u64(data, rva + 8)
                for i in range(min(n, MAX_ITEMS)):
                    o = rva + 16 + 16 * i
                    start, size = u64(data, o), u64(data, o + 8)
                    self.ranges.append((start, size, offset))
                    offset += size
        self.ranges.sort()
        self._starts = [r[0] for r in self.ranges]

    def stream(self, kind: int) -> Optional[Tuple[int, int]]:
        for k, size, rva in self.streams:
            if k == kind:
                return size, rva
        return None

    def string(self, rva: int) -> str:
        n = u32(self.data, rva)
        return self.data[rva + 4 : rva + 4 + n].decode("utf-16-le")

    def read(self, address: int, size: int) -> Optional[bytes]:
        """Bytes at address, stitched across adjacent ranges; None if any byte is missing."""
        out = b""
        for _ in range(64):
            i = bisect.bisect_right(self._starts, address) - 1
            if i < 0:
                return None
            start, length, offset = self.ranges[i]
            if address >= start + length:
                return None
            take = min(size - len(out), start + length - address)
            out += self.data[offset + address - start : offset + address - start + take]
            address += take
            if len(out) == size:
                return out
        return None

    def ptr(self, address: int) -> Optional[int]:
        b = self.read(address, 8)
        return None if b is None else u64(b, 0)

    def threads(self) -> List[dict]:
        loc = self.stream(3)
        out: List[dict] = []
        if loc is None:
            return out
        rva = loc[1]
        for i in range(min(u32(self.data, rva), MAX_ITEMS)):
            o = rva + 4 + 48 * i
            tid, teb = u32(self.data, o), u64(self.data, o + 16)
            stack_start, stack_size = u64(self.data, o + 24), u32(self.data, o + 32)
            ctx_size, ctx_rva = u32(self.data, o + 40), u32(self.data, o + 44)
            out.append(
                {
                    "tid": tid,
                    "teb": teb,
                    "stack_start": stack_start,
                    "stack_size": stack_size,
                    "rip": u64(self.data, ctx_rva + 0xF8) if ctx_size >= 0x100 else None,
                    "rsp": u64(self.data, ctx_rva + 0x98) if ctx_size >= 0x100 else None,
                }
            )
        return out

    def modules(self) -> List[dict]:
        loc = self.stream(4)
        out: List[dict] = []
        if loc is None:
            return out
        rva = loc[1]
        for i in range(min(u32(self.data, rva), MAX_ITEMS)):
            o = rva + 4 + 108 * i
            ffi = struct.unpack_from("<13I", self.data, o + 24)
            version = None
            if ffi[0] == 0xFEEF04BD:
                ms, ls = ffi[2], ffi[3]
                version = "%d.%d.%d.%d" % (ms >> 16, ms & 0xFFFF, ls >> 16, ls & 0xFFFF)
            out.append(
                {
                    "path": self.string(u32(self.data, o + 20)),
                    "base": u64(self.data, o),
                    "size": u32(self.data, o + 8),
                    "checksum": u32(self.data, o + 12),
                    "timestamp": u32(self.data, o + 16),
                    "file_version": version,
                }
            )
        return out

    def exception(self) -> dict:
        loc = self.stream(6)
        if loc is None:
            raise ValueError("no exception stream")
        rva = loc[1]
        n = u32(self.data, rva + 32)
        ctx_size, ctx_rva = u32(self.data, rva + 160), u32(self.data, rva + 164)
        return {
            "tid": u32(self.data, rva),
            "code": u32(self.data, rva + 8),
            "flags": u32(self.data, rva + 12),
            "address": u64(self.data, rva + 24),
            "parameters": [u64(self.data, rva + 40 + 8 * i) for i in range(min(n, 15))],
            "context_size": ctx_size,
            "rip": u64(self.data, ctx_rva + 0xF8),
            "rsp": u64(self.data, ctx_rva + 0x98),
        }

    def process_id(self) -> Optional[int]:
        loc = self.stream(15)
        if loc is None or loc[0] < 12:
            return None
        return u32(self.data, loc[1] + 8) if u32(self.data, loc[1] + 4) & 1 else None


def overlaps(dump: Dump) -> dict:
    """Ranges that overlap an earlier one, and whether the overlapping bytes agree."""
    count = agree = 0
    end_prev, prev = -1, None
    for r in dump.ranges:
        start, size, offset = r
        if prev is not None and start < end_prev:
            count += 1
            p_start, _, p_offset = prev
            n = min(end_prev, start + size) - start
            a = dump.data[p_offset + start - p_start : p_offset + start - p_start + n]
            b = dump.data[offset : offset + n]
            agree += a == b
        if start + size > end_prev:
            end_prev, prev = start + size, r
    return {"overlapping_ranges": count, "overlaps_with_equal_bytes": agree}


def pe_exports(path: str) -> Dict[str, int]:
    """Export name -> RVA, from a PE file on disk."""
    with open(path, "rb") as f:
        pe = f.read()
    nt = u32(pe, 0x3C)
    opt = nt + 24
    sections = opt + struct.unpack_from("<H", pe, nt + 20)[0]
    nsect = struct.unpack_from("<H", pe, nt + 6)[0]
    exp_rva = u32(pe, opt + 112)

    def off(rva: int) -> int:
        for i in range(nsect):
            s = sections + 40 * i
            vsize, vaddr, raw = u32(pe, s + 8), u32(pe, s + 12), u32(pe, s + 20)
            if vaddr <= rva < vaddr + max(vsize, u32(pe, s + 16)):
                return rva - vaddr + raw
        raise ValueError("rva outside sections")

    e = off(exp_rva)
    n_names, funcs, names, ords = u32(pe, e + 24), u32(pe, e + 28), u32(pe, e + 32), u32(pe, e + 36)
    out = {}
    for i in range(min(n_names, MAX_ITEMS)):
        name_off = off(u32(pe, off(names) + 4 * i))
        name = pe[name_off : pe.index(b"\0", name_off)].decode()
        ordinal = struct.unpack_from("<H", pe, off(ords) + 2 * i)[0]
        out[name] = u32(pe, off(funcs) + 4 * ordinal)
    return out


# CPython 3.8 x64 layouts (Include/cpython/pystate.h, frameobject.h, code.h, unicodeobject.h)
RUNTIME_INTERPRETERS_HEAD = 0x20  # _PyRuntimeState.interpreters.head
INTERP_TSTATE_HEAD = 0x08
TSTATE_NEXT, TSTATE_FRAME, TSTATE_RECURSION_DEPTH, TSTATE_THREAD_ID = 0x08, 0x18, 0x20, 0xB0
FRAME_BACK, FRAME_CODE, FRAME_LASTI = 0x18, 0x20, 0x68
CODE_FIRSTLINENO, CODE_FILENAME, CODE_NAME, CODE_LNOTAB = 0x28, 0x68, 0x70, 0x78


def py_str(dump: Dump, obj: int) -> Optional[str]:
    head = dump.read(obj, 0x30)
    if head is None:
        return None
    length, state = u64(head, 0x10), u32(head, 0x20)
    kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
    if not compact or length > 4096:
        return None
    data_at = obj + (0x30 if ascii_ else 0x48)
    raw = dump.read(data_at, length * kind)
    if raw is None:
        return None
    return raw.decode({1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind])


def frame_line(dump: Dump, code: int, lasti: int) -> Optional[int]:
    """PyCode_Addr2Line for 3.8: walk co_lnotab's (address, line) increments."""
    first = dump.read(code + CODE_FIRSTLINENO, 4)
    lnotab = dump.ptr(code + CODE_LNOTAB)
    if first is None or lnotab is None:
        return None
    n = dump.read(lnotab + 0x10, 8)
    if n is None:
        return None
    table = dump.read(lnotab + 0x20, min(u64(n, 0), 1 << 20))
    if table is None:
        return None
    line, addr = u32(first, 0), 0
    for i in range(0, len(table) - 1, 2):
        addr += table[i]
        if addr > lasti:
            break
        line += table[i + 1] - 256 if table[i + 1] >= 128 else table[i + 1]
    return line


def python_threads(dump: Dump, runtime: int) -> List[dict]:
    """Every PyThreadState with its frames, innermost first (bounded walks)."""
    out: List[dict] = []
    interp = dump.ptr(runtime + RUNTIME_INTERPRETERS_HEAD)
    tstate = dump.ptr(interp + INTERP_TSTATE_HEAD) if interp else None
    for _ in range(1000):
        if not tstate:
            break
        tid_b = dump.read(tstate + TSTATE_THREAD_ID, 4)
        depth_b = dump.read(tstate + TSTATE_RECURSION_DEPTH, 4)
        frames: List[dict] = []
        frame = dump.ptr(tstate + TSTATE_FRAME)
        for _ in range(MAX_ITEMS):
            if not frame:
                break
            code = dump.ptr(frame + FRAME_CODE)
            lasti_b = dump.read(frame + FRAME_LASTI, 4)
            if code is None or lasti_b is None:
                break
            lasti = struct.unpack("<i", lasti_b)[0]
            name_p, file_p = dump.ptr(code + CODE_NAME), dump.ptr(code + CODE_FILENAME)
            frames.append(
                {
                    "function": py_str(dump, name_p) if name_p else None,
                    "file": py_str(dump, file_p) if file_p else None,
                    "line": frame_line(dump, code, lasti),
                }
            )
            frame = dump.ptr(frame + FRAME_BACK)
        out.append(
            {
                "tstate": tstate,
                "thread_id": u32(tid_b, 0) if tid_b else None,
                "recursion_depth": u32(depth_b, 0) if depth_b else None,
                "frames": frames,
            }
        )
        tstate = dump.ptr(tstate + TSTATE_NEXT)
    return out


def collapse(frames: List[dict]) -> List[dict]:
    """Innermost-first frames with runs of one repeated (function, line) cycle collapsed."""
    keys = [(f["function"], f["file"], f["line"]) for f in frames]
    out: List[dict] = []
    i = 0
    while i < len(keys):
        best = None
        for period in range(1, 5):
            j = i
            while j + period < len(keys) and keys[j + period] == keys[j]:
                j += 1
            reps = (j - i + period) // period
            if reps >= 3 and (best is None or reps * period > best[0] * best[1]):
                best = (reps, period)
        if best:
            reps, period = best
            out.append({"cycle": [dict(frames[i + k]) for k in range(period)], "repetitions": reps})
            i += reps * period
        else:
            out.append(dict(frames[i]))
            i += 1
    return out


def marked_stack(script: str, tag: str) -> List[dict]:
    """The frames a script's "# stack" lines put on the Python stack, outermost first.

    Each marked line is a call site; its function is the enclosing def (or <module>).
    The chain starts at the marked function nobody marked calls, and follows calls
    until a function repeats (a recursion cycle)."""
    path = os.path.join(HERE, script + ".py")
    with open(path) as f:
        source = f.read()
    tree = ast.parse(source)
    lines = source.splitlines()
    marked = {i + 1 for i, text in enumerate(lines) if re.search(r"#\s*" + re.escape(tag) + r"\s*$", text)}
    sites: Dict[str, Tuple[int, List[str]]] = {}

    def calls_on(node: ast.AST, line: int) -> List[str]:
        names = []
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and getattr(n, "lineno", None) == line:
                names.append(ast.unparse(n.func) if hasattr(ast, "unparse") else getattr(n.func, "id", "?"))
        return names

    for node in ast.walk(tree):
        body_owner = "<module>" if isinstance(node, ast.Module) else getattr(node, "name", None)
        if not isinstance(node, (ast.Module, ast.FunctionDef)):
            continue
        for stmt in node.body:
            for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1):
                if line in marked and not isinstance(stmt, ast.FunctionDef):
                    sites[str(body_owner)] = (line, calls_on(stmt, line))
    called = {c for _, cs in sites.values() for c in cs}
    roots = [f for f in sites if f not in called]
    chain: List[dict] = []
    current = roots[0] if roots else None
    seen = set()
    while current in sites and current not in seen:
        seen.add(current)
        line, calls = sites[current]
        chain.append(
            {
                "function": current,
                "file": SCRIPT_DIR_WINDOWS + "\\" + script + ".py",
                "line": line,
                "calls": calls,
                "source": lines[line - 1].split("#")[0].strip(),
            }
        )
        nxt = [c for c in calls if c in sites]
        current = nxt[0] if nxt else None
    if current in seen:
        start = [c["function"] for c in chain].index(current)
        for entry in chain[start:]:
            entry["cycle"] = True
    return chain


def read_log(path: str) -> dict:
    out: dict = {"marker": None, "dumper": None, "elapsed_seconds": None, "raw_bytes": None, "trim": None}
    if not os.path.exists(path):
        return out
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("MARKER "):
                out["marker"] = json.loads(line[7:])
            elif line.startswith("dumper: "):
                out["dumper"] = line.strip()
            elif line.startswith("elapsed_seconds "):
                out["elapsed_seconds"] = float(line.split()[1])
            elif line.startswith("TRIM "):
                out["trim"] = json.loads(line[5:])
            elif line.startswith("raw_bytes "):
                out["raw_bytes"] = int(line.split()[1])
    return out


def find_image(images: str, windows_path: str) -> Optional[str]:
    """The extracted file a module's recorded Windows path refers to (same relative tail)."""
    parts = windows_path.split("\\")
    for env in sorted(os.listdir(images)) if os.path.isdir(images) else []:
        for i in range(1, len(parts)):
            candidate = os.path.join(images, env, *parts[i:])
            if os.path.isfile(candidate) and "Python38" in parts[i - 1]:
                return os.path.relpath(candidate, images)
    return None


REGISTERS = ["rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi"] + ["r%d" % i for i in range(8, 16)]


def fault_instruction(dump: Dump, exc: dict, module: Optional[dict], images: str) -> Optional[dict]:
    """The instruction at RIP (objdump of the extracted image) and the address its memory
    operand computes from the exception context's registers."""
    if module is None:
        return None
    rel = find_image(images, module["path"])
    loc = dump.stream(6)
    if rel is None or loc is None:
        return None
    ctx = u32(dump.data, loc[1] + 164)
    regs = {r: u64(dump.data, ctx + 0x78 + 8 * i) for i, r in enumerate(REGISTERS)}
    import subprocess

    address = exc["address"] - module["base"] + pe_image_base(os.path.join(images, rel))
    out = subprocess.run(
        ["objdump", "-d", "-M", "intel", "--start-address=0x%x" % address, "--stop-address=0x%x" % (address + 16)]
        + [os.path.join(images, rel)],
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    first = next((ln for ln in out.splitlines() if re.match(r"\s*[0-9a-f]+:\t", ln)), None)
    if first is None:
        return None
    parts = first.split("\t")
    text = parts[2].strip() if len(parts) > 2 else ""
    result: dict = {"rva": "0x%x" % (exc["address"] - module["base"]), "bytes": parts[1].strip(), "intel": text}
    m = re.search(r"\[([^\]]+)\]", text)
    if m:
        ea = 0
        for term in re.findall(r"[+-]?[^+-]+", m.group(1).replace(" ", "")):
            sign = -1 if term.startswith("-") else 1
            term = term.lstrip("+-")
            if "*" in term:
                reg, scale = term.split("*")
                ea += sign * regs[reg] * int(scale, 0)
            elif term in regs:
                ea += sign * regs[term]
            else:
                ea += sign * int(term, 0)
        ea &= (1 << 64) - 1
        result.update(memory_operand=m.group(1), effective_address="0x%x" % ea, canonical=canonical(ea))
        result["registers"] = {r: "0x%x" % regs[r] for r in re.findall(r"r[a-z0-9]+", m.group(1)) if r in regs}
    return result


def pe_image_base(path: str) -> int:
    with open(path, "rb") as f:
        head = f.read(4096)
    return u64(head, u32(head, 0x3C) + 24 + 24)


def canonical(address: int) -> bool:
    return address < 1 << 47 or address >= 0xFFFF800000000000


def facts_for(path: str, logs: str, images: str) -> dict:
    name = os.path.basename(path)
    with open(path, "rb") as f:
        blob = f.read()
    data = lzma.decompress(blob) if name.endswith(".xz") else blob
    stem = name.split(".")[0]
    log = read_log(os.path.join(logs, stem + ".log"))
    marker = log["marker"] or {}
    program = marker.get("scenario") or stem.replace("_full", "")
    dump = Dump(data)
    exc = dump.exception()
    modules = dump.modules()
    threads = dump.threads()

    def module_at(address: int) -> Optional[dict]:
        for m in modules:
            if m["base"] <= address < m["base"] + m["size"]:
                return m
        return None

    def where(address: int) -> Optional[str]:
        m = module_at(address)
        return None if m is None else "%s+0x%x" % (m["path"].split("\\")[-1], address - m["base"])

    crash = next((t for t in threads if t["tid"] == exc["tid"]), None)
    stack_end = crash["stack_start"] + crash["stack_size"] if crash else None
    mods_by_name = {m["path"].split("\\")[-1].lower(): m for m in modules}
    python_dll = mods_by_name.get("python38.dll")
    python_exe = mods_by_name.get("python.exe")
    fact: dict = {
        "file": name,
        "scenario": stem,
        "program": "src/%s.py" % program,
        "dump_type": "full" if dump.full else "normal",
        "header_flags": "0x%x" % dump.flags,
        "size_bytes": len(blob),
        "raw_bytes": len(data),
        "raw_sha256": hashlib.sha256(data).hexdigest(),
        "seconds_to_run_and_dump": log["elapsed_seconds"],
        "streams": [STREAM_NAMES.get(k, "0x%x" % k) for k, _, _ in dump.streams],
        "exception_code": exc["code"],
        "exception_code_hex": "0x%08X" % exc["code"],
        "exception_flags": exc["flags"],
        "exception_address": "0x%x" % exc["address"],
        "exception_address_at": where(exc["address"]),
        "exception_parameters": ["0x%x" % p for p in exc["parameters"]],
        "exception_context_size": exc["context_size"],
        "rip": "0x%x" % exc["rip"],
        "rsp": "0x%x" % exc["rsp"],
        "crash_thread_tid": exc["tid"],
        "process_id": dump.process_id(),
        "threads": [t["tid"] for t in threads],
        "main_thread_tid": threads[0]["tid"] if threads else None,
        "crash_thread_stack_in_dump": None
        if crash is None or stack_end is None
        else {
            "start": "0x%x" % crash["stack_start"],
            "end": "0x%x" % stack_end,
            "size": crash["stack_size"],
            "contains_rsp": crash["stack_start"] <= exc["rsp"] < stack_end,
        },
        "memory_ranges": len(dump.ranges),
        "memory_bytes": sum(r[1] for r in dump.ranges),
        **overlaps(dump),
        "python_version": marker.get("python"),
        "python_exe_path": python_exe["path"] if python_exe else None,
        "python_dll_path": python_dll["path"] if python_dll else None,
        "python_dll_file_version": python_dll["file_version"] if python_dll else None,
        "site_packages": (python_dll["path"].rsplit("\\", 1)[0] + "\\Lib\\site-packages") if python_dll else None,
        "script_path": SCRIPT_DIR_WINDOWS + "\\" + program + ".py",
        "marker": marker,
        "dumper_line": log["dumper"],
        "trimmed": log["trim"],
    }
    fact.update(PROGRAMS.get(program, {}))
    if "depth" in marker:
        fact["depth_built"] = marker["depth"]
    for key in ("numpy", "tensorflow"):
        if key in marker:
            fact[key + "_version"] = marker[key]
    # the modules that matter for naming, with the extracted image each one is
    fact["modules"] = [
        {
            "name": m["path"].split("\\")[-1],
            "path": m["path"],
            "base": "0x%x" % m["base"],
            "size": m["size"],
            "timestamp": "0x%08x" % m["timestamp"],
            "file_version": m["file_version"],
            "image_in_cache": find_image(images, m["path"]) if "Python38" in m["path"] else None,
        }
        for m in modules
    ]
    code = exc["code"]
    params = exc["parameters"]
    if code == 0xC0000005 and len(params) >= 2:
        gp = params == [0, 0xFFFFFFFFFFFFFFFF]  # a #GP reports no address (see ../README.md)
        fact["access"] = {
            "kind": {0: "read", 1: "write", 8: "execute"}.get(params[0], str(params[0])),
            "address": None if gp else "0x%x" % params[1],
            "general_protection": gp,
            "canonical": None if gp else canonical(params[1]),
        }
        if gp:
            fact["fault_instruction"] = fault_instruction(dump, exc, module_at(exc["address"]), images)
    if code == 0xC00000FD and crash is not None and len(params) >= 2:
        # how much stack the thread had used when the guard page ran out
        fact["stack_used_at_overflow"] = stack_end - params[1]
    if program == "thread_stack_size":
        fact["stack_size_requested"] = marker.get("stack_size")
        if "worker_stack_high" in marker:
            # GetCurrentThreadStackLimits in the worker: [DeallocationStack, StackBase)
            fact["worker_stack_from_program"] = {
                "low": "0x%x" % marker["worker_stack_low"],
                "high": "0x%x" % marker["worker_stack_high"],
                "reserve": marker["worker_stack_high"] - marker["worker_stack_low"],
            }
        fact["thread_role"] = "worker: threading.Thread(name='descender') after threading.stack_size(%s)" % marker.get(
            "stack_size"
        )
        fact["worker_tid_from_program"] = marker.get("worker_native_id")
        fact["main_tid_from_program"] = marker.get("main_native_id")
    else:
        fact["thread_role"] = "main thread (python.exe)" if exc["tid"] == fact["main_thread_tid"] else "other"
    if dump.full and crash is not None:
        tib = dump.read(crash["teb"], 0x10 + 8)
        dealloc = dump.ptr(crash["teb"] + 0x1478)
        if tib is not None:
            fact["teb"] = {
                "address": "0x%x" % crash["teb"],
                "stack_base": "0x%x" % u64(tib, 8),
                "stack_limit": "0x%x" % u64(tib, 0x10),
                "deallocation_stack": None if dealloc is None else "0x%x" % dealloc,
                "reserve": None if dealloc is None else u64(tib, 8) - dealloc,
            }
    # Python frames: expected from the script, and (full dumps) read from the dump itself
    fact["python_stack_expected"] = marked_stack(program, "stack")
    if program == "thread_stack_size":
        fact["python_stack_expected_main_thread"] = marked_stack(program, "stack(main)")
    if dump.full and python_dll is not None:
        rel = find_image(images, python_dll["path"])
        runtime_rva = pe_exports(os.path.join(images, rel))["_PyRuntime"] if rel else None
        if runtime_rva is not None:
            threads_py = python_threads(dump, python_dll["base"] + runtime_rva)
            fact["python_threads_in_dump"] = [
                {
                    "thread_id": t["thread_id"],
                    "recursion_depth": t["recursion_depth"],
                    "frame_count": len(t["frames"]),
                    "innermost": t["frames"][:3],
                    "outermost": t["frames"][-3:][::-1],
                    "collapsed": collapse(t["frames"]),
                }
                for t in threads_py
            ]
    return fact


def dump_files(folder: str) -> Iterator[str]:
    for n in sorted(os.listdir(folder)):
        if n.endswith((".dmp", ".dmp.xz")):
            yield os.path.join(folder, n)


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="+", help="folders of dumps (the cache's bundled/ holds those committed as bundles)")
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--logs", required=True)
    ap.add_argument("--images", required=True)
    args = ap.parse_args(argv)
    paths = sorted((p for folder in args.folder for p in dump_files(folder)), key=os.path.basename)
    dumps = [facts_for(p, args.logs, args.images) for p in paths]
    with open(args.manifest, "w") as f:
        json.dump({"schema": 1, "dumps": dumps}, f, indent=1)
        f.write("\n")
    for d in dumps:
        print(d["file"], d["exception_code_hex"], d["exception_address_at"], d["dump_type"], d["size_bytes"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
