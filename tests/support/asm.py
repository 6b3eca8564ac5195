"""A small assembler for walker tests: code with its unwind data, and stacks with labels.

Code is laid out function by function. An x64 function is a prologue (`Push`, `Alloc`,
`SetFP`, `SaveReg`, `MachFrame`) assembled to real instructions, with the UNWIND_INFO
that describes them derived from the same list, then a body of pieces: raw bytes,
`Call("label")` (a `call rel32` whose return site gets the label), `Mark("label")`, and
`Epilogue()` (the mirror of the prologue: add rsp / pops / ret). `Code("name", ...)`
places code with no unwind entry. `Image` lays the pieces out as a PE image (via
tests/support/synth_pe.py), `Jit` as a region registered with a dynamic function table.

A `Stack` is written upward from a thread's SP the way a test reads it: locals,
a return address (`"F.ret"`, resolved from the code's labels), saved registers, and
`mark`s naming addresses (caller SPs, saved frame pointers) other words may refer to.
`target_of` serves image, stack and JIT bytes through the Target seam (tests/support/fakes/target.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

from dumpkit.images import ImageLocator, ImageProvider
from dumpkit.target import GPR_NAMES, MemoryNotInDump, Module, Registers, SystemInfo, Thread
from dumpkit.unwind.cpus import step_for
from dumpkit.unwind.frames import StackWalk
from dumpkit.unwind.walk import DEFAULT_MAX_FRAMES, Caller, Walker

from tests.support.fakes.target import MemoryTarget
from tests.support.synth_pe import I386, TEXT_CHARS, PEBuilder, code, export_table, unwind_info

INT3 = b"\xcc"
UWOP_PUSH, UWOP_ALLOC_LARGE, UWOP_ALLOC_SMALL, UWOP_SET_FPREG = 0, 1, 2, 3
UWOP_SAVE, UWOP_SAVE_FAR, UWOP_MACHFRAME = 4, 5, 10
UNW_FLAG_CHAININFO = 4


def _reg(name: str) -> int:
    return GPR_NAMES.index(name)


# ----------------------------------------------------------------------------- prologue operations
@dataclass(frozen=True)
class Push:
    """push r64 (UWOP_PUSH_NONVOL)."""

    reg: str

    def encode(self) -> bytes:
        n = _reg(self.reg)
        return bytes([0x50 + n]) if n < 8 else bytes([0x41, 0x50 + n - 8])

    def codes(self, end: int) -> List[int]:
        return [code(end, UWOP_PUSH, _reg(self.reg))]


@dataclass(frozen=True)
class Alloc:
    """sub rsp, n (UWOP_ALLOC_SMALL up to 128 bytes, else UWOP_ALLOC_LARGE)."""

    size: int

    def encode(self) -> bytes:
        if self.size < 0x80:
            return bytes([0x48, 0x83, 0xEC, self.size])
        return bytes([0x48, 0x81, 0xEC]) + struct.pack("<I", self.size)

    def codes(self, end: int) -> List[int]:
        if self.size <= 128:
            return [code(end, UWOP_ALLOC_SMALL, self.size // 8 - 1)]
        if self.size // 8 <= 0xFFFF:
            return [code(end, UWOP_ALLOC_LARGE, 0), self.size // 8]
        return [code(end, UWOP_ALLOC_LARGE, 1), self.size & 0xFFFF, self.size >> 16]


@dataclass(frozen=True)
class SetFP:
    """lea reg, [rsp + offset]: the frame register (UWOP_SET_FPREG; register and offset
    go in the UNWIND_INFO header, so the offset is a multiple of 16 up to 240)."""

    reg: str
    offset: int

    def encode(self) -> bytes:
        n = _reg(self.reg)
        rex = 0x4C if n >= 8 else 0x48
        if self.offset < 0x80:
            return bytes([rex, 0x8D, 0x40 | (n & 7) << 3 | 4, 0x24, self.offset])
        return bytes([rex, 0x8D, 0x80 | (n & 7) << 3 | 4, 0x24]) + struct.pack("<I", self.offset)

    def codes(self, end: int) -> List[int]:
        return [code(end, UWOP_SET_FPREG)]


@dataclass(frozen=True)
class SaveReg:
    """mov [rsp + offset], reg (UWOP_SAVE_NONVOL; UWOP_SAVE_NONVOL_FAR, a 32-bit offset,
    when offset / 8 does not fit 16 bits or `far` asks for it)."""

    reg: str
    offset: int
    far: bool = False

    def encode(self) -> bytes:
        n = _reg(self.reg)
        return bytes([0x4C if n >= 8 else 0x48, 0x89, 0x80 | (n & 7) << 3 | 4, 0x24]) + struct.pack("<I", self.offset)

    def codes(self, end: int) -> List[int]:
        if self.offset // 8 <= 0xFFFF and not self.far:
            return [code(end, UWOP_SAVE, _reg(self.reg)), self.offset // 8]
        return [code(end, UWOP_SAVE_FAR, _reg(self.reg)), self.offset & 0xFFFF, self.offset >> 16]


@dataclass(frozen=True)
class MachFrame:
    """The frame the CPU pushed for an interrupt or exception: [error code,] RIP, CS,
    EFLAGS, RSP, SS (UWOP_PUSH_MACHFRAME; no instruction of the function's own)."""

    error_code: bool = False

    def encode(self) -> bytes:
        return b""

    def codes(self, end: int) -> List[int]:
        return [code(end, UWOP_MACHFRAME, 1 if self.error_code else 0)]


PrologueOp = Union[Push, Alloc, SetFP, SaveReg, MachFrame]


# ----------------------------------------------------------------------------- body pieces
@dataclass(frozen=True)
class Call:
    """call rel32; its return site (the next instruction) gets `label`. `to`: the label
    the call goes to (a function's name: its entry); without it, the next instruction."""

    label: str
    to: Optional[str] = None


@dataclass(frozen=True)
class Mark:
    label: str


@dataclass(frozen=True)
class Epilogue:
    """The prologue undone: add rsp, <allocations>; pop the pushed registers; `end`
    (ret by default). Marks `<function>.epilogue` at its first instruction and
    `<function>.pop` at its first pop. (Not for functions that moved RSP since: an
    epilogue after alloca restores RSP from the frame register.)"""

    end: bytes = b"\xc3"


Piece = Union[bytes, Call, Mark, Epilogue]


@dataclass
class Function:
    name: str
    prologue: Sequence[PrologueOp] = ()
    body: Sequence[Piece] = ()
    chain: Optional[str] = None  # the function whose unwind info this part chains to
    unwind: bool = True  # False: code with no unwind entry
    start: int = 0  # offset in its region, set by the layout
    end: int = 0

    def epilogue_bytes(self, piece: Epilogue) -> Tuple[bytes, int]:
        """The epilogue's bytes and the offset of its first pop in them."""
        assert not any(isinstance(op, SetFP) for op in self.prologue)
        out = b""
        alloc = sum(op.size for op in self.prologue if isinstance(op, Alloc))
        if alloc:  # add rsp, alloc
            out += bytes([0x48, 0x83, 0xC4, alloc]) if alloc < 0x80 else b"\x48\x81\xc4" + struct.pack("<I", alloc)
        first_pop = len(out)
        for op in reversed(self.prologue):
            if isinstance(op, Push):
                n = _reg(op.reg)
                out += bytes([0x58 + n]) if n < 8 else bytes([0x41, 0x58 + n - 8])
        return out + piece.end, first_pop

    def unwind_info(self, chain_to: Optional[Tuple[int, int, int]] = None) -> bytes:
        codes: List[int] = []
        offset = 0
        ends = []
        for op in self.prologue:
            offset += len(op.encode())
            ends.append(offset)
        for op, end in reversed(list(zip(self.prologue, ends))):
            codes += op.codes(end)
        fp = next((op for op in self.prologue if isinstance(op, SetFP)), None)
        return unwind_info(
            codes,
            flags=UNW_FLAG_CHAININFO if chain_to is not None else 0,
            prolog=offset,
            frame_reg=_reg(fp.reg) if fp else 0,
            frame_off=fp.offset // 16 if fp else 0,
            chain=chain_to,
        )


def Code(name: str, *body: Piece) -> Function:
    """Code with no unwind entry (hand-written, or a leaf the compiler left out)."""
    return Function(name, (), body, unwind=False)


@dataclass
class Assembled:
    """Code laid out from offset 0 of a region: bytes, labels (region offsets) and the
    RUNTIME_FUNCTIONs (region offsets too) of the functions with unwind entries."""

    text: bytes
    labels: Dict[str, int]
    functions: List[Function] = field(default_factory=list)


def assemble(functions: Sequence[Function], align: int = 16) -> Assembled:
    text = bytearray()
    labels: Dict[str, int] = {}
    calls: List[Tuple[int, str]] = []  # (return site, label called): rel32s filled in at the end
    for fn in functions:
        text += INT3 * (-len(text) % align)
        fn.start = len(text)
        labels[fn.name] = fn.start
        for op in fn.prologue:
            text += op.encode()
        for piece in fn.body:
            if isinstance(piece, bytes):
                text += piece
            elif isinstance(piece, Call):
                text += b"\xe8\0\0\0\0"
                labels[piece.label] = len(text)
                if piece.to is not None:
                    calls.append((len(text), piece.to))
            elif isinstance(piece, Mark):
                labels[piece.label] = len(text)
            else:
                epilogue, first_pop = fn.epilogue_bytes(piece)
                labels[f"{fn.name}.epilogue"] = len(text)
                labels[f"{fn.name}.pop"] = len(text) + first_pop
                text += epilogue
        fn.end = len(text)
        labels[f"{fn.name}.end"] = fn.end
    for site, to in calls:
        struct.pack_into("<i", text, site - 4, labels[to] - site)
    return Assembled(bytes(text), labels, list(functions))


def unwind_section(asm: Assembled, text_rva: int, xdata_rva: int) -> Tuple[bytes, List[Tuple[int, int, int]]]:
    """.xdata for the functions with unwind entries and their RUNTIME_FUNCTIONs (RVAs),
    sorted; a chained part's UNWIND_INFO ends with its parent's RUNTIME_FUNCTION."""
    xdata = bytearray()
    placed: Dict[str, Tuple[int, int, int]] = {}
    for fn in sorted((f for f in asm.functions if f.unwind), key=lambda f: f.chain is not None):
        parent = placed[fn.chain] if fn.chain is not None else None
        placed[fn.name] = (text_rva + fn.start, text_rva + fn.end, xdata_rva + len(xdata))
        xdata += fn.unwind_info(parent)
    return bytes(xdata), sorted(placed.values())


# ----------------------------------------------------------------------------- images
@dataclass
class Image:
    """Functions as a PE image mapped at `base` (x64 unless `machine` says I386);
    `exports` maps exported names to the labels they name."""

    name: str
    base: int
    functions: Sequence[Function]
    machine: Optional[int] = None
    exports: Dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        x86 = self.machine == I386
        b = PEBuilder(image_base=self.base, machine=I386 if x86 else 0x8664, pe32plus=not x86)
        asm = assemble(self.functions)
        text = b.add_section(".text", asm.text + INT3 * 0x40, characteristics=TEXT_CHARS)
        if not x86:
            xdata_rva = b.next_rva
            xdata, entries = unwind_section(asm, text.rva, xdata_rva)
            assert b.add_section(".xdata", xdata).rva == xdata_rva
            pdata = b.add_section(".pdata", b"".join(struct.pack("<III", *e) for e in entries))
            b.set_dir(3, pdata.rva, 12 * len(entries))
        if self.exports:
            rvas = [text.rva + asm.labels[label] for label in self.exports.values()]
            edata_rva = b.next_rva
            table = export_table(edata_rva, self.name, 1, rvas, [(n, i) for i, n in enumerate(self.exports)])
            assert b.add_section(".edata", table).rva == edata_rva
            b.set_dir(0, edata_rva, len(table))
        self.pe = b.build()
        self.labels = {k: self.base + text.rva + v for k, v in asm.labels.items()}
        self.module = Module(
            self.name, f"C:\\nowhere\\{self.name}", self.base, self.pe.size_of_image, self.pe.timestamp
        )

    def __getitem__(self, label: str) -> int:
        return self.labels[label]

    def rva(self, label: str) -> int:
        return self.labels[label] - self.base

    def region(self) -> Tuple[int, bytes]:
        return self.base, self.pe.memory_at(0, self.pe.size_of_image)


UNWIND_AREA = 0x800  # where a Jit region keeps its unwind data


@dataclass
class Jit:
    """Functions in a region registered with RtlAddFunctionTable: code at `base`, their
    UNWIND_INFO and RUNTIME_FUNCTIONs in the same region, the table entries as the
    FunctionTable stream records them (begin, end, unwind VA, base)."""

    base: int
    functions: Sequence[Function]
    size: int = 0x1000

    def __post_init__(self) -> None:
        asm = assemble(self.functions)
        assert len(asm.text) <= UNWIND_AREA
        xdata, entries = unwind_section(asm, 0, UNWIND_AREA)
        mem = bytearray(INT3 * self.size)
        mem[: len(asm.text)] = asm.text
        mem[UNWIND_AREA : UNWIND_AREA + len(xdata)] = xdata
        self.memory = mem
        self.labels = {k: self.base + v for k, v in asm.labels.items()}
        self.entries = [(self.base + b, self.base + e, self.base + u, self.base) for b, e, u in entries]
        self._next = UNWIND_AREA + len(xdata) + (-len(xdata) % 4)

    def __getitem__(self, label: str) -> int:
        return self.labels[label]

    def indirect(self, name: str, start: int, end: int) -> Tuple[int, int, int, int]:
        """A table entry for [start, end) whose unwind field points (bit 0 set) at a copy
        of `name`'s RUNTIME_FUNCTION, as a cold part of a function is registered."""
        target = next(e for e in self.entries if e[0] == self[name])
        at = self._next
        self.memory[at : at + 12] = struct.pack("<III", *(v - self.base for v in target[:3]))
        self._next += 12
        return (start, end, self.base + at + 1, self.base)

    def region(self) -> Tuple[int, bytes]:
        return self.base, bytes(self.memory)


# ----------------------------------------------------------------------------- stacks
Word = Union[int, str]  # a number, or a label of the code or of the stack itself


class Stack:
    """Stack memory [lo, hi), written upward from a cursor. `mark(name)` names the
    cursor's address; words given as names are resolved when the stack is built."""

    def __init__(self, lo: int = 0x100000, hi: int = 0x104000, word_size: int = 8):
        self.lo, self.hi, self.word_size = lo, hi, word_size
        self.cursor = lo
        self.marks: Dict[str, int] = {}
        self._words: List[Tuple[int, Word]] = []

    def at(self, address: int) -> "Stack":
        """Move the cursor (new frames usually start somewhere below hi)."""
        self.cursor = address
        return self

    def mark(self, name: str) -> "Stack":
        self.marks[name] = self.cursor
        return self

    def skip(self, size: int) -> "Stack":
        self.cursor += size
        return self

    def word(self, *values: Word) -> "Stack":
        for v in values:
            self._words.append((self.cursor, v))
            self.cursor += self.word_size
        return self

    def __getitem__(self, name: str) -> int:
        return self.marks[name]

    def build(self, *labelled: Union[Image, Jit]) -> bytes:
        mem = bytearray(self.hi - self.lo)
        fmt = "<Q" if self.word_size == 8 else "<I"
        for address, value in self._words:
            if isinstance(value, str):
                value = self.marks[value] if value in self.marks else _label(value, labelled)
            struct.pack_into(fmt, mem, address - self.lo, value)
        return bytes(mem)


def _label(name: str, labelled: Sequence[Union[Image, Jit]]) -> int:
    for source in labelled:
        if name in source.labels:
            return source.labels[name]
    raise KeyError(name)


# ----------------------------------------------------------------------------- the Target
def target_of(
    regions: Sequence[Tuple[int, bytes]],
    modules: Sequence[Module],
    dynamic: Sequence[Tuple[int, int, int, int]] = (),
    arch: int = 9,
) -> MemoryTarget:
    """The shared Target stand-in over image, stack and JIT bytes, for `arch`'s CPU."""
    return MemoryTarget(regions, modules, dynamic=dynamic, system=SystemInfo(processor_architecture=arch))


# ----------------------------------------------------------------------------- a walk over it all
class Scene:
    """Code and a stack in one MemoryTarget, walked with the step of `arch`'s CPU.
    `stack_range` is the thread's recorded stack (default: the Stack's memory)."""

    def __init__(
        self,
        stack: Stack,
        *code: Union[Image, Jit],
        arch: int = 9,
        modules: Sequence[Module] = (),
        stack_range: Optional[Tuple[int, int]] = None,
    ):
        self.stack = stack
        self.code = code
        self.arch = arch
        self.extra_modules = list(modules)
        self.stack_range = stack_range or (stack.lo, stack.hi)
        self.more_entries: List[Tuple[int, int, int, int]] = []  # function-table entries beyond the Jits' own

    def walker(self, max_frames: int = DEFAULT_MAX_FRAMES) -> Walker:
        regions = [c.region() for c in self.code] + [(self.stack.lo, self.stack.build(*self.code))]
        modules = [c.module for c in self.code if isinstance(c, Image)] + self.extra_modules
        dynamic = [e for c in self.code if isinstance(c, Jit) for e in c.entries]
        dynamic += self.more_entries
        target = target_of(regions, modules, dynamic, self.arch)
        images = ImageProvider(target, ImageLocator(use_recorded_path=False), problems=target.soft_errors)
        return Walker(target, images, step_for(target), max_frames=max_frames, problems=target.soft_errors)

    def thread(self, regs: Dict[str, int]) -> Thread:
        lo, hi = self.stack_range
        return Thread(1, Registers(dict(regs)), lo, hi - lo)

    def walk(self, regs: Dict[str, int], max_frames: int = DEFAULT_MAX_FRAMES, clean: bool = True) -> StackWalk:
        """Walk from `regs` (rip/rsp or eip/esp/ebp and any others). `clean`: the walk
        must have met no soft error (unusable unwind data, missing images)."""
        walker = self.walker(max_frames)
        result = walker.walk(self.thread(regs))
        if clean:
            assert walker.target.soft_errors.items == []
        return result

    def step(self, regs: Dict[str, int]) -> Caller:
        """One step of the CPU's step from an exact IP (where execution stopped)."""
        walker = self.walker()
        assert walker.step is not None
        start = walker.step.start(self.thread(regs), Registers(dict(regs)))
        word = walker.step.word_size

        def read_word(address: int) -> Optional[int]:
            try:
                data = walker.target.read(address, word)
            except MemoryNotInDump:
                return None
            return int.from_bytes(data, "little")

        place = walker.code.place(start.ip)
        got = walker.step.caller(place, start.ip, start.sp, dict(start.regs), read_word, True, start.stack_hi)
        assert got is not None
        return got
