"""`dumpkit info` as text: what a dump holds (the engine's read phase), in tables.

Every dump-derived string goes through escape.clean into rich Text objects, never markup."""

from __future__ import annotations

import datetime
from typing import List, Optional, Sequence, Tuple

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dumpkit.analysis.facts import POINTER_REGISTERS
from dumpkit.analysis.model import Contents, CrashInfo, Environment, SystemSummary
from dumpkit.report.escape import clean
from dumpkit.words import plural

EXCEPTION_NONCONTINUABLE = 1
_FEATURE_NAMES = {"AVX512F": "AVX-512 (F)"}


def iso_time(stamp: Optional[int]) -> Optional[str]:
    """A Unix time as ISO 8601 UTC, or None when absent or out of range."""
    if not stamp:
        return None
    try:
        return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def flags_meaning(flags: int) -> str:
    words = ["non-continuable" if flags & EXCEPTION_NONCONTINUABLE else "continuable"]
    if flags & ~EXCEPTION_NONCONTINUABLE:
        words.append(f"other bits {flags & ~EXCEPTION_NONCONTINUABLE:#x}")
    return ", ".join(words)


def register_lines(regs: Sequence[Tuple[str, int]], width: int, per_line: int = 4) -> List[str]:
    """`rax=0000000000000001 rbx=...`, pointers zero-padded to `width` digits as WinDbg shows them."""
    cells = [f"{name}={v:0{width}x}" if name in POINTER_REGISTERS else f"{name}={v:x}" for name, v in regs]
    return [" ".join(cells[i : i + per_line]) for i in range(0, len(cells), per_line)]


def _recorded(value, unit: str = "") -> str:
    return "not recorded" if value is None else f"{value}{unit}"


def feature_line(env: Environment) -> str:
    word = {True: "yes", False: "no", None: "unknown"}
    shown = ", ".join(f"{_FEATURE_NAMES.get(n, n)} {word[v]}" for n, v in env.cpu_features.items())
    return f"{shown} ({env.cpu_features_source})"


def _system(c: Console, s: Optional[SystemSummary], env: Environment) -> None:
    if s is None:
        return
    version = s.os_version.split(" ", 1)[0]  # os_version carries the service pack too; shown apart
    c.print(
        Text(
            f"System   {s.arch} Windows {version} {clean(s.csd_version or '')} {clean(s.os_build or '')}"
            + (f" under {clean(s.wine)}" if s.wine else "")
        )
    )
    c.print(Text(f"CPU      {clean(s.cpu)}, {plural(s.processors, 'processor')}"))
    c.print(Text(f"         {clean(feature_line(env), 1000)}"))


def _process(c: Console, s: Optional[SystemSummary]) -> None:
    if s is None or (s.pid is None and s.process_create_time is None):
        c.print(Text("Process  not recorded (no MiscInfo stream)"))
        return
    c.print(
        Text(
            f"Process  pid {_recorded(s.pid)}, started {_recorded(iso_time(s.process_create_time))}, "
            f"CPU time user {_recorded(s.process_user_seconds, ' s')}, "
            f"kernel {_recorded(s.process_kernel_seconds, ' s')}"
        )
    )


def _exception(c: Console, e: Optional[CrashInfo], absent: Optional[str], width: int) -> None:
    if e is None:
        c.print(Text(f"Exception {clean(absent or 'none', 1000)}"))
        return
    raw = e.raw_parameters or e.parameters
    address = e.raw_address if e.raw_address is not None else e.address
    c.print(
        Text(
            f"Exception {e.code:#010x} {e.code_name} on thread {e.thread_id} at {address:#x}, "
            f"parameters [{', '.join(f'{p:#x}' for p in raw)}]"
        )
    )
    c.print(
        Text(
            f"          flags {e.flags:#x} ({flags_meaning(e.flags)})"
            + (", chained to another exception record" if e.nested else "")
        )
    )
    c.print(Text(f"          {clean(e.headline, 1000)}", style="dim"))
    if e.context_flags is None:
        c.print(Text("          no register context"))
        return
    c.print(Text(f"          context (flags {e.context_flags:#x}):"))
    for line in register_lines(e.registers, width):
        c.print(Text(f"            {line}"))


def _modules(c: Console, d: Contents) -> None:
    mt = Table(title="Modules", title_justify="left", box=None, header_style="bold")
    for col in ("base", "size", "name", "version", "timestamp", "checksum", "path"):
        mt.add_column(col, no_wrap=col != "path", overflow="fold")
    for m in d.modules:
        mt.add_row(
            f"{m.base:#x}",
            f"{m.size:#x}",
            Text(clean(m.name, 80)),
            clean(m.file_version or ""),
            f"{m.timestamp:#x}",
            f"{m.checksum:#x}",
            Text(clean(m.path, 160)),
        )
    c.print(mt)
    # The CodeView record: which PDB a symbol server must serve for each module.
    cv = [m for m in d.modules if m.pdb is not None]
    if cv:
        ct = Table(title="Debug records (CodeView)", title_justify="left", box=None, header_style="bold")
        for col in ("name", "pdb", "guid", "age"):
            ct.add_column(col, no_wrap=col != "pdb")
        for m in cv:
            ct.add_row(Text(clean(m.name, 80)), Text(clean(m.pdb, 160)), m.pdb_guid or "", str(m.pdb_age))
        c.print(ct)
    else:
        c.print(Text("Debug records (CodeView): none in the dump"))
    if not d.unloaded_modules:
        c.print(Text("Unloaded modules: none recorded"))
        return
    ut = Table(title="Unloaded modules", title_justify="left", box=None, header_style="bold")
    for col in ("base", "size", "name", "timestamp"):
        ut.add_column(col)
    for u in d.unloaded_modules:
        ut.add_row(f"{u.base:#x}", f"{u.size:#x}", Text(clean(u.name, 80)), f"{u.timestamp:#x}")
    c.print(ut)


def render_contents(d: Contents, console: Console) -> None:
    width = 8 if d.system is not None and d.system.arch == "x86" else 16
    c = console
    c.print(
        Text(f"{clean(d.dump.path)}: {d.dump.file_size:,} bytes, written {iso_time(d.dump.timestamp)}", style="bold")
    )
    _system(c, d.system, d.environment)
    _process(c, d.system)
    _exception(c, d.crash, d.crash_absent, width)
    tt = Table(title="Threads", title_justify="left", box=None, header_style="bold")
    for col in ("tid", "name", "rip", "rsp", "stack", "bytes", "ctx", "teb"):
        tt.add_column(col)
    for th in d.threads:
        regs = dict(th.registers)
        ip = regs.get("rip", regs.get("eip"))
        sp = regs.get("rsp", regs.get("esp"))
        tt.add_row(
            str(th.tid),
            Text(clean(th.name or "", 60)),
            f"{ip:#x}" if ip is not None else "",
            f"{sp:#x}" if sp is not None else "",
            f"{th.stack_start:#x}-{th.stack_end:#x}",
            f"{th.stack_end - th.stack_start:,}",
            str(th.context_size or ""),
            f"{th.teb:#x}",
        )
    c.print(tt)
    _modules(c, d)
    streams = ", ".join(f"{clean(x.name)}{'' if x.known else ' (skipped)'}" for x in d.dump.stream_details)
    c.print(Text(f"Streams  {streams}"))
    ranges = "an unknown number of" if d.dump.memory_ranges is None else f"{d.dump.memory_ranges:,}"
    c.print(Text(f"Memory   {ranges} captured ranges, {d.dump.memory_regions:,} memory-info regions"))
    if d.soft_errors:
        c.print(Text("Problems met while reading (the rest stands):", style="bold"))
        for e in d.soft_errors:
            c.print(Text(f"  - {clean(e, 1000)}"))
