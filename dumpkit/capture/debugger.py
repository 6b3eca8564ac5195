"""The debug loop of `dumpkit capture` and the dump it writes. Windows only.

The program is started with DEBUG_PROCESS (its child processes are debugged too: a venv's
python.exe is a launcher that starts the real interpreter as a child) and inherits the
console, so its output passes straight through; or a running process is attached to. Each
exception event goes to policy.on_exception. When it says dump, the crashing process is
dumped while it is stopped: MiniDumpWriteDump with the exception record and the thread's
context, then the memory of its Python stacks (pymemory) is offered through the
MemoryCallback Microsoft documents, and whatever the writer did not take is added to the
file afterwards (amend; Wine's dbghelp ignores callbacks), with the memory the dying
thread's stack points to (pointed). The process is then ended with the exception code, as
Windows would end it.

A process can also end itself without an exception (abort() under Wine, raise(SIGABRT),
_exit(3), OpenMP's fatal errors, TerminateProcess on itself). At each process's first
breakpoint (the loader's, or the attach) an int3 is written over the first byte of ntdll's
exit functions (policy.EXIT_FUNCTIONS; ntdll sits at the same address in every process, so
this process's own addresses are the debuggee's, checked byte for byte before writing).
When one is hit, the byte is put back and RIP set back to the entry, so the thread is as
it was when it called the function; policy.on_exit decides, and a dump is written with
that breakpoint as its exception (as cdb writes one stopped at `bp
ntdll!RtlExitUserProcess`) and a comment stream that says so; the process is then ended
with its own exit code. Either way the breakpoints are gone: an exit happens once.

`snapshot` dumps a running process at once and leaves it running (`--attach PID --now`,
snapshot.py): suspended, not debugged, while the dump is written and what its threads'
stacks point to is read."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from dumpkit.analysis.codes.model import STATUS_BREAKPOINT
from dumpkit.capture import policy, win32
from dumpkit.capture.amend import add_memory
from dumpkit.capture.live import LiveProcess
from dumpkit.capture.pointed import pointed_by_stacks, pointed_memory, unchanging_image_spans
from dumpkit.capture.policy import ExitDumps
from dumpkit.capture.pymemory import PythonMemory, command_line_memory, page_bytes, python_memory
from dumpkit.capture.walkdata import STACK_BYTES, as_ranges, walk_tables
from dumpkit.context import parse_x64
from dumpkit.analysis.holders import TSTATE_SCAN
from dumpkit.capture.snapshot import COMMENT, Snapshot
from dumpkit.pe import PEError
from dumpkit.pe.image import PEImage
from dumpkit.sources.minidump import open_dump
from dumpkit.spans import Span
from dumpkit.target import GPR_NAMES, MemoryNotInDump, Module, Registers, Thread

MAX_CALLBACK_RANGES = 1 << 20
INT3 = b"\xcc"
SAME_CODE = 16  # bytes of each exit function compared with this process's own before arming


@dataclass
class Dumped:
    path: str
    pid: int
    thread_id: int
    code: int
    first_chance: bool
    python: Optional[PythonMemory]
    added_after: int  # bytes added to the file after the writer: Python stacks, command line
    seconds: float
    # an exit stopped at ntdll's exit path (policy.EXIT_FUNCTIONS): the function and the
    # exit code it was given (None: a crash, `code` is its exception)
    exit_function: Optional[str] = None
    exit_code: Optional[int] = None
    pointed: int = 0  # of added_after: the memory the dying thread's stack points to


@dataclass
class Outcome:
    exit_code: Optional[int]  # the program's (None: detached, or left, still running)
    dumps: List[Dumped] = field(default_factory=list)
    detached: bool = False
    # Ctrl-C, and DebugActiveProcessStop failed: its Win32 error, and whether the process
    # had ended (exit_code then, where known). One still running runs on: the loop has
    # continued every event, and with kill-on-exit off Windows detaches it as dumpkit exits.
    detach_failed: Optional[str] = None
    ended: bool = False


@dataclass
class _Process:
    handle: int
    name: str
    threads: Dict[int, int] = field(default_factory=dict)  # thread id -> handle
    # the exit functions' entries -> (name, the byte the int3 replaced), once armed; kept
    # after disarming, so a second thread already at the int3 is set back too
    exit_points: Dict[int, Tuple[str, bytes]] = field(default_factory=dict)
    armed: bool = False
    first_breakpoint_seen: bool = False


class CaptureError(Exception):
    """The program could not be started or attached to; one line."""


def _dump_name(out_dir: str, name: str, pid: int) -> str:
    stem = os.path.splitext(os.path.basename(name))[0] or "process"
    return os.path.join(out_dir, f"{stem}.{pid}.{time.strftime('%Y%m%d-%H%M%S')}.dmp")


def _callback(ranges: Sequence[Tuple[int, int]]):
    """A MINIDUMP_CALLBACK_ROUTINE that hands `ranges` out one per MemoryCallback."""
    pending = iter(ranges[:MAX_CALLBACK_RANGES])

    def routine(_param, inp, out):
        kind = inp.contents.CallbackType
        if kind in (
            win32.IncludeThreadCallback,
            win32.IncludeModuleCallback,
            win32.ThreadCallback,
            win32.ThreadExCallback,
            win32.ModuleCallback,
        ):
            return True
        if kind == win32.MemoryCallback:
            given = next(pending, None)  # (a list's pop(0) would be quadratic in the ranges)
            if given is None:
                return False
            base, size = given
            out.contents.Memory.MemoryBase = base
            out.contents.Memory.MemorySize = size
            return True
        if kind == win32.CancelCallback:
            out.contents.Cancel.CheckCancel = False
            out.contents.Cancel.Cancel = False
            return True
        if kind == win32.ReadMemoryFailureCallback:
            out.contents.Status = 0  # S_OK: leave the page out, write the rest
            return True
        return False

    return win32.MINIDUMP_CALLBACK_ROUTINE(routine)


class _Context:
    """A thread's x64 CONTEXT in a 16-byte aligned buffer (GetThreadContext's demand)."""

    def __init__(self) -> None:
        self._raw = (ctypes.c_ubyte * (win32.CONTEXT_SIZE + 16))()
        self.address = (ctypes.addressof(self._raw) + 15) & ~15
        ctypes.c_uint32.from_address(self.address + win32.CONTEXT_FLAGS_OFFSET).value = win32.CONTEXT_ALL_AMD64

    def read(self, thread: int, tid: int) -> "_Context":
        if not win32.GetThreadContext(thread, ctypes.c_void_p(self.address)):
            raise CaptureError(f"cannot read the registers of thread {tid}: {win32.last_error()}")
        return self

    def __getitem__(self, offset: int) -> int:
        return ctypes.c_uint64.from_address(self.address + offset).value

    def __setitem__(self, offset: int, value: int) -> None:
        ctypes.c_uint64.from_address(self.address + offset).value = value


def write_dump(
    path: str,
    process: int,
    pid: int,
    thread: int,
    tid: int,
    record: "win32.EXCEPTION_RECORD",
    full: bool,
    comment: Optional[str] = None,
) -> Tuple[Optional[PythonMemory], int, int]:
    """Write the dump; (the Python memory found, bytes added after the writer, the bytes
    of memory the dying thread's stack points to that were offered to it). `comment`: a
    CommentStreamW for readers."""
    regs = _Context().read(thread, tid)
    context = regs.address
    pointers = win32.EXCEPTION_POINTERS(ctypes.pointer(record), ctypes.c_void_p(context))
    info = win32.MINIDUMP_EXCEPTION_INFORMATION(tid, ctypes.pointer(pointers), False)
    live = LiveProcess(process, pid)
    memory = None if full else python_memory(live)
    kind = _FULL if full else win32.MiniDumpNormal | win32.MiniDumpWithProcessThreadData | _EITHER
    _write_file(path, process, pid, kind, info, comment, memory)
    # One amend for all that is added: Wine's writer puts its memory list (a million entries
    # for a TensorFlow process) just before the range data, and an amend grows the list
    # there only over range data it can move. After one amend the list is followed by the
    # unused rest of the bytes it moved, which a second amend cannot tell from bytes another
    # stream points at, so it would write a whole new list at the end (23 MB for TensorFlow).
    pieces: List[Tuple[int, bytes]] = []
    if memory is not None and memory.ranges:
        pieces += page_bytes(live, memory.ranges)
    pointed: List[Tuple[int, bytes]] = []
    if not full:
        threads = _written_threads(path)
        pieces += page_bytes(live, command_line_memory(live, threads))
        pieces += _walk_tables(live, threads, _stack_tops(live, threads, STACK_BYTES))
        registers, _ = parse_x64(ctypes.string_at(context, win32.CONTEXT_SIZE))
        pointed = _pointed_bytes(live, threads, tid, regs[win32.CONTEXT_RSP], _pointer_registers(registers))
    added = add_memory(path, pieces + pointed).bytes_added if pieces or pointed else 0
    return memory, added, sum(len(d) for _, d in pointed)


_EITHER = win32.MiniDumpWithUnloadedModules | win32.MiniDumpWithThreadInfo | win32.MiniDumpWithFullMemoryInfo
_FULL = win32.MiniDumpWithFullMemory | win32.MiniDumpWithHandleData | _EITHER


def _write_file(
    path: str,
    process: int,
    pid: int,
    kind: int,
    exception: Optional["win32.MINIDUMP_EXCEPTION_INFORMATION"],
    comment: Optional[str],
    memory: Optional[PythonMemory],
) -> None:
    """MiniDumpWriteDump into `path`: `kind`, the exception (None: a snapshot), a comment
    stream, the Python memory offered through the callback."""
    callback = None
    if memory is not None and memory.ranges:
        routine = _callback(memory.ranges)
        callback = win32.MINIDUMP_CALLBACK_INFORMATION(routine, None)
    streams = None
    if comment:
        text = ctypes.create_unicode_buffer(comment)  # UTF-16 with its NUL, as the stream holds it
        entry = win32.MINIDUMP_USER_STREAM(win32.CommentStreamW, ctypes.sizeof(text), ctypes.addressof(text))
        streams = win32.MINIDUMP_USER_STREAM_INFORMATION(1, ctypes.pointer(entry))
    handle = win32.CreateFileW(
        path, win32.GENERIC_WRITE, 0, None, win32.CREATE_ALWAYS, win32.FILE_ATTRIBUTE_NORMAL, None
    )
    if not handle or handle == win32.INVALID_HANDLE_VALUE:
        raise CaptureError(f"{path}: cannot create the dump file: {win32.last_error()}")
    try:
        ok = win32.MiniDumpWriteDump(
            process,
            pid,
            handle,
            kind,
            ctypes.byref(exception) if exception is not None else None,
            ctypes.byref(streams) if streams else None,
            ctypes.byref(callback) if callback else None,
        )
        error = None if ok else win32.last_error()
    finally:
        win32.CloseHandle(handle)
    if error is not None:
        raise CaptureError(f"{path}: MiniDumpWriteDump failed: {error}")


def _written_threads(path: str) -> List[Thread]:
    """The threads of the dump just written: the TEB addresses and stack ranges its writer
    recorded."""
    written = open_dump(path)
    try:
        return list(written.threads)
    finally:
        written.close()


def _pointed_bytes(
    live: LiveProcess, threads: Sequence[Thread], tid: int, sp: int, registers: Sequence[int]
) -> List[Tuple[int, bytes]]:
    """The memory the dying thread's stack and `registers` point to (pointed.py), beyond the modules'
    images and the stacks the dump holds. The command line's bytes (read through the TEBs
    the dump recorded, as the analysis will: MiniDumpWithProcessThreadData holds them on
    Windows; Wine's dbghelp writes no TEB or PEB) are added beside them."""
    thread = next((t for t in threads if t.tid == tid), None)
    if thread is None or not thread.stack_size:
        return []
    top = max(sp, thread.stack_start)
    stack = live.read_available(top, max(0, thread.stack_end - top))
    skip = [(m.base, m.base + m.size) for m in live.modules]
    skip += [(t.stack_start, t.stack_end) for t in threads if t.stack_size]
    return pointed_memory(stack, skip, live.read_available, registers=registers)


# what MiniDumpWriteDump and the readers need of a process that is dumped but not debugged
SNAPSHOT_ACCESS = (
    win32.PROCESS_QUERY_INFORMATION | win32.PROCESS_VM_READ | win32.PROCESS_DUP_HANDLE | win32.PROCESS_SUSPEND_RESUME
)
# a snapshot is for a hang: the handles (what a thread waits on, where Windows records them)
_SNAPSHOT_NORMAL = win32.MiniDumpNormal | win32.MiniDumpWithProcessThreadData | win32.MiniDumpWithHandleData | _EITHER


def snapshot(pid: int, out_dir: str, full: bool) -> Snapshot:
    """Dump process `pid` as it runs (snapshot.py says how) into `out_dir` and leave it
    running. Ctrl-C waits until the process is resumed: a process left suspended would
    look hung for good."""
    process = win32.OpenProcess(SNAPSHOT_ACCESS, False, pid)
    if not process:
        raise CaptureError(f"cannot open process {pid}: {win32.last_error()}")
    ctrl_c = _CtrlC()
    previous = signal.signal(signal.SIGINT, ctrl_c)
    try:
        return _snapshot(process, pid, out_dir, full)
    finally:
        signal.signal(signal.SIGINT, previous)
        win32.CloseHandle(process)


def _snapshot(process: int, pid: int, out_dir: str, full: bool) -> Snapshot:
    image = _image_name(process, pid)
    path = _dump_name(out_dir, image, pid)
    status = win32.NtSuspendProcess(process)
    if status < 0:
        raise CaptureError(f"cannot suspend process {pid}: NTSTATUS {status & 0xFFFFFFFF:#010x}")
    started = time.perf_counter()
    try:
        live = LiveProcess(process, pid)
        memory = None if full else python_memory(live)
        _write_file(path, process, pid, _FULL if full else _SNAPSHOT_NORMAL, None, COMMENT, memory)
        threads = _written_threads(path)
        pieces: List[Tuple[int, bytes]] = []
        pointed: List[Tuple[int, bytes]] = []
        if not full:
            if memory is not None and memory.ranges:
                pieces += page_bytes(live, memory.ranges)
            pieces += page_bytes(live, command_line_memory(live, threads))
            stacks = _stack_tops(live, threads)
            pieces += _walk_tables(live, threads, stacks)
            pointed = _pointed_by_threads(live, threads, stacks, memory)
    finally:
        resumed = win32.NtResumeProcess(process)
        suspended = time.perf_counter() - started
    added = add_memory(path, pieces + pointed).bytes_added if pieces or pointed else 0
    return Snapshot(
        path=path,
        pid=pid,
        image=image,
        full=full,
        threads=len(threads),
        python=memory,
        added_after=added,
        pointed=sum(len(d) for _, d in pointed),
        suspended_seconds=suspended,
        resume_error=None if resumed >= 0 else f"NTSTATUS {resumed & 0xFFFFFFFF:#010x}",
    )


def _stack_tops(live: LiveProcess, threads: Sequence[Thread], limit: Optional[int] = None) -> List[bytes]:
    """Each thread's stack from its stack pointer up (at most `limit` bytes), read once for
    what the snapshot keeps of what it points to and of the modules it runs in."""
    out = []
    for t in threads:
        if t.stack_size and t.context is not None:
            top = max(t.context.sp, t.stack_start)
            size = max(0, t.stack_end - top)
            out.append(live.read_available(top, size if limit is None else min(limit, size)))
    return out


def _pointed_by_threads(
    live: LiveProcess, threads: Sequence[Thread], stacks: Sequence[bytes], memory: Optional[PythonMemory]
) -> List[Tuple[int, bytes]]:
    """What every thread's stack (`stacks`, _stack_tops) points to (pointed.py), the
    writable sections of the modules included; and what each Python thread's PyThreadState
    points to (the weakref to a Thread's _tstate_lock, which says whose end a join waits
    for: analysis/holders.py)."""
    sources = list(stacks)
    if memory is not None:
        sources += [live.read_available(p.thread_state, TSTATE_SCAN) for p in memory.state.threads if p.thread_state]
    skip = [span for m in live.modules for span in _unchanging(live, m)]
    skip += [(t.stack_start, t.stack_end) for t in threads if t.stack_size]
    # each stack's thread's registers, in _stack_tops' order: a lock a wait was just given
    # may be in a register only
    registers = [_pointer_registers(t.context) for t in threads if t.stack_size and t.context is not None]
    return pointed_by_stacks(sources, skip, live.read_available, registers=registers)


def _pointer_registers(registers: Registers) -> List[int]:
    """The general-purpose registers that may hold a pointer to what a thread works on: all
    but rsp (its stack, which the dump has)."""
    return [v for name, v in registers.values.items() if name in GPR_NAMES and name != "rsp"]


def _walk_tables(live: LiveProcess, threads: Sequence[Thread], stacks: Sequence[bytes]) -> List[Tuple[int, bytes]]:
    """What a walk reads of the images of the modules the threads run in or their stacks
    (`stacks`, _stack_tops) point into (walkdata.py): the dump then reads the same on a
    machine without those images."""
    ips = [t.context.ip for t in threads if t.context is not None]
    return page_bytes(live, as_ranges(walk_tables(live.read, live.modules, ips, stacks)))


def _unchanging(live: LiveProcess, module: Module) -> List[Span]:
    """The parts of `module`'s image that are its file's bytes (all of it when its headers
    cannot be read)."""
    try:
        sections = PEImage.from_memory(live.read, module.base).sections
    except (PEError, MemoryNotInDump):
        return [(module.base, module.base + module.size)]
    return unchanging_image_spans(
        module.base, module.size, [(s.rva, s.mapped_size, s.characteristics) for s in sections]
    )


def _start(argv: Sequence[str]) -> Tuple[int, int]:
    startup = win32.STARTUPINFOW()
    startup.cb = ctypes.sizeof(startup)
    info = win32.PROCESS_INFORMATION()
    line = ctypes.create_unicode_buffer(subprocess.list2cmdline(list(argv)))
    ok = win32.CreateProcessW(
        None, line, None, None, True, win32.DEBUG_PROCESS, None, None, ctypes.byref(startup), ctypes.byref(info)
    )
    if not ok:
        raise CaptureError(f"cannot start {argv[0]}: {win32.last_error()}")
    win32.CloseHandle(info.hThread)
    win32.CloseHandle(info.hProcess)  # the debug events bring their own handles
    return info.dwProcessId, info.dwThreadId


class _CtrlC:
    """Ctrl-C as a flag that the debug loop looks at between events. As KeyboardInterrupt it
    is raised wherever the main thread is; under Wine, Ctrl-C during a dump landed in the
    writer's callback (ctypes printed a traceback and answered FALSE to the writer) or after
    the writer, where it ended capture without a line, exit 130, before the amend: a dump
    without its Python stacks. A started program is debugged with kill-on-exit, so it went
    with it."""

    def __init__(self) -> None:
        self.pressed = False

    def __call__(self, _signum: int, _frame: Optional[FrameType]) -> None:
        self.pressed = True


@dataclass
class _Dumping:
    """What every dump of one capture shares: where, which kind, which exits, who is told."""

    out_dir: str
    full: bool
    exits: ExitDumps
    on_dump: Callable[[Dumped], None]


def run(
    argv: Optional[Sequence[str]],
    attach: Optional[int],
    out_dir: str,
    full: bool,
    on_dump: Callable[[Dumped], None],
    exits: ExitDumps = ExitDumps.ABNORMAL,
) -> Outcome:
    """Run `argv` (or attach to process `attach`) until it exits; dump each crash, and each
    exit `exits` asks for, into `out_dir` and hand it to `on_dump` (which prints the
    verdict). Ctrl-C detaches from an attached process; a started one got it too (one
    console) and decides for itself."""
    ctrl_c = _CtrlC()
    previous = signal.signal(signal.SIGINT, ctrl_c)
    try:
        return _debug_loop(argv, attach, _Dumping(out_dir, full, exits, on_dump), ctrl_c)
    finally:
        signal.signal(signal.SIGINT, previous)


def _debug_loop(argv: Optional[Sequence[str]], attach: Optional[int], dumping: _Dumping, ctrl_c: _CtrlC) -> Outcome:
    if attach is not None:
        if not win32.DebugActiveProcess(attach):
            raise CaptureError(f"cannot attach to process {attach}: {win32.last_error()}")
        win32.DebugSetProcessKillOnExit(False)  # detaching leaves it running
        main_pid = attach
    else:
        assert argv
        main_pid, _ = _start(argv)
    outcome = Outcome(exit_code=None)
    processes: Dict[int, _Process] = {}
    event = win32.DEBUG_EVENT()
    while True:
        # Here the last event has been continued. A dumped process is being ended with its
        # crash code: its exit ends the loop, Ctrl-C or not.
        if ctrl_c.pressed and attach is not None and not outcome.dumps:
            if any(p.armed for p in processes.values()):
                # The exit int3s go first: left behind, the program's own exit would meet one
                # with no debugger (Wine then ends it with code 0, not its own). A thread that
                # reached one before it went is set back by the events of one more wait.
                for armed in processes.values():
                    _disarm(armed)
            elif win32.DebugActiveProcessStop(attach):
                outcome.detached = True
                return outcome
            else:
                outcome.detach_failed = win32.last_error()
                outcome.ended, outcome.exit_code = _ended(attach)
                return outcome
        if not win32.WaitForDebugEvent(ctypes.byref(event), win32.WAIT_TIMEOUT_MS):
            continue
        status = win32.DBG_CONTINUE
        pid, tid, code = event.dwProcessId, event.dwThreadId, event.dwDebugEventCode
        if code == win32.CREATE_PROCESS_DEBUG_EVENT:
            info = event.u.CreateProcessInfo
            if info.hFile:
                win32.CloseHandle(info.hFile)
            processes[pid] = _Process(info.hProcess, _image_name(info.hProcess, pid))
            processes[pid].threads[tid] = info.hThread
        elif code == win32.CREATE_THREAD_DEBUG_EVENT and pid in processes:
            processes[pid].threads[tid] = event.u.CreateThread.hThread
        elif code == win32.EXIT_THREAD_DEBUG_EVENT and pid in processes:
            processes[pid].threads.pop(tid, None)
        elif code == win32.LOAD_DLL_DEBUG_EVENT:
            if event.u.LoadDll.hFile:
                win32.CloseHandle(event.u.LoadDll.hFile)
        elif code == win32.EXCEPTION_DEBUG_EVENT:
            status = _exception(event, processes.get(pid), dumping, outcome)
        elif code == win32.EXIT_PROCESS_DEBUG_EVENT:
            processes.pop(pid, None)
            if pid == main_pid:
                outcome.exit_code = event.u.ExitProcess.dwExitCode
        win32.ContinueDebugEvent(pid, tid, status)
        if code == win32.EXIT_PROCESS_DEBUG_EVENT and not processes and outcome.exit_code is not None:
            return outcome


def _ended(pid: int) -> Tuple[bool, Optional[int]]:
    """Whether process `pid` has exited (or is gone), and its exit code where known."""
    handle = win32.OpenProcess(win32.PROCESS_QUERY_LIMITED_INFORMATION | win32.SYNCHRONIZE, False, pid)
    if not handle:  # no such process (error 87); access denied would mean it is there
        return ctypes.get_last_error() == win32.ERROR_INVALID_PARAMETER, None
    try:
        if win32.WaitForSingleObject(handle, 0) != win32.WAIT_OBJECT_0:
            return False, None
        code = win32.wt.DWORD()
        return True, (code.value if win32.GetExitCodeProcess(handle, ctypes.byref(code)) else None)
    finally:
        win32.CloseHandle(handle)


def _image_name(process: int, pid: int) -> str:
    """The executable's file name (the dump is named after it)."""
    buf = ctypes.create_unicode_buffer(1024)
    size = win32.wt.DWORD(len(buf))
    if win32.QueryFullProcessImageNameW(process, 0, buf, ctypes.byref(size)):
        return buf.value.replace("/", "\\").rsplit("\\", 1)[-1]
    return f"pid{pid}"


def _exception(event: "win32.DEBUG_EVENT", process: Optional[_Process], dumping: _Dumping, outcome: Outcome) -> int:
    info = event.u.Exception
    record = info.ExceptionRecord
    first = bool(info.dwFirstChance)
    if process is not None and record.ExceptionCode == STATUS_BREAKPOINT and first:
        at = record.ExceptionAddress or 0
        if at in process.exit_points:
            return _exit_stop(event, process, at, dumping, outcome)
        if not process.first_breakpoint_seen:
            # the loader's breakpoint (or the attach's): ntdll is mapped, nothing has run yet
            process.first_breakpoint_seen = True
            if dumping.exits is not ExitDumps.NEVER:
                _arm(process)
    decision = policy.on_exception(record.ExceptionCode, first)
    status = win32.DBG_CONTINUE if decision.handled_by_debugger else win32.DBG_EXCEPTION_NOT_HANDLED
    if not decision.dump or process is None:
        return status
    pid, tid = event.dwProcessId, event.dwThreadId
    thread = _thread_handle(process, tid)
    path = _dump_name(dumping.out_dir, process.name, pid)
    started = time.perf_counter()
    saved = win32.EXCEPTION_RECORD.from_buffer_copy(record)
    memory, added, pointed = write_dump(path, process.handle, pid, thread, tid, saved, dumping.full)
    dumped = Dumped(
        path, pid, tid, record.ExceptionCode, first, memory, added, time.perf_counter() - started, pointed=pointed
    )
    outcome.dumps.append(dumped)
    # as Windows ends a process whose exception no handler took: with its code
    win32.TerminateProcess(process.handle, record.ExceptionCode)
    dumping.on_dump(dumped)
    return status


def _thread_handle(process: _Process, tid: int) -> int:
    return process.threads.get(tid) or win32.OpenThread(
        win32.THREAD_GET_CONTEXT | win32.THREAD_SET_CONTEXT | win32.THREAD_QUERY_INFORMATION, False, tid
    )


_OWN_EXIT_POINTS: Optional[Dict[int, str]] = None


def _own_exit_points() -> Dict[int, str]:
    """The exit functions' entries in this process's ntdll, which are the debuggee's too."""
    global _OWN_EXIT_POINTS
    if _OWN_EXIT_POINTS is None:
        ntdll = win32.GetModuleHandleW("ntdll.dll")
        found: Dict[int, str] = {}
        for name in policy.EXIT_FUNCTIONS:
            at = win32.GetProcAddress(ntdll, name.encode()) if ntdll else None
            if at:
                found[at] = name
        _OWN_EXIT_POINTS = found
    return _OWN_EXIT_POINTS


def _write_byte(process: _Process, at: int, byte: bytes) -> bool:
    done = ctypes.c_size_t(0)
    ok = win32.WriteProcessMemory(process.handle, ctypes.c_void_p(at), byte, 1, ctypes.byref(done))
    win32.FlushInstructionCache(process.handle, ctypes.c_void_p(at), 1)
    return bool(ok) and done.value == 1


def _arm(process: _Process) -> None:
    """An int3 on each exit function whose first bytes in the debuggee are this process's
    own (a 32-bit process, or an ntdll mapped elsewhere, is left alone)."""
    live = LiveProcess(process.handle, 0)
    for at, name in _own_exit_points().items():
        theirs = live.read_available(at, SAME_CODE)
        if theirs != ctypes.string_at(at, SAME_CODE):
            continue
        if _write_byte(process, at, INT3):
            process.exit_points[at] = (name, theirs[:1])
    process.armed = bool(process.exit_points)


def _disarm(process: _Process) -> None:
    if process.armed:
        for at, (_name, byte) in process.exit_points.items():
            _write_byte(process, at, byte)
        process.armed = False


def _exit_stop(event: "win32.DEBUG_EVENT", process: _Process, at: int, dumping: _Dumping, outcome: Outcome) -> int:
    """A thread stopped on an exit function's int3: the byte goes back and RIP back to the
    entry (the thread then runs the function as called), and the exit is dumped if
    policy.on_exit says so, the process then ended with its own exit code."""
    pid, tid = event.dwProcessId, event.dwThreadId
    thread = _thread_handle(process, tid)
    regs = _Context().read(thread, tid)
    name = process.exit_points[at][0]
    was_armed = process.armed
    _disarm(process)
    regs[win32.CONTEXT_RIP] = at
    if not win32.SetThreadContext(thread, ctypes.c_void_p(regs.address)):
        raise CaptureError(f"cannot set the registers of thread {tid}: {win32.last_error()}")
    call = policy.exit_call(name, regs[win32.CONTEXT_RCX], regs[win32.CONTEXT_RDX])
    if not was_armed or not policy.on_exit(call, dumping.exits).dump:
        return win32.DBG_CONTINUE  # (not armed: a second thread that reached the int3 before it went)
    record = win32.EXCEPTION_RECORD.from_buffer_copy(event.u.Exception.ExceptionRecord)
    record.ExceptionAddress = at
    path = _dump_name(dumping.out_dir, process.name, pid)
    started = time.perf_counter()
    comment = (
        f"dumpkit capture: the process ended itself: ntdll!{name} was called with exit code "
        f"{call.exit_code} ({call.exit_code:#x}); the exception is dumpkit's breakpoint there"
    )
    memory, added, pointed = write_dump(path, process.handle, pid, thread, tid, record, dumping.full, comment)
    dumped = Dumped(
        path,
        pid,
        tid,
        STATUS_BREAKPOINT,
        True,
        memory,
        added,
        time.perf_counter() - started,
        exit_function=name,
        exit_code=call.exit_code,
        pointed=pointed,
    )
    outcome.dumps.append(dumped)
    win32.TerminateProcess(process.handle, call.exit_code)
    dumping.on_dump(dumped)
    return win32.DBG_CONTINUE
