#!/usr/bin/env python3
"""Derive the facts about each sample dump from the dump and the binaries.

Self-contained (struct only; no `minidump` package): parses the minidump
streams, then walks the crashing thread's stack with the x64 .pdata/.xdata
unwind data of the PE files that produced it (bin/ for tfhost.exe,
opkernels.dll and the stand-ins, Wine's own PE DLLs for ntdll/kernel32) and
names every frame from the COFF symbol table (`x86_64-w64-mingw32-nm`).
This is a verification tool for the sample dumps, not part of dumpkit.

  python3 src/dumpfacts.py [--manifest manifest.json] [DUMP...]
"""
import bisect
import glob
import json
import lzma
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WINE_PE_DIRS = ["/usr/lib/x86_64-linux-gnu/wine/x86_64-windows"]
NM = "x86_64-w64-mingw32-nm"

STREAM_NAMES = {0: "Unused", 3: "ThreadList", 4: "ModuleList", 5: "MemoryList", 6: "Exception",
                7: "SystemInfo", 9: "Memory64List", 15: "MiscInfo", 16: "MemoryInfoList",
                17: "ThreadInfoList", 18: "HandleOperationList", 24: "ThreadNames",
                0xFFF0: "Wine 0xfff0 (host libraries)"}

# scenario facts that come from the source (checked against the dump below)
SCENARIOS = {
    "recursion_one": dict(expected_class="recursion", stack_reserve=1 << 20),
    "recursion_cycle3": dict(expected_class="recursion", stack_reserve=1 << 20),
    "big_frame": dict(expected_class="oversized_frame", stack_reserve=1 << 20,
                      oversized_function="conv_big_kernel"),
    "tree_free": dict(expected_class="recursion", stack_reserve=1 << 20),
    "fastfail_abort": dict(expected_class="abort", stack_reserve=1 << 20),  # subcode 7: abort()
    "fastfail_gs": dict(expected_class="fastfail", stack_reserve=1 << 20),
    "heap_oob": dict(expected_class="access_violation", stack_reserve=1 << 20),
    "null_deref": dict(expected_class="access_violation", stack_reserve=1 << 20),
    "illegal_instruction": dict(expected_class="illegal_instruction", stack_reserve=1 << 20),
    "tf_env_abort": dict(expected_class="abort", stack_reserve=1 << 20),  # subcode 7: abort()
    "deep_recursion_1m": dict(expected_class="recursion", stack_reserve=64 << 20),
    # access violations raised as #GP (simdhost.exe + simdkernels.dll); the
    # faulting instruction and its memory operand are recorded as well
    "gp_misaligned_sse": dict(expected_class="access_violation", stack_reserve=1 << 20,
                              fault_instruction=True),
    "gp_wild_pointer": dict(expected_class="access_violation", stack_reserve=1 << 20,
                            fault_instruction=True),
}
OWN_MODULES = ("opkernels.dll", "tfhost.exe", "_pywrap_tensorflow_internal.pyd",
               "simdkernels.dll", "simdhost.exe")
KERNEL_MODULES = ("opkernels.dll", "_pywrap_tensorflow_internal.pyd", "simdkernels.dll")
REG_NAMES = ["rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
             "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"]


# --------------------------------------------------------------------- PE files
class PE:
    def __init__(self, path):
        self.path = path
        self.data = open(path, "rb").read()
        d = self.data
        pe = struct.unpack_from("<I", d, 0x3C)[0]
        assert d[pe:pe + 4] == b"PE\0\0"
        nsec, = struct.unpack_from("<H", d, pe + 6)
        optsize, = struct.unpack_from("<H", d, pe + 20)
        self.timestamp, = struct.unpack_from("<I", d, pe + 8)
        opt = pe + 24
        self.image_base, = struct.unpack_from("<Q", d, opt + 24)
        self.size_of_image, = struct.unpack_from("<I", d, opt + 56)
        self.stack_reserve, self.stack_commit = struct.unpack_from("<QQ", d, opt + 72)
        ndirs, = struct.unpack_from("<I", d, opt + 108)
        self.dirs = [struct.unpack_from("<II", d, opt + 112 + 8 * i) for i in range(ndirs)]
        self.sections = []
        for i in range(nsec):
            s = opt + optsize + 40 * i
            name = d[s:s + 8].rstrip(b"\0").decode("latin1")
            vsize, va, rawsize, rawptr = struct.unpack_from("<IIII", d, s + 8)
            self.sections.append((name, va, max(vsize, rawsize), rawptr, rawsize))
        exc_rva, exc_size = self.dirs[3]
        self.pdata = [struct.unpack_from("<III", self.read(exc_rva + 12 * i, 12))
                      for i in range(exc_size // 12)] if exc_size else []
        self.pdata.sort()
        self.pdata_begins = [r[0] for r in self.pdata]
        self._exports = None
        self._symbols = None

    def read(self, rva, n):
        for name, va, vsize, rawptr, rawsize in self.sections:
            if va <= rva < va + vsize:
                off = rva - va
                chunk = self.data[rawptr + off:rawptr + min(off + n, rawsize)]
                return chunk + bytes(n - len(chunk))
        raise KeyError(hex(rva))

    def runtime_function(self, rva):
        i = bisect.bisect_right(self.pdata_begins, rva) - 1
        if i >= 0 and self.pdata[i][0] <= rva < self.pdata[i][1]:
            return self.pdata[i]
        return None

    def exports(self):
        if self._exports is None:
            self._exports = []
            rva, size = self.dirs[0]
            if size:
                hdr = self.read(rva, 40)
                nfuncs, nnames, afuncs, anames, aords = struct.unpack_from("<IIIII", hdr, 20)
                funcs = struct.unpack_from(f"<{nfuncs}I", self.read(afuncs, 4 * nfuncs))
                names = struct.unpack_from(f"<{nnames}I", self.read(anames, 4 * nnames))
                ords = struct.unpack_from(f"<{nnames}H", self.read(aords, 2 * nnames))
                for nrva, o in zip(names, ords):
                    name = self.read(nrva, 256).split(b"\0")[0].decode()
                    self._exports.append((funcs[o], name))
            self._exports.sort()
        return self._exports

    def symbols(self):
        """function symbols (rva, name) from the COFF symbol table via nm"""
        if self._symbols is None:
            out = subprocess.run([NM, "--defined-only", self.path], capture_output=True,
                                 text=True, timeout=60).stdout
            syms = {}
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in "Tt":
                    rva = int(parts[0], 16) - self.image_base
                    if 0 <= rva < self.size_of_image and not parts[2].startswith("."):
                        syms.setdefault(rva, parts[2])
            self._symbols = sorted(syms.items())
        return self._symbols

    @staticmethod
    def _nearest(table, rva):
        keys = [k for k, _ in table]
        i = bisect.bisect_right(keys, rva) - 1
        return table[i] if i >= 0 else None

    def symbolize(self, rva):
        s = self._nearest(self.symbols(), rva)
        e = self._nearest(self.exports(), rva)
        return s, e


_pe_cache = {}


def find_pe(module_path):
    base = module_path.replace("\\", "/").split("/")[-1]
    if base in _pe_cache:
        return _pe_cache[base]
    cands = glob.glob(os.path.join(HERE, "bin", "**", base), recursive=True)
    for d in WINE_PE_DIRS:
        cands += glob.glob(os.path.join(d, base))
    pe = PE(cands[0]) if cands else None
    _pe_cache[base] = pe
    return pe


# --------------------------------------------------------------------- minidump
class Dump:
    def __init__(self, data):
        self.data = data
        sig, ver, n, dir_rva = struct.unpack_from("<4sIII", data, 0)
        assert sig == b"MDMP", sig
        self.streams = [struct.unpack_from("<III", data, dir_rva + 12 * i) for i in range(n)]
        self.by_type = {}
        for t, size, rva in self.streams:
            self.by_type.setdefault(t, (size, rva))
        self._parse_memory()
        self._parse_modules()
        self._parse_threads()
        self._parse_exception()

    def u32(self, off):
        return struct.unpack_from("<I", self.data, off)[0]

    def string(self, rva):
        n = self.u32(rva)
        return self.data[rva + 4:rva + 4 + n].decode("utf-16-le")

    def _parse_memory(self):
        self.ranges = []
        if 5 in self.by_type:
            size, rva = self.by_type[5]
            n = self.u32(rva)
            for i in range(n):
                start, dsize, drva = struct.unpack_from("<QII", self.data, rva + 4 + 16 * i)
                self.ranges.append((start, dsize, drva))
        if 9 in self.by_type:
            size, rva = self.by_type[9]
            n, base = struct.unpack_from("<QQ", self.data, rva)
            for i in range(n):
                start, dsize = struct.unpack_from("<QQ", self.data, rva + 16 + 16 * i)
                self.ranges.append((start, dsize, base))
                base += dsize
        self.ranges.sort()
        self.range_starts = [r[0] for r in self.ranges]

    def read(self, addr, n):
        out = b""
        while n:
            i = bisect.bisect_right(self.range_starts, addr) - 1
            if i < 0:
                return None
            start, size, rva = self.ranges[i]
            if not (start <= addr < start + size):
                return None
            take = min(n, start + size - addr)
            out += self.data[rva + addr - start: rva + addr - start + take]
            addr += take
            n -= take
        return out

    def q(self, addr):
        b = self.read(addr, 8)
        return None if b is None else struct.unpack("<Q", b)[0]

    def _parse_modules(self):
        self.modules = []
        size, rva = self.by_type[4]
        n = self.u32(rva)
        for i in range(n):
            m = rva + 4 + 108 * i
            base, isize, cks, ts, name_rva = struct.unpack_from("<QIIII", self.data, m)
            self.modules.append(dict(name=self.string(name_rva), base=base, size=isize,
                                     timestamp=ts, checksum=cks))

    def module_at(self, addr):
        for m in self.modules:
            if m["base"] <= addr < m["base"] + m["size"]:
                return m
        return None

    def _parse_threads(self):
        self.threads = []
        size, rva = self.by_type[3]
        n = self.u32(rva)
        for i in range(n):
            t = rva + 4 + 48 * i
            tid, susp, pc, prio, teb, sstart, ssize, srva, csize, crva = struct.unpack_from(
                "<IIIIQQIIII", self.data, t)
            self.threads.append(dict(tid=tid, teb=teb, stack_start=sstart, stack_size=ssize,
                                     context_size=csize, context=self.context(crva)))

    def context(self, rva):
        regs = struct.unpack_from("<16Q", self.data, rva + 0x78)
        rip, = struct.unpack_from("<Q", self.data, rva + 0xF8)
        flags, = struct.unpack_from("<I", self.data, rva + 0x30)
        return dict(regs=list(regs), rip=rip, flags=flags)

    def _parse_exception(self):
        size, rva = self.by_type[6]
        tid, = struct.unpack_from("<I", self.data, rva)
        code, flags, rec, addr, nparams = struct.unpack_from("<IIQQI", self.data, rva + 8)
        params = struct.unpack_from("<15Q", self.data, rva + 8 + 32)[:nparams]
        csize, crva = struct.unpack_from("<II", self.data, rva + 8 + 152)
        self.exception = dict(tid=tid, code=code, flags=flags, address=addr,
                              parameters=list(params), context_size=csize,
                              context=self.context(crva))


# --------------------------------------------------------------------- unwinder
RSP = 4


def unwind_step(dump, pe, mod, regs, rip):
    """One x64 virtual unwind.  Returns (caller_rip, caller_regs) or None."""
    rva = rip - mod["base"]
    rf = pe.runtime_function(rva)
    regs = list(regs)
    if rf is None:
        # leaf without unwind data.  libgcc's ___chkstk_ms pushes rcx and rax
        # before probing: its return address is 16 bytes above rsp.
        sym, _ = pe.symbolize(rva)
        if sym and sym[1] == "___chkstk_ms":
            off = rva - sym[0]
            regs[RSP] += 8 * (off >= 1) + 8 * (off >= 2)
        ret = dump.q(regs[RSP])
        regs[RSP] += 8
        return ret, regs
    begin, end, info = rf
    first = True
    off_in_func = rva - begin
    while True:
        hdr = pe.read(info, 4)
        flags = hdr[0] >> 3
        prolog, count, fr = hdr[1], hdr[2], hdr[3]
        freg, foff = fr & 15, fr >> 4
        codes = struct.unpack_from(f"<{count}H", pe.read(info + 4, 2 * count)) if count else ()
        frame = regs[RSP]
        i = 0
        while i < count:
            c = codes[i]
            coff, op, opinfo = c & 0xFF, (c >> 8) & 15, c >> 12
            slots = {0: 1, 1: 2 if opinfo == 0 else 3, 2: 1, 3: 1, 4: 2, 5: 3, 6: 1, 8: 2,
                     9: 3, 10: 1}[op]
            if first and off_in_func < prolog and coff > off_in_func:
                i += slots
                continue
            if op == 0:      # PUSH_NONVOL
                regs[opinfo] = dump.q(regs[RSP])
                regs[RSP] += 8
            elif op == 1:    # ALLOC_LARGE
                regs[RSP] += codes[i + 1] * 8 if opinfo == 0 else codes[i + 1] | codes[i + 2] << 16
            elif op == 2:    # ALLOC_SMALL
                regs[RSP] += opinfo * 8 + 8
            elif op == 3:    # SET_FPREG
                regs[RSP] = regs[freg] - 16 * foff
                frame = regs[RSP]
            elif op == 4:    # SAVE_NONVOL
                regs[opinfo] = dump.q(frame + codes[i + 1] * 8)
            elif op == 5:
                regs[opinfo] = dump.q(frame + (codes[i + 1] | codes[i + 2] << 16))
            elif op == 10:   # PUSH_MACHFRAME
                sp = regs[RSP] + (8 if opinfo else 0)
                return dump.q(sp), regs[:RSP] + [dump.q(sp + 24)] + regs[RSP + 1:]
            i += slots
        if flags & 4:        # CHAININFO
            begin, end, info = struct.unpack_from("<III", pe.read(info + 4 + 2 * ((count + 1) & ~1), 12))
            first = False
            continue
        break
    ret = dump.q(regs[RSP])
    regs[RSP] += 8
    return ret, regs


def walk(dump, ctx, stack_lo, stack_hi, limit=5_000_000):
    frames = []
    regs, rip = list(ctx["regs"]), ctx["rip"]
    cache = {}
    while rip and len(frames) < limit:
        mod = dump.module_at(rip)
        sp = regs[RSP]
        if mod is None:
            frames.append(dict(ip=rip, sp=sp, module=None))
            break
        pe = find_pe(mod["name"])
        frames.append(dict(ip=rip, sp=sp, module=mod))
        if pe is None:
            break
        step = unwind_step(dump, pe, mod, regs, rip)
        if step is None or step[0] is None:
            break
        rip, regs = step
        if not (stack_lo <= regs[RSP] <= stack_hi) or regs[RSP] <= sp:
            break
    return frames


def describe(frame, is_fault):
    mod = frame["module"]
    if mod is None:
        return dict(module=None, function=None, rva=None, ip=frame["ip"])
    pe = find_pe(mod["name"])
    rva = frame["ip"] - mod["base"]
    lookup = rva if is_fault else rva - 1     # return addresses: look up the call
    sym, exp = pe.symbolize(lookup) if pe else (None, None)
    d = dict(module=mod["name"].replace("\\", "/").split("/")[-1], function=sym[1] if sym else None,
             function_rva=sym[0] if sym else None, rva=rva, ip=frame["ip"], sp=frame["sp"])
    d["nearest_export"] = f"{exp[1]}+0x{lookup - exp[0] + (0 if is_fault else 1):x}" if exp else None
    return d


def find_cycle(names):
    """shortest period p and start s maximising the covered repeating run"""
    best = (0, 0, 0)  # (covered, start, period)
    for s in range(0, min(8, len(names))):
        for p in range(1, 9):
            j = s
            while j + p < len(names) and names[j] == names[j + p]:
                j += 1
            covered = j - s + p if j > s else 0
            if covered >= 3 * p and covered > best[0]:
                best = (covered, s, p)
    return best


def facts(path):
    raw = open(path, "rb").read()
    if path.endswith(".xz"):
        raw = lzma.decompress(raw)
    d = Dump(raw)
    name = os.path.basename(path).split(".")[0]
    scen = SCENARIOS.get(name, {})
    exc = d.exception
    ctx = exc["context"]
    crash = next(t for t in d.threads if t["tid"] == exc["tid"])
    lo, hi = crash["stack_start"], crash["stack_start"] + crash["stack_size"]
    rsp = ctx["regs"][RSP]
    frames = walk(d, ctx, lo - 0x10000, hi)
    desc = [describe(f, i == 0) for i, f in enumerate(frames)]
    for i in range(len(desc) - 1):
        desc[i]["frame_bytes"] = desc[i + 1]["sp"] - desc[i]["sp"]
    names = [f"{x['module']}!{x['function']}" for x in desc]
    covered, start, period = find_cycle(names)
    out = dict(file=os.path.basename(path))
    out["exception_code"] = exc["code"]
    out["exception_code_hex"] = f"0x{exc['code']:08X}"
    out["exception_flags"] = exc["flags"]
    out["exception_address"] = exc["address"]
    out["exception_parameters"] = exc["parameters"]
    out["fastfail_subcode"] = exc["parameters"][0] if exc["code"] == 0xC0000409 else None
    out["crash_thread_tid"] = exc["tid"]
    out["expected_class"] = scen.get("expected_class")
    rip_mod = d.module_at(ctx["rip"])
    out["rip"] = ctx["rip"]
    out["rip_module"] = desc[0]["module"]
    out["rip_rva"] = ctx["rip"] - rip_mod["base"] if rip_mod else None
    out["rsp"] = rsp
    out["fault_function"] = desc[0]["function"]
    out["exception_context_size"] = exc["context_size"]
    out["crash_thread_stack_in_dump"] = dict(start=lo, end=hi, size=crash["stack_size"],
                                             contains_rsp=lo <= rsp < hi)
    out["stack_reserve_requested"] = scen.get("stack_reserve")
    out["total_frames"] = len(desc)
    if covered:
        reps = covered // period
        cyc = desc[start:start + period]
        # frame 0 may be cut short (fault inside a prologue): measure one full
        # repetition from the middle of the run
        mid = start + period * max(1, reps // 2)
        out["cycle_functions"] = [x["function"] for x in cyc]
        members = {x["function"] for x in cyc}
        outer = start
        while outer + 1 < len(desc) and desc[outer + 1]["function"] in members:
            outer += 1          # the outermost frame of the recursion
        out["cycle_functions_call_order"] = [desc[outer - k]["function"] for k in range(period)]
        out["recursion_frames"] = outer - start + 1
        out["cycle_period"] = period
        out["cycle_repetitions"] = reps
        out["cycle_bytes_per_repetition"] = sum(x["frame_bytes"] for x in desc[mid:mid + period])
        out["cycle_first_frame"] = start
        out["cycle_last_frame"] = start + reps * period - 1
        chain = desc[:start] + [dict(x, cycle=True) for x in cyc] + desc[start + reps * period:]
    else:
        out["cycle_functions"] = []
        out["cycle_functions_call_order"] = []
        out["cycle_period"] = 0
        out["cycle_repetitions"] = 0
        out["cycle_bytes_per_repetition"] = None
        chain = desc
    sizes = {}
    for x in desc[1:-1]:
        sizes.setdefault(f"{x['module']}!{x['function']}", x["frame_bytes"])
    out["frame_bytes_by_function"] = sizes
    out["prologues"] = {f: prologue(*f.split("!")) for f in sizes if f.split("!")[0] in
                        OWN_MODULES}
    if desc[0]["module"] in KERNEL_MODULES:
        out["prologues"].setdefault(f"{desc[0]['module']}!{desc[0]['function']}",
                                    prologue(desc[0]["module"], desc[0]["function"]))
    if name == "big_frame":
        out["oversized_function"] = "conv_big_kernel"
        out["oversized_bytes"] = oversized_bytes("opkernels.dll", "conv_big_kernel")
    else:
        out["oversized_function"] = None
        out["oversized_bytes"] = None
    if scen.get("fault_instruction"):
        out["fault_instruction"] = fault_instruction(desc[0]["module"], out["rip_rva"], ctx)
    out["call_chain"] = [{k: v for k, v in x.items() if k not in ("ip", "sp")} for x in chain]
    out["call_chain_note"] = ("frames fault first, each cycle shown once (cycle=true)"
                              if covered else "frames fault first, complete")
    out["thread_list_crash_rip"] = crash["context"]["rip"]
    out["thread_list_crash_rsp"] = crash["context"]["regs"][RSP]
    out["thread_list_crash_context_matches_exception"] = (
        crash["context"]["rip"] == ctx["rip"] and crash["context"]["regs"][RSP] == rsp)
    out["thread_list_tids_with_exception_rip"] = [t["tid"] for t in d.threads
                                                  if t["context"]["rip"] == ctx["rip"]]
    out["threads"] = [dict(tid=t["tid"], stack_start=t["stack_start"], stack_size=t["stack_size"],
                           context_size=t["context_size"], rip=t["context"]["rip"])
                      for t in d.threads]
    out["modules"] = [dict(name=m["name"], base=m["base"], size=m["size"]) for m in d.modules]
    out["streams"] = [dict(type=t, name=STREAM_NAMES.get(t, "?"), size=s) for t, s, r in d.streams]
    out["memory_ranges"] = len(d.ranges)
    return out


_dis_cache = {}


def disasm(module, func):
    pe = find_pe(module)
    if pe.path not in _dis_cache:
        _dis_cache[pe.path] = subprocess.run(
            ["x86_64-w64-mingw32-objdump", "-d", "--no-show-raw-insn", pe.path],
            capture_output=True, text=True, timeout=60).stdout
    body = _dis_cache[pe.path].split(f"<{func}>:\n")[1].split("\n\n")[0]
    return [ln.split("\t", 1)[1].strip() for ln in body.splitlines() if "\t" in ln]


def fault_instruction(module, rva, ctx):
    """the faulting instruction (objdump, AT&T and Intel syntax), its memory
    operand and the register values from the exception context that make the
    address"""
    import re
    pe = find_pe(module)
    va = pe.image_base + rva
    text = {}
    for syntax in ("att", "intel"):
        dis = subprocess.run(["x86_64-w64-mingw32-objdump", "-d", "-M", syntax,
                              f"--start-address=0x{va:x}", f"--stop-address=0x{va + 16:x}", pe.path],
                             capture_output=True, text=True, timeout=60).stdout
        line = next(ln for ln in dis.splitlines() if ln.strip().startswith(f"{va:x}:"))
        parts = line.split("\t")
        text[syntax] = " ".join(parts[2].split()) if len(parts) > 2 else None
        text["bytes"] = parts[1].strip()
    regs = dict(zip(REG_NAMES, ctx["regs"]))
    m = re.search(r"(-?0x[0-9a-f]+)?\((%\w+)?(?:,(%\w+)(?:,(\d))?)?\)", text["att"])
    out = dict(rva=rva, bytes=text["bytes"], att=text["att"], intel=text["intel"])
    if m:
        disp = int(m.group(1), 16) if m.group(1) else 0
        base = m.group(2)[1:] if m.group(2) else None
        index = m.group(3)[1:] if m.group(3) else None
        scale = int(m.group(4)) if m.group(4) else 1
        ea = (disp + (regs[base] if base else 0) + (regs[index] * scale if index else 0)) % (1 << 64)
        out.update(memory_operand=m.group(0), displacement=disp, base_register=base,
                   base_value=regs.get(base), index_register=index,
                   index_value=regs.get(index), scale=scale, effective_address=ea,
                   canonical=ea < (1 << 47) or ea >= (1 << 64) - (1 << 47),
                   aligned_16=ea % 16 == 0)
    return out


def prologue(module, func):
    """the prologue instructions up to and including the stack allocation"""
    out = []
    for ins in disasm(module, func)[:8]:
        if ins.startswith(("push", "sub ", "mov    $0x", "call", "lea    0x")) and (
                ins.startswith("push") or "%rsp" in ins or "%eax" in ins or "chkstk" in ins):
            out.append(ins)
            if (ins.startswith("sub ") and "%rsp" in ins):
                break
        elif out:
            break
    return out


def oversized_bytes(module, func):
    """N from `mov eax, N; call ___chkstk_ms` in func's prologue (objdump)"""
    pe = find_pe(module)
    dis = subprocess.run(["x86_64-w64-mingw32-objdump", "-d", "--no-show-raw-insn", pe.path],
                         capture_output=True, text=True, timeout=60).stdout
    body = dis.split(f"<{func}>:")[1].split("\n\n")[0]
    for line in body.splitlines():
        if "mov    $0x" in line and ",%eax" in line:
            return int(line.split("$")[1].split(",")[0], 16)
    return None


def markdown(allf):
    L = []
    for f in allf:
        L.append(f"### `{f['file']}`\n")
        code = f["exception_code_hex"]
        params = ", ".join(hex(p) for p in f["exception_parameters"]) or "none"
        L.append(f"- exception: **{code}**, flags {f['exception_flags']}, parameters [{params}]"
                 + (f", fail-fast subcode **{f['fastfail_subcode']}**" if f["fastfail_subcode"] is not None else ""))
        L.append(f"- crashing thread: tid **{f['crash_thread_tid']}** (of {len(f['threads'])} threads:"
                 f" {', '.join(str(t['tid']) for t in f['threads'])}); stack reserve requested"
                 f" {f['stack_reserve_requested']:,} bytes")
        L.append(f"- exception context: RIP 0x{f['rip']:x} = {f['rip_module']}+0x{f['rip_rva']:x}"
                 f" (in `{f['fault_function']}`), RSP 0x{f['rsp']:x}, context {f['exception_context_size']} bytes")
        st = f["crash_thread_stack_in_dump"]
        fi = f.get("fault_instruction")
        if fi:
            line = (f"- faulting instruction (objdump): `{fi['att']}` = `{fi['intel']}`"
                    f" (bytes `{fi['bytes']}`)")
            if fi.get("memory_operand"):
                regs = f"{fi['base_register']} = 0x{fi['base_value']:x}"
                if fi["index_register"]:
                    regs += f", {fi['index_register']} = 0x{fi['index_value']:x} (x{fi['scale']})"
                line += (f"; memory operand `{fi['memory_operand']}`: {regs}, displacement"
                         f" {fi['displacement']:#x} -> address 0x{fi['effective_address']:x}"
                         f" ({'canonical' if fi['canonical'] else 'NON-canonical'},"
                         f" {'16-byte aligned' if fi['aligned_16'] else 'not 16-byte aligned'})")
            L.append(line)
        L.append(f"- crashing thread's stack in the dump: 0x{st['start']:x}-0x{st['end']:x}"
                 f" ({st['size']:,} bytes), contains RSP: {st['contains_rsp']}")
        if f["thread_list_crash_context_matches_exception"]:
            L.append("- thread-list context of the crashing thread = exception context")
        else:
            L.append(f"- **thread-list context of the crashing thread differs**: RIP 0x{f['thread_list_crash_rip']:x},"
                     f" RSP 0x{f['thread_list_crash_rsp']:x} (where it was parked); thread-list entries"
                     f" carrying the exception RIP: {f['thread_list_tids_with_exception_rip']}")
        L.append(f"- frames (true unwind, .pdata/.xdata): {f['total_frames']:,}")
        if f["cycle_period"]:
            L.append(f"- recursion: cycle {' -> '.join(f['cycle_functions_call_order'])} (call order),"
                     f" period {f['cycle_period']}, {f['cycle_repetitions']:,} full repetitions"
                     f" ({f['recursion_frames']:,} recursive frames), {f['cycle_bytes_per_repetition']} bytes"
                     f" per repetition")
        if f["oversized_function"]:
            L.append(f"- oversized frame: `{f['oversized_function']}` asks for {f['oversized_bytes']:,} bytes"
                     f" (`mov $0x{f['oversized_bytes']:x},%eax; call ___chkstk_ms`); the fault is inside"
                     f" `___chkstk_ms` (no .pdata entry) before the frame exists")
        L.append("- prologues (objdump): " + "; ".join(f"`{k}`: " + (f"`{' ; '.join(v)}`" if v else "(none: leaf)") for k, v in f["prologues"].items()))
        L.append("")
        L.append("| # | module | function | function RVA | frame RVA | nearest export | frame bytes |")
        L.append("|---|---|---|---|---|---|---|")
        for i, c in enumerate(f["call_chain"]):
            fr = f"0x{c['function_rva']:x}" if c.get("function_rva") is not None else ""
            L.append(f"| {i}{' (cycle)' if c.get('cycle') else ''} | {c['module']} | `{c['function']}` | {fr}"
                     f" | 0x{c['rva']:x} | {c.get('nearest_export') or '(no export)'} | {c.get('frame_bytes', '')} |")
        L.append("")
    return "\n".join(L)


def main(argv):
    manifest = readme = None
    while argv[:1] in (["--manifest"], ["--readme"]):
        if argv[0] == "--manifest":
            manifest = argv[1]
        else:
            readme = argv[1]
        argv = argv[2:]
    paths = argv or sorted(glob.glob(os.path.join(HERE, "*.dmp")) + glob.glob(os.path.join(HERE, "*.dmp.xz")))
    allf = []
    for p in paths:
        f = facts(p)
        allf.append(f)
        print(f"{f['file']}: {f['exception_code_hex']} params={[hex(x) for x in f['exception_parameters']]}"
              f" tid={f['crash_thread_tid']} rip={f['rip_module']}+0x{f['rip_rva'] or 0:x}"
              f" fault={f['fault_function']} frames={f['total_frames']}"
              f" cycle={f['cycle_functions']} x{f.get('cycle_repetitions')}"
              f" bytes/rep={f.get('cycle_bytes_per_repetition')}"
              f" stack_in_dump={f['crash_thread_stack_in_dump']['contains_rsp']}")
        for c in f["call_chain"]:
            print(f"    {c['module']}!{c['function']} rva=0x{c['rva'] or 0:x}"
                  f" fbytes={c.get('frame_bytes')}{' (cycle)' if c.get('cycle') else ''}"
                  f" export={c.get('nearest_export')}")
    if manifest:
        with open(os.path.join(HERE, manifest), "w") as fh:
            json.dump(dict(schema=1, dumps=allf), fh, indent=1)
            fh.write("\n")
    if readme:
        path = os.path.join(HERE, readme)
        text = open(path).read()
        a, b = "<!-- FACTS BEGIN -->", "<!-- FACTS END -->"
        text = text[:text.index(a) + len(a)] + "\n" + markdown(allf) + "\n" + text[text.index(b):]
        open(path, "w").write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
