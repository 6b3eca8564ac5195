"""A critical-section deadlock inside a DLL called from Python.

storage.dll (src/storage.c, next to this script) keeps a journal and a cache, each behind a
CRITICAL_SECTION: storage_flush enters the journal's then the cache's, storage_evict the
cache's then the journal's. Thread "flusher" calls storage_flush and thread "evictor"
storage_evict, through ctypes.CDLL (which releases the GIL for the call). Each enters its
first critical section, meets the other there (the DLL waits until both are inside, so the
deadlock happens on every run), then asks for its second: neither can go on. The main
thread waits for "flusher" in join().

Once both are stuck, a short-lived thread ("marker") prints the MARKER line (the ground
truth): every thread's native id, name, PyThreadState address and Python stack
(sys._current_frames()), what it waits on and who holds it, and each CRITICAL_SECTION's
address and fields (OwningThread, LockCount, RecursionCount, LockSemaphore) as the process
itself reads them. Then it ends; the process stays hung until it is killed.
"""

import ctypes
import json
import os
import sys
import threading
import time
import traceback

storage = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), "storage.dll"))
storage.storage_lock.restype = ctypes.c_void_p
storage.storage_lock.argtypes = [ctypes.c_int]
ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p
tstates = {}  # thread name -> its PyThreadState address, as the thread itself gets it


class CRITICAL_SECTION(ctypes.Structure):  # winnt.h (RTL_CRITICAL_SECTION), x64
    _fields_ = [
        ("DebugInfo", ctypes.c_void_p),
        ("LockCount", ctypes.c_long),
        ("RecursionCount", ctypes.c_long),
        ("OwningThread", ctypes.c_void_p),  # the owner's thread id, as a HANDLE
        ("LockSemaphore", ctypes.c_void_p),
        ("SpinCount", ctypes.c_size_t),
    ]


def note_thread():
    tstates[threading.current_thread().name] = ctypes.pythonapi.PyThreadState_Get()


def flush_journal():
    return storage.storage_flush()  # "flusher" waits in here for the cache's critical section


def flusher_main():
    note_thread()
    flush_journal()


def evict_cache():
    return storage.storage_evict()  # "evictor" waits in here for the journal's critical section


def evictor_main():
    note_thread()
    evict_cache()


# ----------------------------------------------------------------------------- the MARKER
def python_threads(exclude):
    by_ident = {t.ident: t for t in threading.enumerate()}
    out = {}
    for ident, frame in sys._current_frames().items():
        thread = by_ident.get(ident)
        if thread is None or thread.name in exclude:
            continue
        out[thread.name] = {
            "name": thread.name,
            "native_id": thread.native_id,
            "ident": ident,
            "daemon": thread.daemon,
            "tstate": tstates.get(thread.name),
            "frames": [[f.name, f.filename, f.lineno] for f in traceback.extract_stack(frame)],
        }
    return out


def section_facts(which, names_by_id, wanted_by):
    address = storage.storage_lock(which)
    cs = CRITICAL_SECTION.from_address(address)
    owner = cs.OwningThread or 0
    return {
        "dll": "storage.dll",
        "global": "cache_lock" if which else "journal_lock",
        "address": address,
        "rva": address - storage._handle,
        "owning_thread": owner,
        "held_by": names_by_id.get(owner),
        "lock_count": cs.LockCount,
        "recursion_count": cs.RecursionCount,
        "lock_semaphore": cs.LockSemaphore,
        "debug_info": cs.DebugInfo,
        "spin_count": cs.SpinCount,
        "bytes": ctypes.string_at(address, ctypes.sizeof(cs)).hex(),
        "wanted_by": wanted_by,
    }


def main_thread_joining():
    frame = sys._current_frames().get(threading.main_thread().ident)
    return frame is not None and "join" in [f.name for f in traceback.extract_stack(frame)]


def tell(flusher):
    deadline = time.monotonic() + 30
    while (storage.storage_inside() < 2 or not main_thread_joining()) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # both are inside EnterCriticalSection now: nothing else is left for them to do
    threads = python_threads(exclude={"marker"})
    names_by_id = {t["native_id"]: name for name, t in threads.items()}
    journal = section_facts(0, names_by_id, ["evictor"])
    cache = section_facts(1, names_by_id, ["flusher"])
    threads["flusher"]["waits_on"] = {"kind": "critical_section", "object": "cache_lock", "held_by": cache["held_by"]}
    threads["flusher"]["holds"] = ["journal_lock"]
    threads["evictor"]["waits_on"] = {"kind": "critical_section", "object": "journal_lock", "held_by": journal["held_by"]}
    threads["evictor"]["holds"] = ["cache_lock"]
    lock = getattr(flusher, "_tstate_lock", None)
    handle = getattr(flusher, "_handle", None)
    threads["MainThread"]["waits_on"] = {
        "kind": "join",
        "thread": "flusher",
        "tstate_lock": None if lock is None else id(lock),
        "tstate_lock_repr": None if lock is None else repr(lock),
        "handle": None if handle is None else id(handle),
        "handle_type": None if handle is None else type(handle).__qualname__,
        "held_by": "flusher",
    }
    threads["MainThread"]["holds"] = []
    facts = {
        "scenario": "cs_deadlock",
        "python": sys.version,
        "executable": sys.executable,
        "pid": os.getpid(),
        "switch_interval": sys.getswitchinterval(),
        "threads": sorted(threads.values(), key=lambda t: (t["name"] != "MainThread", t["native_id"])),
        "storage_dll": {"base": storage._handle, "path": storage._name},
        "critical_sections": {"journal_lock": journal, "cache_lock": cache},
        "deadlock": ["flusher", "evictor"],
        "gil": {"held_by": None, "why": "ctypes.CDLL released it for both calls; the main thread waits in join"},
    }
    print("MARKER " + json.dumps(facts), flush=True)


def main():
    note_thread()
    flusher = threading.Thread(target=flusher_main, name="flusher")
    evictor = threading.Thread(target=evictor_main, name="evictor")
    flusher.start()
    evictor.start()
    threading.Thread(target=tell, args=(flusher,), name="marker", daemon=True).start()
    flusher.join()
    evictor.join()
    print("flushed and evicted")


main()
