"""What `dumpkit analyze` (and `!tfstack`) shows, decided once for every format: the
verdict, the facts rows, the recursion summaries, the frame-size table, the stack budget,
the crashing thread's stack and the other threads grouped. Plain typed data; the
renderers (text, Markdown, HTML, DML) only mark it up."""

from __future__ import annotations

from typing import Collection, List, Optional, Tuple

from dumpkit.analysis.model import (
    BlameKind,
    BlameFrame,
    Confidence,
    Cycle,
    Environment,
    ImageCoverage,
    Report,
    RuntimeCollision,
    StackBudget,
    SystemSummary,
    ThreadReport,
)
from dumpkit.analysis.blame import ABOVE_RECURSION
from dumpkit.analysis.recursion import call_order, outside_entry_path
from dumpkit.report.view.contents import iso_time, memory_words, register_cells
from dumpkit.report.view.python import PythonView, python_view
from dumpkit.report.view.inline import CODE, LITERAL, PROSE, THREAD, Line, Span, text, words
from dumpkit.report.view.stacks import (
    DOCUMENT,
    StackTable,
    ThreadGroup,
    ThreadView,
    frame_name,
    pointer_digits,
    stack_groups,
    stack_table,
    thread_view,
)
from dumpkit.unwind.frames import SCANNED as SCANNED_TRUST
from dumpkit.words import human_bytes, plural
from dumpkit.records import record

# --------------------------------------------------------------------------- verdict


@record
class VerdictView:
    headline: str  # dumpkit's sentences, with `code` spans (PROSE)
    confidence: Confidence
    evidence: Tuple[str, ...]
    next_steps: Tuple[str, ...]


# --------------------------------------------------------------------------- facts


@record
class Fact:
    """One row of facts. Tables head it with `label`; the terminal (text, DML) with
    `terminal_label` in its label column, or, when that is None, shows the value as a
    continuation line under the row above."""

    label: str
    value: Line
    terminal_label: Optional[str]
    terminal_value: Optional[Line] = None  # the terminal's wording, where it differs from the tables'


@record
class Remark:
    """A sentence under the facts: a compatibility finding, or a caveat (`note`)."""

    text: str  # PROSE
    note: bool


@record
class CollisionView:
    """A runtime collision under the facts (every format, DML's compact view too): its
    title, one line per module involved, what it leads to, the ways out and what the dump
    cannot tell."""

    title: str  # PROSE
    confidence: Confidence
    modules: Tuple[Line, ...]  # name, version, package, path: its part
    leads_to: str  # PROSE
    ways_out: Tuple[str, ...]  # PROSE
    unknown: Tuple[str, ...]  # PROSE

    @property
    def heading(self) -> str:
        return f"Runtime collision ({self.confidence} confidence)"


@record
class Facts:
    exception: Tuple[Fact, ...]  # what was raised, where, and what it means
    machine: Tuple[Fact, ...]  # OS and CPU
    environment: Tuple[Fact, ...]  # CPU features, Python, TensorFlow, CUDA (all but DML's compact view)
    remarks: Tuple[Remark, ...]
    raised_by: Optional[str]  # the function that raised a fail-fast (DML's extra line)
    process: Tuple[Fact, ...] = ()  # the executable, its command line, the faulting module, the dump's time
    collisions: Tuple[CollisionView, ...] = ()  # runtime DLLs loaded together that do not fit

    @property
    def rows(self) -> Tuple[Fact, ...]:
        """Every row, in order."""
        return self.exception + self.process + self.machine + self.environment


def _exception_facts(report: Report) -> List[Fact]:
    out: List[Fact] = []
    c = report.crash
    if c is not None:
        value: List[Span] = [Span(f"{c.code:#010x}", LITERAL), words(" "), text(c.code_name)]
        if c.fastfail_code is not None:
            value += [words(" / "), text(c.fastfail_name or ""), words(f" ({c.fastfail_code})")]
        value += [words(" on thread "), Span(str(c.thread_id), THREAD), words(" at "), Span(f"{c.address:#x}", LITERAL)]
        out.append(Fact("Exception", tuple(value), "Crash"))
        if c.summary:
            out.append(Fact("Meaning", (Span(c.summary, PROSE, 1000),), None))
    out += _ending_facts(report)
    return out


def _ending_facts(report: Report) -> List[Fact]:
    """How the process ended itself (analysis/ending.py), and in its runtime's words why."""
    e = report.ending
    if e is None:
        return []
    out: List[Fact] = []
    line: List[Span] = []
    if e.exit_code is not None:
        line += [words("exit code "), Span(str(e.exit_code), LITERAL)]
        line += [words(f" ({e.exit_code:#x})")] if e.exit_code > 9 else []
    if e.calls:
        line += [words(", through " if line else "through "), text(" -> ".join(e.calls), 1000)]
    if e.caller:
        line += [words(", called by "), Span(e.caller, CODE)]
    if line:
        out.append(Fact("Ended", tuple(line), "Ended"))
    r = e.reason
    if r is not None:
        out.append(Fact("Reason", (Span(r.text, PROSE, 1000),), "Reason"))
        out.append(Fact("Read from", (Span(r.source, PROSE, 1000),), None))
        if r.meaning:
            out.append(Fact("What it means", (Span(r.meaning, PROSE, 1000),), None))
    return out


def _machine_facts(s: Optional[SystemSummary]) -> List[Fact]:
    out: List[Fact] = []
    if s is not None:
        out.append(Fact("OS", _os_line(s), "System"))
        out.append(Fact("CPU", (text(s.cpu), words(f", {plural(s.processors, 'processor')}")), "CPU"))
    return out


def _os_line(s: SystemSummary) -> Line:
    line = [text(s.arch), words(", Windows "), text(s.os_version)]
    if s.os_build:
        line += [words(" ("), text(s.os_build), words(")")]
    if s.wine:
        line += [words(", under "), text(s.wine)]
    return tuple(line)


def _environment_facts(env: Environment) -> List[Fact]:
    out: List[Fact] = []
    if env.cpu_features:
        states = env.cpu_features.items()
        feats = ", ".join(f"{k} {'yes' if v else 'no' if v is not None else 'unknown'}" for k, v in states)
        terse = ", ".join(f"{k} {'yes' if v else 'no' if v is not None else '?'}" for k, v in states)
        src = env.cpu_features_source
        terse += f" ({src})" if src and src.startswith("unknown") else f" (from {src})" if src else ""
        out.append(Fact("CPU features", (text(feats),), "CPU features", (text(terse, 1000),)))
    if env.python:
        out.append(Fact("Python", (text(env.python, 1000),), "Python"))
    if env.tensorflow or env.tensorflow_version:
        value = [text(env.tensorflow_version or "version unknown", 1000)]
        if env.tensorflow:
            value += [words(" ("), Span(env.tensorflow[0], LITERAL), words(")")]
        out.append(Fact("TensorFlow", tuple(value), "TensorFlow"))
    others = [p for p in env.python_packages if p.name != "tensorflow"]  # TensorFlow has its line
    held = [p for p in others if p.from_memory]
    said: List[Span] = []
    if held:
        said += [text(", ".join(f"{p.name} {p.version}" for p in held), 1000)]
        said += [words(" (their __version__ in the dump's memory)")]
    for p in others:
        if p not in held:  # from an installation or a wheel: each says which
            said += [words("; ")] if said else []
            said += [text(f"{p.name} {p.version}"), words(" ("), text(p.source, 1000), words(")")]
    if said:
        out.append(Fact("Python packages", tuple(said), "Packages"))
    for comp in env.cuda:
        line = (text(comp.version or "?"), words(" ("), Span(comp.module, LITERAL), words(")"))
        out.append(Fact(comp.name, line, comp.name))
    if env.memory is not None:
        said_of_memory = memory_words(env.memory)
        if said_of_memory:
            out.append(Fact("Memory", (words(said_of_memory),), "Memory"))
    return out


def utc_time(stamp: Optional[int]) -> Optional[str]:
    """Unix seconds as `2026-11-22 04:35:18 UTC`, or None when absent or out of range."""
    iso = iso_time(stamp)
    return iso.replace("T", " ").replace("+00:00", " UTC") if iso else None


def _process_facts(report: Report) -> List[Fact]:
    """The executable (version, pid), its command line or why the dump lacks it, the
    module the fault is in (and its version), when the dump was written."""
    out: List[Fact] = []
    p, s, c = report.process, report.system, report.crash
    if p is not None and p.name:
        line: List[Span] = [Span(p.name, CODE)]
        line += [words(" "), text(p.version)] if p.version else []
        line += [words(f", pid {s.pid}")] if s is not None and s.pid is not None else []
        out.append(Fact("Process", tuple(line), "Process"))
    if p is not None:
        if p.command_line is not None:
            value: Line = (Span(p.command_line or "(empty)", LITERAL, 2000),)
        else:
            value = (words("not in the dump: "), text(p.command_line_missing or "unknown", 1000))
        out.append(Fact("Command line", value, "Command line"))
    if c is not None and c.module:
        line = [Span(c.module, CODE), words(" ")]
        line += [text(c.module_version)] if c.module_version else [words("(no version recorded)")]
        out.append(Fact("Faulting module", tuple(line), "Module"))
    written = utc_time(report.dump.timestamp)
    if written:
        started = s.process_create_time if s is not None else None
        after = report.dump.timestamp - started if started and report.dump.timestamp >= started else None
        uptime = f", {after:,} s after the process started" if after is not None else ""
        out.append(Fact("Dump written", (words(written + uptime),), "Dump written"))
    return out


def collision_view(c: RuntimeCollision) -> CollisionView:
    modules = []
    for m in c.modules:
        line: List[Span] = [Span(m.name, CODE)]
        line += [words(" "), text(m.version)] if m.version else []
        line += [words(" ("), text(m.package, 1000), words(")")] if m.package else []
        line += [words(", "), Span(m.path, LITERAL, 1000), words(": "), text(m.role, 1000)]
        modules.append(tuple(line))
    return CollisionView(c.title, c.confidence, tuple(modules), c.leads_to, c.ways_out, c.unknown)


def facts(report: Report) -> Facts:
    env = report.environment
    remarks = tuple(Remark(s, False) for s in env.compatibility) + tuple(Remark(n, True) for n in env.notes)
    if env.memory is not None:  # a limit the verdict says stays out of the remarks
        remarks += tuple(Remark(s, False) for s in env.memory.findings if s not in report.verdict.evidence)
    raised_by = report.crash.raised_by if report.crash is not None else None
    return Facts(
        tuple(_exception_facts(report)),
        tuple(_machine_facts(report.system)),
        tuple(_environment_facts(env)),
        remarks,
        raised_by,
        tuple(_process_facts(report)),
        tuple(collision_view(c) for c in env.runtime_collisions),
    )


# --------------------------------------------------------------------------- recursion

MAX_CYCLES_SHOWN = 3  # per thread
MIN_OTHER_THREAD_REPETITIONS = 10  # shorter repeats on healthy threads are ordinary code
ENTRY_PATH_SHOWN = 6


@record
class RecursionView:
    tid: int
    summary: str  # numbers only
    functions: Tuple[str, ...]  # the cycle in call order (caller first)
    entry_path: Tuple[str, ...]  # the functions below the cycle, innermost first, as many as shown
    entry_more: int  # how many more the entry path has


def shown_cycles(report: Report) -> List[Tuple[ThreadReport, Cycle]]:
    """The recursions every format lists, crashing thread first. A short repeat is news only
    on the thread whose stack ran out: elsewhere (and on a thread that crashed otherwise) a
    few repetitions are ordinary code, e.g. the eval loop once per nested Python call."""
    stack_crash = report.verdict.kind.is_stack
    return [
        (t, c)
        for t in report.threads
        for c in t.cycles[:MAX_CYCLES_SHOWN]
        if (t.is_crashing and stack_crash) or c.repetitions >= MIN_OTHER_THREAD_REPETITIONS
    ]


def cycle_summary(c: Cycle) -> str:
    share = f" ({c.stack_share:.0%} of the used stack)" if c.stack_share is not None else ""
    return (
        f"cycle of {plural(c.period, 'function')} in call order, {plural(c.repetitions, 'repetition')} x "
        f"{c.bytes_per_repetition:,} bytes = {human_bytes(c.total_bytes)}{share}, "
        f"frames {c.first_frame}-{c.last_frame}"
    )


def recursion_view(t: ThreadReport, c: Cycle) -> RecursionView:
    path = outside_entry_path(c)
    return RecursionView(
        tid=t.tid,
        summary=cycle_summary(c),
        functions=tuple(call_order(c)),
        entry_path=tuple(path[:ENTRY_PATH_SHOWN]),
        entry_more=max(0, len(path) - ENTRY_PATH_SHOWN),
    )


# --------------------------------------------------------------------------- frame sizes

FRAME_SIZES_SHOWN = 8


@record
class FrameSizeRow:
    index: int
    function: str
    size: str  # bytes, decimal
    asks: str  # what the prologue asks for, or ""
    asks_noted: str  # `asks`, and when the thread died in the stack probe, a short note (tables without `how`)
    how: str  # the prologue instruction(s), and the long probe note
    oversized: bool


@record
class FrameSizeHeaders:
    """The largest-frames table's column headers, with their units."""

    index: str = "#"
    function: str = "Function"
    size: str = "Frame size (B)"
    asks: str = "Prologue asks (B)"
    how: str = "Prologue"


@record
class FrameSizeTable:
    rows: Tuple[FrameSizeRow, ...]
    legend: Optional[str]  # what the `oversized` mark means; None when no row carries it (and no mark column)
    headers: FrameSizeHeaders = FrameSizeHeaders()


def shows_frame_sizes(report: Report) -> bool:
    """Frame sizes explain stack overflows; elsewhere they matter only when one is oversized."""
    return bool(report.frame_sizes) and (report.verdict.kind.is_stack or any(fs.oversized for fs in report.frame_sizes))


def oversized_legend(report: Report) -> Optional[str]:
    if not any(fs.oversized for fs in report.frame_sizes):
        return None
    threshold = report.oversized_threshold
    limit = f"{human_bytes(threshold)} (--threshold)" if threshold else "the --threshold (default 64 KiB)"
    return f"oversized: the frame, or what its prologue asks for, is at least {limit}"


def frame_size_table(report: Report) -> Optional[FrameSizeTable]:
    if not shows_frame_sizes(report):
        return None
    rows = []
    for fs in report.frame_sizes[:FRAME_SIZES_SHOWN]:
        asks = f"{fs.requested:,}" if fs.requested is not None else ""
        how = fs.prologue_text or ""
        rows.append(
            FrameSizeRow(
                index=fs.frame_index,
                function=fs.function,
                size=f"{fs.size:,}",
                asks=asks,
                asks_noted=asks + (" (died in the stack probe)" if fs.not_yet_allocated else ""),
                how=how + (" (died in the probe before the frame existed)" if fs.not_yet_allocated else ""),
                oversized=fs.oversized,
            )
        )
    return FrameSizeTable(tuple(rows), oversized_legend(report))


# --------------------------------------------------------------------------- stack budget


def budget_line(b: StackBudget) -> str:
    """The crashing thread's stack use in one line (dumpkit's words and numbers only)."""
    estimated = b.source == "captured+image"
    used = human_bytes(b.used) if b.used is not None else "an unknown amount"
    if b.reserve_size:
        frac = b.used_fraction
        line = f"used {used} of {'~' if estimated else ''}{human_bytes(b.reserve_size)}" + (
            f" ({frac:.0%})" if frac is not None else ""
        )
    else:
        line = f"used {used} (reserve not known)"
    line += f", from {b.source}"
    if estimated:
        line += " (the reserve is the executable's default; a thread created with its own stack size has another)"
    if b.guard_hit:
        line += ", fault in the guard region"
    return line


# --------------------------------------------------------------------------- the crash site


@record
class CodeRow:
    address: str  # hex, as wide as a pointer
    bytes: str  # hex
    text: str  # the instruction; a direct branch's destination named in parentheses (escape it)
    faulting: bool


@record
class CodeView:
    """The instructions around the faulting IP, the one at the IP marked."""

    where: str  # the top frame's name (escape it)
    rows: Tuple[CodeRow, ...]
    note: Optional[str]  # how sure the instructions before the IP are, or why there are none


MAX_SKIPPED_SHOWN = 3


def code_view(report: Report, crash: Optional[ThreadReport], digits: int) -> Optional[CodeView]:
    c = report.crash
    if c is None or c.disassembly is None:
        return None
    rows = tuple(
        CodeRow(
            f"{i.address:0{digits}x}", i.bytes, i.text + (f" ({i.target_name})" if i.target_name else ""), i.faulting
        )
        for i in c.disassembly.instructions
    )
    where = frame_name(crash.frames[0]) if crash is not None and crash.frames else f"{c.address:#x}"
    return CodeView(where, rows, c.disassembly.note)


def blame_line(b: BlameFrame) -> Line:
    """`frame 1 m.dll!f (above it: m.dll!___chkstk_ms, runtime code)`; the frames above an
    overflowing recursion are counted, not named (where it ran out says nothing)."""
    if b.kind is BlameKind.PYTHON:
        # every native frame is the system's or a runtime's: the Python line is where to look
        said: List[Span] = [words("Python frame "), Span(b.function, CODE)]
        said.append(words(f", {b.python_via}" if b.python_via else ""))
        runtime = len(b.skipped)
        if runtime:
            said.append(words(f" (above it: {plural(runtime, 'native frame')} of the Python runtime and the system)"))
        return tuple(said)
    line: List[Span] = [words(f"frame {b.frame_index} "), Span(b.function, CODE)]
    ran_out = sum(1 for p in b.skipped if p.role == ABOVE_RECURSION)
    named = [p for p in b.skipped if p.role != ABOVE_RECURSION]
    if ran_out:
        line.append(words(f", the recursion (above it: {plural(ran_out, 'frame')} where it ran out of stack"))
        line.append(words("; then " if named else ")"))
    elif named:
        line.append(words(" (above it: "))
    if named:
        for i, p in enumerate(named[:MAX_SKIPPED_SHOWN]):
            line += [words(", ")] if i else []
            line += [Span(p.function, CODE), words(f", {p.role}" if len(named) == 1 else f" ({p.role})")]
        more = len(named) - MAX_SKIPPED_SHOWN
        line.append(words(f" and {more} more)" if more > 0 else ")"))
    if not b.skipped:
        line.append(words(", the faulting frame itself"))
    if b.trust in SCANNED_TRUST:
        line.append(words("; found by stack scanning"))
    if not b.named:
        line.append(words("; no symbol names it, so it may still be a statically linked runtime function"))
    if b.python_via:
        at = " code at " if b.python_frame else ""
        line.append(words(f"; called from Python{at}"))
        if b.python_frame:
            line.append(Span(b.python_frame, CODE))
        line.append(words(f" {b.python_via}"))
    return tuple(line)


# --------------------------------------------------------------------------- the report


def group_summary(lead: ThreadView, same: Tuple[ThreadView, ...]) -> Line:
    """`488 "worker": 6 frames, top ntdll.dll!NtWait... (+2 with the same stack: 492, 496)`."""
    line: List[Span] = [Span(str(lead.tid), THREAD)]
    if lead.name:
        line += [words(' "'), text(lead.name, 80), words('"')]
    line += [words(f": {lead.frames}, top "), Span(lead.top, CODE)]
    if same:
        line.append(words(f" (+{len(same)} with the same stack: "))
        for i, x in enumerate(same):
            line += [words(", ")] if i else []
            line.append(Span(str(x.tid), THREAD))
        line.append(words(")"))
    return tuple(line)


@record
class Threads:
    """The threads besides the crashing one."""

    title: str  # "Other threads", or "Threads" when none crashed
    count: str  # "19; 5 distinct stacks": how many, and how many stacks they make
    groups: Tuple[ThreadGroup, ...]  # identical stacks folded (threads shown in full left out)
    full: Tuple[ThreadView, ...]  # threads shown with their whole stack besides the crashing one (DML)


@record
class ImagesView:
    """What of the crashing stack was guessed for want of images, and how to fill the gap."""

    title: str
    lines: Tuple[str, ...]


def images_view(coverage: Optional[ImageCoverage]) -> Optional[ImagesView]:
    if coverage is None:
        return None
    lines: List[str] = []
    if coverage.unvalidated:
        lines.append(
            f"{coverage.scanned:,} of {plural(coverage.frames, 'frame')} on the crashing thread were found by stack "
            f"scanning, {coverage.unvalidated:,} of them with no call site to confirm them"
        )
    for m in coverage.missing:
        lines.append(f"{m.module} ({plural(m.frames, 'frame')}): {m.fix}")
    lines.extend(coverage.search_problems)
    if not lines:
        return None
    title = "Missing images" if coverage.missing or coverage.unvalidated else "Image searches that found nothing"
    return ImagesView(title, tuple(lines))


@record
class WaitRow:
    """One thread's wait in the "Who waits for whom" table: the thread (id and name), where
    it is (its Python line of the user's code, else the code that waits), what it waits on,
    and who holds that where known."""

    thread: str
    where: str  # PROSE (a dump's Python line, or a frame name)
    what: str  # PROSE
    held_by: str  # PROSE: "thread 280", "thread 276 (taken in a with block at ...)", "not known", ""


@record
class WaitsView:
    """Who waits for whom (analysis/waits.py, holders.py): the deadlocks first, then every
    thread's wait. Shown when the dump has no exception, or when a lock wait is in it."""

    deadlocks: Tuple[str, ...]  # PROSE
    rows: Tuple[WaitRow, ...]


def waits_view(report: Report) -> Optional[WaitsView]:
    waits = report.waits
    if not waits or (report.crash is not None and not report.deadlocks):
        return None  # a crash's report shows the other threads' stacks; their waits are in the JSON
    by = {w.tid: w for w in waits}
    rows = []
    for w in waits:
        thread = f"{w.tid}" + (f' "{w.name}"' if w.name else "")
        join = (w.python_line or "").endswith(", calling threading.join")  # `what` names the thread
        if w.owner is not None and not join:
            owner = by.get(w.owner)
            held_by = f"thread {w.owner}" + (f' "{owner.name}"' if owner is not None and owner.name else "")
            held_by += f" (taken in a with block at {w.owner_at})" if w.owner_at else ""
        elif w.obj is not None and not join:
            held_by = "not known"
        else:
            held_by = ""
        rows.append(WaitRow(thread, w.python_line or w.caller or "", w.what, held_by))
    return WaitsView(tuple(d.text for d in report.deadlocks), tuple(rows))


@record
class ReportView:
    dumpkit_version: str
    schema_version: int
    dump_path: str
    pointer_digits: int  # hex digits of an address: 8 on 32-bit dumps, else 16
    verdict: VerdictView
    facts: Facts
    recursions: Tuple[RecursionView, ...]
    frame_sizes: Optional[FrameSizeTable]  # None when not shown
    budget: Optional[str]  # the crashing thread's stack use
    crashing: Optional[ThreadView]  # with its stack
    threads: Threads
    problems: Tuple[str, ...]  # met while reading; the rest of the report stands
    python: Optional[PythonView] = None  # None: the process runs no CPython
    images: Optional[ImagesView] = None  # None: the crashing stack did not want for images
    signature: Optional[str] = None  # the crash signature (dump names: escape it)
    blame: Optional[Line] = None  # the first frame in the program's own code
    code: Optional[CodeView] = None  # the instructions around the faulting IP
    registers: Tuple[str, ...] = ()  # the exception context, `rax=...` cells in WinDbg's order
    waits: Optional[WaitsView] = None  # who waits for whom (a snapshot, or a deadlock beside a crash)


def report_view(
    report: Report,
    convention: str = DOCUMENT,
    max_rows: Optional[int] = None,
    other_stacks: bool = True,
    full_threads: Collection[int] = (),
    all_threads: bool = False,
) -> ReportView:
    """`convention`: the stack tables' cells (stacks.REPORT / DOCUMENT / KF); `max_rows`:
    frame rows shown per stack; `other_stacks`: build the stacks of the grouped threads too;
    `full_threads` / `all_threads`: threads shown in full, apart from the groups."""
    digits = pointer_digits(report.system)

    def table(t: ThreadReport) -> StackTable:
        return stack_table(t, convention, digits, max_rows=max_rows)

    v = report.verdict
    crash = next((t for t in report.threads if t.is_crashing), None)
    full = tuple(
        thread_view(t, table(t)) for t in report.threads if not t.is_crashing and (all_threads or t.tid in full_threads)
    )
    shown = {t.tid for t in full}
    groups = []
    for t, same in stack_groups([t for t in report.threads if t.tid not in shown]):
        lead, others = thread_view(t, table(t) if other_stacks else None), tuple(thread_view(x) for x in same)
        groups.append(ThreadGroup(lead, others, group_summary(lead, others)))
    count = sum(1 + len(g.same) for g in groups)
    return ReportView(
        dumpkit_version=report.dumpkit_version,
        schema_version=report.schema_version,
        dump_path=report.dump.path,
        pointer_digits=digits,
        verdict=VerdictView(v.headline, v.confidence, v.evidence, v.next_steps),
        facts=facts(report),
        recursions=tuple(recursion_view(t, c) for t, c in shown_cycles(report)),
        frame_sizes=frame_size_table(report),
        budget=budget_line(crash.budget) if crash is not None and crash.budget is not None else None,
        crashing=thread_view(crash, table(crash)) if crash is not None else None,
        threads=Threads(
            title="Other threads" if crash is not None else "Threads",
            count=f"{count}" + (f"; {plural(len(groups), 'distinct stack')}" if len(groups) < count else ""),
            groups=tuple(groups),
            full=full,
        ),
        problems=report.soft_errors,
        python=python_view(report.python, crash.tid if crash is not None else None),
        images=images_view(report.images),
        signature=report.signature.text if report.signature is not None else None,
        blame=blame_line(report.blame) if report.blame is not None else None,
        code=code_view(report, crash, digits),
        registers=tuple(register_cells(report.crash.registers, digits)) if report.crash is not None else (),
        waits=waits_view(report),
    )
