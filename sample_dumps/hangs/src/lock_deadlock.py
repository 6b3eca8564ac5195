"""A lock-order deadlock between two Python threads.

A small indexing service keeps a catalog and an index, each behind its own lock:
`catalog_lock` (a threading.Lock) and `index_lock` (a threading.RLock). Thread "ingest" adds
a batch: it takes the catalog lock, then the index lock to update the index. Thread
"reindex" rebuilds the index: it takes the index lock, then the catalog lock to read the
catalog. Each takes both locks in `with` blocks, in opposite orders; a Barrier makes sure
both hold their first lock before either asks for its second, so the deadlock happens on
every run. The main thread waits for "ingest" in join().

Once all three are stuck, a short-lived thread ("marker") prints the MARKER line (the ground
truth): every thread's native id, name, PyThreadState address and Python stack
(sys._current_frames()), what it waits on and who holds it, where each lock was entered,
and each lock's address (id()), repr and first bytes as the process itself sees them. Then
it ends; the process stays hung until it is killed.
"""

import ctypes
import json
import linecache
import os
import sys
import threading
import time
import traceback

catalog_lock = threading.Lock()
index_lock = threading.RLock()
both_hold_first = threading.Barrier(2)
catalog, index = [], []
tstates = {}  # thread name -> its PyThreadState address, as the thread itself gets it
asking = set()  # threads about to ask for their second lock

ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p


def note_thread():
    tstates[threading.current_thread().name] = ctypes.pythonapi.PyThreadState_Get()


def update_index(batch):
    with index_lock:  # "ingest" waits here: "reindex" holds index_lock
        index.extend(batch)


def add_batch(batch):
    with catalog_lock:
        catalog.extend(batch)
        both_hold_first.wait()
        asking.add("ingest")
        update_index(batch)


def ingest_main():
    note_thread()
    add_batch(["2026-11-28.csv", "2026-11-29.csv"])


def read_catalog():
    with catalog_lock:  # "reindex" waits here: "ingest" holds catalog_lock
        return list(catalog)


def rebuild_index():
    with index_lock:
        both_hold_first.wait()
        asking.add("reindex")
        index[:] = sorted(read_catalog())


def reindex_main():
    note_thread()
    rebuild_index()


# ----------------------------------------------------------------------------- the MARKER
def with_line(function, name):
    """The line of `with NAME:` in `function` (where the lock was entered)."""
    code = function.__code__
    line = code.co_firstlineno
    while f"with {name}:" not in linecache.getline(code.co_filename, line):
        line += 1
    return [code.co_name, code.co_filename, line]


def lock_facts(lock, held_by, entered_at, wanted_by):
    kind = type(lock)
    return {
        "type": f"{kind.__module__}.{kind.__qualname__}",
        "address": id(lock),
        "repr": repr(lock),
        "locked": lock.locked() if hasattr(lock, "locked") else None,
        "bytes": ctypes.string_at(id(lock), 48).hex(),
        "held_by": held_by,
        "entered_at": entered_at,
        "wanted_by": wanted_by,
    }


def join_facts(thread):
    """What Thread.join() waits on: the thread's _tstate_lock (3.8-3.12, held by the thread
    while it lives) or its _handle (3.13, set when it ends)."""
    lock = getattr(thread, "_tstate_lock", None)
    handle = getattr(thread, "_handle", None)
    return {
        "kind": "join",
        "thread": thread.name,
        "tstate_lock": None if lock is None else id(lock),
        "tstate_lock_repr": None if lock is None else repr(lock),
        "handle": None if handle is None else id(handle),
        "handle_type": None if handle is None else type(handle).__qualname__,
        "held_by": thread.name,
    }


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


def main_thread_joining():
    frame = sys._current_frames().get(threading.main_thread().ident)
    return frame is not None and "join" in [f.name for f in traceback.extract_stack(frame)]


def tell(ingest):
    deadline = time.monotonic() + 30
    while (asking != {"ingest", "reindex"} or not main_thread_joining()) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # both are inside acquire() now: nothing else is left for them to do
    threads = python_threads(exclude={"marker"})
    threads["ingest"]["waits_on"] = {"kind": "lock", "object": "index_lock", "held_by": "reindex"}
    threads["ingest"]["holds"] = ["catalog_lock"]
    threads["reindex"]["waits_on"] = {"kind": "lock", "object": "catalog_lock", "held_by": "ingest"}
    threads["reindex"]["holds"] = ["index_lock"]
    threads["MainThread"]["waits_on"] = join_facts(ingest)
    threads["MainThread"]["holds"] = []
    facts = {
        "scenario": "lock_deadlock",
        "python": sys.version,
        "executable": sys.executable,
        "pid": os.getpid(),
        "switch_interval": sys.getswitchinterval(),
        "threads": sorted(threads.values(), key=lambda t: (t["name"] != "MainThread", t["native_id"])),
        "locks": {
            "catalog_lock": lock_facts(catalog_lock, "ingest", with_line(add_batch, "catalog_lock"), ["reindex"]),
            "index_lock": lock_facts(index_lock, "reindex", with_line(rebuild_index, "index_lock"), ["ingest"]),
        },
        "deadlock": ["ingest", "reindex"],
        "gil": {"held_by": None, "why": "every thread waits with the GIL released (lock acquire, join)"},
    }
    print("MARKER " + json.dumps(facts), flush=True)


def main():
    note_thread()
    ingest = threading.Thread(target=ingest_main, name="ingest")
    reindex = threading.Thread(target=reindex_main, name="reindex")
    ingest.start()
    reindex.start()
    threading.Thread(target=tell, args=(ingest,), name="marker", daemon=True).start()
    ingest.join()
    reindex.join()
    print("indexed", index)


main()
