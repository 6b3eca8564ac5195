"""`dumpkit info`: what a dump holds, straight from the Target (no walking, no analysis)."""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Optional

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dumpkit.analysis.codes import decode_exception
from dumpkit.analysis.environment import cpu_features
from dumpkit.report.escape import clean
from dumpkit.target import GPR_NAMES, ExceptionInfo, Registers, SystemInfo, Target, significant_exception

EXCEPTION_STREAM = 6
EXCEPTION_NONCONTINUABLE = 1

# WinDbg's order: what a reader scans for first. Registers not listed follow, sorted.
_REGISTER_ORDER = (
    "rax",
    "rbx",
    "rcx",
    "rdx",
    "rsi",
    "rdi",
    "rbp",
    "rsp",
    "r8",
    "r9",
    "r10",
    "r11",
    "r12",
    "r13",
    "r14",
    "r15",
    "rip",
    "eax",
    "ebx",
    "ecx",
    "edx",
    "esi",
    "edi",
    "ebp",
    "esp",
    "eip",
    "eflags",
    "cs",
    "ds",
    "es",
    "fs",
    "gs",
    "ss",
    "mxcsr",
)
# Zero-padded to the pointer width, as WinDbg shows them; flags and selectors are not.
_PADDED = set(GPR_NAMES) | {"rip", "eax", "ebx", "ecx", "edx", "esi", "edi", "ebp", "esp", "eip"}


def _time(stamp) -> Any:
    if not stamp:
        return None
    try:
        return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def _why_no_exception(t: Target) -> str:
    """An Exception stream that is listed but damaged must not read as 'no crash'."""
    if not t.dump.has_stream(EXCEPTION_STREAM):
        return "none (the dump has no Exception stream: it was not written for a crash)"
    why = t.dump.stream_problem(EXCEPTION_STREAM)
    return "unreadable: the dump lists an Exception stream, but it could not be read" + (f": {why}" if why else "")


def _ordered(regs: Registers) -> List[str]:
    rank = {n: i for i, n in enumerate(_REGISTER_ORDER)}
    return sorted(regs.values, key=lambda n: (rank.get(n, len(rank)), n))


def register_dict(regs: Optional[Registers]) -> Optional[Dict[str, str]]:
    """Every register the context holds (absent ones are not invented), in reading order."""
    if regs is None:
        return None
    return {n: f"{regs.values[n]:#x}" for n in _ordered(regs)}


def _flags_meaning(flags: int) -> str:
    words = ["non-continuable" if flags & EXCEPTION_NONCONTINUABLE else "continuable"]
    if flags & ~EXCEPTION_NONCONTINUABLE:
        words.append(f"other bits {flags & ~EXCEPTION_NONCONTINUABLE:#x}")
    return ", ".join(words)


def _features(t: Target) -> Dict[str, Any]:
    feats, sources, summary = cpu_features(t.system, getattr(t, "xstate_enabled_features", None))
    return {"present": feats, "source": summary, "sources": sources}


def _system(t: Target, s: SystemInfo) -> Dict[str, Any]:
    known = s.cpu_signature_known
    return {
        "arch": s.arch_name,
        "os": f"{s.os_major}.{s.os_minor}.{s.os_build}",
        "csd": s.csd_version,
        "build_string": getattr(t, "build_string", None),
        "product_type": s.product_type,
        "processors": s.number_of_processors,
        "cpu_vendor": s.cpu_vendor,
        "cpu": s.cpu_description,
        "cpu_family": s.cpu_family if known else None,
        "cpu_model": s.cpu_model if known else None,
        "cpu_stepping": s.cpu_stepping if known else None,
        "cpu_level": s.processor_level,
        "cpu_revision": s.processor_revision,
        "cpuid_version": f"{s.cpuid_version:#x}",
        "cpuid_features_edx": f"{s.cpuid_features:#x}",
        "processor_features": [f"{x:#x}" for x in s.processor_features],
        "cpu_features": _features(t),
        "xstate_enabled_features": getattr(t, "xstate_enabled_features", None),
        "wine": s.wine_version,
    }


def _exception(ex: ExceptionInfo, s: Optional[SystemInfo]) -> Dict[str, Any]:
    return {
        "code": f"{ex.code:#010x}",
        "name": decode_exception(ex.code, ex.parameters).code_info.name,
        "headline": decode_exception(ex.code, significant_exception(ex, s)[1]).headline,
        "flags": f"{ex.flags:#x}",
        "flags_meaning": _flags_meaning(ex.flags),
        "nested": ex.nested,
        "address": f"{ex.address:#x}",
        "parameters": [f"{p:#x}" for p in ex.parameters],
        "thread_id": ex.thread_id,
        "context_flags": f"{ex.context.context_flags:#x}" if ex.context else None,
        "context": register_dict(ex.context),
    }


def info_dict(t: Target) -> Dict[str, Any]:
    s = t.system
    ex = t.exception
    p = t.process
    return {
        "dump": {
            "path": t.dump.path,
            "size": t.dump.file_size,
            "time": _time(t.dump.timestamp),
            "flags": f"{t.dump.flags:#x}",
            "streams": [
                {
                    "type": f"{e.type:#x}",
                    "name": e.name,
                    "size": e.size,
                    "known": e.known,
                    "problem": t.dump.stream_problem(e.type),
                }
                for e in t.dump.streams
                if e.type
            ],
            "memory_ranges": getattr(t, "memory_range_count", None),
        },
        "system": None if s is None else _system(t, s),
        "process": None
        if p is None
        else {
            "pid": p.pid,
            "create_time": _time(p.create_time),
            "user_seconds": p.user_time,
            "kernel_seconds": p.kernel_time,
        },
        "exception": None if ex is None else _exception(ex, s),
        "exception_absent": None if ex is not None else _why_no_exception(t),
        "threads": [
            {
                "tid": th.tid,
                "name": th.name,
                "teb": f"{th.teb:#x}",
                "stack": [f"{th.stack_start:#x}", f"{th.stack_end:#x}"],
                "stack_bytes": th.stack_size,
                "context_bytes": th.context.context_size if th.context else None,
                "context_flags": f"{th.context.context_flags:#x}" if th.context else None,
                "rip": f"{th.context.ip:#x}" if th.context else None,
                "rsp": f"{th.context.sp:#x}" if th.context else None,
                "registers": register_dict(th.context),
            }
            for th in t.threads
        ],
        "modules": [
            {
                "name": m.name,
                "path": m.path,
                "base": f"{m.base:#x}",
                "size": m.size,
                "timestamp": f"{m.timestamp:#x}",
                "checksum": f"{m.checksum:#x}",
                "file_version": m.file_version,
                "product_version": m.product_version,
                "pdb": m.cv_record.pdb_name if m.cv_record else None,
                "pdb_guid": m.cv_record.guid if m.cv_record else None,
                "pdb_age": m.cv_record.age if m.cv_record else None,
                "pdb_id": m.cv_record.symbol_id if m.cv_record else None,
            }
            for m in t.modules
        ],
        "unloaded_modules": [
            {"name": u.name, "base": f"{u.base:#x}", "size": u.size, "timestamp": f"{u.timestamp:#x}"}
            for u in t.unloaded_modules
        ],
        "memory_regions": len(t.memory_regions),
        "function_table_entries": len(t.function_table_entries()),
        "soft_errors": list(t.soft_errors.items),
    }


# ----------------------------------------------------------------------------- text
def _recorded(value, unit: str = "") -> str:
    return "not recorded" if value is None else f"{value}{unit}"


def _feature_line(f: Dict[str, Any]) -> str:
    word = {True: "yes", False: "no", None: "unknown"}
    names = {"AVX512F": "AVX-512 (F)"}
    shown = ", ".join(f"{names.get(n, n)} {word[v]}" for n, v in f["present"].items())
    return f"{shown} ({f['source']})"


def _register_lines(regs: Dict[str, str], width: int, per_line: int = 4) -> List[str]:
    cells = []
    for name, value in regs.items():
        v = int(value, 16)
        cells.append(f"{name}={v:0{width}x}" if name in _PADDED else f"{name}={v:x}")
    return [" ".join(cells[i : i + per_line]) for i in range(0, len(cells), per_line)]


def _print_system(c: Console, d: Dict[str, Any]) -> None:
    s = d["system"]
    if not s:
        return
    c.print(
        Text(
            f"System   {s['arch']} Windows {s['os']} {clean(s['csd'] or '')} {clean(s['build_string'] or '')}"
            + (f" under {clean(s['wine'])}" if s["wine"] else "")
        )
    )
    c.print(Text(f"CPU      {clean(s['cpu'])}, {s['processors']} processors"))
    c.print(Text(f"         {clean(_feature_line(s['cpu_features']), 1000)}"))


def _print_process(c: Console, p: Optional[Dict[str, Any]]) -> None:
    if not p:
        c.print(Text("Process  not recorded (no MiscInfo stream)"))
        return
    c.print(
        Text(
            f"Process  pid {_recorded(p['pid'])}, started {_recorded(p['create_time'])}, "
            f"CPU time user {_recorded(p['user_seconds'], ' s')}, kernel {_recorded(p['kernel_seconds'], ' s')}"
        )
    )


def _print_exception(c: Console, d: Dict[str, Any]) -> None:
    e = d["exception"]
    if not e:
        c.print(Text(f"Exception {clean(d['exception_absent'], 1000)}"))
        return
    c.print(
        Text(
            f"Exception {e['code']} {e['name']} on thread {e['thread_id']} at {e['address']}, "
            f"parameters [{', '.join(e['parameters'])}]"
        )
    )
    c.print(
        Text(
            f"          flags {e['flags']} ({e['flags_meaning']})"
            + (", chained to another exception record" if e["nested"] else "")
        )
    )
    c.print(Text(f"          {clean(e['headline'], 1000)}", style="dim"))
    if e["context"] is None:
        c.print(Text("          no register context"))
        return
    width = 16 if d["system"] is None or d["system"]["arch"] != "x86" else 8
    c.print(Text(f"          context (flags {e['context_flags']}):"))
    for line in _register_lines(e["context"], width):
        c.print(Text(f"            {line}"))


def _print_modules(c: Console, d: Dict[str, Any]) -> None:
    mt = Table(title="Modules", title_justify="left", box=None, header_style="bold")
    for col in ("base", "size", "name", "version", "timestamp", "checksum", "path"):
        mt.add_column(col, no_wrap=col != "path", overflow="fold")
    for m in d["modules"]:
        mt.add_row(
            m["base"],
            f"{m['size']:#x}",
            Text(clean(m["name"], 80)),
            clean(m["file_version"] or ""),
            m["timestamp"],
            m["checksum"],
            Text(clean(m["path"], 160)),
        )
    c.print(mt)
    # The CodeView record: which PDB a symbol server must serve for each module.
    cv = [m for m in d["modules"] if m["pdb"] is not None]
    if cv:
        ct = Table(title="Debug records (CodeView)", title_justify="left", box=None, header_style="bold")
        for col in ("name", "pdb", "guid", "age"):
            ct.add_column(col, no_wrap=col != "pdb")
        for m in cv:
            ct.add_row(Text(clean(m["name"], 80)), Text(clean(m["pdb"], 160)), m["pdb_guid"], str(m["pdb_age"]))
        c.print(ct)
    else:
        c.print(Text("Debug records (CodeView): none in the dump"))
    if not d["unloaded_modules"]:
        c.print(Text("Unloaded modules: none recorded"))
        return
    ut = Table(title="Unloaded modules", title_justify="left", box=None, header_style="bold")
    for col in ("base", "size", "name", "timestamp"):
        ut.add_column(col)
    for u in d["unloaded_modules"]:
        ut.add_row(u["base"], f"{u['size']:#x}", Text(clean(u["name"], 80)), u["timestamp"])
    c.print(ut)


def render_info(t: Target) -> None:
    d = info_dict(t)
    c = Console(highlight=False, soft_wrap=False, width=max(120, Console().width))
    c.print(Text(f"{clean(d['dump']['path'])}: {d['dump']['size']:,} bytes, written {d['dump']['time']}", style="bold"))
    _print_system(c, d)
    _print_process(c, d["process"])
    _print_exception(c, d)
    tt = Table(title="Threads", title_justify="left", box=None, header_style="bold")
    for col in ("tid", "name", "rip", "rsp", "stack", "bytes", "ctx", "teb"):
        tt.add_column(col)
    for th in d["threads"]:
        tt.add_row(
            str(th["tid"]),
            Text(clean(th["name"] or "", 60)),
            th["rip"] or "",
            th["rsp"] or "",
            f"{th['stack'][0]}-{th['stack'][1]}",
            f"{th['stack_bytes']:,}",
            str(th["context_bytes"] or ""),
            th["teb"],
        )
    c.print(tt)
    _print_modules(c, d)
    streams = ", ".join(f"{clean(x['name'])}{'' if x['known'] else ' (skipped)'}" for x in d["dump"]["streams"])
    c.print(Text(f"Streams  {streams}"))
    c.print(
        Text(f"Memory   {d['dump']['memory_ranges']:,} captured ranges, {d['memory_regions']:,} memory-info regions")
    )
    if d["soft_errors"]:
        c.print(Text("Problems met while reading (the rest stands):", style="bold"))
        for e in d["soft_errors"]:
            c.print(Text(f"  - {clean(e, 1000)}"))
