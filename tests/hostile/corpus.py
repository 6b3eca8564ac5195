"""A corpus of damaged and hostile dumps, built from the real sample dumps at test time.

`build_corpus(out_dir)` writes every case into `out_dir` (nothing is committed as a
binary) and returns the list of `Case`s: the file, the exit codes the CLI may end with,
and, for cases where exit 0 is allowed, why the damage does not matter.

The structure edits (header, stream directory, list counts, thread/module/memory
records, MINIDUMP_STRINGs, appended streams) are done here with `struct`, independently
of dumpkit's reader, so a reader bug cannot hide itself.
"""

from __future__ import annotations

import random
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_dumps"
SAMPLE_BIN = SAMPLES / "bin"

PROBLEMS = (1,)  # analysed, problems listed
UNUSABLE = (2,)  # one line naming the file
PARTIAL_OR_UNUSABLE = (1, 2)

# Strings a dump writer controls, aimed at each output format.
ANSI_NAME = "\x1b[31mEVIL|x|\x1b[0m\x1b]0;pwned\x07\x1b[2J\r\x08\u202eevil.dll"
SCRIPT_NAME = "<script>alert(1)</script>.dll"
LINK_NAME = "[x](http://evil)![i](http://evil/i.png).dll"
BACKTICK_NAME = "```\n</details><b>x</b>`break`.dll"
TRAVERSAL_NAME = "..\\..\\..\\..\\etc\\passwd"
MD_NAME = "*bold* _it_ # h | pipe | ~~s~~ <!-- x --> &amp; \\.dll"
HUGE_TEXT = "A" * (64 * 1024)  # 64 Ki characters: 128 KiB of UTF-16, over the reader's cap
BIG_TEXT = "B" * (32 * 1024 - 1)  # just under the 64 KiB cap: shown clipped, no error

HOSTILE_NAMES = (ANSI_NAME, SCRIPT_NAME, LINK_NAME, BACKTICK_NAME, TRAVERSAL_NAME, MD_NAME)


@dataclass
class Case:
    name: str
    path: Path
    expect: Tuple[int, ...]
    why_ok: str = ""  # when 0 is in expect: why this damage does not matter
    image_paths: Sequence[str] = ()
    notes: Dict[str, object] = field(default_factory=dict)


# ----------------------------------------------------------------------- dump editing
class Dump:
    """Just enough of the minidump layout to damage it precisely."""

    def __init__(self, data: bytes):
        self.data = bytearray(data)

    # header / directory
    @property
    def nstreams(self) -> int:
        return struct.unpack_from("<I", self.data, 8)[0]

    @property
    def dir_rva(self) -> int:
        return struct.unpack_from("<I", self.data, 12)[0]

    def streams(self) -> List[Tuple[int, int, int, int]]:
        """(index, type, size, rva) of each directory entry."""
        out = []
        for i in range(self.nstreams):
            t, s, r = struct.unpack_from("<III", self.data, self.dir_rva + 12 * i)
            out.append((i, t, s, r))
        return out

    def stream(self, stype: int) -> Tuple[int, int, int]:
        for i, t, s, r in self.streams():
            if t == stype:
                return i, s, r
        raise KeyError(stype)

    def set_u32(self, off: int, v: int) -> None:
        struct.pack_into("<I", self.data, off, v & 0xFFFFFFFF)

    def set_u64(self, off: int, v: int) -> None:
        struct.pack_into("<Q", self.data, off, v & 0xFFFFFFFFFFFFFFFF)

    def u32(self, off: int) -> int:
        return struct.unpack_from("<I", self.data, off)[0]

    def u64(self, off: int) -> int:
        return struct.unpack_from("<Q", self.data, off)[0]

    def dir_entry_offset(self, stype: int) -> int:
        i, _s, _r = self.stream(stype)
        return self.dir_rva + 12 * i

    # records
    def threads(self) -> List[dict]:
        _i, _s, rva = self.stream(3)
        out = []
        for k in range(self.u32(rva)):
            off = rva + 4 + 48 * k
            out.append(
                {
                    "off": off,
                    "tid": self.u32(off),
                    "stack_start": self.u64(off + 24),
                    "stack_size": self.u32(off + 32),
                    "stack_rva": self.u32(off + 36),
                    "ctx_size": self.u32(off + 40),
                    "ctx_rva": self.u32(off + 44),
                }
            )
        return out

    def modules(self) -> List[dict]:
        _i, _s, rva = self.stream(4)
        out = []
        for k in range(self.u32(rva)):
            off = rva + 4 + 108 * k
            name_rva = self.u32(off + 20)
            out.append(
                {
                    "off": off,
                    "base": self.u64(off),
                    "size": self.u32(off + 8),
                    "name_rva": name_rva,
                    "name": self.string(name_rva),
                }
            )
        return out

    def memory(self) -> List[dict]:
        _i, _s, rva = self.stream(5)
        return [
            {
                "off": rva + 4 + 16 * k,
                "start": self.u64(rva + 4 + 16 * k),
                "size": self.u32(rva + 12 + 16 * k),
                "rva": self.u32(rva + 16 + 16 * k),
            }
            for k in range(self.u32(rva))
        ]

    def exception(self) -> dict:
        _i, _s, rva = self.stream(6)
        return {"off": rva, "tid": self.u32(rva), "ctx_size": self.u32(rva + 160), "ctx_rva": self.u32(rva + 164)}

    def string(self, rva: int) -> str:
        n = self.u32(rva)
        return bytes(self.data[rva + 4 : rva + 4 + n]).decode("utf-16-le", "replace")

    # appending
    def append(self, blob: bytes) -> int:
        while len(self.data) % 8:
            self.data.append(0)
        at = len(self.data)
        self.data += blob
        return at

    def append_string(self, text: str) -> int:
        raw = text.encode("utf-16-le", "surrogatepass")
        return self.append(struct.pack("<I", len(raw)) + raw + b"\0\0")

    def set_module_name(self, index: int, text: str) -> None:
        self.set_u32(self.modules()[index]["off"] + 20, self.append_string(text))

    def add_stream(self, stype: int, payload: bytes) -> None:
        """Append a stream: the directory has no room, so a new one is written at the end
        of the file and the header's NumberOfStreams / StreamDirectoryRva point to it."""
        rva = self.append(payload)
        entries = [(t, s, r) for _i, t, s, r in self.streams()]
        entries.append((stype, len(payload), rva))
        new_dir = self.append(b"".join(struct.pack("<III", *e) for e in entries))
        self.set_u32(8, len(entries))
        self.set_u32(12, new_dir)

    def add_thread_names(self, names: Dict[int, str]) -> None:
        recs = []
        for tid, text in names.items():
            recs.append((tid, self.append_string(text)))
        payload = struct.pack("<I", len(recs)) + b"".join(struct.pack("<IQ", t, r) for t, r in recs)
        self.add_stream(0x18, payload)

    def crash_thread(self) -> dict:
        tid = self.exception()["tid"]
        return next(t for t in self.threads() if t["tid"] == tid)

    def exception_rsp(self) -> int:
        return self.u64(self.exception()["ctx_rva"] + 0x98)

    def extents(self) -> List[Tuple[int, int]]:
        """(start, end) of every byte range the structures reference: for truncation."""
        ext = [(0, 32), (self.dir_rva, self.dir_rva + 12 * self.nstreams)]
        for _i, t, s, r in self.streams():
            if t:
                ext.append((r, r + s))
        try:
            for m in self.memory():
                ext.append((m["rva"], m["rva"] + m["size"]))
            for t in self.threads():
                ext.append((t["ctx_rva"], t["ctx_rva"] + t["ctx_size"]))
                ext.append((t["stack_rva"], t["stack_rva"] + t["stack_size"]))
            for m in self.modules():
                ext.append((m["name_rva"], m["name_rva"] + 4 + 2 * len(m["name"])))
            e = self.exception()
            ext.append((e["ctx_rva"], e["ctx_rva"] + e["ctx_size"]))
        except KeyError:
            pass
        return ext

    def bytes(self) -> bytes:
        return bytes(self.data)


# ----------------------------------------------------------------------- PE editing
def loop_unwind_image(src: Path, dst: Path, functions: Sequence[str] = ("expand", "visit", "reduce")) -> Dict[str, str]:
    """Copy `src` (a PE32+ DLL with .pdata/.xdata) to `dst` with the unwind data of
    `functions` replaced by chains that never end: a chain to itself, a two-step loop,
    and an indirect RUNTIME_FUNCTION that points at itself. TimeDateStamp and
    SizeOfImage are unchanged, so the image still matches the dump's module record."""
    data = bytearray(src.read_bytes())
    e_lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    nsec = struct.unpack_from("<H", data, e_lfanew + 6)[0]
    opt_size = struct.unpack_from("<H", data, e_lfanew + 20)[0]
    sec_table = e_lfanew + 24 + opt_size
    secs = {}
    for i in range(nsec):
        off = sec_table + 40 * i
        name = bytes(data[off : off + 8]).rstrip(b"\0").decode("ascii", "replace")
        vsize, va, rsize, roff = struct.unpack_from("<IIII", data, off + 8)
        secs[name] = {"hdr": off, "vsize": vsize, "va": va, "rsize": rsize, "roff": roff}
    x, p = secs[".xdata"], secs[".pdata"]
    slack_at = (x["vsize"] + 15) & ~15
    if x["rsize"] - slack_at < 64:
        raise RuntimeError("no room in .xdata for the looping unwind infos")
    # Make the slack part of the section (still inside its section alignment).
    struct.pack_into("<I", data, x["hdr"] + 8, x["rsize"])

    def rva_to_off(rva: int) -> int:
        for s in secs.values():
            if s["va"] <= rva < s["va"] + max(s["vsize"], s["rsize"]) and s["rsize"]:
                return s["roff"] + rva - s["va"]
        raise KeyError(rva)

    a = x["va"] + slack_at  # A chains to A
    b, c = a + 16, a + 32  # B -> C -> B
    d = a + 48  # D chains via an indirect entry that points at itself
    chain_flag = 1 | (4 << 3)  # version 1, UNW_FLAG_CHAININFO

    def put_info(rva: int, target_unwind: int) -> None:
        off = rva_to_off(rva)
        struct.pack_into("<BBBB", data, off, chain_flag, 0, 0, 0)
        struct.pack_into("<III", data, off + 4, 0x1000, 0x1001, target_unwind)

    put_info(a, a)
    put_info(b, c)
    put_info(c, b)
    put_info(d, (d + 4) | 1)  # the RUNTIME_FUNCTION at d+4 -> itself (indirect)

    # COFF symbols give function RVAs; mingw keeps them.
    sys.path.insert(0, str(ROOT))
    from dumpkit.pe import PEImage

    with PEImage.from_file(str(src)) as img:
        rvas = {n: r for r, n in img.coff_functions()}
        count = img.pdata_count
    targets = dict(zip(functions, (a, b, d)))
    done = {}
    for i in range(count):
        off = p["roff"] + 12 * i
        begin = struct.unpack_from("<I", data, off)[0]
        for fn, info in targets.items():
            if rvas.get(fn) == begin:
                struct.pack_into("<I", data, off + 8, info)
                done[fn] = f"{info:#x}"
    dst.write_bytes(bytes(data))
    return done


# ----------------------------------------------------------------------- the corpus
def _cut_points(d: Dump, extra: int, rng: random.Random, fine: bool) -> List[int]:
    """Every stream start and end (and, when `fine`, one byte in, the middle and one
    byte short), inside the header and directory, and `extra` random points."""
    size = len(d.data)
    cuts = {0, 1, 4, 8, 16, 31, 32, d.dir_rva + 12, d.dir_rva + 12 * d.nstreams - 1, d.dir_rva + 12 * d.nstreams}
    for _i, t, s, r in d.streams():
        if t:
            cuts.update((r, r + 1, r + s // 2, r + s - 1, r + s) if fine else (r, r + s // 2, r + s))
    cuts.update(rng.randrange(32, size) for _ in range(extra))
    return sorted(c for c in cuts if 0 <= c < size)


def _needed_to(d: Dump) -> int:
    return max(end for _s, end in d.extents())


def build_corpus(out: Path, samples: Path = SAMPLES, extra_cuts: int = 24, seed: int = 1234) -> List[Case]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    cases: List[Case] = []

    def add(name: str, data: bytes, expect: Tuple[int, ...], why_ok: str = "", **kw) -> Case:
        path = out / f"{name}.dmp"
        path.write_bytes(data)
        c = Case(name, path, expect, why_ok, **kw)
        cases.append(c)
        return c

    nd_raw = (samples / "null_deref.dmp").read_bytes()
    rc_raw = (samples / "recursion_cycle3.dmp").read_bytes()

    # 1. truncation: at every stream boundary, inside streams, and at random points.
    for label, raw, extra, fine in (
        ("null_deref", nd_raw, extra_cuts, True),
        ("recursion_cycle3", rc_raw, extra_cuts // 4, False),
    ):
        d = Dump(raw)
        needed = _needed_to(d)
        for cut in _cut_points(d, extra, rng, fine):
            expect = UNUSABLE if cut < 32 else PARTIAL_OR_UNUSABLE
            why = ""
            if cut >= needed:
                expect, why = (0, 1), "only bytes no structure references were cut"
            add(f"trunc_{label}_{cut}", raw[:cut], expect, why) if cut else None
        add(f"trunc_{label}_empty", b"", UNUSABLE)

    # 2. header: signature, version, directory placement, stream count.
    d = Dump(nd_raw)
    d.data[0:4] = b"MDMX"
    add("bad_signature", d.bytes(), UNUSABLE)
    d = Dump(nd_raw)
    d.data[0:8] = b"PAGEDU64"
    add("kernel_dump_signature", d.bytes(), UNUSABLE)
    d = Dump(nd_raw)
    d.set_u32(4, 0x0000BEEF)
    add("bad_version", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    d.set_u32(12, len(d.data) + 4096)
    add("directory_past_end", d.bytes(), UNUSABLE)
    d = Dump(nd_raw)
    d.set_u32(12, 0xFFFFFFFF)
    add("directory_rva_max", d.bytes(), UNUSABLE)
    d = Dump(nd_raw)
    d.set_u32(8, 0xFFFFFFFF)
    add("stream_count_max", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    d.set_u32(8, 0)
    # no stream at all: no thread, module or exception record, so nothing to report on
    add("stream_count_zero", d.bytes(), UNUSABLE)

    # 3. directory entries pointing past the end / with huge sizes.
    for stype, label in ((3, "threads"), (4, "modules"), (5, "memory"), (6, "exception"), (7, "sysinfo"), (15, "misc")):
        d = Dump(nd_raw)
        e = d.dir_entry_offset(stype)
        d.set_u32(e + 8, len(d.data) + 64)
        add(f"entry_past_end_{label}", d.bytes(), PROBLEMS)
        d = Dump(nd_raw)
        d.set_u32(d.dir_entry_offset(stype) + 4, 0xFFFFFFFF)
        add(f"entry_size_max_{label}", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    d.set_u32(d.dir_entry_offset(4), 3)  # a second ThreadList where the ModuleList was
    add("duplicate_stream", d.bytes(), PROBLEMS)

    # 4. counts of 2^32-1.
    for stype, label in ((3, "threads"), (4, "modules"), (5, "memory_ranges")):
        d = Dump(nd_raw)
        _i, _s, rva = d.stream(stype)
        d.set_u32(rva, 0xFFFFFFFF)
        add(f"count_max_{label}", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)  # a Memory64List claiming 2^64-1 ranges, appended
    d.add_stream(9, struct.pack("<QQ", (1 << 64) - 1, len(d.data)) + struct.pack("<QQ", 0x1000, 0x1000) * 4)
    add("count_max_memory64", d.bytes(), PROBLEMS)

    # 5. memory ranges out of order and overlapping.
    d = Dump(nd_raw)
    mem = d.memory()
    descs = [bytes(d.data[m["off"] : m["off"] + 16]) for m in mem]
    base = mem[0]["off"]
    for k, blob in enumerate(reversed(descs)):
        d.data[base + 16 * k : base + 16 * (k + 1)] = blob
    add("memory_out_of_order", d.bytes(), (0,), "the format does not require sorted ranges")
    d = Dump(nd_raw)
    ct = d.crash_thread()
    stack_desc = next(m for m in d.memory() if m["start"] == ct["stack_start"])
    other = next(m for m in d.memory() if m is not stack_desc and m["size"] >= 64)
    # another range now claims the upper half of the crash stack and 64 bytes beyond it
    half = ct["stack_size"] // 2
    d.set_u64(other["off"], ct["stack_start"] + half)
    d.set_u32(other["off"] + 8, max(other["size"], half + 64))
    add("memory_overlapping", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    for m in d.memory()[:200]:
        d.set_u64(m["off"], 0xFFFFFFFFFFFFF000)  # ranges that wrap the address space
    add("memory_wraps", d.bytes(), PROBLEMS)

    # 6. the crashing thread's stack is absent (record and memory list agree it is gone).
    d = Dump(nd_raw)
    ct = d.crash_thread()
    for m in d.memory():
        if m["start"] == ct["stack_start"]:
            d.set_u64(m["off"], 0x7FF000000000)
    d.set_u64(ct["off"] + 24, 0x7FF000000000)
    add("stack_absent", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    ct = d.crash_thread()
    d.set_u32(ct["off"] + 32, 0)  # zero-length stack in the thread record
    for m in d.memory():
        if m["start"] == ct["stack_start"]:
            d.set_u32(m["off"] + 8, 0)
    add("stack_zero_length", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    ct = d.crash_thread()
    d.set_u32(ct["off"] + 32, 0xFFFFFFFF)  # stack claims 4 GiB
    add("stack_size_max", d.bytes(), PROBLEMS)

    # 7. context sizes: zero and huge, thread and exception.
    d = Dump(nd_raw)
    for t in d.threads():
        d.set_u32(t["off"] + 40, 0)
    add("thread_context_zero", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    for t in d.threads():
        d.set_u32(t["off"] + 40, 0xFFFFFFFF)
    add("thread_context_huge", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    d.set_u32(d.exception()["off"] + 160, 0)
    add("exception_context_zero", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    d.set_u32(d.exception()["off"] + 160, 0xFFFFFFFF)
    add("exception_context_huge", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    d.set_u32(d.exception()["off"] + 164, len(d.data) + 8)
    add("exception_context_past_end", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    d.set_u32(d.exception()["off"] + 160, 16)
    add("exception_context_short", d.bytes(), PROBLEMS)

    # 8. stacks whose words point back into the stack / repeat one return address.
    ret = None
    d = Dump(rc_raw)
    ct = d.crash_thread()
    rsp = d.exception_rsp()
    lo = ct["stack_start"]
    first = rsp - lo + 8
    for off in range(first, ct["stack_size"] - 7, 8):
        d.set_u64(ct["stack_rva"] + off, lo + off)  # each word points at itself
    add(
        "stack_self_pointers",
        d.bytes(),
        (0, 1),
        "the file is intact: the process's stack held these words; the walk must stop, and its stop_reason says where",
        image_paths=[str(SAMPLE_BIN)],
    )
    d = Dump(rc_raw)
    ct = d.crash_thread()
    # the return address the real stack holds right above frame 0 (into visit)
    words = [d.u64(ct["stack_rva"] + o) for o in range(first, min(ct["stack_size"], first + 0x400), 8)]
    opk = next(m for m in d.modules() if m["name"].lower().endswith("opkernels.dll"))
    ret = next(w for w in words if opk["base"] + 0x1000 <= w < opk["base"] + opk["size"])
    for off in range(first, ct["stack_size"] - 7, 8):
        d.set_u64(ct["stack_rva"] + off, ret)
    add(
        "stack_same_return_address",
        d.bytes(),
        (0, 1),
        "every word is the same valid return address: indistinguishable from a real recursion "
        "without call-target checks; it must stay bounded",
        image_paths=[str(SAMPLE_BIN)],
        notes={"return_address": ret},
    )
    d = Dump(rc_raw)
    ct = d.crash_thread()
    for k, off in enumerate(range(first, ct["stack_size"] - 15, 16)):
        # [saved rbx, saved rsi] pairs pointing down the stack, return addresses below SP
        d.set_u64(ct["stack_rva"] + off, lo + max(0, off - 4096))
        d.set_u64(ct["stack_rva"] + off + 8, ret if k % 3 else lo + 16)
    add(
        "stack_pointing_down",
        d.bytes(),
        (0, 1),
        "the file is intact; the walk must stop without looping",
        image_paths=[str(SAMPLE_BIN)],
    )

    # 9. unwind info whose chain loops (patched copy of opkernels.dll via --image-path).
    img_dir = out / "images_loop"
    img_dir.mkdir(exist_ok=True)
    patched = loop_unwind_image(SAMPLE_BIN / "opkernels.dll", img_dir / "opkernels.dll")
    d = Dump(rc_raw)
    k = next(i for i, m in enumerate(d.modules()) if m["name"].lower().endswith("opkernels.dll"))
    d.set_module_name(k, "C:\\not-on-this-machine\\opkernels.dll")  # so --image-path serves it
    add("unwind_chain_loops", d.bytes(), PROBLEMS, image_paths=[str(img_dir)], notes={"patched": patched})

    # 10. hostile module and thread names.
    for label, raw in (("null_deref", nd_raw), ("recursion_cycle3", rc_raw)):
        d = Dump(raw)
        mods = d.modules()
        opk = next(i for i, m in enumerate(mods) if m["name"].lower().endswith("opkernels.dll"))
        order = [opk] + [i for i in range(len(mods)) if i != opk]
        for i, text in zip(order, HOSTILE_NAMES + (BIG_TEXT,)):
            d.set_module_name(i, text if text in (TRAVERSAL_NAME, BIG_TEXT) else "C:\\x\\" + text)
        names = {}
        for t, text in zip(d.threads(), (SCRIPT_NAME, ANSI_NAME, LINK_NAME, BACKTICK_NAME, MD_NAME)):
            names[t["tid"]] = text
        d.add_thread_names(names)
        add(
            f"hostile_names_{label}",
            d.bytes(),
            (1,),
            "the names are valid strings that must only come out escaped; one file name is "
            "32,767 characters, more than NTFS allows, and is cut to 255 (a soft error)",
            image_paths=[str(SAMPLE_BIN)],
            notes={"thread_names": names},
        )
    d = Dump(nd_raw)
    d.set_module_name(0, HUGE_TEXT)
    d.add_thread_names({t["tid"]: HUGE_TEXT for t in d.threads()})
    add("names_64k", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    d.set_u32(d.modules()[0]["off"] + 20, len(d.data) + 100)  # name past the end
    add("module_name_past_end", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    at = d.append(struct.pack("<I", 0xFFFFFFFF) + b"x\0")  # length 4 GiB, 2 bytes present
    d.set_u32(d.modules()[1]["off"] + 20, at)
    add("module_name_length_max", d.bytes(), PROBLEMS)
    d = Dump(nd_raw)
    d.add_thread_names({d.threads()[0]["tid"]: "ok"})
    _i, _s, rva = d.stream(0x18)
    d.set_u32(rva, 0xFFFFFFFF)
    add("thread_names_count_max", d.bytes(), PROBLEMS)

    # 11. cases the synthetic builder makes easy (tests/support/synth_dump.py).
    for name, data, expect, why in synthetic_cases():
        add(name, data, expect, why)
    return cases


def synthetic_cases() -> List[Tuple[str, bytes, Tuple[int, ...], str]]:
    """(name, dump bytes, exit codes, why exit 0 is fine) for damage no sample dump shows:
    overlapping copies (agreeing, as Wine and dbghelp write them, and conflicting), an
    overlap flood for the comparison budget, a cut Memory64 list, a short x86 context, a
    function table and an unloaded-module list that claim more than they hold."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.support.synth_dump import (
        FUNCTION_TABLE,
        MEMORY_LIST,
        UNLOADED_MODULE_LIST,
        X86,
        SynthDump,
        x64_context,
        x86_context,
    )

    stack_at = 0x7FF0_0010_0000
    stack = bytes((i * 13) & 0xFF for i in range(0x2000))
    rip = 0x1_4000_1000

    def base(arch: int = 9) -> SynthDump:
        d = SynthDump(arch=arch)
        d.module("C:\\app\\app.exe", 0x1_4000_0000, 0x5000, version=(1, 0, 0, 0))
        d.unloaded_module("C:\\app\\old.dll", 0x1_9000_0000, 0x2000)
        return d

    def x64_crash(d: SynthDump, st) -> SynthDump:
        ctx = x64_context(rip=rip, rsp=stack_at + 0x1000)
        d.thread(1, context=ctx, stack=st)
        d.exception(1, 0xC0000005, rip, params=(0, 0), context=ctx)
        return d

    out: List[Tuple[str, bytes, Tuple[int, ...], str]] = []
    d = base()
    st = d.memory(stack_at, stack)
    d.memory(stack_at + 0x100, stack[0x100:0x180])  # inside the stack
    d.memory(stack_at + 0x1F00, stack[0x1F00:] + b"\x99" * 0x100)  # across its end
    out.append(
        (
            "synth_overlaps_agree",
            x64_crash(d, st).build().data,
            (0,),
            "overlapping copies of the same bytes are how Wine's and dbghelp's writers save memory",
        )
    )
    d = base()
    st = d.memory(stack_at, stack)
    d.memory(stack_at + 0x800, b"\xee" * 0x100)  # inside the stack, different bytes
    out.append(("synth_overlaps_conflict", x64_crash(d, st).build().data, PROBLEMS, ""))

    d = base()
    st = d.memory(stack_at, bytes(8 << 20))
    for _ in range(199):
        d.memory(stack_at, b"\0")
    f = x64_crash(d, st).build()
    zeros_at = f.where[f"memory {stack_at:#x}"]
    rva, _size = f.stream(MEMORY_LIST)
    for k in range(1, 200):  # 199 more copies of the 8 MiB stack, each from a different offset
        struct.pack_into("<QII", f.data, rva + 4 + 16 * k, stack_at, (8 << 20) - k, zeros_at + k)
    out.append(("synth_overlap_flood", f.data, PROBLEMS, ""))

    d = base()
    d.memory64(stack_at, stack)
    st = d.memory64(stack_at + len(stack), b"\x77" * 0x1000)
    f = x64_crash(d, st).build()
    out.append(("synth_memory64_cut", f.cut(f.where[f"memory {stack_at + len(stack):#x}"] + 0x10).data, PROBLEMS, ""))

    d = base(X86)
    ctx = x86_context(eip=0x401000, esp=0x19F800, ebp=0x19F900)
    d.thread(1, context=ctx[:100], stack=d.memory(0x19F000, stack))
    d.exception(1, 0xC0000005, 0x401000, params=(0, 0), context=ctx)
    out.append(("synth_x86_thread_context_short", d.build().data, PROBLEMS, ""))

    d = base()
    d.function_table(0x2000_0000, [(0x100, 0x180, 0x1000)])
    f = x64_crash(d, d.memory(stack_at, stack)).build().lie_count(FUNCTION_TABLE, 5000)
    out.append(("synth_function_table_lies", f.data, PROBLEMS, ""))
    f = x64_crash(base(), None).build().lie_count(UNLOADED_MODULE_LIST, 0xFFFFFFFF)
    out.append(("synth_unloaded_count_lies", f.data, PROBLEMS, ""))
    return [(name, bytes(data), expect, why) for name, data, expect, why in out]


if __name__ == "__main__":
    import tempfile

    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="dumpkit-hostile-"))
    built = build_corpus(where)
    print(f"{len(built)} cases in {where}")
