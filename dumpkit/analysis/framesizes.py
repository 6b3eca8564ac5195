"""Oversized stack frames: which function asked for how much stack.

Two numbers per function:
- `size`: what the frame measured on the walked stack (distance to the caller's frame,
  return address and pushes included);
- `requested`: what the prologue asks for, decoded with capstone (`sub rsp, N`, or
  `mov eax, N; call <probe>` for frames of a page or more).

And the case that matters most for a large-frame stack overflow: the function whose
prologue called the stack probe (`___chkstk_ms`, `__chkstk`) and died inside it, page by
page, before its frame existed. Its measured size is tiny (the probe never returned, so
`sub rsp, rax` never ran); only the prologue says how much it wanted.

Pure apart from the `read_code` callable. Per-function work is memoized, so a stack of
10^6 frames costs one decode per distinct function.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from dumpkit.records import replace
from dumpkit.unwind.bulk import Frames
from dumpkit.limits import OVERSIZED_FRAME
from dumpkit.analysis.model import FrameSize
from dumpkit.unwind import disasm
from dumpkit.unwind.frames import Frame, without_offset

__all__ = ["frame_sizes", "PROBE_NAMES", "is_probe_name", "is_oversized", "faulted_in_probe"]

# Stack-probe helpers (libgcc / mingw, MSVC CRT). None of them has an unwind entry of its
# own, so the walker cannot always name them; a missing function_start counts too.
PROBE_NAMES = (
    "___chkstk_ms",
    "__chkstk_ms",
    "__chkstk",
    "_chkstk",
    "__alloca_probe",
    "_alloca_probe",
    "__alloca_probe_16",
    "__alloca_probe_8",
)
_PROBE_SET = {n.lower() for n in PROBE_NAMES}

# How far from a probe's entry frame 0 may be (the probes are a few dozen bytes long).
_PROBE_MAX_LENGTH = 0x400
# Instructions between `mov eax, N` and the probe call that we follow.
_MAX_STEPS_TO_CALL = 8

ReadCode = Callable[[int, int], bytes]


def is_probe_name(symbol: Optional[str]) -> bool:
    """Is `module!name+off` (or a bare name) one of the stack-probe helpers?"""
    if not symbol:
        return False
    name = without_offset(symbol.split("!", 1)[-1]).strip()
    return name.lower() in _PROBE_SET


def _read(read_code: ReadCode, address: int, size: int) -> bytes:
    try:
        return read_code(address, size) or b""
    except Exception:
        return b""


def _probe_call_end(read_code: ReadCode, alloc: disasm.StackAllocation) -> Optional[Tuple[int, Optional[int]]]:
    """(address right after the probe CALL, call target if direct) for a via-probe prologue."""
    pc = alloc.instruction_address
    code = _read(read_code, pc, 16 * _MAX_STEPS_TO_CALL)
    off = 0
    for _ in range(_MAX_STEPS_TO_CALL):
        got = disasm.decode_one(code[off:], pc + off)
        if got is None:
            return None
        size, mnem, ops = got
        if mnem == "call":
            end = pc + off + size
            target = None
            text = ops.strip()
            try:
                target = int(text, 16) if text.startswith("0x") else int(text)
            except ValueError:
                target = None
            return end, target
        if mnem in ("ret", "jmp") or mnem.startswith("j"):
            return None
        off += size
    return None


def _probe_name(
    target: int, name_at: Optional[Callable[[int], Optional[str]]], frames: Sequence[Frame]
) -> Optional[str]:
    """The name of the function at a probe call's target: the walker's name for that
    exact address, else frame 0's function when frame 0 is the probe and starts there."""
    name = None
    if name_at is not None:
        try:
            name = name_at(target)
        except Exception:
            name = None
    if name and "+" not in name:  # a name with an offset is some other function's
        return name
    top = frames[0] if frames else None
    if top is not None and top.symbol and target <= top.ip < target + _PROBE_MAX_LENGTH:
        off = top.ip - target  # frame 0's name must start exactly at the target
        if top.symbol == (top.function_name if off == 0 else f"{top.function_name}+{off:#x}"):
            return top.function_name
    return None


def _with_probe_named(
    alloc: disasm.StackAllocation,
    read_code: ReadCode,
    name_at: Optional[Callable[[int], Optional[str]]],
    frames: Sequence[Frame],
) -> disasm.StackAllocation:
    """`call 0x276782510` in a prologue's text becomes `call opkernels.dll!___chkstk_ms`
    (or `call to the stack probe at 0x...` when the target has no name)."""
    found = _probe_call_end(read_code, alloc)
    target = found[1] if found else None
    if target is None or f"call {target:#x}" not in alloc.text:
        return alloc
    name = _probe_name(target, name_at, frames)
    text = alloc.text.replace(
        f"call {target:#x}", f"call {name}" if name else f"call to the stack probe at {target:#x}"
    )
    return replace(alloc, text=text)


def faulted_in_probe(frames: Sequence[Frame], alloc: Optional[disasm.StackAllocation], read_code: ReadCode) -> bool:
    """Did frame 1's function die inside its own prologue's probe call (frame 0)?

    Frame 0 must look like a probe (no unwind entry, or a probe's name), frame 1's prologue
    must be `mov eax, N; call <probe>` and frame 1's return address must be exactly the end
    of that call. When the call is direct, frame 0 must also be inside its target."""
    if len(frames) < 2 or alloc is None or not alloc.via_probe:
        return False
    top, caller = frames[0], frames[1]
    if not (top.function_start is None or is_probe_name(top.symbol)):
        return False
    found = _probe_call_end(read_code, alloc)
    if found is None:
        return False
    end, target = found
    if end != caller.ip:
        return False
    if target is not None and not (target <= top.ip < target + _PROBE_MAX_LENGTH):
        return False
    return True


def frame_sizes(
    frames: Sequence[Frame],
    read_code: ReadCode,
    *,
    module_base: Callable[[str], Optional[int]],
    threshold: int = OVERSIZED_FRAME,
    top: int = 10,
    is_probe: Optional[Callable[[int], bool]] = None,
    name_at: Optional[Callable[[int], Optional[str]]] = None,
) -> List[FrameSize]:
    """Frames ranked by stack use, one entry per function (its largest frame), largest
    first by max(size, requested); at most `top` entries plus every oversized one
    (size or requested >= `threshold`).

    `read_code(va, n)` returns code bytes; `module_base(name)` the load address of a module.
    A frame whose size is unknown (the outermost one, which has no caller to measure
    against) is ranked only when its prologue's request alone reaches `threshold`.

    `is_probe(target_va)`, if given, confirms that a call in a prologue goes to the stack
    probe (otherwise any call right after `mov eax, N` counts, as in `disasm`);
    `name_at(va)`, if given, names the probe the prologue calls (`module!name`).

    The function that faulted inside the probe before its frame existed (frame 1, when
    frame 0 is the probe) is reported with `requested` = the prologue's N,
    `via_probe=True` and `not_yet_allocated=True`; the probe's own frame is then left out
    (its bytes are part of that dying allocation)."""
    allocs: Dict[Tuple[str, int], Optional[disasm.StackAllocation]] = {}
    bases: Dict[str, Optional[int]] = {}

    def allocation(f: Frame) -> Optional[disasm.StackAllocation]:
        if f.module is None or f.function_start is None:
            return None
        key = (f.module, f.function_start)
        if key in allocs:
            return allocs[key]
        if f.module not in bases:
            try:
                bases[f.module] = module_base(f.module)
            except Exception:
                bases[f.module] = None
        base = bases[f.module]
        result = None
        if base is not None:
            try:
                result = disasm.stack_allocation(
                    lambda va, n: _read(read_code, va, n), base + f.function_start, is_probe
                )
            except Exception:
                result = None
            if result is not None and result.via_probe:
                result = _with_probe_named(result, lambda va, n: _read(read_code, va, n), name_at, frames)
        allocs[key] = result
        return result

    # best (largest) frame per function: key -> (score, -index, FrameSize)
    best: Dict[object, Tuple[int, int, FrameSize]] = {}
    skip_index: Optional[int] = None

    if len(frames) >= 2:
        caller = frames[1]
        alloc = allocation(caller)
        if faulted_in_probe(frames, alloc, read_code):
            assert alloc is not None
            fs = FrameSize(
                frame_index=caller.index,
                function=caller.function_name,
                size=caller.size or 0,
                requested=alloc.size,
                via_probe=True,
                prologue_text=alloc.text,
                not_yet_allocated=True,
                oversized=max(caller.size or 0, alloc.size) >= threshold,
            )
            best[_fkey(caller)] = (max(fs.size, alloc.size), -caller.index, fs)
            skip_index = frames[0].index

    # a bulk-walked recursion repeats its first repetition's sizes: that one is enough
    for f in frames.first_repetitions() if isinstance(frames, Frames) else frames:
        if f.index == skip_index:
            continue
        key = _fkey(f)
        size = f.size or 0
        prev = best.get(key)
        if prev is not None and prev[2].not_yet_allocated:
            continue  # the dying frame stays the function's entry
        if prev is not None and size <= prev[2].size:
            continue
        alloc = allocation(f)
        requested = alloc.size if alloc else None
        if f.size is None and (requested or 0) < threshold:
            continue  # the outermost frame: its real size is unknown, its prologue alone ranks nothing
        fs = FrameSize(
            frame_index=f.index,
            function=f.function_name,
            size=size,
            requested=requested,
            via_probe=bool(alloc and alloc.via_probe),
            prologue_text=alloc.text if alloc else None,
            oversized=max(size, requested or 0) >= threshold,
        )
        best[key] = (max(size, requested or 0), -f.index, fs)

    ranked = sorted(best.values(), key=lambda t: (t[0], t[1]), reverse=True)
    out: List[FrameSize] = []
    for i, (score, _neg, fs) in enumerate(ranked):
        if i < max(0, top) or score >= threshold:
            out.append(fs)
    return out


def is_oversized(fs: FrameSize, threshold: int = OVERSIZED_FRAME) -> bool:
    """Does this frame reach the threshold, by measured size or by what it requested?"""
    return max(fs.size, fs.requested or 0) >= threshold


def _fkey(f: Frame) -> object:
    if f.module is not None and f.function_start is not None:
        return (f.module, f.function_start)
    return f.function_key
