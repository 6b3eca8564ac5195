"""DML (WinDbg's Debugger Markup Language) rendering of a Report, for `!tfstack`: the
text report with links that switch to a thread (`~~[TID]s`) or a frame (`.frame N`, after
`.ecxr` on the crashing thread).
Dump-derived text is escaped for DML."""

from __future__ import annotations

import html
import re
from typing import List, Sequence

from dumpkit.analysis.recursion import call_order
from dumpkit.words import plural
from dumpkit.report.escape import clean
from dumpkit.report.text import (
    budget_line,
    collapse,
    cycle_summary,
    entry_path,
    frame_name,
    kf_memory,
    pointer_digits,
    shown_cycles,
    shows_frame_sizes,
    stack_groups,
)


def dml_text(text: object, limit: int = 512) -> str:
    """Dump-derived text made safe for DML: one line, controls removed, &<>" escaped."""
    return clean(text, limit).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def plain_text(dml_line: str) -> str:
    """A DML line as plain text: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]*>", "", dml_line))


def link(cmd: str, label: str) -> str:
    return f'<link cmd="{dml_text(cmd, 1000)}">{dml_text(label)}</link>'


def thread_link(tid: int) -> str:
    return link(f"~~[0x{tid:x}]s", f"{tid} (0x{tid:x})")


def frame_link(tid: int, index: int, crashing: bool = False) -> str:
    """`.frame N` on the thread, in the register context dumpkit numbered the frames from.

    Switching threads puts WinDbg in the thread list's context, but the crashing thread's
    frames are walked (and numbered) from the exception record's context, so its links
    add `.ecxr` first; other threads are walked from the thread-list context itself."""
    label = f"{index:02x}" if index < 256 else f"{index:x}"
    context = "; .ecxr" if crashing else ""
    return link(f"~~[0x{tid:x}]s{context}; .frame 0x{index:x}", label)


def render_dml(report, rows: int = 40, show_threads: Sequence[int] = (), all_threads: bool = False) -> List[str]:
    out: List[str] = []
    v = report.verdict
    out.append(f"<b>dumpkit {dml_text(report.dumpkit_version)}</b>: {dml_text(report.dump.path)}")
    out.append(f"<b>VERDICT</b>  <b>{dml_text(v.headline, 2000)}</b>")
    out.append(f"confidence: {dml_text(v.confidence)}")
    if v.evidence:
        out.append("<b>Evidence</b>")
        out.extend(f"  - {dml_text(e, 2000)}" for e in v.evidence)
    if v.next_steps:
        out.append("<b>Next steps</b>")
        out.extend(f"  {i}. {dml_text(s, 2000)}" for i, s in enumerate(v.next_steps, 1))
    out.append("")

    c = report.crash
    if c is not None:
        line = f"{c.code:#010x} {c.code_name}"
        if c.fastfail_code is not None:
            line += f" / {c.fastfail_name} ({c.fastfail_code})"
        out.append(f"<b>Crash</b>      {dml_text(line)} on thread {thread_link(c.thread_id)} at {c.address:#x}")
        out.append(f"           {dml_text(c.summary, 1000)}")
        if c.raised_by:
            out.append(f"           raised by {dml_text(c.raised_by)}")
    s = report.system
    if s is not None:
        os_line = f"{s.arch}, Windows {s.os_version}" + (f" ({s.os_build})" if s.os_build else "")
        if s.wine:
            os_line += f", under {s.wine}"
        out.append(f"<b>System</b>     {dml_text(os_line)}")
        out.append(f"<b>CPU</b>        {dml_text(s.cpu)}, {plural(s.processors, 'processor')}")
    out.append("")

    crash = next((t for t in report.threads if t.is_crashing), None)
    for t, cyc in shown_cycles(report):
        out.append(f"<b>Recursion on thread</b> {thread_link(t.tid)}")
        out.append(f"  {cycle_summary(cyc)}")
        for fn in call_order(cyc):
            out.append(f"    {dml_text(fn)}")
        path, more = entry_path(cyc)
        if path:
            out.append(
                "  entered from: " + dml_text(" <- ".join(path), 1000) + (f" &lt;- ... ({more} more)" if more else "")
            )
    if shows_frame_sizes(report):
        out.append("<b>Largest frames (crashing thread)</b>")
        out.append(f"  {'#':>6}  {'frame':>10}  {'prologue asks':>13}  function / how")
        for fs in report.frame_sizes[:8]:
            how = fs.prologue_text or ""
            if fs.not_yet_allocated:
                how += " (died in the probe before the frame existed)"
            idx = frame_link(crash.tid, fs.frame_index, crashing=True) if crash is not None else str(fs.frame_index)
            pad = " " * max(0, 6 - len(f"{fs.frame_index:02x}" if fs.frame_index < 256 else f"{fs.frame_index:x}"))
            asks = f"{fs.requested:,}" if fs.requested is not None else ""
            out.append(
                f"  {pad}{idx}  {fs.size:>10,}  {asks:>13}  {dml_text(fs.function)}"
                + (f"  {dml_text(how)}" if how else "")
            )
    if crash is not None and crash.budget is not None:
        out.append(f"<b>Stack</b>      {dml_text(budget_line(crash.budget), 1000)}")
    out.append("")
    digits = pointer_digits(report)

    def stack(t, title: str) -> None:
        trust = ", ".join(f"{k} {n}" for k, n in sorted(t.trust_counts.items()))
        name = f' "{dml_text(t.name, 80)}"' if t.name else ""
        out.append(
            f"<b>{title}</b> {thread_link(t.tid)}{name}  {plural(t.frame_count, 'frame')} ({dml_text(trust)}); "
            f"walk ended: {dml_text(t.stop_reason)}"
        )
        out.append(
            f"  {'#':>4}  {'Memory':>8}  {'Child-SP':>{digits}}  {'RetAddr/IP':>{digits}}  Call site  (found by)"
        )
        shown = 0
        rows_ = collapse(t.frames, t.cycles)
        for r, above in zip(rows_, kf_memory(rows_, t.frames)):
            if shown >= rows:
                out.append(f"  ... more frames: `!tfstack --thread 0x{t.tid:x} --rows N` or `k` ...")
                break
            if isinstance(r, str):
                out.append(f"        {dml_text(r, 1000)}")
                continue
            label = f"{r.index:02x}" if r.index < 256 else f"{r.index:x}"
            pad = " " * max(0, 4 - len(label))
            size = f"{above:x}" if above is not None else ""  # kf's Memory: frame N-1's size
            out.append(
                f"  {pad}{frame_link(t.tid, r.index, t.is_crashing)}  {size:>8}  {r.sp:0{digits}x}  {r.ip:0{digits}x}  "
                f"{dml_text(frame_name(r))}  ({dml_text(r.trust)})"
            )
            shown += 1
        out.append("")

    if crash is not None:
        stack(crash, "Crashing thread")
    wanted = set(show_threads)
    for t in report.threads:
        if t.is_crashing:
            continue
        if all_threads or t.tid in wanted:
            stack(t, "Thread")
    groups = stack_groups([t for t in report.threads if not (all_threads or t.tid in wanted)])
    if groups:
        out.append("<b>Other threads</b>")
        for t, same in groups:
            top = frame_name(t.frames[0]) if t.frames else "(no frames)"
            group = (
                f" (+{len(same)} with the same stack: " + ", ".join(thread_link(x.tid) for x in same) + ")"
                if same
                else ""
            )
            name = f' "{dml_text(t.name, 80)}"' if t.name else ""
            out.append(f"  {thread_link(t.tid)}{name}: {plural(t.frame_count, 'frame')}, top {dml_text(top)}{group}")
    if report.soft_errors:
        out.append("")
        out.append("<b>Problems met while reading (the rest of the report stands)</b>")
        out.extend(f"  - {dml_text(e, 2000)}" for e in report.soft_errors)
    return out
