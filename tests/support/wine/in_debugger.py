"""The Windows side of the real-pykd lane: runs in the lane's CPython 3.8 under Wine.

    python.exe in_debugger.py REQUEST.json

opens the request's dump with the real pykd 0.3.4.15 (`pykd.loadDump`, Microsoft's dbgeng
inside), optionally points the debugger at a folder of images (`.exepath` + `.reload`, as
a WinDbg user does), then runs windbg_scripts/tfstack.py once per requested argument list
the way pykd-ext's `!py` runs a script: its text executed in a fresh `__main__` namespace,
no `__file__`, `sys.argv[0]` the script's path. What the script prints through
`pykd.dprintln` arrives on `sys.stdout` in a standalone pykd session, so it is captured
there. A run may ask for its DML links to be checked: every `<link cmd="...">` command is
run through `pykd.dbgCommand` and its output (or the exception it raised) recorded. The
results go to the request's `result` file as JSON; the host side judges them.

Python 3.8 code (the lane's interpreter): no 3.9+ syntax or library calls.
"""

from __future__ import annotations

import html
import io
import json
import re
import sys
import time
import traceback

_LINK = re.compile(r'<link cmd="([^"]*)">(.*?)</link>')


def _run_script(script, args):
    with open(script, encoding="utf-8") as f:
        code = compile(f.read(), "<string>", "exec")  # PyRun_String: no file name
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    saved_argv, saved_out = sys.argv, sys.stdout
    captured = io.StringIO()
    error = None
    started = time.perf_counter()
    sys.argv, sys.stdout = [script] + list(args), captured
    try:
        exec(code, namespace)
    except BaseException:  # the script must not raise; if it does, the host reports it
        error = traceback.format_exc()
    finally:
        sys.argv, sys.stdout = saved_argv, saved_out
    return {"output": captured.getvalue(), "error": error, "seconds": round(time.perf_counter() - started, 3)}


def _command(pykd, command, label=None):
    out = {"command": command, "label": label, "output": None, "raised": None}
    try:
        out["output"] = pykd.dbgCommand(command)
    except pykd.DbgException as e:
        out["raised"] = " ".join(str(e).split())
    return out


def _check_links(pykd, dml):
    seen = {}
    for raw, label in _LINK.findall(dml):
        seen.setdefault(html.unescape(raw), html.unescape(re.sub(r"<[^>]*>", "", label)))
    return [_command(pykd, c, label) for c, label in seen.items()]


def main(request_path):
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    import pykd

    result = {"python": sys.version, "pykd": pykd.__version__, "runs": [], "setup": []}
    started = time.perf_counter()
    pykd.initialize()
    pykd.loadDump(request["dump"])
    result["load_seconds"] = round(time.perf_counter() - started, 3)
    for command in request.get("setup", []):
        result["setup"].append(_command(pykd, command))
    for command in request.get("facts", []):  # what the debugger says, for the host's checks
        result.setdefault("facts", []).append(_command(pykd, command))
    for run in request["runs"]:
        got = _run_script(request["script"], run["args"])
        if run.get("check_links"):
            got["links"] = _check_links(pykd, got["output"])
        result["runs"].append(got)
    with open(request["result"], "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1])
