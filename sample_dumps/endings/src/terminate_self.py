"""TerminateProcess on itself, from a watchdog thread, with a distinctive exit code.

A watchdog thread ("watchdog") sees that the main thread made no progress and kills its own
process: kernel32.TerminateProcess(GetCurrentProcess(), 0xE0000001), which reaches
ntdll!NtTerminateProcess(-1, 0xE0000001) directly (no ExitProcess, no DLL detach, no
exception). The main thread is asleep in `wait_for_result` -> time.sleep().
Lines marked "# stack" are the watchdog's Python frames when it ends the process,
"# stack(main)" the main thread's.
"""

import ctypes
import json
import linecache
import sys
import threading
import time
import traceback
from ctypes import wintypes

EXIT_CODE = 0xE0000001


def marker(scenario, **extra):
    """Print the MARKER line just before the program ends itself: versions, thread ids and
    the caller's Python stack, outermost first ([function, file, line]), its innermost
    line moved to the next "# stack" line (the call it is about to make)."""
    frame = sys._getframe(1)
    frames = [[f.name, f.filename, f.lineno] for f in traceback.extract_stack(frame)]
    line = frame.f_lineno
    while not linecache.getline(frame.f_code.co_filename, line).rstrip().endswith("# stack"):
        line += 1
    frames[-1][2] = line
    facts = {
        "scenario": scenario,
        "python": sys.version,
        "executable": sys.executable,
        **extra,
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
        "stack": frames,
    }
    print("MARKER " + json.dumps(facts), flush=True)


def kill_self(code):
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.GetCurrentProcess.restype = wintypes.HANDLE
    kernel32.TerminateProcess.argtypes = (wintypes.HANDLE, wintypes.UINT)
    kernel32.TerminateProcess.restype = wintypes.BOOL
    main_frame = sys._current_frames()[threading.main_thread().ident]
    main_stack = [[f.name, f.filename, f.lineno] for f in traceback.extract_stack(main_frame)]
    marker("terminate_self", call="kernel32.TerminateProcess(GetCurrentProcess(), 0x%08X)" % code,
           exit_code=code, crash_thread_name=threading.current_thread().name,
           main_stack=main_stack)
    kernel32.TerminateProcess(kernel32.GetCurrentProcess(), code)  # stack


def watch(progress, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.05)
    if progress["steps"] == 0:
        kill_self(EXIT_CODE)  # stack


def wait_for_result(progress):
    time.sleep(60)  # stack(main)
    progress["steps"] += 1


def main():
    progress = {"steps": 0}
    threading.Thread(target=watch, args=(progress, 0.5), name="watchdog", daemon=True).start()
    wait_for_result(progress)  # stack(main)


main()  # stack(main)
