"""!tfstack: dumpkit inside WinDbg, on the dump or live process the debugger has open.

Run by pykd:  !py C:\\path\\to\\windbg_scripts\\tfstack.py [--thread TID] [--all] [--json]
              [--max-frames N] [--rows N] [--image-path DIR]... [--symbol-path SPEC]...
(or `!tfstack ...` once tfstack.js is loaded with `.scriptload`).

It builds a `dumpkit.sources.pykd.PykdTarget` over the session, runs the same engine as
`dumpkit analyze` (`dumpkit.engine.analyze`) and prints the verdict, the recursion cycle,
oversized frames, the stack budget and the crashing stack, with DML links that switch to
a thread (`~~[TID]s`) or a frame (`.frame N`). `--json` prints exactly what
`dumpkit analyze --format json` prints for the same Report. Errors are one line.
"""
from __future__ import annotations

import argparse
import html
import os
import re
import sys
from typing import List, Optional, Sequence

try:
    import dumpkit  # noqa: F401
except ImportError:  # a source checkout: windbg_scripts/ sits next to dumpkit/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROG = "!tfstack"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports through exceptions and the debugger, never sys.exit."""

    def error(self, message):  # type: ignore[override]
        raise UsageError(message)

    def exit(self, status=0, message=None):  # type: ignore[override]
        if message:
            raise UsageError(message.strip())
        raise _Done()

    def _print_message(self, message, file=None):  # --help
        if message:
            for line in message.rstrip("\n").splitlines():
                _emit(line, dml=False)


class _Done(Exception):
    pass


def _tid(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a thread id: {text!r} (decimal, or hex with 0x)")


def _positive(text: str) -> int:
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}")
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, add_help=True,
                description="What killed this process: verdict, recursion, frame sizes, stack budget, stacks.")
    p.add_argument("--thread", "-t", type=_tid, metavar="TID",
                   help="also show this thread's stack (OS thread id: decimal, or hex with 0x)")
    p.add_argument("--all", action="store_true", help="show every thread's stack")
    p.add_argument("--json", action="store_true",
                   help="print the JSON report (same as `dumpkit analyze --format json`)")
    p.add_argument("--max-frames", type=_positive, default=2_000_000, metavar="N",
                   help="most frames walked on the crashing thread (default 2,000,000)")
    p.add_argument("--rows", type=_positive, default=40, metavar="N",
                   help="frames shown per stack (default 40; recursion is folded)")
    p.add_argument("--plain", action="store_true",
                   help="plain text instead of DML (tfstack.js uses this: captured output has no links)")
    p.add_argument("--image-path", "-i", action="append", default=[], metavar="DIR",
                   help="folder searched for module images (exe/dll/pyd); repeatable")
    p.add_argument("--symbol-path", action="append", default=[], metavar="SPEC",
                   help="symbol store folder or srv*cache*url string; the debugger's "
                        ".sympath and _NT_SYMBOL_PATH are used too")
    return p


# ----------------------------------------------------------------------------- output
_pykd = None


def _emit(line: str, dml: bool = True) -> None:
    if _pykd is not None:
        _pykd.dprintln(line, dml)
    else:
        sys.stdout.write(line + "\n")


def dml_text(text: object, limit: int = 512) -> str:
    """Dump-derived text made safe for DML: one line, controls removed, &<>" escaped."""
    from dumpkit.report.escape import clean

    return (clean(text, limit).replace("&", "&amp;").replace("<", "&lt;")
            .replace(">", "&gt;").replace('"', "&quot;"))


def plain_text(dml_line: str) -> str:
    """A DML line as plain text: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]*>", "", dml_line))


def link(cmd: str, label: str) -> str:
    return f'<link cmd="{dml_text(cmd, 1000)}">{dml_text(label)}</link>'


def thread_link(tid: int) -> str:
    return link(f"~~[0x{tid:x}]s", f"{tid} (0x{tid:x})")


def frame_link(tid: int, index: int) -> str:
    # Switch to the thread first: `.frame` applies to the current thread.
    label = f"{index:02x}" if index < 256 else f"{index:x}"
    return link(f"~~[0x{tid:x}]s; .frame 0x{index:x}", label)


# ----------------------------------------------------------------------------- report
def render_dml(report, rows: int = 40, show_threads: Sequence[int] = (), all_threads: bool = False) -> List[str]:
    from dumpkit.analysis.verdict import human_bytes
    from dumpkit.report.text import collapse, frame_name

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
        out.append(f"<b>Crash</b>      {dml_text(line)} on thread {thread_link(c.thread_id)} "
                   f"at {c.address:#x}")
        out.append(f"           {dml_text(c.summary, 1000)}")
        if c.raised_by:
            out.append(f"           raised by {dml_text(c.raised_by)}")
    s = report.system
    if s is not None:
        os_line = f"{s.arch}, Windows {s.os_version}" + (f" ({s.os_build})" if s.os_build else "")
        out.append(f"<b>System</b>     {dml_text(os_line)}")
        out.append(f"<b>CPU</b>        {dml_text(s.cpu)}, {s.processors} processors")
    out.append("")

    crash = next((t for t in report.threads if t.is_crashing), None)
    for t in report.threads:
        for cyc in t.cycles[:3]:
            if not t.is_crashing and cyc.repetitions < 10:
                continue
            out.append(f"<b>Recursion on thread</b> {thread_link(t.tid)}")
            share = f" ({cyc.stack_share:.0%} of the used stack)" if cyc.stack_share is not None else ""
            out.append(f"  cycle of {cyc.period} function(s), {cyc.repetitions:,} repetitions x "
                       f"{cyc.bytes_per_repetition:,} bytes = {human_bytes(cyc.total_bytes)}{share}, "
                       f"frames {cyc.first_frame}-{cyc.last_frame}")
            for fn in cyc.functions:
                out.append(f"    {dml_text(fn)}")
            if cyc.entry_path:
                out.append("  entered from: " + dml_text(" <- ".join(cyc.entry_path[:6]), 1000))
    if report.frame_sizes:
        out.append("<b>Largest frames (crashing thread)</b>")
        out.append(f"  {'#':>6}  {'frame':>10}  {'prologue asks':>13}  function / how")
        for fs in report.frame_sizes[:8]:
            how = fs.prologue_text or ""
            if fs.not_yet_allocated:
                how += " (died in the probe before the frame existed)"
            idx = frame_link(crash.tid, fs.frame_index) if crash is not None else str(fs.frame_index)
            pad = " " * max(0, 6 - len(f"{fs.frame_index:02x}" if fs.frame_index < 256 else f"{fs.frame_index:x}"))
            asks = f"{fs.requested:,}" if fs.requested is not None else ""
            out.append(f"  {pad}{idx}  {fs.size:>10,}  {asks:>13}  {dml_text(fs.function)}"
                       + (f"  {dml_text(how)}" if how else ""))
    if crash is not None and crash.budget is not None:
        b = crash.budget
        frac = b.used_fraction
        out.append(f"<b>Stack</b>      used {human_bytes(b.used)} of {human_bytes(b.reserve_size)}"
                   + (f" ({frac:.0%})" if frac is not None else "") + f", from {dml_text(b.source)}"
                   + (", fault in the guard region" if b.guard_hit else ""))
    out.append("")

    def stack(t, title: str) -> None:
        trust = ", ".join(f"{k} {n}" for k, n in sorted(t.trust_counts.items()))
        name = f' "{dml_text(t.name, 80)}"' if t.name else ""
        out.append(f"<b>{title}</b> {thread_link(t.tid)}{name}  {t.frame_count:,} frames ({dml_text(trust)}); "
                   f"walk ended: {dml_text(t.stop_reason)}")
        out.append(f"  {'#':>4}  {'Memory':>8}  {'Child-SP':>16}  {'RetAddr/IP':>16}  Call site  (found by)")
        shown = 0
        last = -1
        for r in collapse(t.frames, t.cycles):
            if shown >= rows:
                out.append(f"  ... more frames: `!tfstack --thread 0x{t.tid:x} --rows N` or `k` ...")
                break
            if isinstance(r, str):
                out.append(f"        {dml_text(r, 1000)}")
                continue
            if t.elided_frames and last >= 0 and r.index != last + 1:
                out.append(f"        ... {r.index - last - 1:,} frames not kept in the report ...")
            last = r.index
            label = f"{r.index:02x}" if r.index < 256 else f"{r.index:x}"
            pad = " " * max(0, 4 - len(label))
            size = f"{r.size:x}" if r.size is not None else ""
            out.append(f"  {pad}{frame_link(t.tid, r.index)}  {size:>8}  {r.sp:016x}  {r.ip:016x}  "
                       f"{dml_text(frame_name(r))}  ({dml_text(r.trust)})")
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
    others = [t for t in report.threads if not t.is_crashing and not (all_threads or t.tid in wanted)]
    if others:
        out.append("<b>Other threads</b>")
        seen = set()
        for t in others:
            if t.tid in seen:
                continue
            seen.update(t.same_stack_as)
            top = frame_name(t.frames[0]) if t.frames else "(no frames)"
            group = (f" (+{len(t.same_stack_as)} with the same stack: "
                     + ", ".join(thread_link(x) for x in t.same_stack_as) + ")") if t.same_stack_as else ""
            name = f' "{dml_text(t.name, 80)}"' if t.name else ""
            out.append(f"  {thread_link(t.tid)}{name}: {t.frame_count} frames, top {dml_text(top)}{group}")
    if report.soft_errors:
        out.append("")
        out.append("<b>Problems met while reading (the rest of the report stands)</b>")
        out.extend(f"  - {dml_text(e, 2000)}" for e in report.soft_errors)
    return out


# ----------------------------------------------------------------------------- main
def _symbol_paths(explicit: Sequence[str]) -> List[str]:
    paths = list(explicit)
    for extra in (os.environ.get("_NT_SYMBOL_PATH"), _debugger_sympath()):
        if extra and extra not in paths:
            paths.append(extra)
    return paths


def _debugger_sympath() -> Optional[str]:
    try:
        return str(_pykd.getSymbolPath() or "") or None
    except Exception:  # noqa: BLE001 - an optional extra; never fatal
        return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    global _pykd
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        import pykd  # noqa: PLC0415
    except ImportError:
        _pykd = None
        sys.stderr.write("tfstack: error: pykd is not available; run this inside WinDbg "
                         "with `.load pykd` and `!py tfstack.py`\n")
        return 2
    _pykd = pykd
    try:
        args = build_parser().parse_args(argv)
    except _Done:
        return 0
    except UsageError as e:
        _emit(f"tfstack: error: {e} (try {PROG} --help)", dml=False)
        return 2
    try:
        from dumpkit.engine import Options, analyze
        from dumpkit.sources.pykd import PykdTarget

        target = PykdTarget(pykd)
        if args.thread is not None and all(t.tid != args.thread for t in target.threads):
            ids = ", ".join(f"{t.tid} (0x{t.tid:x})" for t in target.threads)
            _emit(f"tfstack: error: no thread {args.thread} (0x{args.thread:x}); threads: {ids}", dml=False)
            return 2
        opts = Options(image_paths=tuple(args.image_path), symbol_paths=_symbol_paths(args.symbol_path),
                       max_frames=args.max_frames)
        report = analyze(target, opts).report
        if args.json:
            from dumpkit.report.json_report import render_json
            _emit(render_json(report), dml=False)
        else:
            shown = [args.thread] if args.thread is not None else []
            for line in render_dml(report, rows=args.rows, show_threads=shown, all_threads=args.all):
                if args.plain:
                    _emit(plain_text(line), dml=False)
                else:
                    _emit(line, dml=True)
        return 1 if report.soft_errors else 0
    except KeyboardInterrupt:
        _emit("tfstack: interrupted", dml=False)
        return 130
    except Exception as e:  # noqa: BLE001 - one line in the debugger, never a traceback
        text = " ".join(str(e).split()) or type(e).__name__
        _emit(f"tfstack: error: {type(e).__name__}: {text[:500]}", dml=False)
        return 1


if __name__ == "__main__":
    main()
