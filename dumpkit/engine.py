"""One engine for every front door: Target in, Report out.

`analyze(target, options)` runs four named phases, each a call into the stage that owns it:
read (the dump's own facts: `analysis.facts`), walk (`unwind`), analyse (per-thread budget,
cycles, frame sizes; the crash record; the environment) and decide (`analysis.verdict`).
`contents` (for `dumpkit info`) runs the read phase only and `stacks` (for `dumpkit stack`)
read and walk; all three give records of the same shapes. Memory is read only through the
Target; what each phase met goes to the run's one problems collector (`problems=`): the
caller made it and handed it to the source it opened, so reading's problems come first."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from dumpkit.analysis import facts
from dumpkit.analysis.crashcase import crash_case
from dumpkit.analysis.crashrecord import crash_record
from dumpkit.analysis.ending import as_exit_record
from dumpkit.analysis.documents import contents_document, header, report_document
from dumpkit.analysis.environment import describe_environment
from dumpkit.analysis.environment.versions import Versions
from dumpkit.analysis.imagefacts import InstalledPackages, crash_coverage, exe_stack_reserve, image_facts, image_version
from dumpkit.analysis.model import Contents, Report, Stacks, ThreadReport
from dumpkit.analysis.pyread import read_python
from dumpkit.analysis.pyentry import installation_of
from dumpkit.analysis.reasons import inferred_from_collisions, read_ending
from dumpkit.analysis.holders import deadlocks, with_owners
from dumpkit.analysis.waits import thread_waits as waits_of
from dumpkit.analysis.recursion import find_cycles
from dumpkit.analysis.threadreport import frame_record, thread_report, thread_reports, with_python_names
from dumpkit.analysis.verdict import decide
from dumpkit.images.constants import with_constants
from dumpkit.images import ImageLocator, ImageProvider, ImageStore
from dumpkit.images.fetch import fetch_requested
from dumpkit.images.paths import LIVE, FileProbe
from dumpkit.limits import MAX_FRAMES, OVERSIZED_FRAME
from dumpkit.packages import InstalledPackage
from dumpkit.problems import Problems
from dumpkit.records import field, record, replace
from dumpkit.target import Target, Thread
from dumpkit.unwind.cpus import step_for
from dumpkit.unwind.frames import Frame, StackWalk, Support, unsaved_unwind
from dumpkit.unwind.walk import DEFAULT_SCAN_WORDS, Walker, walk_thread

MAX_THREADS_READ = 4096  # threads whose stack ranges bound what a wait's object can be

if TYPE_CHECKING:
    from dumpkit.images.fetch.fetcher import ImageFetcher

__all__ = ["Analysis", "Options", "analyze", "contents", "crashing_thread", "frame_record", "stacks", "walk_all"]


@record(frozen=False)
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
    # --fetch-images (or DUMPKIT_FETCH_IMAGES=1): modules without an image are fetched from
    # where they are published; `fetch_progress` draws a bar for the downloads
    fetch_images: bool = False
    fetch_progress: Optional[Callable[[str, int, Optional[int]], None]] = None
    # which files the dump's recorded paths name here: asked of the file system each time,
    # or (a triage) answered once per path for all the dumps a process reads
    file_probe: FileProbe = LIVE
    # a triage record's analysis: the verdict, signature and environment, without what only
    # a reader of the report sees (the code around the fault, the module list, the blamed
    # frame, where --fetch-images would find an image); the Report is not rendered
    for_record: bool = False


@record(frozen=False)
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
    return next((t for t in target.threads if t.tid == ex.thread_id), None) if ex is not None else None


def contents(target: Target, *, problems: Problems, options: Optional[Options] = None) -> Contents:
    """The read phase alone: what the dump holds, nothing walked (`dumpkit info`). With
    --fetch-images in `options`, every module's image is looked for too (fetched where it is
    published, so a later analysis finds them cached) and each module says where it came from."""
    doc = contents_document(target, problems)
    if options is None or not fetch_requested(options.fetch_images):
        return doc
    images = make_walker(target, options, problems=problems).code.images
    for module in target.modules:  # bounded by the module list
        images.image(module)
    where = images.sources()
    return replace(
        doc,
        modules=tuple(replace(m, image_source=where.get(m.name, m.image_source)) for m in doc.modules),
        soft_errors=tuple(problems.items),
    )


# ----------------------------------------------------------------------------- walk
def make_walker(target: Target, options: Options, *, problems: Problems) -> Walker:
    # A target read from a bundle carries the image pages that travelled with it.
    store: Optional[ImageStore] = target.image_store
    locator = options.locator or ImageLocator(
        image_paths=list(options.image_paths),
        symbol_paths=list(options.symbol_paths),
        use_recorded_path=options.use_recorded_paths,
        store=store,
        fetcher=image_fetcher(target, options),
        probe=options.file_probe,
    )
    images = ImageProvider(target, locator, problems=problems)
    step = step_for(target)
    return Walker(target, images, step, max_frames=options.max_frames, scan_words=options.scan_words, problems=problems)


def image_fetcher(target: Target, options: Options) -> Optional[ImageFetcher]:
    """The run's --fetch-images source, when asked for (flag or DUMPKIT_FETCH_IMAGES)."""
    if not fetch_requested(options.fetch_images):
        return None
    from dumpkit.images.fetch import fetcher_for
    from dumpkit.symbols.store import download_limit

    return fetcher_for(target, download_limit(), options.fetch_progress)


def walker_for(target: Target):
    """The thread walker for the dump's CPU, or None when it is not one we walk."""
    return walk_thread if step_for(target) is not None else None


def walk_all(target: Target, walker: Walker, options: Options, problems: Problems) -> Dict[int, StackWalk]:
    """Walk the crashing thread from the exception context, others from their own, within
    the options' limits; what stops a thread being walked is added to `problems`."""
    walk_thread = walker_for(target)
    if walk_thread is None:
        arch = target.system.arch_name if target.system is not None else "unknown"
        problems.add(
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
        problems.add(f"exception thread {ex.thread_id} is not in the thread list")
    budget = options.other_frames_budget
    walked = 0
    skipped = 0
    for t in target.threads:
        if t.tid in walks:
            continue
        if options.thread_id is not None and t.tid != options.thread_id:
            continue
        if not options.all_threads and options.thread_id is None and ex is not None:
            continue  # a dump without an exception is a hang: what it says is every thread's wait
        if walked >= options.max_other_threads or budget <= 0:
            skipped += 1
            continue
        w = walk_thread(walker, t, None, min(options.other_thread_max_frames, budget))
        walks[t.tid] = w
        walked += 1
        budget -= max(1, len(w.frames))
    if skipped:
        problems.add(
            f"{skipped} thread(s) not walked: limits of {options.max_other_threads} threads / "
            f"{options.other_frames_budget:,} frames for threads other than the crashing one"
        )
    return walks


def stacks(
    target: Target,
    options: Options,
    threads: Iterable[Thread],
    python: bool = False,
    cycles: bool = False,
    *,
    problems: Problems,
) -> Tuple[Stacks, List[List[Frame]], List[Optional[Dict[int, Support]]]]:
    """Read and walk phases for the threads asked for (`dumpkit stack`). The crashing
    thread is walked from the exception context. The document's threads carry no frame
    records: a million of them would cost seconds and gigabytes, so every frame is given
    as the walk found it, in the second list (one per thread, the document's order), for
    the caller to stream (`report.stream`). `cycles`: find each long or crashing stack's
    recursion cycles (for folding). `python`: the Python phase too, every Python frame kept."""
    walker = make_walker(target, options, problems=problems)
    walk_thread = walker_for(target)
    crash = crashing_thread(target)
    ex = target.exception
    reports: List[ThreadReport] = []
    walked: List[List[Frame]] = []
    supports: List[Optional[Dict[int, Support]]] = []  # each walk's, for its scanned frames
    unsaved: Set[int] = set()  # JIT unwind data the walks found unsaved
    for t in threads:
        is_crash = crash is not None and t.tid == crash.tid
        ctx = ex.context if is_crash and ex is not None and ex.context else None
        w = walk_thread(walker, t, ctx, options.max_frames) if walk_thread is not None else None
        if w is not None:
            unsaved |= w.unsaved_jit_unwind
            for p in w.problems:
                problems.add(f"thread {t.tid}: {p}")
        found = tuple(find_cycles(w.frames)) if cycles and w is not None and (is_crash or len(w.frames) >= 64) else ()
        reports.append(thread_report(t, w, is_crash, 0, cycles=found))
        walked.append(w.frames if w is not None else [])
        supports.append(w.support if w is not None else None)
    doc = Stacks(
        **header(target),
        threads=tuple(reports),
        modules=facts.module_records(target, walker.code.images.sources(), walker.code.images.symbol_sources()),
        soft_errors=tuple(problems.items),
        python=read_python(target, walker.code.images, problems, keep=None) if python else None,
        notes=facts.unsaved_jit_unwind(len(unsaved)),
    )
    return doc, walked, supports


# ----------------------------------------------------------------------------- analyse
def analyze(target: Target, options: Optional[Options] = None, *, problems: Problems) -> Analysis:
    options = options or Options()
    started = time.perf_counter()
    walker = make_walker(target, options, problems=problems)
    code = walker.code
    packages = InstalledPackages(target, code.images)
    # read: judged on what reading met, as `info` judges it (walk problems come later)
    crash_absent = facts.crash_absent(target, problems)
    read_problems = tuple(problems.items)

    # walk
    walks = walk_all(target, walker, options, problems)

    # analyse
    crash_thread = crashing_thread(target)
    crash_walk = walks.get(crash_thread.tid) if crash_thread else None
    versions = Versions(image_version(code.images))
    show_code = walker.step is not None and not options.for_record
    crash = crash_record(target, code, crash_walk.frames if crash_walk else (), versions, show_code)
    threads = thread_reports(
        target,
        code,
        walks,
        crash_thread.tid if crash_thread is not None else None,
        options.keep_frames,
        options.oversized_threshold,
        exe_stack_reserve(target, code.images),
        problems,
    )
    # python (before the environment: a full dump's heap holds the packages' versions)
    python = read_python(target, code.images, problems)
    threads = with_python_names(threads, python)

    env = describe_environment(
        target,
        image_version=image_version(code.images),
        installed_package=packages,
        image_facts=image_facts(code.images),
        loaded_versions=python.package_versions if python is not None else None,
    )
    env = replace(env, notes=env.notes + facts.unsaved_jit_unwind(len(unsaved_unwind(walks.values()))))
    coverage = crash_coverage(target, code.images, crash_walk, plans=not options.for_record)

    # how the process ended itself, when it did (an exit a debugger stopped, abort())
    interpreter = env.python_module.replace("/", "\\").rsplit("\\", 1)[-1] if env.python_module else None
    ending = read_ending(
        target, code, crash, crash_thread, crash_walk.frames if crash_walk else (), walker.frame_registers, interpreter
    )
    ending = inferred_from_collisions(ending, crash_walk.frames if crash_walk else (), env.runtime_collisions)
    crash = as_exit_record(crash, ending) if crash is not None else None

    # who waits for whom: what each thread waits on, who holds it where memory says, cycles
    thread_waits = waits_of(threads.threads, walks, python, installation_of(env.python_module))
    by_tid = {t.tid: t for t in target.threads}
    stacks = [(t.stack_start, t.stack_end) for t in target.threads[:MAX_THREADS_READ] if t.stack_size]
    thread_waits = with_owners(
        thread_waits,
        lambda tid: walker.frame_registers(by_tid[tid], None, 16),
        with_constants(target, code.images),
        stacks,
        python,
        target.handles,
    )
    cycles_of_waits = deadlocks(thread_waits)

    # decide
    case = crash_case(
        target, code, crash, threads, crash_walk, env, python, coverage, problems, options.oversized_threshold, ending
    )
    case = replace(case, waits=thread_waits, deadlocks=cycles_of_waits, read_problems=read_problems)
    verdict, findings = decide(case)
    report = report_document(
        target,
        case,
        verdict,
        findings,
        threads.threads,
        code.images,
        problems,
        crash_absent,
        versions,
        crash_thread,
        options.for_record,
    )
    return Analysis(report, walks, code.images.sources(), time.perf_counter() - started, packages.found)
