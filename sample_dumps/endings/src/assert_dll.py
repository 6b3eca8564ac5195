"""A C assert() failing in a DLL called through ctypes: the C runtime reports it, then abort().

`prepare_batch` -> `build_index` asks assertlib.dll (src/assertlib.c, built with mingw against
the Universal C Runtime, assert() kept) to fill a rows x cols matrix; an empty batch gives
rows = 0 and the DLL's assert on its arguments fails: the C runtime prints its assertion
message (logs/assert_dll_py312.log; not quoted here, as this file's text is in the process's
memory) and calls abort(): exit code 3 under Wine (no exception), 0xC0000409 subcode 7 on
Windows.
Lines marked "# stack" are the main thread's Python frames when it dies.
"""

import ctypes
import json
import linecache
import os
import sys
import threading
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


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


def build_index(lib, rows, cols):
    out = (ctypes.c_int * max(rows * cols, 1))()
    marker("assert_dll", call="assertlib.al_fill_matrix(out, %d, %d)" % (rows, cols),
           dll=os.path.join(HERE, "assertlib.dll"))
    return lib.al_fill_matrix(out, rows, cols)  # stack


def prepare_batch(lib, records):
    rows = len(records)
    return build_index(lib, rows, 4)  # stack


def main():
    lib = ctypes.CDLL(os.path.join(HERE, "assertlib.dll"))
    records = [line for line in "".splitlines() if line.strip()]  # an empty input file
    print("batch", prepare_batch(lib, records))  # stack


main()  # stack
