"""The debug loop of `dumpkit capture` and the dump it writes. Windows only.

The program is started with DEBUG_PROCESS (its child processes are debugged too: a venv's
python.exe is a launcher that starts the real interpreter as a child) and inherits the
console, so its output passes straight through; or a running process is attached to. Each
exception event goes to policy.on_exception. When it says dump, the crashing process is
dumped while it is stopped: MiniDumpWriteDump with the exception record and the thread's
context, then the memory of its Python stacks (pymemory) is offered through the
MemoryCallback Microsoft documents, and whatever the writer did not take is added to the
file afterwards (amend; Wine's dbghelp ignores callbacks). The process is then ended with
the exception code, as Windows would end it."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from dumpkit.capture import policy, win32
from dumpkit.capture.amend import add_memory
from dumpkit.capture.live import LiveProcess
from dumpkit.capture.pymemory import PythonMemory, command_line_memory, page_bytes, python_memory
from dumpkit.sources.minidump import open_dump

MAX_CALLBACK_RANGES = 1 << 20


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


def write_dump(
    path: str, process: int, pid: int, thread: int, tid: int, record: "win32.EXCEPTION_RECORD", full: bool
) -> Tuple[Optional[PythonMemory], int]:
    """Write the dump; (the Python memory found, bytes of it added after the writer)."""
    raw = (ctypes.c_ubyte * (win32.CONTEXT_SIZE + 16))()
    context = (ctypes.addressof(raw) + 15) & ~15  # CONTEXT is 16-byte aligned
    ctypes.c_uint32.from_address(context + win32.CONTEXT_FLAGS_OFFSET).value = win32.CONTEXT_ALL_AMD64
    if not win32.GetThreadContext(thread, ctypes.c_void_p(context)):
        raise CaptureError(f"cannot read the registers of thread {tid}: {win32.last_error()}")
    pointers = win32.EXCEPTION_POINTERS(ctypes.pointer(record), ctypes.c_void_p(context))
    info = win32.MINIDUMP_EXCEPTION_INFORMATION(tid, ctypes.pointer(pointers), False)
    live = LiveProcess(process, pid)
    memory = None if full else python_memory(live)
    callback = None
    if memory is not None and memory.ranges:
        routine = _callback(memory.ranges)
        callback = win32.MINIDUMP_CALLBACK_INFORMATION(routine, None)
    kind = (
        win32.MiniDumpWithFullMemory | win32.MiniDumpWithHandleData
        if full
        else win32.MiniDumpNormal | win32.MiniDumpWithProcessThreadData
    )
    kind |= win32.MiniDumpWithUnloadedModules | win32.MiniDumpWithThreadInfo | win32.MiniDumpWithFullMemoryInfo
    handle = win32.CreateFileW(
        path, win32.GENERIC_WRITE, 0, None, win32.CREATE_ALWAYS, win32.FILE_ATTRIBUTE_NORMAL, None
    )
    if not handle or handle == win32.INVALID_HANDLE_VALUE:
        raise CaptureError(f"{path}: cannot create the dump file: {win32.last_error()}")
    try:
        ok = win32.MiniDumpWriteDump(
            process, pid, handle, kind, ctypes.byref(info), None, ctypes.byref(callback) if callback else None
        )
        error = None if ok else win32.last_error()
    finally:
        win32.CloseHandle(handle)
    if error is not None:
        raise CaptureError(f"{path}: MiniDumpWriteDump failed: {error}")
    # One amend for all that is added: Wine's writer puts its memory list (a million entries
    # for a TensorFlow process) just before the range data, and an amend grows the list
    # there only over range data it can move. After one amend the list is followed by the
    # unused rest of the bytes it moved, which a second amend cannot tell from bytes another
    # stream points at, so it would write a whole new list at the end (23 MB for TensorFlow).
    pieces: List[Tuple[int, bytes]] = []
    if memory is not None and memory.ranges:
        pieces += page_bytes(live, memory.ranges)
    if not full:
        pieces += _command_line_bytes(path, live)
    added = add_memory(path, pieces).bytes_added if pieces else 0
    return memory, added


def _command_line_bytes(path: str, live: LiveProcess) -> List[Tuple[int, bytes]]:
    """The bytes the written dump needs for its command line, where the writer left them out
    (MiniDumpWithProcessThreadData holds them on Windows; Wine's dbghelp writes no TEB or
    PEB): read through the TEB addresses the dump recorded, as the analysis will."""
    written = open_dump(path)
    try:
        threads = list(written.threads)
    finally:
        written.close()
    return page_bytes(live, command_line_memory(live, threads))


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


def run(
    argv: Optional[Sequence[str]], attach: Optional[int], out_dir: str, full: bool, on_dump: Callable[[Dumped], None]
) -> Outcome:
    """Run `argv` (or attach to process `attach`) until it exits; dump each crash into
    `out_dir` and hand it to `on_dump` (which prints the verdict). Ctrl-C detaches from an
    attached process; a started one got it too (one console) and decides for itself."""
    ctrl_c = _CtrlC()
    previous = signal.signal(signal.SIGINT, ctrl_c)
    try:
        return _debug_loop(argv, attach, out_dir, full, on_dump, ctrl_c)
    finally:
        signal.signal(signal.SIGINT, previous)


def _debug_loop(
    argv: Optional[Sequence[str]],
    attach: Optional[int],
    out_dir: str,
    full: bool,
    on_dump: Callable[[Dumped], None],
    ctrl_c: _CtrlC,
) -> Outcome:
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
            if win32.DebugActiveProcessStop(attach):
                outcome.detached = True
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
            status = _exception(event, processes.get(pid), out_dir, full, outcome, on_dump)
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


def _exception(
    event: "win32.DEBUG_EVENT",
    process: Optional[_Process],
    out_dir: str,
    full: bool,
    outcome: Outcome,
    on_dump: Callable[[Dumped], None],
) -> int:
    info = event.u.Exception
    record = info.ExceptionRecord
    first = bool(info.dwFirstChance)
    decision = policy.on_exception(record.ExceptionCode, first)
    status = win32.DBG_CONTINUE if decision.handled_by_debugger else win32.DBG_EXCEPTION_NOT_HANDLED
    if not decision.dump or process is None:
        return status
    pid, tid = event.dwProcessId, event.dwThreadId
    thread = process.threads.get(tid) or win32.OpenThread(
        win32.THREAD_GET_CONTEXT | win32.THREAD_QUERY_INFORMATION, False, tid
    )
    path = _dump_name(out_dir, process.name, pid)
    started = time.perf_counter()
    saved = win32.EXCEPTION_RECORD.from_buffer_copy(record)
    memory, added = write_dump(path, process.handle, pid, thread, tid, saved, full)
    dumped = Dumped(path, pid, tid, record.ExceptionCode, first, memory, added, time.perf_counter() - started)
    outcome.dumps.append(dumped)
    # as Windows ends a process whose exception no handler took: with its code
    win32.TerminateProcess(process.handle, record.ExceptionCode)
    on_dump(dumped)
    return status
