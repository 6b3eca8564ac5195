"""`!tfstack`'s body: what the debugger command does once windbg_scripts/tfstack.py has
parsed its options. It builds a Target over the debugger's session (a DbgengTarget over
the engine's own interfaces when tfstack.dll hosts the Python, a PykdTarget under pykd's
`!py`), runs the engine `dumpkit analyze` runs, and writes the report through the
debugger (DML, plain text or JSON), with the debugger's own frame numbers in the frame
links. The script keeps what is the debugger host's: the session (pykd, or the engine's
client), reading the options, writing a line, and leaving pykd's sub-interpreter safely.

Nothing may end the debugger: every failure is one line and an exit code (0 done, 1 done
with problems or failed, 2 bad usage, 130 interrupted), as the other commands'."""

from __future__ import annotations

import bisect
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from dumpkit.limits import MAX_FRAMES
from dumpkit.records import record

Emit = Callable[[str, bool], None]  # (line, is DML) -> written to the debugger's output

_MAX_FRAME_NUMBER = 0xFFFF  # `.frame` rejects higher numbers (seen with dbgeng 10.0)


@record
class TfstackRequest:
    """What `!tfstack` was asked, its options parsed."""

    thread: Optional[int] = None
    all_threads: bool = False
    json: bool = False
    max_frames: int = MAX_FRAMES
    rows: int = 40
    plain: bool = False
    image_paths: Tuple[str, ...] = ()
    symbol_paths: Tuple[str, ...] = ()
    progress_after: Optional[float] = None  # seconds before the first progress line (the lane's knob)


class CtrlBreak(KeyboardInterrupt):
    """The user's Ctrl-Break, seen by polling the engine (BreakWatch)."""


class BreakWatch:
    """While a run is on, asks the engine every POLL seconds whether the user pressed
    Ctrl-Break (cdb) or Debug > Break (WinDbg), from a thread of its own, and raises
    CtrlBreak in the run's thread when so (PyThreadState_SetAsyncExc: it lands between two
    Python instructions, wherever the run is, as pykd's own watch delivers its
    SystemExit). `interrupted()` is IDebugControl::GetInterrupt, which may be called from
    any thread and clears the request it reports. Once at most; `stop()` ends the watch
    and drops an exception not yet delivered. One that lands in a callback the engine
    makes into Python is lost there, so `fired` stays set for the run to check."""

    POLL = 0.1

    def __init__(self, interrupted: Callable[[], bool]):
        import threading

        self._interrupted = interrupted
        self._target = threading.get_ident()
        self._lock = threading.Lock()
        self._armed = True
        self._done = threading.Event()
        self.fired = False
        # Python reports an exception that ends a callback from C (ctypes) as "ignored",
        # on sys.stderr, which is the debugger's output: not this one
        self._hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        self._thread = threading.Thread(target=self._watch, name="tfstack Ctrl-Break watch", daemon=True)
        self._thread.start()

    def _unraisable(self, info) -> None:
        if not isinstance(info.exc_value, CtrlBreak):
            self._hook(info)

    def _watch(self) -> None:
        while not self._done.wait(self.POLL):
            try:
                pressed = self._interrupted()
            except Exception:
                return
            if pressed:
                with self._lock:
                    if self._armed:
                        self.fired = True
                        _raise_in(self._target, CtrlBreak)
                return

    def stop(self) -> None:
        if self._done.is_set():
            return
        try:
            with self._lock:
                self._armed = False
            self._done.set()
            self._thread.join(2.0)
            if self.fired:
                _raise_in(self._target, None)  # one still pending is dropped
        except CtrlBreak:
            pass  # it landed here: the run is over anyway
        finally:
            sys.unraisablehook = self._hook


def _raise_in(thread_id: int, exception) -> None:
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception else None
    )


def run_tfstack(request: TfstackRequest, pykd: Any, emit: Emit, open_target: Optional[Callable] = None) -> int:
    """Analyse the debugger's session and write the report; the exit code. `pykd`: the
    session, pykd itself or a dumpkit.sources.dbgeng.EngineSession (same calls);
    `open_target(session, problems)` makes the Target (PykdTarget by default)."""
    interrupted = getattr(pykd, "interrupted", None)  # the engine route's Ctrl-Break
    watch: Optional[BreakWatch] = None
    try:
        from dumpkit.engine import Options, analyze
        from dumpkit.problems import Problems

        from dumpkit.sources.pykd import PykdTarget

        make_target: Callable[..., Any] = open_target if open_target is not None else PykdTarget

        watch = BreakWatch(interrupted) if interrupted is not None else None
        progress = Progress(
            pykd, emit, enabled=not request.json, first=request.progress_after
        )  # --json: the JSON alone
        problems = Problems()  # this run's: the session adds to it at every read, the engine too
        target = make_target(progress, problems)
        if request.thread is not None and all(t.tid != request.thread for t in target.threads):
            ids = ", ".join(f"{t.tid} (0x{t.tid:x})" for t in target.threads)
            emit(f"tfstack: error: no thread {request.thread} (0x{request.thread:x}); threads: {ids}", False)
            return 2
        opts = Options(
            image_paths=tuple(image_paths(request.image_paths, target.exe_path)),
            symbol_paths=symbol_paths(list(request.symbol_paths) + exe_path_stores(target.exe_path), pykd),
            max_frames=request.max_frames,
        )
        report = analyze(target, opts, problems=problems).report
        if watch is not None:
            watch.stop()  # the walk is over: what is left is writing the report
            if watch.fired:  # swallowed where it landed (a callback from the engine)
                raise CtrlBreak()
        refused = progress.refused_read(target.dump_ranges)
        if refused is not None:
            emit(
                f"tfstack: interrupted (Ctrl-Break): the debugger stopped answering memory reads "
                f"({refused[1]} bytes at {refused[0]:#x}, held by the dump): no report",
                False,
            )
            return 130
        if request.json:
            from dumpkit.report.json_report import render_json

            emit(render_json(report), False)
        else:
            from dumpkit.report.dml import Markup, render_dml

            shown = [request.thread] if request.thread is not None else []
            lines = render_dml(
                report,
                rows=request.rows,
                show_threads=shown,
                all_threads=request.all_threads,
                frame_numbers=debugger_frame_numbers(report, target),
                plain=request.plain,
            )
            for line in lines + debugger_facts(target.debugger_facts(), Markup(dml=not request.plain)):
                emit(line, not request.plain)
        return 1 if report.soft_errors else 0
    except (KeyboardInterrupt, SystemExit) as e:
        # pykd's `!py` turns Ctrl-Break into SystemExit("CTRL+BREAK") raised in the script
        # (a pending call, so it lands between two Python instructions); on the engine
        # route BreakWatch raises CtrlBreak the same way
        if watch is not None:
            watch.stop()
        said = " (Ctrl-Break)" if isinstance(e, (SystemExit, CtrlBreak)) else ""
        emit(f"tfstack: interrupted{said}: no report", False)
        return 130
    except Exception as e:
        text = " ".join(str(e).split()) or type(e).__name__
        emit(f"tfstack: error: {type(e).__name__}: {text[:500]}", False)
        return 1
    finally:
        if watch is not None:
            watch.stop()


def debugger_frame_numbers(report, target):
    """The DML's `.frame N` links (a dumpkit.report.dml.FrameNumbers): each of dumpkit's
    frames as the number of the debugger's own frame with the same Child-SP. The two
    number frames alike only while they unwind alike: dbgeng cannot unwind out of a stack
    probe without unwind data (on big_frame.dmp its frame 1 is not dumpkit's), stops at
    1,024 frames in getStack and takes no `.frame` number above 0xffff. A frame it does not
    have is left out of the map (shown unlinked); when the debugger gives no stack at all,
    dumpkit's numbers stay."""
    walked = {t.tid: t.frames + (t.possible_frames or ()) for t in report.threads}  # possible frames get links too

    def numbers(tid: int, exception_context: bool) -> Optional[Dict[int, int]]:
        stack = target.debugger_stack(tid, exception_context=exception_context)
        if stack is None:
            return None
        first = {sp: i for i, sp in reversed(list(enumerate(stack)))}  # an SP's innermost frame
        found = ((f.index, first.get(f.sp)) for f in walked.get(tid, ()))
        return {index: n for index, n in found if n is not None and n <= _MAX_FRAME_NUMBER}

    return numbers


def debugger_facts(facts: Sequence[str], m) -> List[str]:
    """Where the report used the debugger's facts instead of the dump file's: lines after
    the report (none when there are none)."""
    if not facts:
        return []
    return ["", m.bold("From the debugger")] + [f"  - {m.text(fact, 2000)}" for fact in facts]


class Progress:
    """The session (pykd or an EngineSession), with a line on the debugger's output every
    few seconds of a long run (a million-frame walk): every memory read the analysis makes
    passes here, on the debugger's own thread, which is also where Ctrl-Break lands."""

    FIRST = 2.0  # seconds before the first line
    EVERY = 5.0

    def __init__(self, pykd_module: Any, emit: Emit, enabled: bool = True, first: Optional[float] = None):
        self._pykd = pykd_module
        self._emit = emit
        self._started = time.perf_counter()
        self._next = self._started + (self.FIRST if first is None else first) if enabled else float("inf")
        self._reads = 0
        self._bytes = 0
        self.failed: List[Tuple[int, int]] = []

    def __getattr__(self, name):
        return getattr(self._pykd, name)

    def _count(self, size: int) -> None:
        self._reads += 1
        self._bytes += size
        if self._reads & 0x3F == 0:
            now = time.perf_counter()
            if now >= self._next:
                self._next = now + self.EVERY
                self._emit(
                    f"tfstack: working, {now - self._started:.0f} s, {self._bytes / 1048576:,.1f} MiB read "
                    "from the debugger (Ctrl-Break stops)",
                    False,
                )

    def loadBytes(self, address, size):
        self._count(size)
        try:
            return self._pykd.loadBytes(address, size)
        except Exception:
            self.failed.append((address, size))
            raise

    def readVirtual(self, address, size):
        """The engine route's partial read. One that gets nothing is noted as failed (a
        short one is not: the next read goes on from where it stopped)."""
        self._count(size)
        got = self._pykd.readVirtual(address, size)
        if not got:
            self.failed.append((address, size))
        return got

    def refused_read(self, held: Sequence[Tuple[int, int]]) -> Optional[Tuple[int, int]]:
        """A read that failed although the dump holds every byte of it. dbgeng answers a
        Ctrl-Break that lands during a memory read by failing the read (pykd's own watch
        then often never sees it): the walk would end early and report a short stack as
        if it were the truth."""
        starts = [start for start, _ in held]
        for address, size in self.failed:
            i = bisect.bisect_right(starts, address) - 1
            if i >= 0 and address + size <= held[i][1]:
                return address, size
        return None


def symbol_paths(explicit: Sequence[str], pykd: Any) -> List[str]:
    """The user's symbol paths, then _NT_SYMBOL_PATH and the debugger's `.sympath`."""
    paths = list(explicit)
    for extra in (os.environ.get("_NT_SYMBOL_PATH"), _debugger_sympath(pykd)):
        if extra and extra not in paths:
            paths.append(extra)
    return paths


def image_paths(explicit: Sequence[str], exe_path: Sequence[str]) -> List[str]:
    """The user's folders, then the plain folders of the debugger's `.exepath` (where
    dbgeng found the images it maps); its `srv*` elements go with the symbol path."""
    paths = list(explicit)
    for element in exe_path:
        if "*" not in element and "://" not in element and element not in paths:
            paths.append(element)
    return paths


def exe_path_stores(exe_path: Sequence[str]) -> List[str]:
    return [e for e in exe_path if "*" in e or "://" in e]


def _debugger_sympath(pykd: Any) -> Optional[str]:
    try:
        return str(pykd.getSymbolPath() or "") or None
    except Exception:
        return None
