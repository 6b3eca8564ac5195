"""DML (WinDbg's Debugger Markup Language) rendering of a Report, for `!tfstack`: the
text report with links that switch to a thread (`~~[TID]s`) or a frame (`.frame N`, after
`.ecxr` on the crashing thread). What is shown comes from report.view (in WinDbg's `kf`
layout); dump-derived text is escaped for DML. A frame link names the debugger's number
for the frame when the caller gives a FrameNumbers (dbgeng numbers its own walk)."""

from __future__ import annotations

import html
import re
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from dumpkit.analysis.model import Report
from dumpkit.report.escape import clean
from dumpkit.report.view import (
    HEADERS,
    KF,
    THREAD,
    WORDS,
    CodeView,
    Fact,
    Fold,
    Line,
    Span,
    ThreadView,
    kf_number,
    report_view,
)


def dml_text(text: object, limit: int = 512) -> str:
    """Dump-derived text made safe for DML: one line, controls removed, &<>" escaped."""
    return clean(text, limit).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def plain_text(dml_line: str) -> str:
    """A DML line as plain text: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]*>", "", dml_line))


def link(cmd: str, label: str) -> str:
    return f'<link cmd="{dml_text(cmd, 1000)}">{dml_text(label)}</link>'


class Markup:
    """How the report's lines are marked up: DML (`dml`: bold, links, escaped text) or the
    same lines as plain text (`!tfstack --plain`, for output that is captured, where a
    link cannot be followed): what the DML shows with its tags dropped and its entities
    decoded, written directly rather than stripped from the DML."""

    def __init__(self, dml: bool = True):
        self.dml = dml
        self.arrow = "=&gt;" if dml else "=>"
        self.from_ = " &lt;- " if dml else " <- "

    def text(self, text: object, limit: int = 512) -> str:
        return dml_text(text, limit) if self.dml else clean(text, limit)

    def bold(self, markup: str) -> str:
        return f"<b>{markup}</b>" if self.dml else markup

    def link(self, cmd: str, label: str) -> str:
        return link(cmd, label) if self.dml else clean(label)

    def thread(self, tid: int) -> str:
        return self.link(f"~~[0x{tid:x}]s", f"{tid} (0x{tid:x})")

    def frame(self, tid: int, index: int, crashing: bool = False, number: Optional[int] = None) -> str:
        return frame_link(tid, index, crashing, number, self)


DML = Markup()


def thread_link(tid: int) -> str:
    return DML.thread(tid)


def frame_link(tid: int, index: int, crashing: bool = False, number: Optional[int] = None, markup: Markup = DML) -> str:
    """`.frame N` on the thread, in the register context dumpkit numbered the frames from,
    labelled with dumpkit's frame number `index`; N is `number` (the debugger's number for
    the same frame) when given, else `index`.

    Switching threads puts WinDbg in the thread list's context, but the crashing thread's
    frames are walked (and numbered) from the exception record's context, so its links
    add `.ecxr` first; other threads are walked from the thread-list context itself."""
    context = "; .ecxr" if crashing else ""
    n = index if number is None else number
    return markup.link(f"~~[0x{tid:x}]s{context}; .frame 0x{n:x}", kf_number(index))


# (thread id, walked from the exception context) -> {dumpkit's frame index: the number
# `.frame` takes for that frame}, or None to link dumpkit's own numbers. A frame missing
# from the map is shown unlinked: a link must show the frame it names or nothing.
FrameNumbers = Callable[[int, bool], Optional[Mapping[int, int]]]


class _FrameRefs:
    """Frame numbers as links, each thread's map asked for once, when its first frame is
    shown (asking may walk the thread in the debugger)."""

    def __init__(self, numbers: Optional[FrameNumbers], m: Markup = DML):
        self._numbers = numbers
        self._m = m
        self._maps: Dict[Tuple[int, bool], Optional[Mapping[int, int]]] = {}

    def __call__(self, tid: int, index: int, crashing: bool) -> str:
        key = (tid, crashing)
        if key not in self._maps:
            self._maps[key] = self._numbers(tid, crashing) if self._numbers is not None else None
        numbers = self._maps[key]
        if numbers is None:
            return self._m.frame(tid, index, crashing)
        number = numbers.get(index)
        return self._m.text(kf_number(index)) if number is None else self._m.frame(tid, index, crashing, number)


def _span(s: Span, m: Markup) -> str:
    if s.kind == WORDS:
        return s.text
    return m.thread(int(s.text)) if s.kind == THREAD else m.text(s.text, s.limit)


def inline(line: Line, m: Markup = DML) -> str:
    """A view line as DML: thread ids become links, values are escaped."""
    return "".join(_span(s, m) for s in line)


LABEL_WIDTH = 11


def _code(c: CodeView, m: Markup) -> List[str]:
    """The instructions around the faulting IP, `=>` at the IP, each address a `u` link."""
    out = [f"{m.bold('Faulting code')} in {m.text(c.where)}"]
    width = max((len(r.bytes) for r in c.rows), default=0)
    for r in c.rows:
        mark = m.bold(m.arrow) if r.faulting else "  "
        text = m.text(r.text, 400)
        out.append(
            f"  {mark} {m.link(f'u 0x{r.address}', r.address)}  {r.bytes:<{width}}  "
            + (m.bold(text) if r.faulting else text)
        )
    if c.note:
        out.append(f"     {m.text(c.note, 1000)}")
    out.append("")
    return out


def _fact(out: List[str], f: Fact, m: Markup) -> None:
    value = inline(f.terminal_value or f.value, m)
    if f.terminal_label is None:
        out.append(f"{' ' * LABEL_WIDTH}{value}")
    else:
        out.append(f"{m.bold(f.terminal_label)}{' ' * max(1, LABEL_WIDTH - len(f.terminal_label))}{value}")


def render_dml(
    report: Report,
    rows: int = 40,
    show_threads: Sequence[int] = (),
    all_threads: bool = False,
    frame_numbers: Optional[FrameNumbers] = None,
    plain: bool = False,
) -> List[str]:
    """The report's lines in DML, or (`plain`) the same lines as plain text."""
    m = Markup(dml=not plain)
    frame_ref = _FrameRefs(frame_numbers, m)
    view = report_view(
        report, KF, max_rows=rows, other_stacks=False, full_threads=show_threads, all_threads=all_threads
    )
    out: List[str] = []
    v = view.verdict
    out.append(f"{m.bold('dumpkit ' + m.text(view.dumpkit_version))}: {m.text(view.dump_path)}")
    out.append(f"{m.bold('VERDICT')}  {m.bold(m.text(v.headline, 2000))}")
    out.append(f"confidence: {m.text(v.confidence)}")
    if view.signature:
        out.append(f"signature: {m.text(view.signature, 1000)}")
    if view.blame:
        out.append(f"blame:     {inline(view.blame, m)}")
    if v.evidence:
        out.append(m.bold("Evidence"))
        out.extend(f"  - {m.text(e, 2000)}" for e in v.evidence)
    if v.next_steps:
        out.append(m.bold("Next steps"))
        out.extend(f"  {i}. {m.text(s, 2000)}" for i, s in enumerate(v.next_steps, 1))
    if view.images is not None:
        out.append(m.bold(m.text(view.images.title)))
        out.extend(f"  - {m.text(x, 2000)}" for x in view.images.lines)
    out.append("")

    facts = view.facts
    for f in facts.exception:
        _fact(out, f, m)
    if facts.raised_by:
        out.append(f"{' ' * LABEL_WIDTH}raised by {m.text(facts.raised_by)}")
    for f in facts.process + facts.machine:
        _fact(out, f, m)
    out.append("")
    for c in facts.collisions:  # the compact view leaves the environment out, not these
        out.append(f"{m.bold(m.text(c.heading))}  {m.text(c.title, 2000)}")
        out.extend(f"  - {inline(line, m)}" for line in c.modules)
        out.append(f"  leads to: {m.text(c.leads_to, 2000)}")
        out.append("  ways out:")
        out.extend(f"    {i}. {m.text(w, 2000)}" for i, w in enumerate(c.ways_out, 1))
        out.extend(f"  not known: {m.text(u, 2000)}" for u in c.unknown)
        out.append("")
    if view.waits is not None:
        out.append(m.bold("Who waits for whom"))
        out.extend(f"  {m.bold('deadlock:')} {m.text(d, 2000)}" for d in view.waits.deadlocks)
        for w in view.waits.rows:
            held = f"; held by {w.held_by}" if w.held_by and w.held_by != "not known" else ""
            held = held or ("; who holds it is not known" if w.held_by == "not known" else "")
            at = f" at {w.where}" if w.where else ""
            out.append(f"  thread {m.text(w.thread, 200)}{m.text(at, 1000)}: {m.text(w.what + held, 2000)}")
        out.append("")
    if view.code is not None:
        out += _code(view.code, m)
    if view.registers:
        # WinDbg's own `.ecxr` shows them too; the link is the way back after a `.frame`.
        out.append(f"{m.bold('Registers')}  ({m.link('.ecxr', '.ecxr')})")
        out += ["  " + m.text(" ".join(view.registers[i : i + 4]), 400) for i in range(0, len(view.registers), 4)]
        out.append("")

    crash = view.crashing
    if view.python is not None:
        py = view.python
        out.append(f"{m.bold('Python stacks')} {m.text(py.summary, 1000)}")
        for s in py.stacks:
            out.append(f"{m.bold(m.text(s.title))} ({m.thread(s.tid)})")
            for r in s.rows[:rows]:
                if isinstance(r, Fold):
                    out.append(f"        {m.text(r.text, 1000)}")
                else:
                    out.append(f"  {r.index:>5}  {m.text(r.function, 200)}  {m.text(r.location, 300)}")
        out.append("")
    for rec in view.recursions:
        out.append(f"{m.bold('Recursion on thread')} {m.thread(rec.tid)}")
        out.append(f"  {rec.summary}")
        for fn in rec.functions:
            out.append(f"    {m.text(fn)}")
        if rec.entry_path:
            out.append(
                "  entered from: "
                + m.text(" <- ".join(rec.entry_path), 1000)
                + (f"{m.from_}... ({rec.entry_more} more)" if rec.entry_more else "")
            )
    sizes = view.frame_sizes
    if sizes is not None:
        out.append(m.bold("Largest frames (crashing thread)"))
        h = sizes.headers
        size_w, asks_w = len(h.size), len(h.asks)
        out.append(f"  {h.index:>6}  {h.size:>{size_w}}  {h.asks:>{asks_w}}  {h.function} / {h.how.lower()}")
        for fs in sizes.rows:
            idx = frame_ref(crash.tid, fs.index, crashing=True) if crash is not None else str(fs.index)
            pad = " " * max(0, 6 - len(kf_number(fs.index)))
            out.append(
                f"  {pad}{idx}  {fs.size:>{size_w}}  {fs.asks:>{asks_w}}  {m.text(fs.function)}"
                + (f"  {m.text(fs.how)}" if fs.how else "")
            )
    if view.budget is not None:
        out.append(f"{m.bold('Stack')}      {m.text(view.budget, 1000)}")
    out.append("")
    digits = view.pointer_digits

    def stack(t: ThreadView, title: str) -> None:
        name = f' "{m.text(t.name, 80)}"' if t.name else ""
        out.append(
            f"{m.bold(title)} {m.thread(t.tid)}{name}  {t.frames} ({m.text(t.trust)}); "
            f"walk ended: {m.text(t.stop_reason)}"
        )
        table = t.stack
        h = table.headers if table is not None else HEADERS[KF]
        out.append(
            f"  {h.number:>4}  {h.size:>8}  {h.child_sp:>{digits}}  {h.ip:>{digits}}  {h.call_site}  ({h.found_by.lower()})"
        )
        for r in table.rows if table is not None else ():
            if isinstance(r, Fold):
                out.append(f"        {m.text(r.text, 1000)}")
                continue
            pad = " " * max(0, 4 - len(r.number))
            out.append(
                f"  {pad}{frame_ref(t.tid, r.index, t.is_crashing)}  {r.memory:>8}  {r.child_sp}  {r.ip}  "
                f"{m.text(r.call_site)}  ({m.text(r.found_by)})"
            )
        if table is not None and table.cut:
            out.append(f"  ... more frames: `!tfstack --thread 0x{t.tid:x} --rows N` or `k` ...")
        out.append("")

    if crash is not None:
        stack(crash, "Crashing thread")
    for t in view.threads.full:
        stack(t, "Thread")
    if view.threads.groups:
        out.append(m.bold("Other threads"))
        for g in view.threads.groups:
            out.append(f"  {inline(g.summary, m)}")
    if view.problems:
        out.append("")
        out.append(m.bold("Problems met while reading (the rest of the report stands)"))
        out.extend(f"  - {m.text(e, 2000)}" for e in view.problems)
    return out
