"""A program that runs until told to stop, for `dumpkit capture --attach PID` and its Ctrl-C.

Ten times a second it appends a line to STATUS: its process id (the one --attach takes), a
beat count and IsDebuggerPresent(). The test reads them to know that the attach took
(debugged), that the detach did (not debugged) and that the program went on running after it
(the beat grows). It exits with 5 once the file STOP exists, so its exit code says it ended
on its own and was not killed or crashed by the attach.

Two more files, looked for beside STOP, make it act while attached:
- STOP.detach: it detaches its debugger itself, as some programs do to resist debugging
  (NtQueryInformationProcess(ProcessDebugObjectHandle), then NtRemoveProcessDebug), and
  says so in its status lines ("self_detach": the two NTSTATUS values). The debugger's own
  DebugActiveProcessStop then fails: the process is no longer its debuggee.
- STOP.crash: it reads a C int at address 0x10 (ctypes.c_int.from_address: a real access
  violation inside _ctypes.pyd, on the main thread), four Python frames deep in
  crash_now <- handle_request <- serve <- <module>."""

import ctypes
import json
import os
import sys
import time

ProcessDebugObjectHandle = 30
CURRENT_PROCESS = ctypes.c_void_p(-1)

status, stop = sys.argv[1], sys.argv[2]
being_debugged = ctypes.windll.kernel32.IsDebuggerPresent


def detach_my_debugger():
    ntdll = ctypes.WinDLL("ntdll")
    debug_object = ctypes.c_void_p()
    query = ntdll.NtQueryInformationProcess(
        CURRENT_PROCESS, ProcessDebugObjectHandle, ctypes.byref(debug_object), ctypes.sizeof(debug_object), None
    )
    remove = ntdll.NtRemoveProcessDebug(CURRENT_PROCESS, debug_object) if query == 0 else None
    return [query & 0xFFFFFFFF, None if remove is None else remove & 0xFFFFFFFF]


def crash_now():
    return ctypes.c_int.from_address(0x10).value


def handle_request():
    return crash_now()


def serve():
    beat = 0
    self_detach = None
    while not os.path.exists(stop):
        beat += 1
        if self_detach is None and os.path.exists(stop + ".detach"):
            self_detach = detach_my_debugger()
        if os.path.exists(stop + ".crash"):
            handle_request()
        line = {"pid": os.getpid(), "beat": beat, "debugged": bool(being_debugged()), "self_detach": self_detach}
        with open(status, "a") as f:  # whole lines: the reader takes the last one ending in \n
            f.write(json.dumps(line) + "\n")
        time.sleep(0.1)


serve()
sys.exit(5)
