"""`dumpkit info`: what a dump holds, straight from the Target (no walking, no analysis)."""
from __future__ import annotations

import datetime
from typing import Any, Dict

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dumpkit.analysis.codes import decode_exception
from dumpkit.report.escape import clean
from dumpkit.target import Target, significant_exception


def _time(stamp) -> Any:
    if not stamp:
        return None
    try:
        return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


EXCEPTION_STREAM = 6


def _why_no_exception(t: Target) -> str:
    """An Exception stream that is listed but damaged must not read as 'no crash'."""
    if not t.dump.has_stream(EXCEPTION_STREAM):
        return "none (the dump has no Exception stream: it was not written for a crash)"
    why = t.dump.stream_problem(EXCEPTION_STREAM)
    return "unreadable: the dump lists an Exception stream, but it could not be read" + (f": {why}" if why else "")


def info_dict(t: Target) -> Dict[str, Any]:
    s = t.system
    ex = t.exception
    return {
        "dump": {"path": t.dump.path, "size": t.dump.file_size, "time": _time(t.dump.timestamp),
                 "flags": f"{t.dump.flags:#x}",
                 "streams": [{"type": f"{e.type:#x}", "name": e.name, "size": e.size, "known": e.known,
                              "problem": t.dump.stream_problem(e.type)} for e in t.dump.streams if e.type],
                 "memory_ranges": getattr(t, "memory_range_count", None)},
        "system": None if s is None else {
            "arch": s.arch_name, "os": f"{s.os_major}.{s.os_minor}.{s.os_build}", "csd": s.csd_version,
            "build_string": getattr(t, "build_string", None), "product_type": s.product_type,
            "processors": s.number_of_processors, "cpu_vendor": s.cpu_vendor,
            "cpu": s.cpu_description,
            "cpu_family": s.cpu_family if s.cpu_signature_known else None,
            "cpu_model": s.cpu_model if s.cpu_signature_known else None,
            "cpu_stepping": s.cpu_stepping if s.cpu_signature_known else None,
            "cpu_level": s.processor_level, "cpu_revision": s.processor_revision,
            "cpuid_version": f"{s.cpuid_version:#x}", "cpuid_features_edx": f"{s.cpuid_features:#x}",
            "processor_features": [f"{x:#x}" for x in s.processor_features],
            "xstate_enabled_features": getattr(t, "xstate_enabled_features", None),
            "wine": s.wine_version},
        "process": None if t.process is None else {
            "pid": t.process.pid, "create_time": _time(t.process.create_time),
            "user_seconds": t.process.user_time, "kernel_seconds": t.process.kernel_time},
        "exception": None if ex is None else {
            "code": f"{ex.code:#010x}", "name": decode_exception(ex.code, ex.parameters).code_info.name,
            "headline": decode_exception(ex.code, significant_exception(ex, s)[1]).headline,
            "flags": f"{ex.flags:#x}", "address": f"{ex.address:#x}",
            "parameters": [f"{p:#x}" for p in ex.parameters], "thread_id": ex.thread_id,
            "context": None if ex.context is None else {k: f"{v:#x}" for k, v in ex.context.values.items()}},
        "exception_absent": None if ex is not None else _why_no_exception(t),
        "threads": [{"tid": th.tid, "name": th.name, "teb": f"{th.teb:#x}",
                     "stack": [f"{th.stack_start:#x}", f"{th.stack_end:#x}"], "stack_bytes": th.stack_size,
                     "context_bytes": th.context.context_size if th.context else None,
                     "rip": f"{th.context.ip:#x}" if th.context else None,
                     "rsp": f"{th.context.sp:#x}" if th.context else None} for th in t.threads],
        "modules": [{"name": m.name, "path": m.path, "base": f"{m.base:#x}", "size": m.size,
                     "timestamp": f"{m.timestamp:#x}", "checksum": f"{m.checksum:#x}",
                     "file_version": m.file_version, "product_version": m.product_version,
                     "pdb": m.cv_record.pdb_name if m.cv_record else None,
                     "pdb_id": m.cv_record.symbol_id if m.cv_record else None} for m in t.modules],
        "unloaded_modules": [{"name": u.name, "base": f"{u.base:#x}", "size": u.size} for u in t.unloaded_modules],
        "memory_regions": len(t.memory_regions),
        "function_table_entries": len(t.function_table_entries()),
        "soft_errors": list(t.soft_errors.items),
    }


def render_info(t: Target) -> None:
    d = info_dict(t)
    c = Console(highlight=False, soft_wrap=False, width=max(120, Console().width))
    c.print(Text(f"{clean(d['dump']['path'])}: {d['dump']['size']:,} bytes, written {d['dump']['time']}", style="bold"))
    s = d["system"]
    if s:
        c.print(Text(f"System   {s['arch']} Windows {s['os']} {clean(s['csd'] or '')} {clean(s['build_string'] or '')}"
                     + (f" under {clean(s['wine'])}" if s["wine"] else "")))
        c.print(Text(f"CPU      {clean(s['cpu'])}, {s['processors']} processors"))
    p = d["process"]
    if p:
        c.print(Text(f"Process  pid {p['pid']}, started {p['create_time']}"))
    e = d["exception"]
    if e:
        c.print(Text(f"Exception {e['code']} {e['name']} on thread {e['thread_id']} at {e['address']}, parameters [{', '.join(e['parameters'])}]"))
        c.print(Text(f"          {clean(e['headline'], 1000)}", style="dim"))
    else:
        c.print(Text(f"Exception {clean(d['exception_absent'], 1000)}"))
    tt = Table(title="Threads", title_justify="left", box=None, header_style="bold")
    for col in ("tid", "name", "rip", "rsp", "stack", "bytes", "ctx", "teb"):
        tt.add_column(col)
    for th in d["threads"]:
        tt.add_row(str(th["tid"]), Text(clean(th["name"] or "", 60)), th["rip"] or "", th["rsp"] or "",
                   f"{th['stack'][0]}-{th['stack'][1]}", f"{th['stack_bytes']:,}", str(th["context_bytes"] or ""), th["teb"])
    c.print(tt)
    mt = Table(title="Modules", title_justify="left", box=None, header_style="bold")
    for col in ("base", "size", "name", "version", "timestamp", "path"):
        mt.add_column(col)
    for m in d["modules"]:
        mt.add_row(m["base"], f"{m['size']:#x}", Text(clean(m["name"], 80)), clean(m["file_version"] or ""),
                   m["timestamp"], Text(clean(m["path"], 160)))
    c.print(mt)
    streams = ", ".join(f"{clean(x['name'])}{'' if x['known'] else ' (skipped)'}" for x in d["dump"]["streams"])
    c.print(Text(f"Streams  {streams}"))
    c.print(Text(f"Memory   {d['dump']['memory_ranges']:,} captured ranges, {d['memory_regions']:,} memory-info regions"))
    if d["soft_errors"]:
        c.print(Text("Problems met while reading (the rest stands):", style="bold"))
        for e in d["soft_errors"]:
            c.print(Text(f"  - {clean(e, 1000)}"))
