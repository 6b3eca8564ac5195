"""A ctypes call into a native DLL that recurses in C until the main thread's stack runs out.

main -> run_job -> build_index -> nativelib.nl_sum_tree (through ctypes): the tree handed to
the DLL has a cycle (its root is its own left and right child), and nativelib's
walk_tree/visit_node (two mutually recursive C functions, period 2, 320 + 240 bytes of stack
per repetition) only stop at NULL. On every CPython version this overflows the C stack in
native code, below _ctypes.pyd and libffi: the Python frames stay as they were at the call.
Lines marked "# stack" are the Python frames at the crash (the last one is the native call).
"""

import ctypes
import json
import linecache
import os
import sys
import threading
import traceback

DLL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nativelib.dll")


class TreeNode(ctypes.Structure):
    pass


TreeNode._fields_ = [
    ("left", ctypes.POINTER(TreeNode)),
    ("right", ctypes.POINTER(TreeNode)),
    ("value", ctypes.c_int),
]


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


def build_index(lib, root):
    facts = {
        "scenario": "ctypes_recursion",
        "python": sys.version,
        "executable": sys.executable,
        "dll": DLL_PATH,
        "native_entry": "nl_sum_tree",
        "native_cycle": ["walk_tree", "visit_node"],
        "recursion_kind": "native",
        "crash_native_id": threading.get_native_id(),
        "main_native_id": threading.main_thread().native_id,
    }
    facts["threads"] = python_stacks()
    facts["stack_at_entry"] = facts["threads"][0]["frames"]
    print("MARKER " + json.dumps(facts), flush=True)
    return lib.nl_sum_tree(ctypes.byref(root), 0)  # stack


def run_job():
    lib = ctypes.CDLL(DLL_PATH)
    lib.nl_sum_tree.argtypes = [ctypes.POINTER(TreeNode), ctypes.c_int]
    lib.nl_sum_tree.restype = ctypes.c_int
    root = TreeNode(value=1)
    root.left = ctypes.pointer(root)  # the bug: a node that is its own child
    root.right = ctypes.pointer(root)
    return build_index(lib, root)  # stack


def main():
    print("index sum", run_job())  # stack


main()  # stack
