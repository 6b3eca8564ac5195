"""An access violation on a worker thread, five Python frames deep in its own code.

Thread "loader": loader_main -> load_dataset -> read_shard -> parse_header -> read_field
reads a C int at address 0x10 (a field of a NULL record) with
ctypes.c_int.from_address(0x10).value: a real read fault inside _ctypes.pyd (ctypes'
own guard only covers ctypes.string_at/wstring_at/memmove). The main thread waits in join().
Lines marked "# stack" are the loader's Python frames at the crash, "# stack(main)" the
main thread's.
"""

import ctypes
import json
import linecache
import sys
import threading
import time
import traceback

BAD_ADDRESS = 0x10


def python_stacks():
    """Every thread's Python stack, outermost first ([function, file, line]), as this
    program sees it; the caller's innermost line is moved to the next "# stack" line
    (the call it is about to make)."""
    me = threading.get_ident()
    by_ident = {t.ident: t for t in threading.enumerate()}
    caller = sys._getframe(1)
    result = []
    for ident, frame in sys._current_frames().items():
        if ident == me:
            frame = caller
        frames = [[f.name, f.filename, f.lineno] for f in traceback.extract_stack(frame)]
        if ident == me:
            line = frame.f_lineno
            while not linecache.getline(frame.f_code.co_filename, line).rstrip().endswith("# stack"):
                line += 1
            frames[-1][2] = line
        thread = by_ident.get(ident)
        result.append({
            "native_id": thread.native_id if thread else None,
            "name": thread.name if thread else None,
            "crashing": ident == me,
            "frames": frames,
        })
    result.sort(key=lambda t: (not t["name"] == "MainThread", t["native_id"] or 0))
    return result


def main_thread_waiting():
    """True once the main thread is blocked inside Thread.join()."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    names = [f.name for f in traceback.extract_stack(frame)] if frame else []
    return "join" in names


def read_field(record_address, offset):
    deadline = time.monotonic() + 10
    while not main_thread_waiting() and time.monotonic() < deadline:
        time.sleep(0.01)
    facts = {
        "scenario": "thread_av",
        "python": sys.version,
        "executable": sys.executable,
        "bad_address": record_address + offset,
        "crash_thread_name": threading.current_thread().name,
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
    }
    facts["threads"] = python_stacks()
    print("MARKER " + json.dumps(facts), flush=True)
    return ctypes.c_int.from_address(record_address + offset).value  # stack


def parse_header(record_address):
    return {"count": read_field(record_address, BAD_ADDRESS)}  # stack


def read_shard(index):
    record_address = 0  # the shard's header record was never allocated
    return parse_header(record_address)  # stack


def load_dataset(shards):
    headers = []
    for index in range(shards):
        headers.append(read_shard(index))  # stack
    return headers


def loader_main(results):
    results.append(load_dataset(4))  # stack


def main():
    results = []
    thread = threading.Thread(target=loader_main, args=(results,), name="loader")
    thread.start()
    thread.join()  # stack(main)
    print("loaded", results)


main()  # stack(main)
