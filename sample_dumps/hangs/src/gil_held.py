"""The GIL held across a blocking native call.

A device wrapper waits for its device through ctypes.PyDLL, which, unlike ctypes.CDLL and
ctypes.WinDLL, keeps the GIL during the call (it is meant for functions of the Python C
API): thread "device" calls kernel32's WaitForSingleObject on an event nobody sets, with no
timeout. Every other Python thread then waits for the GIL for good: "scorer" (a pure Python
loop), "heartbeat" (a sleep loop) and the main thread (a sleep loop, on one line each, so
where each waits is one line whatever the moment).

The "device" thread prints the MARKER line itself just before the call (once it makes it,
no other Python code can run): every thread's native id, name, PyThreadState address and
Python stack (its own innermost line moved to the "# stack" line of the call), the event's
handle, and that the GIL is to be held by "device". Then the process stays hung until it is
killed.
"""

import ctypes
import json
import linecache
import os
import sys
import threading
import time
import traceback

INFINITE = 0xFFFFFFFF
kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
kernel32.CreateEventW.restype = ctypes.c_void_p
kernel32.CreateEventW.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_wchar_p]
device_api = ctypes.PyDLL("kernel32")  # the mistake: PyDLL keeps the GIL during the call
device_api.WaitForSingleObject.restype = ctypes.c_uint32
device_api.WaitForSingleObject.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p
tstates = {}  # thread name -> its PyThreadState address, as the thread itself gets it
started = set()


def note_thread():
    tstates[threading.current_thread().name] = ctypes.pythonapi.PyThreadState_Get()
    started.add(threading.current_thread().name)


def score_forever():
    note_thread()
    n = 0
    while True: n = (n * 31 + 7) % 1000003  # noqa: E701  (one line: where it waits for the GIL)


def beat_forever():
    note_thread()
    while True: time.sleep(0.02)  # noqa: E701


def wait_for_device(ready):
    tell(ready)
    return device_api.WaitForSingleObject(ready, INFINITE)  # stack


def device_main():
    note_thread()
    ready = kernel32.CreateEventW(None, True, False, None)  # manual reset, not set, unnamed
    while len(started) < 4:
        time.sleep(0.01)
    time.sleep(0.5)  # every other thread is in its loop now
    wait_for_device(ready)  # stack


# ----------------------------------------------------------------------------- the MARKER
def python_threads():
    """Every thread's Python stack, outermost first; the caller's innermost line moved to
    the next "# stack" line (the call it is about to make)."""
    me = threading.get_ident()
    caller = sys._getframe(2)
    by_ident = {t.ident: t for t in threading.enumerate()}
    out = {}
    for ident, frame in sys._current_frames().items():
        thread = by_ident[ident]
        frame = caller if ident == me else frame
        frames = [[f.name, f.filename, f.lineno] for f in traceback.extract_stack(frame)]
        if ident == me:
            line = frame.f_lineno
            while not linecache.getline(frame.f_code.co_filename, line).rstrip().endswith("# stack"):
                line += 1
            frames[-1][2] = line
        out[thread.name] = {
            "name": thread.name,
            "native_id": thread.native_id,
            "ident": ident,
            "daemon": thread.daemon,
            "tstate": tstates.get(thread.name),
            "frames": frames,
        }
    return out


def tell(ready):
    threads = python_threads()
    threads["device"]["waits_on"] = {
        "kind": "native_wait",
        "function": "kernel32!WaitForSingleObject",
        "via": "ctypes.PyDLL (keeps the GIL)",
        "handle": ready,
        "object": "event: manual reset, unnamed, never set",
        "timeout": "INFINITE",
        "held_by": None,
    }
    threads["device"]["holds"] = ["GIL"]
    for name in ("scorer", "heartbeat", "MainThread"):
        threads[name]["waits_on"] = {"kind": "gil", "held_by": "device"}
        threads[name]["holds"] = []
    facts = {
        "scenario": "gil_held",
        "python": sys.version,
        "executable": sys.executable,
        "pid": os.getpid(),
        "switch_interval": sys.getswitchinterval(),
        "threads": sorted(threads.values(), key=lambda t: (t["name"] != "MainThread", t["native_id"])),
        "event_handle": ready,
        "gil": {"held_by": "device", "tstate": tstates["device"], "waiting": ["scorer", "heartbeat", "MainThread"]},
        "deadlock": None,
    }
    print("MARKER " + json.dumps(facts), flush=True)


def main():
    note_thread()
    for name, target in (("scorer", score_forever), ("heartbeat", beat_forever), ("device", device_main)):
        threading.Thread(target=target, name=name, daemon=True).start()
    while True: time.sleep(0.05)  # noqa: E701


main()
