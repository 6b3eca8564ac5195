"""The crashed process as a bug report names it: the executable, its version, and the
command line it was started with.

The command line lives in the process's memory (TEB -> PEB -> ProcessParameters ->
CommandLine, a UNICODE_STRING); a dump holds it only when its writer captured that memory
(full-memory dumps and MiniDumpWithProcessThreadData do, MiniDumpNormal does not). When a
link of that chain is missing, the record says which one, rather than guessing."""

from __future__ import annotations

from typing import Optional, Tuple

from dumpkit.analysis.environment.versions import Versions
from dumpkit.analysis.model import ProcessRecord
from dumpkit.target import PROCESSOR_ARCHITECTURE_INTEL, Module, Target, Thread

# Offsets of the chain, (64-bit, 32-bit): TEB.ProcessEnvironmentBlock,
# PEB.ProcessParameters, RTL_USER_PROCESS_PARAMETERS.CommandLine.
PEB_IN_TEB = (0x60, 0x30)
PARAMETERS_IN_PEB = (0x20, 0x10)
COMMAND_LINE_IN_PARAMETERS = (0x70, 0x40)
MAX_COMMAND_LINE = 32_767 * 2  # bytes: CreateProcess's limit, in UTF-16 code units
TEBS_TRIED = 8  # every thread's TEB points at the one PEB; a few are enough to find one captured


def executable(modules) -> Optional[Module]:
    """The process's .exe: the first module named so (Windows lists it first; Wine does not)."""
    return next((m for m in modules if m.name.lower().endswith(".exe")), None)


def _pointer(target: Target, address: int, size: int) -> Optional[int]:
    data = target.read_available(address, size)
    return int.from_bytes(data, "little") if len(data) == size else None


def command_line(target: Target, threads: Tuple[Thread, ...], wide: bool) -> Tuple[Optional[str], Optional[str]]:
    """(command line, None), or (None, which memory the dump lacks). `dumpkit capture`
    runs it over the live process to learn which bytes a dump needs for it."""
    i = 0 if wide else 1
    size = 8 if wide else 4
    peb = None
    tebs = [t.teb for t in threads[:TEBS_TRIED] if t.teb]
    if not tebs:
        return None, "the dump records no thread environment block (TEB) address"
    for teb in tebs:
        peb = _pointer(target, teb + PEB_IN_TEB[i], size)
        if peb:
            break
    if not peb:
        return None, (
            "the dump holds no thread environment block (TEB) to find it from; full-memory dumps "
            "(and MiniDumpWithProcessThreadData ones) hold it"
        )
    params = _pointer(target, peb + PARAMETERS_IN_PEB[i], size)
    if not params:
        return None, f"the dump does not hold the process environment block at {peb:#x}"
    header = target.read_available(params + COMMAND_LINE_IN_PARAMETERS[i], 16 if wide else 8)
    if len(header) != (16 if wide else 8):
        return None, f"the dump does not hold the process parameters at {params:#x}"
    length = int.from_bytes(header[0:2], "little")
    buffer = int.from_bytes(header[8:16] if wide else header[4:8], "little")
    if length == 0:
        return "", None
    if length % 2 or length > MAX_COMMAND_LINE or not buffer:
        return None, f"the process parameters at {params:#x} hold no valid command line (length {length})"
    data = target.read_available(buffer, length)
    if len(data) != length:
        return None, f"the dump does not hold the command line's text at {buffer:#x}"
    return data.decode("utf-16-le", errors="replace"), None


def process_record(target: Target, versions: Versions, first_threads: Tuple[Thread, ...] = ()) -> ProcessRecord:
    """The executable, its version, and the command line. `first_threads`: threads whose
    TEB to try first (the crashing one)."""
    exe = executable(target.modules)
    version = versions.fixed(exe)[0] if exe is not None else None
    wide = target.system is None or target.system.processor_architecture != PROCESSOR_ARCHITECTURE_INTEL
    seen = {t.tid for t in first_threads}
    threads = tuple(first_threads) + tuple(t for t in target.threads[:TEBS_TRIED] if t.tid not in seen)
    line, missing = command_line(target, threads, wide)
    return ProcessRecord(
        name=exe.name if exe is not None else None,
        path=exe.path if exe is not None else None,
        version=version,
        command_line=line,
        command_line_missing=missing,
    )


def module_version(module: Optional[Module], versions: Versions) -> Optional[str]:
    """A module's file version: its record's, else its image's version resource."""
    return versions.fixed(module)[0] if module is not None else None
