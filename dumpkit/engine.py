"""One engine for every front door: Target in, Report out.

`analyze(target, options)` runs four named phases, each a call into the stage that owns it:
read (the dump's own facts: `analysis.facts`), walk (`unwind`), analyse (per-thread budget,
cycles, frame sizes; the crash record; the environment) and decide (`analysis.verdict`).
`contents` (for `dumpkit info`) runs the read phase only and `stacks` (for `dumpkit stack`)
read and walk; all three give records of the same shapes. Memory is read only through the
Target."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from dumpkit import __version__
from dumpkit.analysis import facts
from dumpkit.analysis.blame import blame_frame
from dumpkit.analysis.budget import stack_budget
from dumpkit.analysis.callsites import cycle_call_edges
from dumpkit.analysis.codes.model import STATUS_ACCESS_VIOLATION, STATUS_STACK_OVERFLOW
from dumpkit.analysis.codefacts import CodeFacts, code_facts, merged
from dumpkit.analysis.crash import decode_crash
from dumpkit.analysis.coverage import image_coverage
from dumpkit.analysis.disassembly import disassemble_around
from dumpkit.analysis.environment import describe_environment
from dumpkit.analysis.environment.versions import Versions
from dumpkit.limits import MAX_FRAMES, OVERSIZED_FRAME
from dumpkit.packages import InstalledPackage, owning_package
from dumpkit.analysis.framesizes import frame_sizes
from dumpkit.analysis.model import (
    SCHEMA_VERSION,
    Contents,
    CrashInfo,
    Cycle,
    FrameRecord,
    FrameSize,
    PythonReport,
    Report,
    Stacks,
    StackBudget,
    ThreadReport,
)
from dumpkit.analysis.process import executable, module_version, process_record
from dumpkit.analysis.pyentry import PythonEntry, crash_entry
from dumpkit.analysis.pystack import KEEP_FRAMES, python_report
from dumpkit.analysis.python import classify_recursion, facts_needed
from dumpkit.analysis.recursion import find_cycles
from dumpkit.analysis.signature import crash_signature, recursion_start
from dumpkit.analysis.verdict import Case, decide, frame_limit
from dumpkit.cpython import export_lookup, find_interpreter, read_python_state
from dumpkit.images import ImageLocator, ImageProvider, ImageStore
from dumpkit.pe import PEError
from dumpkit.pe.image import PEImage
from dumpkit.target import MemoryNotInDump, Module, Target, Thread, significant_exception
from dumpkit.unwind.cpus import step_for
from dumpkit.unwind.frames import Frame, StackWalk
from dumpkit.unwind.places import nearest_name
from dumpkit.unwind.walk import Walker, walk_thread


@dataclass
class Options:
    image_paths: Sequence[str] = ()
    symbol_paths: Sequence[str] = ()
    # False: ignore the paths the dump recorded, as on a machine without the crashed
    # program's files (what a colleague reading the dump would see)
    use_recorded_paths: bool = True
    max_frames: int = MAX_FRAMES  # crashing thread
    other_thread_max_frames: int = 2_000
    oversized_threshold: int = OVERSIZED_FRAME
    keep_frames: int = 200  # frames kept in the report per thread (head + tail)
    all_threads: bool = True
    thread_id: Optional[int] = None  # walk only this thread (plus the crashing one)
    scan_words: int = 256
    # Bounds on the other threads, whatever the dump claims: a damaged thread list can
    # name a million threads, each worth a scan.
    max_other_threads: int = 512
    other_frames_budget: int = 50_000
    # A locator built by the caller instead of one from image_paths/symbol_paths: the
    # bundle writer passes one that records every image page read.
    locator: Optional[ImageLocator] = None


@dataclass
class Analysis:
    """The engine's full result: the Report plus the raw walks, for front doors that want
    every frame (`dumpkit stack`, `!tfstack`)."""

    report: Report
    walks: Dict[int, StackWalk]
    image_sources: Dict[str, str]
    seconds: float = 0.0
    # module base -> the installed distribution the environment phase found owning it (None:
    # none), for each module it asked about: a bundle carries these facts with the images.
    packages: Dict[int, Optional[InstalledPackage]] = field(default_factory=dict)


# ----------------------------------------------------------------------------- read
def crashing_thread(target: Target) -> Optional[Thread]:
    ex = target.exception
    if ex is None:
        return None
    for t in target.threads:
        if t.tid == ex.thread_id:
            return t
    return None


def contents(target: Target) -> Contents:
    """The read phase alone: what the dump holds, nothing walked (`dumpkit info`)."""
    ex = target.exception
    crash = decode_crash(ex, target.system, (), target.read_available) if ex is not None else None
    threads = tuple(
        ThreadReport(
            tid=t.tid,
            name=t.name,
            is_crashing=ex is not None and t.tid == ex.thread_id,
            frame_count=0,
            frames=(),
            elided_frames=0,
            stop_reason="not walked",
            trust_counts={},
            **facts.thread_record_fields(t),  # type: ignore[arg-type]
        )
        for t in target.threads
    )
    return Contents(
        schema_version=SCHEMA_VERSION,
        dumpkit_version=__version__,
        dump=facts.dump_summary(target),
        system=facts.system_summary(target),
        crash=crash,
        crash_absent=facts.crash_absent(target),
        threads=threads,
        modules=facts.module_records(target, {}),
        unloaded_modules=facts.unloaded_records(target),
        environment=describe_environment(target),
        soft_errors=tuple(target.soft_errors.items),
    )


# ----------------------------------------------------------------------------- walk
def make_walker(target: Target, options: Options) -> Walker:
    # A target read from a bundle carries the image pages that travelled with it.
    store: Optional[ImageStore] = target.image_store
    locator = options.locator or ImageLocator(
        image_paths=list(options.image_paths),
        symbol_paths=list(options.symbol_paths),
        use_recorded_path=options.use_recorded_paths,
        store=store,
    )
    images = ImageProvider(target, locator)
    return Walker(target, images, step_for(target), max_frames=options.max_frames, scan_words=options.scan_words)


def walker_for(target: Target):
    """The thread walker for the dump's CPU, or None when it is not one we walk."""
    return walk_thread if step_for(target) is not None else None


def walk_all(target: Target, walker: Walker, options: Options) -> Dict[int, StackWalk]:
    """Walk the crashing thread from the exception context, others from their own."""
    walk_thread = walker_for(target)
    if walk_thread is None:
        arch = target.system.arch_name if target.system is not None else "unknown"
        target.soft_errors.add(
            f"stack walking supports x64 and x86; this dump is {arch}: "
            "threads, modules and the exception are still reported"
        )
        return {}
    ex = target.exception
    crash = crashing_thread(target)
    walks: Dict[int, StackWalk] = {}
    if crash is not None and ex is not None:
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
    return FrameRecord(f.index, f.ip, f.sp, f.module, f.rva, f.function_start, f.symbol, f.size, f.trust, f.source)


def _records(frames: Sequence[Frame], keep: Optional[int]) -> Tuple[Tuple[FrameRecord, ...], int]:
    """Head and tail of a long stack (the fault and the thread's entry both matter); every
    frame when `keep` is None, none when it is 0."""
    rec = frame_record
    if keep == 0:
        return (), len(frames)
    if keep is None or len(frames) <= keep:
        return tuple(rec(f) for f in frames), 0
    head = keep * 3 // 4
    tail = keep - head
    kept = list(frames[:head]) + list(frames[-tail:])
    return tuple(rec(f) for f in kept), len(frames) - keep


def _thread_report(
    t: Thread, w: Optional[StackWalk], is_crash: bool, keep: Optional[int], unwalked: str = "not walked", **more
) -> ThreadReport:
    """`more`: the analyses' fields (cycles, budget, same_stack_as); `unwalked`: the stop
    reason shown when there is no walk."""
    frames, elided = _records(w.frames, keep) if w else ((), 0)
    return ThreadReport(
        tid=t.tid,
        name=t.name,
        is_crashing=is_crash,
        frame_count=len(w.frames) if w else 0,
        frames=frames,
        elided_frames=elided,
        stop_reason=w.stop_reason if w else unwalked,
        trust_counts=w.trust_counts if w else {},
        **more,
        **facts.thread_record_fields(t),  # type: ignore[arg-type]
    )


def stacks(
    target: Target, options: Options, threads: Iterable[Thread], python: bool = False, cycles: bool = False
) -> Tuple[Stacks, List[List[Frame]]]:
    """Read and walk phases for the threads asked for (`dumpkit stack`). The crashing
    thread is walked from the exception context. The document's threads carry no frame
    records: a million of them would cost seconds and gigabytes, so every frame is given
    as the walk found it, in the second list (one per thread, the document's order), for
    the caller to stream (`report.stream`). `cycles`: find each long or crashing stack's
    recursion cycles (for folding). `python`: the Python phase too, every Python frame kept."""
    walker = make_walker(target, options)
    walk_thread = walker_for(target)
    crash = crashing_thread(target)
    ex = target.exception
    reports: List[ThreadReport] = []
    walked: List[List[Frame]] = []
    for t in threads:
        is_crash = crash is not None and t.tid == crash.tid
        ctx = ex.context if is_crash and ex is not None and ex.context else None
        w = walk_thread(walker, t, ctx, options.max_frames) if walk_thread is not None else None
        if w is not None:
            for p in w.problems:
                target.soft_errors.add(f"thread {t.tid}: {p}")
        found = tuple(find_cycles(w.frames)) if cycles and w is not None and (is_crash or len(w.frames) >= 64) else ()
        reports.append(_thread_report(t, w, is_crash, 0, cycles=found))
        walked.append(w.frames if w is not None else [])
    doc = Stacks(
        schema_version=SCHEMA_VERSION,
        dumpkit_version=__version__,
        dump=facts.dump_summary(target),
        system=facts.system_summary(target),
        threads=tuple(reports),
        modules=facts.module_records(target, walker.images.sources(), walker.images.symbol_sources()),
        soft_errors=tuple(target.soft_errors.items),
        python=read_python(target, walker, keep=None) if python else None,
        notes=facts.unsaved_jit_unwind(len(walker.unsaved_jit_unwind)),
    )
    return doc, walked


# ----------------------------------------------------------------------------- python
def read_python(target: Target, walker: Walker, keep: Optional[int] = KEEP_FRAMES) -> Optional[PythonReport]:
    """The Python phase: each thread's Python stack when the process runs CPython and the
    dump holds its memory (else a status saying what is missing). None: not Python."""
    interp = find_interpreter(target.modules)
    if interp is None:
        return None
    image = walker.images.image(interp.module)
    if image is None:
        # no usable image (its unwind data is not in the dump, no file here): the export
        # table alone is enough to find the interpreter, and a full-memory dump or one
        # written by `dumpkit capture` holds it
        try:
            image = PEImage.from_memory(target.read, interp.module.base)
        except (PEError, MemoryNotInDump):
            image = None
    exports = None
    if image is not None:
        try:
            exports = export_lookup(interp.module.base, image.exports())
        except (PEError, MemoryNotInDump) as e:
            target.soft_errors.add(f"{interp.module.name}: export table unreadable ({e})")
    return python_report(read_python_state(target, exports, interp), keep=keep)


# ----------------------------------------------------------------------------- analyse
def _exe_stack_reserve(target: Target, images: ImageProvider) -> Optional[int]:
    exe = next((m for m in target.modules if m.name.lower().endswith(".exe")), None)
    if exe is None:
        return None
    image = images.image(exe)
    return image.size_of_stack_reserve if image is not None else None


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


def _stack_fault_address(target: Target) -> Optional[int]:
    """The address to check against the crashing thread's guard region: a stack
    overflow's, and an access violation's too (running off the stack past the guard page,
    e.g. a big frame allocated without the probe, is an access violation). Not a #GP's
    all-ones placeholder: a guard page faults as a page fault, with its real address."""
    ex = target.exception
    if ex is None or ex.code not in (STATUS_STACK_OVERFLOW, STATUS_ACCESS_VIOLATION) or len(ex.parameters) < 2:
        return None
    address = significant_exception(ex, target.system)[1][1]
    return None if address in (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF) else address


def _module_base(target: Target, name: str) -> Optional[int]:
    for m in target.modules:
        if m.name == name:
            return m.base
    return None


def _cycle_code_facts(walker: Walker, frames: Sequence[Frame], cycle: Cycle) -> Dict[str, CodeFacts]:
    """What the code of the cycle's unnamed members refers to (strings, callees): how an
    MSVC module's static functions are recognised without its PDB. A member split into
    chained fragments is read from its entry and in each fragment the stack is in (the
    call that recursed is often there, not in the primary part)."""
    wanted = set(facts_needed(cycle))
    parts: Dict[str, Dict[int, Optional[int]]] = {}  # name -> {part start VA: end VA}
    start = cycle.frames_above
    for f in frames[start : start + cycle.period]:
        name = f.function_name
        if name not in wanted or f.function_start is None or f.rva is None:
            continue
        base = f.ip - f.rva
        entry = base + f.function_start
        mine = parts.setdefault(name, {})
        if entry not in mine:
            primary = walker.place(entry).function
            mine[entry] = base + primary.end_rva if primary is not None else None
        here = walker.place(f.ip, f.index > 0)
        if here.in_fragment and here.function is not None:
            mine[base + here.function.begin_rva] = base + here.function.end_rva

    def name_at(va: int) -> Optional[str]:
        return walker.place(va).symbol

    return {
        name: merged(code_facts(walker.read_code, s, e, name_at) for s, e in ranges.items())
        for name, ranges in parts.items()
    }


@dataclass
class _ThreadAnalysis:
    report: ThreadReport
    sizes: Tuple[FrameSize, ...] = ()


def _analyse_thread(
    target: Target,
    walker: Walker,
    t: Thread,
    w: Optional[StackWalk],
    is_crash: bool,
    options: Options,
    exe_reserve: Optional[int],
    same: Tuple[int, ...],
) -> _ThreadAnalysis:
    """Budget, cycles (checked at their call sites) and, for the crashing thread, frame sizes."""
    cycles: tuple = ()
    budget: Optional[StackBudget] = None
    sizes: Tuple[FrameSize, ...] = ()
    bits = walker.bits

    def read_pointer(address: int) -> Optional[int]:
        data = target.read_available(address, bits // 8)
        return int.from_bytes(data, "little") if len(data) == bits // 8 else None

    def module_base(name: str) -> Optional[int]:
        return _module_base(target, name)

    if w is not None and w.frames:
        fault = _stack_fault_address(target) if is_crash else None
        try:
            budget = stack_budget(target, t, w.frames[0].sp, fault_address=fault, exe_stack_reserve=exe_reserve)
        except (MemoryNotInDump, ValueError) as e:
            target.soft_errors.add(f"thread {t.tid}: stack budget unavailable ({e})")
        used = budget.used if budget is not None else None
        if is_crash or len(w.frames) >= 64:
            cycles = tuple(
                replace(
                    c,
                    call_edges=cycle_call_edges(
                        w.frames, c, walker.read_code, module_base, read_pointer=read_pointer, bits=bits
                    ),
                    kind=classify_recursion(c, _cycle_code_facts(walker, w.frames, c) if bits == 64 else {}),
                )
                for c in find_cycles(w.frames, used_stack=used)
            )
        if is_crash:
            sizes = tuple(
                frame_sizes(
                    w.frames,
                    walker.read_code,
                    module_base=module_base,
                    threshold=options.oversized_threshold,
                    name_at=lambda va: walker.place(va).symbol,
                )
            )
        for p in w.problems:
            target.soft_errors.add(f"thread {t.tid}: {p}")
    report = _thread_report(t, w, is_crash, options.keep_frames, cycles=cycles, budget=budget, same_stack_as=same)
    return _ThreadAnalysis(report, sizes)


def _image_version(walker: Walker):
    def lookup(module):
        image = walker.images.image(module)
        if image is None:
            return None
        try:
            return image.version_info()
        except (PEError, MemoryNotInDump):
            return None

    return lookup


def _installed_package(
    target: Target, walker: Walker, module: Module, seen: Dict[int, Optional[InstalledPackage]]
) -> Optional[InstalledPackage]:
    """The distribution that installed `module`: as a bundle recorded it (the installation
    stayed on the machine that wrote it), else found next to the module's local files."""
    if module.base not in seen:
        store = target.image_store
        found = store.package_for(module) if store is not None else None
        seen[module.base] = found if found is not None else owning_package(walker.images.files(module))
    return seen[module.base]


def _function_entry(walker: Walker, ip: int) -> Tuple[Optional[int], str]:
    """The first byte of the function holding `ip` and where it comes from: its unwind
    entry, else the nearest export or COFF symbol that can name it (a leaf such as a
    hand-written stack probe has no unwind entry)."""
    place = walker.place(ip)
    if place.dynamic is not None:  # JIT code registered with RtlAddFunctionTable
        return place.dynamic[0], "function_entry"
    if place.module is None or place.rva is None:
        return None, "none"
    if place.function_start is not None:
        return place.module.base + place.function_start, "function_entry"
    near = nearest_name(place.image, place.rva, None) if place.image is not None else None
    return (place.module.base + near[1], "symbol") if near is not None else (None, "none")


def _fault_site(target: Target, walker: Walker, crash: CrashInfo, frames: Sequence[Frame], versions: Versions):
    """The crash record with where it happened: the module holding the faulting IP, that
    module's version, and the code around the IP."""
    ip = frames[0].ip if frames else crash.address
    module = target.module_at(ip)
    disassembly = None
    if walker.step is not None:  # a CPU dumpkit walks, so decodes: x86 or x64
        entry, entry_from = _function_entry(walker, ip)
        executing = crash.access_kind == "execute" and crash.access_address == ip
        disassembly = disassemble_around(
            walker.read_code,
            ip,
            entry,
            walker.bits,
            executing=executing,
            name_at=lambda va: walker.place(va).symbol,
            entry_from=entry_from,
        )
    return replace(
        crash,
        module=module.name if module is not None else None,
        module_version=module_version(module, versions),
        disassembly=disassembly,
    )


def _python_entry(
    crash: CrashInfo, thread: Optional[ThreadReport], walk: Optional[StackWalk], python: Optional[PythonReport]
) -> Optional[PythonEntry]:
    """How the crashing thread's native code was entered from Python, from all its frames."""
    if thread is None or walk is None:
        return None
    start = recursion_start(crash, thread)
    cause = thread.cycles[0] if start is not None and thread.cycles else None
    return crash_entry(walk.frames, cause, python.thread(crash.thread_id) if python is not None else None)


def analyze(target: Target, options: Optional[Options] = None) -> Analysis:
    options = options or Options()
    started = time.perf_counter()
    walker = make_walker(target, options)
    packages: Dict[int, Optional[InstalledPackage]] = {}
    # read: judged on what reading met, as `info` judges it (walk problems come later)
    crash_absent = facts.crash_absent(target)

    # walk
    walks = walk_all(target, walker, options)

    # analyse
    crash_thread = crashing_thread(target)
    crash_walk = walks.get(crash_thread.tid) if crash_thread else None
    ex = target.exception
    crash: Optional[CrashInfo] = (
        decode_crash(ex, target.system, crash_walk.frames if crash_walk else (), walker.read_code)
        if ex is not None
        else None
    )
    versions = Versions(_image_version(walker))
    if crash is not None:
        crash = _fault_site(target, walker, crash, crash_walk.frames if crash_walk else (), versions)
    exe_reserve = _exe_stack_reserve(target, walker.images)
    same = _group_identical(walks)
    thread_reports: List[ThreadReport] = []
    sizes: Tuple[FrameSize, ...] = ()
    seen_tids = set()
    repeated_tids = 0
    for t in target.threads:
        # A damaged or hostile thread list can repeat one id thousands of times: the walk
        # (keyed by id) belongs to its first entry only, or every repeat would carry and
        # re-analyse the crashing thread's stack.
        if t.tid in seen_tids:
            repeated_tids += 1
            thread_reports.append(
                _thread_report(t, None, False, None, unwalked="not walked (repeats an earlier thread id)")
            )
            continue
        seen_tids.add(t.tid)
        is_crash = crash_thread is not None and t.tid == crash_thread.tid
        done = _analyse_thread(target, walker, t, walks.get(t.tid), is_crash, options, exe_reserve, same.get(t.tid, ()))
        thread_reports.append(done.report)
        if is_crash:
            sizes = done.sizes
    if repeated_tids:
        target.soft_errors.add(
            f"thread list: {repeated_tids} entries repeat an earlier thread id; "
            "only the first entry of each id was walked"
        )
    # Crashing thread first, then by id: that is the order people read them in.
    thread_reports.sort(key=lambda r: (not r.is_crashing, r.tid))
    env = describe_environment(
        target,
        image_version=_image_version(walker),
        installed_package=lambda module: _installed_package(target, walker, module, packages),
    )

    env = replace(env, notes=env.notes + facts.unsaved_jit_unwind(len(walker.unsaved_jit_unwind)))

    # python
    python = read_python(target, walker)

    coverage = image_coverage(
        crash_walk.frames if crash_walk else (),
        target.modules,
        lambda module: walker.images.image(module) is not None,
        walker.images.search_problems(),
        wine=bool(target.system is not None and target.system.wine_version),
    )

    # decide
    crash_report = next((r for r in thread_reports if r.is_crashing), None)
    exe = executable(target.modules)
    entry = _python_entry(crash, crash_report, crash_walk, python) if crash is not None else None
    verdict, findings = decide(
        Case(
            crash=crash,
            thread=crash_report,
            frames=crash_walk.frames if crash_walk else (),
            frame_limit=frame_limit(crash_walk),
            sizes=sizes,
            environment=env,
            problems=tuple(target.soft_errors.items),
            bits=walker.bits,
            stacks=tuple((t.tid, t.stack_start, t.stack_end) for t in target.threads[:4096] if t.stack_size),
            threshold=options.oversized_threshold,
            read_code=walker.read_code,
            python=python,
            coverage=coverage,
            executable=exe.name if exe is not None else None,
            python_entry=entry,
        )
    )

    sources = walker.images.sources()
    report = Report(
        schema_version=SCHEMA_VERSION,
        dumpkit_version=__version__,
        dump=facts.dump_summary(target),
        system=facts.system_summary(target),
        crash=crash,
        verdict=verdict,
        findings=tuple(findings),
        threads=tuple(thread_reports),
        frame_sizes=sizes,
        environment=env,
        modules=facts.module_records(target, sources, walker.images.symbol_sources()),
        soft_errors=tuple(target.soft_errors.items),
        oversized_threshold=options.oversized_threshold,
        unloaded_modules=facts.unloaded_records(target),
        crash_absent=crash_absent,
        python=python,
        images=coverage,
        process=process_record(target, versions, (crash_thread,) if crash_thread is not None else ()),
        signature=crash_signature(crash, crash_report),
        blame=blame_frame(
            crash_report, facts.module_records(target, sources), recursion_start(crash, crash_report), entry
        )
        if crash is not None
        else None,
    )
    return Analysis(report, walks, sources, time.perf_counter() - started, packages)
