"""The crash record: the exception decoded (what was accessed, where, the faulting
instruction's operand) and placed (the faulting module, its version, the code around the
IP)."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from dumpkit.analysis.codes.model import DELAY_LOAD_CODES, MASK32
from dumpkit.analysis.crash import decode_crash
from dumpkit.analysis.environment.versions import Versions
from dumpkit.analysis.faultsite import with_fault_site
from dumpkit.analysis.model import CrashInfo, DelayLoadFailure
from dumpkit.records import replace
from dumpkit.target import PROCESSOR_ARCHITECTURE_AMD64, Target
from dumpkit.unwind.codemap import CodeMap
from dumpkit.unwind.frames import Frame


def place_of(target: Target) -> Callable[[int], Optional[str]]:
    """An address as `module+0xRVA`, or None outside every module."""

    def place(address: int) -> Optional[str]:
        m = target.module_at(address)
        return f"{m.name}+{address - m.base:#x}" if m is not None else None

    return place


def crash_record(
    target: Target, code: CodeMap, frames: Sequence[Frame], versions: Versions, show_code: bool
) -> Optional[CrashInfo]:
    """The target's exception as a crash record, None when it has none. `frames`: the
    crashing thread's walked frames (may be empty); `show_code`: whether the code around the
    IP is decoded for the report (a CPU dumpkit walks, and a report that shows it)."""
    ex = target.exception
    if ex is None:
        return None
    crash = decode_crash(ex, target.system, frames, code.read_code, place_of(target))
    if crash.code & MASK32 in DELAY_LOAD_CODES:
        crash = replace(crash, delay_load=_delay_load(target, code, crash, frames))
    return with_fault_site(target, code, crash, frames, versions, show_code)


def _delay_load(target: Target, code: CodeMap, crash: CrashInfo, frames: Sequence[Frame]) -> DelayLoadFailure:
    """The DelayLoadInfo of a delay-load failure: on the stack (the dump), its names in the
    importing module's read-only data (the dump's memory when it holds them, else the image).
    Imported here: no other crash needs the module, and every analysis starts up without it."""
    from dumpkit.analysis.delayload import calling_frame, delay_load_failure

    def read(address: int, size: int) -> bytes:
        held = target.read_available(address, size)
        return held if held and (len(held) == size or b"\0" in held) else code.read_code(address, size)

    system = target.system
    pointer = 8 if system is None or system.processor_architecture == PROCESSOR_ARCHITECTURE_AMD64 else 4
    failure = delay_load_failure(crash.parameters, pointer, read, target.module_at, target.modules)
    caller = (
        calling_frame(frames, failure.slot_address, code.read_code) if failure.slot_address and pointer == 8 else None
    )
    if caller is None:
        return failure
    return replace(failure, caller=caller.function_name, caller_frame=caller.index)
