"""The terminal view (rich). Every dump-derived string goes through escape.clean and into
rich Text objects, never into markup, so a hostile module name cannot style or inject."""

from __future__ import annotations

import io
import shlex
from typing import Iterable, List, Optional, Sequence, Tuple

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dumpkit.analysis.model import Cycle, FrameRecord, Report, StackBudget, Stacks, ThreadReport
from dumpkit.analysis.recursion import call_order, outside_entry_path
from dumpkit.words import human_bytes, plural
from dumpkit.report.escape import clean


def pointer_digits(report: Report) -> int:
    """Hex digits of a pointer, as debuggers print them: 8 on 32-bit dumps, else 16."""
    return 8 if report.system is not None and report.system.arch == "x86" else 16


STACK_VERDICTS = ("recursion", "oversized_frame", "stack_overflow")


def shows_frame_sizes(report: Report) -> bool:
    """Frame sizes explain stack overflows; elsewhere they matter only when one is oversized."""
    return bool(report.frame_sizes) and (
        report.verdict.kind in STACK_VERDICTS or any(fs.oversized for fs in report.frame_sizes)
    )


def oversized_legend(report: Report) -> Optional[str]:
    """What the `oversized` mark on a frame means, or None when no frame carries it."""
    if not any(fs.oversized for fs in report.frame_sizes):
        return None
    threshold = report.oversized_threshold
    limit = f"{human_bytes(threshold)} (--threshold)" if threshold else "the --threshold (default 64 KiB)"
    return f"oversized: the frame, or what its prologue asks for, is at least {limit}"


def frame_name(f: FrameRecord) -> str:
    if f.symbol:
        return f.symbol
    if f.module is not None and f.rva is not None:
        return f"{f.module}+{f.rva:#x}"
    return f"{f.ip:#x}"


LABEL_WIDTH = 15  # "CUDA runtime", "NVIDIA driver", "CPU features" fit whole


def _label(name: str) -> Text:
    return Text(name.ljust(LABEL_WIDTH), style="bold")


def collapse(frames: Sequence[FrameRecord], cycles: Sequence[Cycle], show_repeats: int = 1):
    """The rows every renderer shows for a stack: frames, with each cycle's repetitions
    beyond the first `show_repeats` folded into one marker string, and a marker where
    the report did not keep frames (long stacks keep their head and tail)."""
    spans = sorted(((c.first_frame, c.last_frame, c) for c in cycles), key=lambda s: s[0])
    out: List[object] = []
    skip_until = -1
    prev = None  # index of the last frame shown or folded
    for f in frames:
        if f.index <= skip_until:
            continue
        if prev is not None and f.index > prev + 1:
            out.append(f"... {plural(f.index - prev - 1, 'frame')} not kept in the report ...")
        span = next((s for s in spans if s[0] <= f.index <= s[1]), None)
        if span is not None:
            first, last, c = span
            keep_to = first + c.period * show_repeats - 1
            if f.index > keep_to:
                out.append(
                    f"... {plural(last - keep_to, 'more frame')}: the cycle above repeats "
                    f"{plural(c.repetitions - show_repeats, 'more time')} "
                    f"({human_bytes(c.total_bytes)} in all) ..."
                )
                skip_until = prev = last
                continue
        out.append(f)
        prev = f.index
    return out


MAX_CYCLES_SHOWN = 3  # per thread
MIN_OTHER_THREAD_REPETITIONS = 10  # shorter repeats on healthy threads are ordinary code
ENTRY_PATH_SHOWN = 6


def shown_cycles(report: Report) -> List[Tuple[ThreadReport, Cycle]]:
    """The recursions every renderer lists, crashing thread first."""
    return [
        (t, c)
        for t in report.threads
        for c in t.cycles[:MAX_CYCLES_SHOWN]
        if t.is_crashing or c.repetitions >= MIN_OTHER_THREAD_REPETITIONS
    ]


def cycle_summary(c: Cycle) -> str:
    """Numbers only (no dump strings): safe in any format as is."""
    share = f" ({c.stack_share:.0%} of the used stack)" if c.stack_share is not None else ""
    return (
        f"cycle of {plural(c.period, 'function')} in call order, {plural(c.repetitions, 'repetition')} x "
        f"{c.bytes_per_repetition:,} bytes = {human_bytes(c.total_bytes)}{share}, "
        f"frames {c.first_frame}-{c.last_frame}"
    )


def entry_path(c: Cycle) -> Tuple[Tuple[str, ...], int]:
    """The functions below the cycle (innermost first) as shown, and how many more there are."""
    path = outside_entry_path(c)
    return path[:ENTRY_PATH_SHOWN], max(0, len(path) - ENTRY_PATH_SHOWN)


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


def stack_groups(threads: Sequence[ThreadReport]) -> List[Tuple[ThreadReport, Tuple[ThreadReport, ...]]]:
    """The threads other than the crashing one, those with identical stacks folded into
    one entry (like `!uniqstack`): (the first such thread, the others with its stack)."""
    others = [t for t in threads if not t.is_crashing]
    by_tid = {t.tid: t for t in others}
    seen = set()
    groups = []
    for t in others:
        if t.tid in seen:
            continue
        same = tuple(by_tid[x] for x in sorted(t.same_stack_as) if x in by_tid and x not in seen and x != t.tid)
        seen.add(t.tid)
        seen.update(x.tid for x in same)
        groups.append((t, same))
    return groups


def kf_memory(rows: Sequence[object], frames: Sequence[FrameRecord]) -> List[Optional[int]]:
    """WinDbg's `kf` Memory column for each row: the distance from this frame's Child-SP
    to the one above it, i.e. the size of frame N-1 on row N (row 0 is blank). `rows` is
    `collapse()` output (marker strings get None); `frames` is sorted by index, and both
    are walked once, so a million-frame stack costs no lookup table."""
    out: List[Optional[int]] = []
    j = 0
    for r in rows:
        if isinstance(r, str) or r.index == 0:
            out.append(None)
            continue
        while j < len(frames) and frames[j].index < r.index - 1:
            j += 1
        above = frames[j] if j < len(frames) and frames[j].index == r.index - 1 else None
        out.append(above.size if above is not None else None)
    return out


def thread_table(
    t: ThreadReport,
    max_rows: Optional[int] = None,
    collapse_cycles: bool = True,
    hex_index: bool = True,
    digits: int = 16,
) -> Table:
    """`hex_index`: WinDbg's `kf` layout (`dumpkit stack`): frame numbers and Memory in
    hex, Memory on row N being frame N-1's size as kf shows it. Without it (the analyze
    report) both are decimal and each row shows its own frame's size, as the evidence,
    recursion and frame-size lines do (a frame of 304 bytes is not '130' in one table and
    '304' in the next)."""
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    table.add_column("#", justify="right")
    table.add_column("Memory", justify="right")
    table.add_column("Child-SP", justify="right")
    table.add_column("RetAddr/IP", justify="right")
    table.add_column("Call site")
    table.add_column("Found by")
    rows = collapse(t.frames, t.cycles) if collapse_cycles else list(t.frames)
    kf = kf_memory(rows, t.frames) if hex_index else None
    shown = 0
    for k, r in enumerate(rows):
        if max_rows is not None and shown >= max_rows:
            table.add_row("", "", "", "", Text("... (more frames: use `dumpkit stack`)", style="dim"), "")
            break
        if isinstance(r, str):
            table.add_row("", "", "", "", Text(r, style="yellow"), "")
            continue
        table.add_row(
            (f"{r.index:02x}" if r.index < 256 else f"{r.index:x}") if hex_index else str(r.index),
            _memory(kf[k] if kf is not None else r.size, hex_index),
            f"{r.sp:0{digits}x}",
            f"{r.ip:0{digits}x}",
            Text(clean(frame_name(r))),
            Text(r.trust, style="dim" if r.trust.startswith("scan") else ""),
        )
        shown += 1
    return table


def _memory(size: Optional[int], hex_digits: bool) -> str:
    return "" if size is None else (f"{size:x}" if hex_digits else f"{size:,}")


def _lines(console: Console, title: str, items: Iterable[str], numbered: bool = False) -> None:
    items = list(items)
    if not items:
        return
    console.print(Text(title, style="bold"))
    for i, it in enumerate(items, 1):
        console.print(Text(f"  {i}. " if numbered else "  - ") + Text(clean(it, 2000)))


def render_text(report: Report, color: bool = False, width: int = 120, max_frames: int = 40) -> str:
    buf = io.StringIO()
    console = Console(
        file=buf,
        force_terminal=color,
        color_system="standard" if color else None,
        width=width,
        highlight=False,
        soft_wrap=False,
    )
    v = report.verdict
    console.print(Text(f"dumpkit {report.dumpkit_version}: ", style="dim") + Text(clean(report.dump.path)))
    console.print()
    console.print(Text("VERDICT ", style="bold reverse") + Text(" ") + Text(clean(v.headline, 2000), style="bold"))
    console.print(Text(f"confidence: {v.confidence}", style="dim"))
    _lines(console, "Evidence", v.evidence)
    _lines(console, "Next steps", v.next_steps, numbered=True)
    console.print()

    c = report.crash
    if c is not None:
        line = f"{c.code:#010x} {c.code_name}"
        if c.fastfail_code is not None:
            line += f" / {c.fastfail_name} ({c.fastfail_code})"
        console.print(_label("Crash") + Text(f"{line} on thread {c.thread_id} at {c.address:#x}"))
        console.print(Text(" " * LABEL_WIDTH) + Text(clean(c.summary, 1000), style="dim"))
    s = report.system
    if s is not None:
        os_line = f"{clean(s.arch)}, Windows {clean(s.os_version)}" + (f" ({clean(s.os_build)})" if s.os_build else "")
        if s.wine:
            os_line += f", under {clean(s.wine)}"
        console.print(_label("System") + Text(os_line))
        console.print(_label("CPU") + Text(f"{clean(s.cpu)}, {plural(s.processors, 'processor')}"))
    env = report.environment
    env_bits = []
    if env.cpu_features:
        feats = ", ".join(f"{k} {'yes' if v else 'no' if v is not None else '?'}" for k, v in env.cpu_features.items())
        src = env.cpu_features_source
        env_bits.append(
            (
                "CPU features",
                feats + (f" ({src})" if src and src.startswith("unknown") else f" (from {src})" if src else ""),
            )
        )
    if env.python:
        env_bits.append(("Python", env.python))
    if env.tensorflow or env.tensorflow_version:
        env_bits.append(
            (
                "TensorFlow",
                (env.tensorflow_version or "version unknown")
                + (f" ({clean(env.tensorflow[0])})" if env.tensorflow else ""),
            )
        )
    for comp in env.cuda:
        env_bits.append((comp.name, f"{comp.version or '?'} ({clean(comp.module)})"))
    for label, val in env_bits:
        console.print(_label(clean(label, LABEL_WIDTH - 1)) + Text(clean(val, 1000)))
    for sentence in env.compatibility:
        console.print(Text(" " * LABEL_WIDTH) + Text(clean(sentence, 1000), style="dim"))
    for note in env.notes:
        console.print(Text(" " * LABEL_WIDTH) + Text("note: " + clean(note, 1000), style="dim"))
    console.print()

    crash_thread = next((t for t in report.threads if t.is_crashing), None)
    for t, cyc in shown_cycles(report):
        console.print(Text(f"Recursion on thread {t.tid}", style="bold"))
        console.print(Text(f"  {cycle_summary(cyc)}"))
        for fn in call_order(cyc):
            console.print(Text("    ") + Text(clean(fn)))
        path, more = entry_path(cyc)
        if path:
            console.print(
                Text("  entered from: ")
                + Text(clean(" <- ".join(path), 1000))
                + Text(f" <- ... ({more} more)" if more else "")
            )
    if shows_frame_sizes(report):
        console.print(Text("Largest frames (crashing thread)", style="bold"))
        legend = oversized_legend(report)
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("#", "function", "frame", "prologue asks") + (("",) if legend else ()) + ("how",):
            table.add_column(col, justify="right" if col in ("#", "frame", "prologue asks") else "left")
        for fs in report.frame_sizes[:8]:
            how = clean(fs.prologue_text or "")
            if fs.not_yet_allocated:
                how += " (died in the probe before the frame existed)"
            mark = (Text("oversized" if fs.oversized else "", style="bold red"),) if legend else ()
            table.add_row(
                str(fs.frame_index),
                Text(clean(fs.function)),
                f"{fs.size:,}",
                f"{fs.requested:,}" if fs.requested is not None else "",
                *mark,
                Text(how),
            )
        console.print(table)
        if legend:
            console.print(Text(f"  {legend}", style="dim"))
    if crash_thread is not None and crash_thread.budget is not None:
        console.print(_label("Stack") + Text(clean(budget_line(crash_thread.budget), 1000)))
    console.print()

    if crash_thread is not None:
        trust = ", ".join(f"{k} {v}" for k, v in sorted(crash_thread.trust_counts.items()))
        console.print(
            Text(f"Crashing thread {crash_thread.tid}", style="bold")
            + Text(
                f"  {plural(crash_thread.frame_count, 'frame')} ({trust}); "
                f"walk ended: {clean(crash_thread.stop_reason, 1000)}",
                style="dim",
            )
        )
        console.print(thread_table(crash_thread, max_rows=max_frames, hex_index=False, digits=pointer_digits(report)))
        console.print()
    groups = stack_groups(report.threads)
    if groups:
        console.print(Text("Other threads" if crash_thread is not None else "Threads", style="bold"))
        for t, same in groups:
            top = frame_name(t.frames[0]) if t.frames else "(no frames)"
            group = f" (+{len(same)} with the same stack: {', '.join(str(x.tid) for x in same)})" if same else ""
            name = f' "{clean(t.name, 80)}"' if t.name else ""
            console.print(Text(f"  {t.tid}{name}: {plural(t.frame_count, 'frame')}, top {clean(top)}{group}"))
        console.print(
            Text(f"  (every stack in full: dumpkit stack --all {clean(shlex.quote(report.dump.path))})", style="dim")
        )
    if report.soft_errors:
        console.print()
        _lines(console, "Problems met while reading (the rest of the report stands)", report.soft_errors)
    return buf.getvalue()


def render_stacks(doc: Stacks, console: Console) -> None:
    """`dumpkit stack`: each thread asked for, every frame, in WinDbg's `kf` layout, then
    where each module image came from."""
    digits = 8 if doc.system is not None and doc.system.arch == "x86" else 16  # as wide as the CPU's addresses
    for t in doc.threads:
        console.print(
            Text(f"Thread {t.tid}" + (f' "{clean(t.name, 80)}"' if t.name else ""), style="bold")
            + Text(f"  {plural(t.frame_count, 'frame')}; walk ended: {t.stop_reason}", style="dim")
        )
        console.print(thread_table(t, collapse_cycles=False, digits=digits))
        console.print()
    sources = [(m.name, m.image_source) for m in doc.modules if m.image_source is not None]
    if sources:
        console.print(Text("Module images", style="bold"))
        for name, src in sorted(sources):
            console.print(Text(f"  {clean(name)}: {clean(src)}"))
