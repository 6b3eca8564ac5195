"""One engine for every front door: Target in, Report out.

`analyze(target, options)` walks the threads, runs every analysis and builds the Report
the CLI, the renderers and `!tfstack` all show. It reads memory only through the Target.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from dumpkit import __version__
from dumpkit.analysis import codes
from dumpkit.analysis.access import faulting_access, operand_headline
from dumpkit.analysis.budget import stack_budget
from dumpkit.analysis.callsites import cycle_call_edges
from dumpkit.analysis.cxx import thrown_types
from dumpkit.analysis.environment import describe_environment
from dumpkit.analysis.framesizes import frame_sizes
from dumpkit.analysis.model import (
    SCHEMA_VERSION,
    CrashInfo,
    DumpSummary,
    Finding,
    FrameRecord,
    ModuleRecord,
    Report,
    SystemSummary,
    ThreadReport,
)
from dumpkit.analysis.raiser import RUNTIME_FUNCTIONS, RUNTIME_MODULES, raising_function  # noqa: F401 (re-exported)
from dumpkit.analysis.recursion import find_cycles
from dumpkit.analysis.verdict import decide
from dumpkit.images import ImageLocator
from dumpkit.pe import PEError
from dumpkit.target import MemoryNotInDump, Target, Thread, significant_exception
from dumpkit.unwind.amd64 import ImageProvider, Walker, walk_thread
from dumpkit.unwind.x86 import walk_x86
from dumpkit.unwind.frames import Frame, StackWalk


@dataclass
class Options:
    image_paths: Sequence[str] = ()
    symbol_paths: Sequence[str] = ()
    max_frames: int = 2_000_000  # crashing thread
    other_thread_max_frames: int = 2_000
    oversized_threshold: int = 64 * 1024
    keep_frames: int = 200  # frames kept in the report per thread (head + tail)
    all_threads: bool = True
    thread_id: Optional[int] = None  # walk only this thread (plus the crashing one)
    scan_words: int = 256
    # Bounds on the other threads, whatever the dump claims: a damaged thread list can
    # name a million threads, each worth a scan.
    max_other_threads: int = 512
    other_frames_budget: int = 50_000


@dataclass
class Analysis:
    """The engine's full result: the Report plus the raw walks, for front doors that want
    every frame (`dumpkit stack`, `!tfstack`)."""

    report: Report
    walks: Dict[int, StackWalk]
    image_sources: Dict[str, str]
    seconds: float = 0.0


def crashing_thread(target: Target) -> Optional[Thread]:
    ex = target.exception
    if ex is None:
        return None
    for t in target.threads:
        if t.tid == ex.thread_id:
            return t
    return None


def make_walker(target: Target, options: Options) -> Walker:
    locator = ImageLocator(image_paths=list(options.image_paths), symbol_paths=list(options.symbol_paths))
    return Walker(target, ImageProvider(target, locator), max_frames=options.max_frames, scan_words=options.scan_words)


def walker_for(target: Target):
    """The thread walker for the dump's CPU, or None when it is not one we walk."""
    arch = target.system.processor_architecture if target.system is not None else 9
    return {9: walk_thread, 0: walk_x86}.get(arch)


def walk_all(target: Target, walker: Walker, options: Options) -> Dict[int, StackWalk]:
    """Walk the crashing thread from the exception context, others from their own."""
    walk_thread = walker_for(target)
    ex = target.exception
    crash = crashing_thread(target)
    walks: Dict[int, StackWalk] = {}
    if crash is not None:
        walks[crash.tid] = walk_thread(walker, crash, ex.context or crash.context, options.max_frames)
    elif ex is not None and ex.context is not None:
        target.soft_errors.add(f"exception thread {ex.thread_id} is not in the thread list")
    budget = options.other_frames_budget
    walked = 0
    skipped = 0
    for t in target.threads:
        if t.tid in walks:
            continue
        if options.thread_id is not None and t.tid != options.thread_id:
            continue
        if not options.all_threads and options.thread_id is None:
            continue
        if walked >= options.max_other_threads or budget <= 0:
            skipped += 1
            continue
        w = walk_thread(walker, t, None, min(options.other_thread_max_frames, budget))
        walks[t.tid] = w
        walked += 1
        budget -= max(1, len(w.frames))
    if skipped:
        target.soft_errors.add(
            f"{skipped} thread(s) not walked: limits of {options.max_other_threads} threads / "
            f"{options.other_frames_budget:,} frames for threads other than the crashing one"
        )
    return walks


def frame_record(f: Frame) -> FrameRecord:
    """A walked frame as reports carry it."""
    return FrameRecord(f.index, f.ip, f.sp, f.module, f.rva, f.function_start, f.symbol, f.size, f.trust)


def _records(frames: Sequence[Frame], keep: int) -> Tuple[Tuple[FrameRecord, ...], int]:
    """Head and tail of a long stack: the fault and the thread's entry both matter."""
    rec = frame_record
    if len(frames) <= keep:
        return tuple(rec(f) for f in frames), 0
    head = keep * 3 // 4
    tail = keep - head
    kept = list(frames[:head]) + list(frames[-tail:])
    return tuple(rec(f) for f in kept), len(frames) - keep


def _exe_stack_reserve(target: Target, images: ImageProvider) -> Optional[int]:
    exe = next((m for m in target.modules if m.name.lower().endswith(".exe")), None)
    if exe is None:
        return None
    image = images.image(exe)
    return image.size_of_stack_reserve if image is not None else None


def _crash_info(target: Target, walk: Optional[StackWalk], read_code=None) -> Optional[CrashInfo]:
    ex = target.exception
    if ex is None:
        return None
    address, parameters = significant_exception(ex, target.system)
    dec = codes.decode_exception(ex.code, parameters)
    instruction_access = None
    arch = target.system.processor_architecture if target.system is not None else None
    # (an execute fault's "instruction" is whatever data lies at the bad IP: nothing to decode)
    executing = bool(parameters) and parameters[0] == 8
    if ex.code == 0xC0000005 and not executing and ex.context is not None and arch in (0, 9) and read_code is not None:
        instruction_access = faulting_access(read_code, address, ex.context.values, 64 if arch == 9 else 32)
    ff = dec.fastfail
    acc = dec.access
    headline = dec.headline
    if instruction_access is not None and acc is not None and acc.address is not None:
        # a #GP's recorded address and read/write flag mean nothing: say what the code did
        headline = operand_headline(ex.code, acc.address, instruction_access) or headline
    raised_by = None
    # abort / invalid parameter / fail-fast / heap corruption are raised by the CRT or the
    # heap on behalf of a caller: name the first frame outside that machinery
    if walk is not None and walk.frames and (ff is not None or ex.code in (0x40000015, 0xC000000D, 0xC0000374)):
        raised_by = raising_function(walk.frames, fallback=ex.code != 0xC0000374)
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
        cxx_types=tuple(thrown_types(parameters, read_code or target.read_available)) if ex.code == 0xE06D7363 else (),
        instruction_access=instruction_access,
    )


def _group_identical(walks: Dict[int, StackWalk]) -> Dict[int, Tuple[int, ...]]:
    groups: Dict[Tuple[int, ...], List[int]] = {}
    for tid, w in walks.items():
        if len(w.frames) > 10_000:
            continue  # a runaway stack is its own story
        key = tuple(f.ip for f in w.frames)
        if key:
            groups.setdefault(key, []).append(tid)
    out: Dict[int, Tuple[int, ...]] = {}
    for tids in groups.values():
        if len(tids) > 1:
            for t in tids:
                out[t] = tuple(x for x in tids if x != t)
    return out


def _system(target: Target) -> Optional[SystemSummary]:
    s = target.system
    if s is None:
        return None
    cpu = s.cpu_description
    build = getattr(target, "build_string", None)
    proc = target.process
    return SystemSummary(
        arch=s.arch_name,
        os_version=f"{s.os_major}.{s.os_minor}.{s.os_build}" + (f" {s.csd_version}" if s.csd_version else ""),
        os_build=build,
        cpu=cpu,
        processors=s.number_of_processors,
        wine=s.wine_version,
        pid=proc.pid if proc else None,
        process_create_time=proc.create_time if proc else None,
    )


def analyze(target: Target, options: Optional[Options] = None) -> Analysis:
    options = options or Options()
    started = time.perf_counter()
    walker = make_walker(target, options)
    walkable = walker_for(target) is not None
    walks = walk_all(target, walker, options) if walkable else {}
    if not walkable:
        target.soft_errors.add(
            f"stack walking supports x64 and x86; this dump is {target.system.arch_name}: "
            "threads, modules and the exception are still reported"
        )
    crash_thread = crashing_thread(target)
    crash_walk = walks.get(crash_thread.tid) if crash_thread else None
    crash = _crash_info(target, crash_walk, walker.read_code)
    exe_reserve = _exe_stack_reserve(target, walker.images)
    same = _group_identical(walks)

    pointer_size = walker.bits // 8

    def read_pointer(address: int) -> Optional[int]:
        data = target.read_available(address, pointer_size)
        return int.from_bytes(data, "little") if len(data) == pointer_size else None

    thread_reports: List[ThreadReport] = []
    findings: List[Finding] = []
    sizes = ()
    seen_tids = set()
    repeated_tids = 0
    for t in target.threads:
        # A damaged or hostile thread list can repeat one id thousands of times: the walk
        # (keyed by id) belongs to its first entry only, or every repeat would carry and
        # re-analyse the crashing thread's stack.
        repeat = t.tid in seen_tids
        seen_tids.add(t.tid)
        repeated_tids += repeat
        w = None if repeat else walks.get(t.tid)
        is_crash = not repeat and crash_thread is not None and t.tid == crash_thread.tid
        cycles = ()
        budget = None
        if w is not None and w.frames:
            sp0 = w.frames[0].sp
            fault = _stack_fault_address(target) if is_crash else None
            try:
                budget = stack_budget(target, t, sp0, fault_address=fault, exe_stack_reserve=exe_reserve)
            except (MemoryNotInDump, ValueError) as e:
                target.soft_errors.add(f"thread {t.tid}: stack budget unavailable ({e})")
            used = budget.used if budget is not None else None
            if is_crash or len(w.frames) >= 64:
                cycles = tuple(
                    replace(
                        c,
                        call_edges=cycle_call_edges(
                            w.frames,
                            c,
                            walker.read_code,
                            lambda name: _module_base(target, name),
                            read_pointer=read_pointer,
                            bits=walker.bits,
                        ),
                    )
                    for c in find_cycles(w.frames, used_stack=used)
                )
            if is_crash:
                sizes = tuple(
                    frame_sizes(
                        w.frames,
                        walker.read_code,
                        module_base=lambda name: _module_base(target, name),
                        threshold=options.oversized_threshold,
                        name_at=lambda va: walker.place(va).symbol,
                    )
                )
            for p in w.problems:
                target.soft_errors.add(f"thread {t.tid}: {p}")
        frames, elided = _records(w.frames, options.keep_frames) if w else ((), 0)
        thread_reports.append(
            ThreadReport(
                tid=t.tid,
                name=t.name,
                is_crashing=is_crash,
                frame_count=len(w.frames) if w else 0,
                frames=frames,
                elided_frames=elided,
                stop_reason=w.stop_reason
                if w
                else "not walked (repeats an earlier thread id)"
                if repeat
                else "not walked",
                trust_counts=w.trust_counts if w else {},
                cycles=cycles,
                budget=budget,
                same_stack_as=same.get(t.tid, ()),
            )
        )
    if repeated_tids:
        target.soft_errors.add(
            f"thread list: {repeated_tids} entries repeat an earlier thread id; "
            "only the first entry of each id was walked"
        )
    # Crashing thread first, then by id: that is the order people read them in.
    thread_reports.sort(key=lambda r: (not r.is_crashing, r.tid))

    def image_version(module):
        image = walker.images.image(module)
        if image is None:
            return None
        try:
            return image.version_info()
        except (PEError, MemoryNotInDump):
            return None

    env = describe_environment(target, image_version=image_version)
    crash_report = next((r for r in thread_reports if r.is_crashing), None)
    verdict, more = decide(
        target,
        crash,
        crash_report,
        crash_walk,
        sizes,
        env,
        read_code=walker.read_code,
        threshold=options.oversized_threshold,
    )
    findings.extend(more)

    sources = walker.images.sources()
    modules = tuple(
        ModuleRecord(
            m.name,
            m.path,
            m.base,
            m.size,
            m.timestamp,
            m.file_version,
            m.product_version,
            m.cv_record.pdb_name if m.cv_record else None,
            sources.get(m.name),
        )
        for m in sorted(target.modules, key=lambda m: m.base)
    )
    d = target.dump
    summary = DumpSummary(
        path=d.path,
        file_size=d.file_size,
        timestamp=d.timestamp,
        streams=tuple(s.name for s in d.streams if s.type != 0),
        skipped_streams=tuple(s.name for s in d.streams if not s.known and s.type != 0),
        thread_count=len(target.threads),
        module_count=len(target.modules),
        memory_ranges=getattr(target, "memory_range_count", 0),
    )
    report = Report(
        schema_version=SCHEMA_VERSION,
        dumpkit_version=__version__,
        dump=summary,
        system=_system(target),
        crash=crash,
        verdict=verdict,
        findings=tuple(findings),
        threads=tuple(thread_reports),
        frame_sizes=sizes,
        environment=env,
        modules=modules,
        soft_errors=tuple(target.soft_errors.items),
        oversized_threshold=options.oversized_threshold,
    )
    return Analysis(report, walks, sources, time.perf_counter() - started)


def _stack_fault_address(target: Target) -> Optional[int]:
    """The address to check against the crashing thread's guard region: a stack
    overflow's, and an access violation's too (running off the stack past the guard page,
    e.g. a big frame allocated without the probe, is an access violation). Not a #GP's
    all-ones placeholder: a guard page faults as a page fault, with its real address."""
    ex = target.exception
    if ex is None or ex.code not in (0xC00000FD, 0xC0000005) or len(ex.parameters) < 2:
        return None
    address = significant_exception(ex, target.system)[1][1]
    return None if address in (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF) else address


def _module_base(target: Target, name: str) -> Optional[int]:
    for m in target.modules:
        if m.name == name:
            return m.base
    return None
