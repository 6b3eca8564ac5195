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
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from dumpkit import __version__
from dumpkit.analysis import facts
from dumpkit.analysis.blame import blame_frame
from dumpkit.analysis.crash import decode_crash
from dumpkit.analysis.coverage import image_coverage
from dumpkit.analysis.environment import describe_environment
from dumpkit.analysis.environment.versions import Versions
from dumpkit.analysis.faultsite import with_fault_site
from dumpkit.analysis.threads import analyse_thread, identical_stacks
from dumpkit.limits import MAX_FRAMES, OVERSIZED_FRAME
from dumpkit.packages import InstalledPackage, owning_package
from dumpkit.analysis.model import (
    SCHEMA_VERSION,
    Contents,
    CrashInfo,
    FrameRecord,
    FrameSize,
    NotWalked,
    PythonReport,
    Report,
    Stacks,
    ThreadReport,
)
from dumpkit.analysis.process import executable, process_record
from dumpkit.analysis.pyentry import PythonEntry, crash_entry
from dumpkit.analysis.pystack import KEEP_FRAMES, python_report
from dumpkit.analysis.recursion import find_cycles
from dumpkit.analysis.signature import crash_signature, recursion_start
from dumpkit.analysis.verdict import Case, decide, frame_limit
from dumpkit.cpython.interpreter import find_interpreter
from dumpkit.images import ImageLocator, ImageProvider, ImageStore
from dumpkit.pe import PEError
from dumpkit.pe.image import PEImage
from dumpkit.target import MemoryNotInDump, Module, Target, Thread
from dumpkit.unwind.bulk import Frames
from dumpkit.unwind.confirm import support_of
from dumpkit.unwind.cpus import step_for
from dumpkit.unwind.frames import Frame, StackWalk, Support
from dumpkit.unwind.walk import DEFAULT_SCAN_WORDS, Walker, walk_thread


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
    scan_words: int = DEFAULT_SCAN_WORDS
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
            stop=NotWalked.SKIPPED,
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


def _place_of(target: Target) -> Callable[[int], Optional[str]]:
    """An address as `module+0xRVA`, or None outside every module."""

    def place(address: int) -> Optional[str]:
        m = target.module_at(address)
        return f"{m.name}+{address - m.base:#x}" if m is not None else None

    return place


def with_possible(w: StackWalk) -> Sequence[Frame]:
    """A walk's stack and its possible frames, as one sequence of frames."""
    if not w.possible:
        return w.frames
    parts = list(w.frames.parts) if isinstance(w.frames, Frames) else [list(w.frames)]
    return Frames(parts + [list(w.possible)])


def frame_record(f: Frame, support: Optional[Dict[int, Support]] = None) -> FrameRecord:
    """A walked frame as reports carry it (`support`: the walk's, by frame index)."""
    return FrameRecord(
        f.index,
        f.ip,
        f.sp,
        f.module,
        f.rva,
        f.function_start,
        f.symbol,
        f.size,
        f.trust,
        f.source,
        support_of(f, support),
    )


def _records(
    frames: Sequence[Frame], keep: Optional[int], support: Optional[Dict[int, Support]] = None
) -> Tuple[Tuple[FrameRecord, ...], int]:
    """Head and tail of a long stack (the fault and the thread's entry both matter); every
    frame when `keep` is None, none when it is 0."""

    def rec(f: Frame) -> FrameRecord:
        return frame_record(f, support)

    if keep == 0:
        return (), len(frames)
    if keep is None or len(frames) <= keep:
        return tuple(rec(f) for f in frames), 0
    head = keep * 3 // 4
    tail = keep - head
    kept = list(frames[:head]) + list(frames[-tail:])
    return tuple(rec(f) for f in kept), len(frames) - keep


def _thread_report(
    t: Thread,
    w: Optional[StackWalk],
    is_crash: bool,
    keep: Optional[int],
    unwalked: NotWalked = NotWalked.SKIPPED,
    **more,
) -> ThreadReport:
    """`more`: the analyses' fields (cycles, budget, same_stack_as); `unwalked`: why there
    is no walk, when there is none."""
    frames, elided = _records(w.frames, keep, w.support) if w else ((), 0)
    # the first `keep` possible frames; every one where the stack's are streamed instead
    # (keep 0: `dumpkit stack`)
    possible = tuple(frame_record(f, w.support) for f in w.possible[: keep or None]) if w and w.possible else None
    return ThreadReport(
        tid=t.tid,
        name=t.name,
        is_crashing=is_crash,
        frame_count=len(w.frames) if w else 0,
        frames=frames,
        elided_frames=elided,
        stop=w.stop if w else unwalked,
        frame_limit=w.frame_limit if w else None,
        trust_counts=w.trust_counts if w else {},
        possible_frames=possible,
        possible_count=len(w.possible) if w and w.possible else None,
        **more,
        **facts.thread_record_fields(t),  # type: ignore[arg-type]
    )


def stacks(
    target: Target, options: Options, threads: Iterable[Thread], python: bool = False, cycles: bool = False
) -> Tuple[Stacks, List[List[Frame]], List[Optional[Dict[int, Support]]]]:
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
    supports: List[Optional[Dict[int, Support]]] = []  # each walk's, for its scanned frames
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
        supports.append(w.support if w is not None else None)
    doc = Stacks(
        schema_version=SCHEMA_VERSION,
        dumpkit_version=__version__,
        dump=facts.dump_summary(target),
        system=facts.system_summary(target),
        threads=tuple(reports),
        modules=facts.module_records(target, walker.code.images.sources(), walker.code.images.symbol_sources()),
        soft_errors=tuple(target.soft_errors.items),
        python=read_python(target, walker, keep=None) if python else None,
        notes=facts.unsaved_jit_unwind(len(walker.unsaved_jit_unwind)),
    )
    return doc, walked, supports


# ----------------------------------------------------------------------------- python
def read_python(target: Target, walker: Walker, keep: Optional[int] = KEEP_FRAMES) -> Optional[PythonReport]:
    """The Python phase: each thread's Python stack when the process runs CPython and the
    dump holds its memory (else a status saying what is missing). None: not Python."""
    interp = find_interpreter(target.modules)
    if interp is None:
        return None
    from dumpkit.cpython.stacks import export_lookup, read_python_state  # the reader: only for a CPython process

    image = walker.code.images.image(interp.module)
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


def _image_version(walker: Walker):
    def lookup(module):
        image = walker.code.images.image(module)
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
        seen[module.base] = found if found is not None else owning_package(walker.code.images.files(module))
    return seen[module.base]


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
        decode_crash(
            ex, target.system, crash_walk.frames if crash_walk else (), walker.code.read_code, _place_of(target)
        )
        if ex is not None
        else None
    )
    versions = Versions(_image_version(walker))
    if crash is not None:
        crash = with_fault_site(
            target, walker.code, crash, crash_walk.frames if crash_walk else (), versions, walker.step is not None
        )
    exe_reserve = _exe_stack_reserve(target, walker.code.images)
    same = identical_stacks(walks)
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
            thread_reports.append(_thread_report(t, None, False, None, unwalked=NotWalked.REPEATED_TID))
            continue
        seen_tids.add(t.tid)
        is_crash = crash_thread is not None and t.tid == crash_thread.tid
        walk = walks.get(t.tid)
        found = analyse_thread(target, walker.code, t, walk, is_crash, options.oversized_threshold, exe_reserve)
        thread_reports.append(
            _thread_report(
                t,
                walk,
                is_crash,
                options.keep_frames,
                cycles=found.cycles,
                budget=found.budget,
                same_stack_as=same.get(t.tid, ()),
            )
        )
        if is_crash:
            sizes = found.sizes
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
        # the possible frames too: their modules' images are what could confirm them
        with_possible(crash_walk) if crash_walk else (),
        target.modules,
        lambda module: walker.code.images.image(module) is not None,
        walker.code.images.search_problems(),
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
            bits=walker.code.bits,
            stacks=tuple((t.tid, t.stack_start, t.stack_end) for t in target.threads[:4096] if t.stack_size),
            threshold=options.oversized_threshold,
            read_code=walker.code.read_code,
            python=python,
            coverage=coverage,
            executable=exe.name if exe is not None else None,
            python_entry=entry,
        )
    )

    sources = walker.code.images.sources()
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
        modules=facts.module_records(target, sources, walker.code.images.symbol_sources()),
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
