"""The Windows side of the Windows lane: runs in the genuine CPython 3.8 under Wine.

    python.exe driver.py REQUEST.json

Runs every case of the request as its own `python.exe -m dumpkit ARGS...` child process
(sys.executable: the lane's interpreter, whose ._pth puts the checkout on sys.path), the
way a user runs it from cmd.exe or a script: stdin NUL, in the request's working folder,
with the environment Windows gives (the host removed PYTHONIOENCODING, so a pipe gets the
ANSI code page as it does on Windows). A case's stdout is either
- a pipe (the default): the bytes are recorded as written, or
- this process's Windows console (`"stdout": "console"`, the host made a pty of it, which
  Wine's conhost serves), inherited: what the child printed is read back from the
  console's screen buffer (the rows between the cursor before and after), with the console
  mode after it ended (did anything switch on VT processing?).
stderr is a pipe, or the console too (`"stderr": "console"`). Each child runs in a job
object: on a time-out the whole tree is ended (a triage's worker processes included), and
nothing it started outlives it holding the pipes. Results go to the request's `result` file
as JSON (bytes as base64), rewritten after every case; the host side judges them.

Python 3.8 code (the lane's interpreter): no 3.9+ syntax or library calls.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import subprocess
import sys
import time

MARK = "@@windows-lane"  # no spaces: Wine's console draws a space as a cursor move


class _Console:
    """This process's Windows console (Wine's conhost over the host's pty), through the
    console API: its mode, and the characters its screen buffer holds, which are what a
    user sees (a real conhost without VT processing stores an escape sequence as text and
    shows it as `<-[1m`; so does Wine's)."""

    ROWS = 9000  # the screen buffer's height: every console case's lines fit, none scroll away

    def __init__(self):
        from ctypes import wintypes

        class COORD(ctypes.Structure):
            _fields_ = [("X", ctypes.c_short), ("Y", ctypes.c_short)]

        class SMALL_RECT(ctypes.Structure):
            _fields_ = [
                ("Left", ctypes.c_short),
                ("Top", ctypes.c_short),
                ("Right", ctypes.c_short),
                ("Bottom", ctypes.c_short),
            ]

        class INFO(ctypes.Structure):
            _fields_ = [
                ("size", COORD),
                ("cursor", COORD),
                ("attributes", wintypes.WORD),
                ("window", SMALL_RECT),
                ("maximum", COORD),
            ]

        self.COORD, self.INFO, self.wintypes = COORD, INFO, wintypes
        k = ctypes.WinDLL("kernel32", use_last_error=True)
        k.GetStdHandle.restype = wintypes.HANDLE
        k.GetConsoleMode.argtypes = [wintypes.HANDLE, ctypes.POINTER(wintypes.DWORD)]
        k.GetConsoleScreenBufferInfo.argtypes = [wintypes.HANDLE, ctypes.POINTER(INFO)]
        k.SetConsoleScreenBufferSize.argtypes = [wintypes.HANDLE, COORD]
        k.ReadConsoleOutputCharacterW.argtypes = [
            wintypes.HANDLE,
            wintypes.LPWSTR,
            wintypes.DWORD,
            COORD,
            ctypes.POINTER(wintypes.DWORD),
        ]
        self.k = k
        self.handle = k.GetStdHandle(-11)

    def mode(self):
        mode = self.wintypes.DWORD()
        if not self.k.GetConsoleMode(self.handle, ctypes.byref(mode)):
            return None
        return mode.value

    def info(self):
        info = self.INFO()
        if not self.k.GetConsoleScreenBufferInfo(self.handle, ctypes.byref(info)):
            return None
        return info

    def grow(self):
        info = self.info()
        if info is not None:
            self.k.SetConsoleScreenBufferSize(self.handle, self.COORD(info.size.X, self.ROWS))
        info = self.info()
        return None if info is None else {"columns": info.size.X, "rows": info.size.Y}

    def cursor_row(self):
        info = self.info()
        return None if info is None else info.cursor.Y

    def rows(self, first, last):
        """The screen buffer's rows first..last, trailing blanks removed."""
        info = self.info()
        if info is None or first is None or last is None:
            return None
        width = info.size.X
        out = []
        for y in range(first, last + 1):
            buf = ctypes.create_unicode_buffer(width + 1)
            n = self.wintypes.DWORD()
            if not self.k.ReadConsoleOutputCharacterW(self.handle, buf, width, self.COORD(0, y), ctypes.byref(n)):
                return None
            out.append(buf[: n.value].rstrip(" "))
        return out


def _b64(data):
    return base64.b64encode(data or b"").decode("ascii")


class _Job:
    """A Windows job object holding a case's process and every process it starts (worker
    processes of a triage): a case that overruns its time is ended whole, and nothing it
    started outlives it holding the pipes open."""

    def __init__(self):
        from ctypes import wintypes

        k = ctypes.WinDLL("kernel32", use_last_error=True)
        k.CreateJobObjectW.restype = wintypes.HANDLE
        k.CreateJobObjectW.argtypes = [ctypes.c_void_p, wintypes.LPCWSTR]
        k.AssignProcessToJobObject.argtypes = [wintypes.HANDLE, wintypes.HANDLE]
        k.TerminateJobObject.argtypes = [wintypes.HANDLE, wintypes.UINT]
        k.CloseHandle.argtypes = [wintypes.HANDLE]
        self.k = k
        self.handle = k.CreateJobObjectW(None, None)

    def add(self, proc):
        return bool(self.handle and self.k.AssignProcessToJobObject(self.handle, int(proc._handle)))

    def end(self):
        if self.handle:
            self.k.TerminateJobObject(self.handle, 1)
            self.k.CloseHandle(self.handle)
            self.handle = None


def _run(case, cwd, env, console_api):
    argv = [sys.executable] + list(case.get("python_args", ["-m", "dumpkit"])) + list(case["args"])
    child_env = dict(env)
    child_env.update(case.get("env", {}))
    console = case.get("stdout") == "console"
    out = {"name": case["name"], "argv": argv, "returncode": None, "stdout": "", "stderr": "", "error": None}
    first = None
    if console:
        sys.stdout.write("\n%s-begin-%s@@\n" % (MARK, case["name"]))
        sys.stdout.flush()
        first = console_api.cursor_row()
    # a file another program has open (as Python's open() does: no FILE_SHARE_DELETE), for
    # the time the case runs: Windows refuses to replace it
    held = open(case["hold_open"], "rb") if case.get("hold_open") else None
    started = time.perf_counter()
    job = _Job()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=None if console else subprocess.PIPE,
            stderr=None if case.get("stderr") == "console" else subprocess.PIPE,
            cwd=case.get("cwd", cwd),
            env=child_env,
        )
    except OSError as e:
        out["error"] = "could not start: %s" % e
        job.end()
        if held is not None:
            held.close()
        return out
    out["in_job"] = job.add(proc)
    try:
        stdout, stderr = proc.communicate(timeout=case.get("timeout", 300))
    except subprocess.TimeoutExpired:
        exited = proc.poll()
        out["error"] = "timed out after %s s (%s)" % (
            case.get("timeout", 300),
            "running" if exited is None else "exited %s, but processes it started held its pipes open" % exited,
        )
        job.end()
        proc.kill()
        try:
            stdout, stderr = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            stdout, stderr = b"", b""
    finally:
        job.end()
        if held is not None:
            held.close()
    out["returncode"] = proc.returncode
    out["stdout"] = _b64(stdout)
    out["stderr"] = _b64(stderr)
    out["seconds"] = round(time.perf_counter() - started, 3)
    if console:
        last = console_api.cursor_row()
        out["screen"] = console_api.rows(first, last)
        out["screen_scrolled"] = last is not None and last >= console_api.ROWS - 1
        out["console_mode"] = console_api.mode()
        sys.stdout.write("\n%s-end-%s@@\n" % (MARK, case["name"]))
        sys.stdout.flush()
    return out


def main(request_path):
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    env = dict(os.environ)
    console_api = _Console()
    result = {
        "python": sys.version,
        "executable": sys.executable,
        "sys_path": sys.path,
        "stdout_encoding": sys.stdout.encoding,
        "console_mode": console_api.mode(),
        "console_size": console_api.grow(),
        "cases": [],
    }
    for case in request["cases"]:
        result["cases"].append(_run(case, request["cwd"], env, console_api))
        # written after every case: a lane that dies half-way still shows what ran
        with open(request["result"], "w", encoding="utf-8") as f:
            json.dump(result, f)
    result["done"] = True
    with open(request["result"], "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1])
