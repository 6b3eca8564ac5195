"""The exception record decoded: what was raised, where, with what parameters, and who
raised it when it was the C runtime or the heap acting for a caller."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from dumpkit.analysis import codes
from dumpkit.analysis.access import faulting_access, operand_headline
from dumpkit.analysis.cxx import thrown_types
from dumpkit.analysis.facts import register_pairs
from dumpkit.analysis.model import CrashInfo
from dumpkit.analysis.raiser import raising_function
from dumpkit.target import PROCESSOR_ARCHITECTURE_AMD64, X86_FAMILY, ExceptionInfo, SystemInfo, significant_exception
from dumpkit.analysis.codes.model import (
    STATUS_ACCESS_VIOLATION,
    STATUS_CPP_EH_EXCEPTION,
    STATUS_FATAL_APP_EXIT,
    STATUS_HEAP_CORRUPTION,
    STATUS_INVALID_PARAMETER,
)
from dumpkit.unwind.frames import Frame

ReadMemory = Callable[[int, int], bytes]

ACCESS_VIOLATION = STATUS_ACCESS_VIOLATION
CXX_EXCEPTION = STATUS_CPP_EH_EXCEPTION
# raised by the CRT or the heap on behalf of a caller: the report names that caller
_RAISED_FOR_A_CALLER = (STATUS_FATAL_APP_EXIT, STATUS_INVALID_PARAMETER, STATUS_HEAP_CORRUPTION)
HEAP_CORRUPTION = STATUS_HEAP_CORRUPTION


def decode_crash(
    ex: ExceptionInfo,
    system: Optional[SystemInfo],
    frames: Sequence[Frame],
    read_code: Optional[ReadMemory],
    place_of: Optional[Callable[[int], Optional[str]]] = None,
) -> CrashInfo:
    """`frames`: the crashing thread's walked frames (may be empty); `read_code` reads code
    bytes (image first, then the dump), to decode the faulting instruction's operand;
    `place_of(address)` names an address as `module+0xRVA` (None outside every module)."""
    address, parameters = significant_exception(ex, system)
    # Without NX (XP-era CPUs and systems) running into unmapped memory is reported as a READ
    # (parameter 0 = 0) of the instruction pointer itself: it was execution that went there.
    jumped = (
        ex.code == ACCESS_VIOLATION
        and len(parameters) >= 2
        and parameters[0] == 0
        and parameters[1] == address
        and (ex.context is None or ex.context.ip == address)
    )
    dec = codes.decode_exception(ex.code, (8,) + tuple(parameters[1:]) if jumped else parameters)
    instruction_access = None
    arch = system.processor_architecture if system is not None else None
    # (an execute fault's "instruction" is whatever data lies at the bad IP: nothing to decode)
    executing = jumped or (bool(parameters) and parameters[0] == 8)
    if ex.code == ACCESS_VIOLATION and not executing and ex.context is not None and arch in X86_FAMILY and read_code:
        bits = 64 if arch == PROCESSOR_ARCHITECTURE_AMD64 else 32
        instruction_access = faulting_access(read_code, address, ex.context.values, bits)
    ff = dec.fastfail
    acc = dec.access
    headline = dec.headline
    if instruction_access is not None and acc is not None and acc.address is not None:
        # a #GP's recorded address and read/write flag mean nothing: say what the code did
        headline = operand_headline(ex.code, acc.address, instruction_access) or headline
    raised_by = None
    # abort / invalid parameter / fail-fast / heap corruption are raised by the CRT or the
    # heap on behalf of a caller: name the first frame outside that machinery
    if frames and (ff is not None or ex.code in _RAISED_FOR_A_CALLER):
        raised_by = raising_function(frames, fallback=ex.code != HEAP_CORRUPTION)
    cxx_types = tuple(thrown_types(parameters, read_code)) if ex.code == CXX_EXCEPTION and read_code else ()
    # a type that could not be read: where its ThrowInfo lies names the module defining it
    # (parameter 2 is the ThrowInfo's address on x86 and x64 alike; often a C++ runtime DLL
    # whose data the dump does not hold)
    throw_info = None
    if ex.code == CXX_EXCEPTION and not cxx_types and len(parameters) >= 3 and place_of is not None:
        throw_info = place_of(parameters[2])
    return CrashInfo(
        code=ex.code,
        code_name=dec.code_info.name,
        summary=codes.crash_summary(dec),
        headline=headline,
        thread_id=ex.thread_id,
        address=address,
        parameters=parameters,
        fastfail_code=ff.subcode if ff else None,
        fastfail_name=ff.name if ff else None,
        access_kind=acc.kind if acc else None,
        access_address=acc.address if acc else None,
        raised_by=raised_by,
        cxx_types=cxx_types,
        cxx_throw_info=throw_info,
        instruction_access=instruction_access,
        flags=ex.flags,
        nested=ex.nested,
        raw_address=ex.address,
        raw_parameters=tuple(ex.parameters),
        context_flags=ex.context.context_flags if ex.context else None,
        registers=register_pairs(ex.context),
    )
