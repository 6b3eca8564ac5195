"""Where the crash happened: the module holding the faulting instruction, that module's
version, and the code around it, decoded from the function's first byte when it is known
(else from a guess that says so)."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from dumpkit.analysis.disassembly import disassemble_around
from dumpkit.analysis.environment.versions import Versions
from dumpkit.analysis.model import CrashInfo
from dumpkit.analysis.process import module_version
from dumpkit.records import replace
from dumpkit.target import Target
from dumpkit.unwind.frames import Frame
from dumpkit.unwind.places import nearest_name
from dumpkit.unwind.codemap import CodeMap


def function_entry(code: CodeMap, ip: int) -> Tuple[Optional[int], str]:
    """The first byte of the function holding `ip` and where it comes from: its unwind
    entry, else the nearest export or COFF symbol that can name it (a leaf such as a
    hand-written stack probe has no unwind entry)."""
    place = code.place(ip)
    if place.dynamic is not None:  # JIT code registered with RtlAddFunctionTable
        return place.dynamic[0], "function_entry"
    if place.module is None or place.rva is None:
        return None, "none"
    if place.function_start is not None:
        return place.module.base + place.function_start, "function_entry"
    near = nearest_name(place.image, place.rva, None) if place.image is not None else None
    return (place.module.base + near[1], "symbol") if near is not None else (None, "none")


def with_fault_site(
    target: Target, code: CodeMap, crash: CrashInfo, frames: Sequence[Frame], versions: Versions, show_code: bool
) -> CrashInfo:
    """The crash record with where it happened: the module holding the faulting IP (the
    walk's frame 0, else the exception address), its version, and the code around the IP
    when `show_code` (a CPU dumpkit walks, so decodes: x86 or x64; and a report to show it:
    no verdict reads it)."""
    ip = frames[0].ip if frames else crash.address
    module = target.module_at(ip)
    disassembly = None
    if show_code:
        entry, entry_from = function_entry(code, ip)
        executing = crash.access_kind == "execute" and crash.access_address == ip
        disassembly = disassemble_around(
            code.read_code,
            ip,
            entry,
            code.bits,
            executing=executing,
            name_at=lambda va: code.place(va).symbol,
            entry_from=entry_from,
        )
    return replace(
        crash,
        module=module.name if module is not None else None,
        module_version=module_version(module, versions),
        disassembly=disassembly,
    )
