"""What the dump holds, as the Report's records: the engine's read phase.

No walking and no analysis here: these are the facts every command shows the same way
(`info` shows only these; `stack` and `analyze` add to them)."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from dumpkit.analysis.model import DumpSummary, ModuleRecord, StreamRecord, SystemSummary, UnloadedModuleRecord
from dumpkit.problems import Problems
from dumpkit.target import GPR_NAMES, Registers, Target, Thread
from dumpkit.words import plural

EXCEPTION_STREAM = 6

# WinDbg's order: what a reader scans for first. Registers not listed follow, sorted.
REGISTER_ORDER = (
    *("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp"),
    *("r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"),
    *("eax", "ebx", "ecx", "edx", "esi", "edi", "ebp", "esp", "eip"),
    *("eflags", "cs", "ds", "es", "fs", "gs", "ss", "mxcsr"),
)
_RANK = {n: i for i, n in enumerate(REGISTER_ORDER)}
# Zero-padded to the pointer width when shown, as WinDbg does; flags and selectors are not.
POINTER_REGISTERS = frozenset(GPR_NAMES) | {"rip", "eax", "ebx", "ecx", "edx", "esi", "edi", "ebp", "esp", "eip"}


# reading order of each set of register names met (one or two per dump: every thread's
# context holds the same registers), bounded: a damaged dump can vary them per thread
_ORDERS: Dict[Tuple[str, ...], Tuple[str, ...]] = {}
_MAX_ORDERS = 64


def register_pairs(regs: Optional[Registers]) -> Tuple[Tuple[str, int], ...]:
    """Every register the context holds (absent ones are not invented), in reading order."""
    if regs is None:
        return ()
    values = regs.values
    held = tuple(values)
    names = _ORDERS.get(held)
    if names is None:
        names = tuple(sorted(values, key=lambda n: (_RANK.get(n, len(_RANK)), n)))
        if len(_ORDERS) >= _MAX_ORDERS:
            _ORDERS.clear()
        _ORDERS[held] = names
    return tuple([(n, values[n]) for n in names])


def dump_summary(target: Target) -> DumpSummary:
    d = target.dump
    return DumpSummary(
        path=d.path,
        file_size=d.file_size,
        timestamp=d.timestamp,
        streams=tuple(s.name for s in d.streams if s.type != 0),
        skipped_streams=tuple(s.name for s in d.streams if not s.known and s.type != 0),
        thread_count=len(target.threads),
        module_count=len(target.modules),
        memory_ranges=target.memory_range_count,
        version=d.version,
        flags=d.flags,
        stream_details=tuple(
            StreamRecord(s.type, s.name, s.size, s.known, d.stream_problem(s.type)) for s in d.streams if s.type
        ),
        memory_regions=len(target.memory_regions),
        function_tables=len(target.function_table_entries()),
    )


def system_summary(target: Target) -> Optional[SystemSummary]:
    s = target.system
    if s is None:
        return None
    proc = target.process
    known = s.cpu_signature_known
    return SystemSummary(
        arch=s.arch_name,
        os_version=f"{s.os_major}.{s.os_minor}.{s.os_build}" + (f" {s.csd_version}" if s.csd_version else ""),
        os_build=target.build_string,
        cpu=s.cpu_description,
        processors=s.number_of_processors,
        wine=s.wine_version,
        pid=proc.pid if proc else None,
        process_create_time=proc.create_time if proc else None,
        csd_version=s.csd_version,
        product_type=s.product_type,
        cpu_vendor=s.cpu_vendor,
        cpu_family=s.cpu_family if known else None,
        cpu_model=s.cpu_model if known else None,
        cpu_stepping=s.cpu_stepping if known else None,
        processor_level=s.processor_level,
        processor_revision=s.processor_revision,
        cpuid_version=s.cpuid_version,
        cpuid_features_edx=s.cpuid_features,
        processor_features=tuple(s.processor_features),
        xstate_enabled_features=target.xstate_enabled_features,
        process_user_seconds=proc.user_time if proc else None,
        process_kernel_seconds=proc.kernel_time if proc else None,
    )


def module_records(
    target: Target, image_sources: Dict[str, str], symbol_sources: Optional[Dict[str, str]] = None
) -> Tuple[ModuleRecord, ...]:
    """The loaded modules by base address, with where each image came from when one was
    needed, and where the names of its frames came from when any were named."""
    out: List[ModuleRecord] = []
    for m in sorted(target.modules, key=lambda m: m.base):
        cv = m.cv_record
        out.append(
            ModuleRecord(
                m.name,
                m.path,
                m.base,
                m.size,
                m.timestamp,
                m.file_version,
                m.product_version,
                cv.pdb_name if cv else None,
                image_sources.get(m.name),
                checksum=m.checksum,
                pdb_guid=cv.guid if cv else None,
                pdb_age=cv.age if cv else None,
                pdb_id=cv.symbol_id if cv else None,
                symbol_source=(symbol_sources or {}).get(m.name),
            )
        )
    return tuple(out)


def unloaded_records(target: Target) -> Tuple[UnloadedModuleRecord, ...]:
    return tuple(UnloadedModuleRecord(u.name, u.base, u.size, u.timestamp) for u in target.unloaded_modules)


def thread_record_fields(thread: Thread) -> Dict[str, object]:
    """The ThreadReport fields that describe the thread as recorded (not its walk)."""
    ctx = thread.context
    return {
        "teb": thread.teb,
        "stack_start": thread.stack_start,
        "stack_end": thread.stack_end,
        "context_size": ctx.context_size if ctx else None,
        "context_flags": ctx.context_flags if ctx else None,
        "registers": register_pairs(ctx),
    }


def crash_absent(target: Target, problems: Problems) -> Optional[str]:
    """Why there is no crash record: an Exception stream that is listed but damaged must
    not read as 'no crash'. None when there is an exception. `problems`: the run's
    collector, as reading left it."""
    if target.exception is not None:
        return None
    if not target.dump.has_stream(EXCEPTION_STREAM):
        if problems.items:
            # A damaged directory may have lost the entry: absence proves nothing here.
            return (
                "none (the dump has no Exception stream, but it is damaged: "
                f"{plural(len(problems.items), 'problem')} reading it; a crash record may have been lost)"
            )
        return "none (the dump has no Exception stream: it was not written for a crash)"
    why = target.dump.stream_problem(EXCEPTION_STREAM)
    return "unreadable: the dump lists an Exception stream, but it could not be read" + (f": {why}" if why else "")


def nothing_to_analyse(target: Target, problems: Problems) -> Optional[str]:
    """Why the dump is unusable input (exit 2, one line), or None. A dump with no thread,
    no module and no exception record holds nothing any command could show: such a file
    is garbage with a valid signature, not a damaged crash report to read around.
    `problems`: the collector the dump was opened with, which says why."""
    if target.threads or target.modules or target.exception is not None:
        return None
    # the lists' absence is what this line says already; the other problems say why
    said = [p for p in problems.items if p not in _NO_LISTS]
    why = f" ({said[0]}{f'; {len(said) - 1} more' if len(said) > 1 else ''})" if said else ""
    return f"nothing usable in it: no thread, no module and no exception record could be read{why}"


_NO_LISTS = ("dump has no thread list", "dump has no module list")


def unsaved_jit_unwind(count: int) -> Tuple[str, ...]:
    """What the walk could not use because of how the dump was written (not damage): the
    unwind data of `count` JIT functions the process registered lies in memory the dump
    writer did not save."""
    if not count:
        return ()
    return (
        f"JIT code: the unwind data of {plural(count, 'function')} on the walked stacks (registered "
        "with RtlAddFunctionTable, listed in the FunctionTable stream) lies in memory the dump writer "
        "did not save, so frames through that code were found by stack scanning; this is how the "
        "dump was written, not damage (a full-memory dump holds it)",
    )
