"""What `dumpkit info` shows of a dump (the engine's read phase, not walked): lines and
tables of plain text, decided here; report/contents.py lays them out."""

from __future__ import annotations

import time
from typing import List, Optional, Sequence, Tuple

from dumpkit.analysis.facts import POINTER_REGISTERS
from dumpkit.analysis.model import Contents, CrashInfo, Environment, MemoryUse, SystemSummary
from dumpkit.report.view.inline import Line, Span, text, words
from dumpkit.report.view.stacks import pointer_digits
from dumpkit.words import memory_size, percent_of, plural
from dumpkit.records import record

EXCEPTION_NONCONTINUABLE = 1
_FEATURE_NAMES = {"AVX512F": "AVX-512 (F)"}

HEADING, SECONDARY = "heading", "secondary"  # a line's emphasis


@record
class InfoLine:
    text: Line
    emphasis: str = ""  # "", HEADING or SECONDARY


@record
class Table:
    title: str
    columns: Tuple[str, ...]
    rows: Tuple[Line, ...]  # one span per cell
    empty: str = ""  # the line shown instead when there are no rows


@record
class ContentsView:
    head: Tuple[InfoLine, ...]  # the file, system, process and exception
    threads: Table
    modules: Table
    debug_records: Table  # the CodeView record: which PDB a symbol server must serve
    unloaded: Table
    tail: Tuple[InfoLine, ...]  # streams, memory
    problems: Tuple[str, ...]


def iso_time(stamp: Optional[int]) -> Optional[str]:
    """A Unix time as ISO 8601 UTC, or None when absent or out of range: what
    `datetime.fromtimestamp(stamp, timezone.utc).isoformat()` gives for whole seconds
    (years 1-9999), without importing datetime (~1 ms of every report's start-up)."""
    if not stamp:
        return None
    try:
        t = time.gmtime(stamp)
    except (OverflowError, OSError, ValueError):
        return None
    if not 1 <= t.tm_year <= 9999:
        return None
    return "%04d-%02d-%02dT%02d:%02d:%02d+00:00" % t[:6]


def flags_meaning(flags: int) -> str:
    meaning = ["non-continuable" if flags & EXCEPTION_NONCONTINUABLE else "continuable"]
    if flags & ~EXCEPTION_NONCONTINUABLE:
        meaning.append(f"other bits {flags & ~EXCEPTION_NONCONTINUABLE:#x}")
    return ", ".join(meaning)


def register_cells(regs: Sequence[Tuple[str, int]], width: int) -> List[str]:
    """`rax=0000000000000001`, ...: pointers zero-padded to `width` digits as WinDbg shows them."""
    return [f"{name}={v:0{width}x}" if name in POINTER_REGISTERS else f"{name}={v:x}" for name, v in regs]


def register_lines(regs: Sequence[Tuple[str, int]], width: int, per_line: int = 4) -> List[str]:
    """`rax=0000000000000001 rbx=...`, `per_line` registers a line."""
    cells = register_cells(regs, width)
    return [" ".join(cells[i : i + per_line]) for i in range(0, len(cells), per_line)]


def _recorded(value, unit: str = "") -> str:
    return "not recorded" if value is None else f"{value}{unit}"


def feature_line(env: Environment) -> str:
    word = {True: "yes", False: "no", None: "unknown"}
    shown = ", ".join(f"{_FEATURE_NAMES.get(n, n)} {word[v]}" for n, v in env.cpu_features.items())
    return f"{shown} ({env.cpu_features_source})"


def _system(s: Optional[SystemSummary], env: Environment) -> List[InfoLine]:
    if s is None:
        return []
    version = s.os_version.split(" ", 1)[0]  # os_version carries the service pack too; shown apart
    line = [
        words(f"System   {s.arch} Windows {version} "),
        text(s.csd_version or ""),
        words(" "),
        text(s.os_build or ""),
    ]
    if s.wine:
        line += [words(" under "), text(s.wine)]
    return [
        InfoLine(tuple(line)),
        InfoLine((words("CPU      "), text(s.cpu), words(f", {plural(s.processors, 'processor')}"))),
        InfoLine((words("         "), text(feature_line(env), 1000))),
    ]


def _process(s: Optional[SystemSummary]) -> InfoLine:
    if s is None or (s.pid is None and s.process_create_time is None):
        return InfoLine((words("Process  not recorded (no MiscInfo stream)"),))
    return InfoLine(
        (
            words(
                f"Process  pid {_recorded(s.pid)}, started {_recorded(iso_time(s.process_create_time))}, "
                f"CPU time user {_recorded(s.process_user_seconds, ' s')}, "
                f"kernel {_recorded(s.process_kernel_seconds, ' s')}"
            ),
        )
    )


def memory_words(m: MemoryUse) -> str:
    """'this process: 2.7 GiB committed (peak 2.8 GiB), 2.4 GiB working set; the machine:
    6.1 GiB committed of its 10.2 GiB commit limit (60%), 8.0 GiB RAM, 3.5 GiB available'."""
    process: List[str] = []
    if m.private_commit is not None:
        peak = m.peak_private_commit
        process.append(f"{memory_size(m.private_commit)} committed")
        if peak is not None and peak > m.private_commit:
            process[-1] += f" (peak {memory_size(peak)})"
    if m.working_set is not None:
        process.append(f"{memory_size(m.working_set)} working set")
    if m.job_commit is not None and m.job_commit_limit:
        process.append(f"its job object {_of_limit(m.job_commit, m.job_commit_limit, 'limit')}")
    machine: List[str] = []
    if m.system_commit is not None and m.system_commit_limit:
        machine.append(_of_limit(m.system_commit, m.system_commit_limit, "commit limit"))
    if m.physical_memory:
        machine.append(f"{memory_size(m.physical_memory)} RAM")
    if m.available_memory is not None:
        machine.append(f"{memory_size(m.available_memory)} available")
    parts = [f"this process: {', '.join(process)}"] if process else []
    parts += [f"the machine: {', '.join(machine)}"] if machine else []
    return "; ".join(parts)


def _of_limit(used: int, limit: int, what: str) -> str:
    return f"{memory_size(used)} committed of its {memory_size(limit)} {what} ({percent_of(used, limit)}%)"


def _exception(e: Optional[CrashInfo], absent: Optional[str], width: int) -> List[InfoLine]:
    if e is None:
        return [InfoLine((words("Exception "), text(absent or "none", 1000)))]
    raw = e.raw_parameters or e.parameters
    address = e.raw_address if e.raw_address is not None else e.address
    out = [
        InfoLine(
            (
                words(
                    f"Exception {e.code:#010x} {e.code_name} on thread {e.thread_id} at {address:#x}, "
                    f"parameters [{', '.join(f'{p:#x}' for p in raw)}]"
                ),
            )
        ),
        InfoLine(
            (
                words(
                    f"          flags {e.flags:#x} ({flags_meaning(e.flags)})"
                    + (", chained to another exception record" if e.nested else "")
                ),
            )
        ),
        InfoLine((words("          "), text(e.headline, 1000)), SECONDARY),
    ]
    if e.context_flags is None:
        return out + [InfoLine((words("          no register context"),))]
    out.append(InfoLine((words(f"          context (flags {e.context_flags:#x}):"),)))
    out += [InfoLine((words(f"            {line}"),)) for line in register_lines(e.registers, width)]
    return out


def _hex(n: int) -> Span:
    return words(f"{n:#x}")


# Numbers say their base where it is not the obvious one; addresses are 0x-prefixed hex.
MODULE_COLUMNS = ("base", "size (hex)", "name", "version", "timestamp (hex)", "checksum (hex)", "path")


def contents_view(d: Contents) -> ContentsView:
    width = pointer_digits(d.system)
    ip_name, sp_name = ("eip", "esp") if width == 8 else ("rip", "rsp")
    head = [
        InfoLine(
            (text(d.dump.path), words(f": {d.dump.file_size:,} bytes, written {iso_time(d.dump.timestamp)}")), HEADING
        )
    ]
    head += _system(d.system, d.environment)
    head.append(_process(d.system))
    said_of_memory = memory_words(d.environment.memory) if d.environment.memory is not None else ""
    if said_of_memory:
        head.append(InfoLine((words("Commit   "), text(said_of_memory, 1000))))
    head += _exception(d.crash, d.crash_absent, width)
    threads = []
    for th in d.threads:
        regs = dict(th.registers)
        ip = regs.get("rip", regs.get("eip"))
        sp = regs.get("rsp", regs.get("esp"))
        threads.append(
            (
                words(str(th.tid)),
                text(th.name or "", 60),
                words(f"{ip:#x}" if ip is not None else ""),
                words(f"{sp:#x}" if sp is not None else ""),
                words(f"{th.stack_start:#x}-{th.stack_end:#x}"),
                words(f"{th.stack_end - th.stack_start:,}"),
                words(str(th.context_size or "")),
                _hex(th.teb),
            )
        )
    modules = tuple(
        (
            _hex(m.base),
            _hex(m.size),
            text(m.name, 80),
            text(m.file_version or ""),
            _hex(m.timestamp),
            _hex(m.checksum),
            text(m.path, 160),
        )
        for m in d.modules
    )
    debug = tuple(
        (text(m.name, 80), text(m.pdb or "", 160), words(m.pdb_guid or ""), words(str(m.pdb_age)))
        for m in d.modules
        if m.pdb is not None
    )
    unloaded = tuple((_hex(u.base), _hex(u.size), text(u.name, 80), _hex(u.timestamp)) for u in d.unloaded_modules)
    # Stream names are dumpkit's (a table's, or Unknown(0x...)), every one of them listed.
    streams = ", ".join(f"{x.name}{'' if x.known else ' (skipped)'}" for x in d.dump.stream_details)
    ranges = "an unknown number of" if d.dump.memory_ranges is None else f"{d.dump.memory_ranges:,}"
    return ContentsView(
        head=tuple(head),
        threads=Table(
            "Threads",
            ("tid", "name", ip_name, sp_name, "stack", "stack size (B)", "context (B)", "teb"),
            tuple(threads),
        ),
        modules=Table("Modules", MODULE_COLUMNS, modules),
        debug_records=Table(
            "Debug records (CodeView)",
            ("name", "pdb", "guid", "age"),
            debug,
            "Debug records (CodeView): none in the dump",
        ),
        unloaded=Table(
            "Unloaded modules", ("base", "size", "name", "timestamp"), unloaded, "Unloaded modules: none recorded"
        ),
        tail=(
            InfoLine((words(f"Streams  {streams}"),)),
            InfoLine((words(f"Memory   {ranges} captured ranges, {d.dump.memory_regions:,} memory-info regions"),)),
        ),
        problems=d.soft_errors,
    )
