"""The crash record: the exception decoded (what was accessed, where, the faulting
instruction's operand) and placed (the faulting module, its version, the code around the
IP)."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from dumpkit.analysis.crash import decode_crash
from dumpkit.analysis.environment.versions import Versions
from dumpkit.analysis.faultsite import with_fault_site
from dumpkit.analysis.model import CrashInfo
from dumpkit.target import Target
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
    return with_fault_site(target, code, crash, frames, versions, show_code)
