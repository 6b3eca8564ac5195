#! python3.9
"""!tfstack: dumpkit inside WinDbg, on the dump or live process the debugger has open.

Run by the debugger:
    .load C:\\path\\to\\windbg_scripts\\tfstack.dll     then   !tfstack [--thread TID] [--all] [--json]
          [--max-frames N] [--rows N] [--image-path DIR]... [--symbol-path SPEC]...
tfstack.dll starts a CPython 3.8+ that has dumpkit inside the debugger and calls
`run_with_engine` here for each command, with the engine's IDebugClient: dumpkit reads the
session through the engine's own interfaces (dumpkit.sources.dbgeng), no pykd needed.

Or by pykd, where it is installed: `!py -g C:\\path\\to\\windbg_scripts\\tfstack.py` with pykd.pyd
loaded (no options: its `!py` loses them), `!py -3.9 ...\\tfstack.py [options]` with the
pykd-ext bootstrapper, or `!tfstack "..."` once tfstack.js is loaded with `.scriptload`
(`main`, over dumpkit.sources.pykd). pykd 0.3.4.15 has wheels for CPython 2.7 and 3.5-3.9
only (tests/windbg_real runs this script through the real pykd on 3.8). The first line
asks pykd-ext's `!py` for 3.9 when no `-X.Y` is given; without it pykd-ext would pick the
highest Python 3 installed, which has no pykd.

When a debugger hosts this script nothing may end the debugger: no exception, SystemExit
or sys.exit leaves it (bad options print the usage error and return; Ctrl-Break stops
the run with one line).

Both routes parse the options here and hand them to the command's body,
`dumpkit.commands.tfstack.run_tfstack`, which builds the Target over the session, runs the
same engine as `dumpkit analyze` and prints the verdict, the recursion cycle, oversized
frames, the stack budget and the crashing stack, with DML links that switch to a thread
(`~~[TID]s`) or a frame (`.frame N`). `--json` prints exactly what `dumpkit analyze
--format json` prints for the same Report. Errors are one line.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Sequence, Tuple

try:
    import dumpkit  # noqa: F401
except ImportError:  # a source checkout: windbg_scripts/ sits next to dumpkit/
    # pykd-ext runs a Python 3 script's text in __main__ (PyRun_String), so there is no
    # __file__; it sets sys.argv[0] to the script's full path instead.
    _here = globals().get("__file__") or (sys.argv[0] if sys.argv else "")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(_here))))

PROG = "!tfstack"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports through exceptions and the debugger, never sys.exit."""

    def error(self, message):
        raise UsageError(message)

    def exit(self, status=0, message=None):
        if message:
            raise UsageError(message.strip())
        raise _Done()

    def _print_message(self, message, file=None):  # --help
        if message:
            for line in message.rstrip("\n").splitlines():
                _emit(line, dml=False)


class _Done(Exception):
    pass


# ----------------------------------------------------------------------------- arguments
def split_command_line(text: str) -> List[str]:
    """Words the way debugger extensions split their argument text (kdlib's and pykd-ext's
    boost escaped_list_separator: blanks separate, double quotes group, backslashes are
    plain characters, so `--image-path "C:\\my dir\\bin"` is two words)."""
    words: List[str] = []
    word: List[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif ch in " \t" and not quoted:
            if word:
                words.append("".join(word))
            word = []
        else:
            word.append(ch)
    if word:
        words.append("".join(word))
    return words


def _process_env(name: str) -> Optional[str]:
    """The debugger process's variable as it is now. os.environ is a copy made when the
    interpreter started (pykd starts it once per debugger session), so on Windows the
    live block is asked through kernel32."""
    if sys.platform != "win32":
        return os.environ.get(name)
    try:
        import ctypes

        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        size = kernel32.GetEnvironmentVariableW(name, None, 0)
        if size == 0:
            return None
        buf = ctypes.create_unicode_buffer(size)
        kernel32.GetEnvironmentVariableW(name, buf, size)
        return buf.value
    except Exception:
        return os.environ.get(name)


def _hosted_by_pykd_pyd() -> bool:
    """pykd.pyd loaded as a debugger extension runs `!py` with pykd compiled into the
    interpreter (PyImport_AppendInittab); imported as a module (pykd-ext, python.exe) it
    is a file."""
    return "pykd" in sys.builtin_module_names


def arguments(argv: Optional[Sequence[str]]) -> Tuple[Optional[List[str]], str]:
    """(the options to parse, or None when they cannot be trusted; where they came from)."""
    if argv is not None:
        return list(argv), "caller"
    given = list(sys.argv[1:])
    if given and _hosted_by_pykd_pyd():
        # pykd 0.3.4.15's `!py` (windbgext.cpp) builds each argument in a std::wstring that
        # dies at the end of its loop iteration and hands PySys_SetArgv the dangling
        # pointers: short options arrive empty, long ones as freed heap ("--all" as "",
        # "--thread 0x118" as "?4", ""). None of them can be believed.
        return None, "pykd's !py"
    return given, "argv"


def _tid(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a thread id: {text!r} (decimal, or hex with 0x)") from None


def _positive(text: str) -> int:
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return n


def build_parser() -> argparse.ArgumentParser:
    from dumpkit.limits import MAX_FRAMES  # the CLI's default too

    p = _Parser(
        prog=PROG,
        add_help=True,
        description="What killed this process: verdict, recursion, frame sizes, stack budget, stacks.",
    )
    p.add_argument(
        "--thread",
        "-t",
        type=_tid,
        metavar="TID",
        help="also show this thread's stack (OS thread id: decimal, or hex with 0x)",
    )
    p.add_argument("--all", action="store_true", help="show every thread's stack")
    p.add_argument(
        "--json", action="store_true", help="print the JSON report (same as `dumpkit analyze --format json`)"
    )
    p.add_argument(
        "--max-frames",
        type=_positive,
        default=MAX_FRAMES,
        metavar="N",
        help=f"most frames walked on the crashing thread (default {MAX_FRAMES:,})",
    )
    p.add_argument(
        "--rows",
        type=_positive,
        default=40,
        metavar="N",
        help="frames shown per stack (default 40; recursion is folded)",
    )
    p.add_argument(
        "--plain",
        action="store_true",
        help="plain text instead of DML (tfstack.js uses this: captured output has no links)",
    )
    p.add_argument(
        "--image-path",
        "-i",
        action="append",
        default=[],
        metavar="DIR",
        help="folder searched for module images (exe/dll/pyd); repeatable",
    )
    p.add_argument(
        "--symbol-path",
        action="append",
        default=[],
        metavar="SPEC",
        help="symbol store folder or srv*cache*url string; the debugger's .sympath and _NT_SYMBOL_PATH are used too",
    )
    return p


# ----------------------------------------------------------------------------- output
_out = None  # what lines go through: pykd (dprintln), or the engine session (tfstack.dll)


def _emit(line: str, dml: bool = True) -> None:
    if _out is not None:
        _out.dprintln(line, dml)
    else:
        sys.stdout.write(line + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The pykd route: pykd's `!py` (or pykd-ext's, or tfstack.js) runs this script."""
    global _out
    argv, source = arguments(argv)
    try:
        import pykd
    except ImportError:
        _out = None
        here = "%d.%d" % sys.version_info[:2]
        sys.stderr.write(
            f"tfstack: error: pykd is not installed in this Python ({here}): tfstack.dll needs no pykd "
            "(`.load ...\\windbg_scripts\\tfstack.dll`, then `!tfstack`); to run this script through "
            "pykd-ext, name a Python that has pykd 0.3.4.15 (`!py -3.9 ...\\tfstack.py`)\n"
        )
        return 2
    _out = pykd
    if argv is None:
        _emit(
            "tfstack: error: pykd's own !py loses a script's options (pykd 0.3.4.15 passes them to "
            "Python from strings it has already freed): load windbg_scripts\\tfstack.dll and type "
            "!tfstack with the options, or run !py -g ...\\tfstack.py without them",
            dml=False,
        )
        return 2
    return _run(argv, pykd, None)


def _run(argv: Sequence[str], session, open_target) -> int:
    """Parse the options, run the command's body over `session`; the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except _Done:
        return 0
    except UsageError as e:
        _emit(f"tfstack: error: {e} (try {PROG} --help)", dml=False)
        return 2
    try:  # the command's body: dumpkit/commands/tfstack.py
        from dumpkit.commands.tfstack import TfstackRequest, run_tfstack
    except Exception as e:
        _emit(f"tfstack: error: dumpkit cannot be imported: {type(e).__name__}: {e}", dml=False)
        return 1
    request = TfstackRequest(
        thread=args.thread,
        all_threads=args.all,
        json=args.json,
        max_frames=args.max_frames,
        rows=args.rows,
        plain=args.plain,
        image_paths=tuple(args.image_path),
        symbol_paths=tuple(args.symbol_path),
        progress_after=_seconds(_process_env("DUMPKIT_TFSTACK_PROGRESS_AFTER")),
    )
    return run_tfstack(request, session, lambda line, dml: _emit(line, dml=dml), open_target)


# ----------------------------------------------------------------------------- the engine route
def run_with_engine(client: int, typed: str) -> Optional[str]:
    """tfstack.dll's entry, once per `!tfstack`: `client` is the engine's IDebugClient for
    this call (an address), `typed` what followed `!tfstack`. Everything is written
    through the engine; the answer is None, or one line for tfstack.dll to print when
    there is no session to print it through (dumpkit cannot be imported). Nothing
    escapes."""
    global _out
    try:
        try:
            import importlib.util

            from dumpkit.sources.dbgeng import DbgengTarget, EngineSession

            if importlib.util.find_spec("capstone") is None:  # the walk's disassembler, a dependency
                raise ModuleNotFoundError("No module named 'capstone'")
        except Exception as e:
            return _not_importable(e)
        session = EngineSession(client)
    except BaseException as e:  # noqa: B036 - nothing may reach the debugger's Python host
        return f"tfstack: error: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
    saved = _out, sys.stdout, sys.stderr
    try:
        _out = session
        sys.stdout = sys.stderr = _DebuggerStream(session)  # a stray print or warning: the debugger's output
        _run(split_command_line(typed), session, DbgengTarget)
    except BaseException as e:  # noqa: B036 - a second Ctrl-Break, or a failure in _run's own handlers
        try:
            _emit(f"tfstack: error: {type(e).__name__}: {' '.join(str(e).split())[:300]}", dml=False)
        except BaseException:  # noqa: B036
            pass
    finally:
        try:
            sys.stdout.flush()
        except BaseException:  # noqa: B036
            pass
        _out, sys.stdout, sys.stderr = saved
        session.close()
    return None


def _not_importable(e: BaseException) -> str:
    where = sys.prefix
    version = "%d.%d" % sys.version_info[:2]
    return (
        f"tfstack: dumpkit cannot be imported in the Python at {where} ({version}): {type(e).__name__}: "
        f'{" ".join(str(e).split())[:200]}; fix: "{where}\\python.exe" -m pip install dumpkit '
        "(or set DUMPKIT_PYTHON to a Python that has it and restart the debugger)"
    )


class _DebuggerStream:
    """sys.stdout/sys.stderr while tfstack.dll's run is on: whole lines to the debugger."""

    def __init__(self, session):
        self._session = session
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += str(text)
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            self._session.output(line, False)
        return len(text)

    def flush(self) -> None:
        if self._pending:
            line, self._pending = self._pending, ""
            self._session.output(line, False)


def _seconds(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def run_in_debugger() -> None:
    """The script's entry when run as a program (pykd's `!py`): main(), with nothing
    let out. A debugger hosting Python dies of what its script raises: pykd's `!py` hands
    an escaping SystemExit to the interpreter's exit path."""
    try:
        main()
    except BaseException as e:  # noqa: B036 - a second Ctrl-Break, or a failure in main's own handlers
        try:
            _emit(f"tfstack: error: {type(e).__name__}: {' '.join(str(e).split())[:300]}", dml=False)
        except BaseException:  # noqa: B036
            pass
    finally:
        _leave_subinterpreter()


def _leave_subinterpreter() -> None:
    """pykd 0.3.4.15's `!py` (without -g) runs a script in a new sub-interpreter and then
    deletes that interpreter while the script's thread state is still the current one;
    CPython 3.8 stops the process for that ("Fatal Python error: PyThreadState_Delete:
    tstate is still current"), whatever the script did: the debugger dies after every
    `!py script`. Making the main interpreter's thread state current as the script's last
    act lets pykd delete the sub-interpreter's without the fatal error (3.9 and later no
    longer check, so nothing is done there). Only when pykd.pyd hosts this script."""
    if sys.version_info[:2] != (3, 8) or sys.platform != "win32" or not _hosted_by_pykd_pyd():
        return
    try:
        import ctypes

        api = ctypes.pythonapi
        for name in ("PyThreadState_Get", "PyInterpreterState_Main", "PyGILState_GetThisThreadState"):
            getattr(api, name).restype = ctypes.c_void_p
        api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
        api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
        api.PyThreadState_Next.restype = ctypes.c_void_p
        api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
        api.PyThreadState_Swap.restype = ctypes.c_void_p
        api.PyThreadState_Swap.argtypes = [ctypes.c_void_p]
        current = api.PyThreadState_Get()
        main_states = []
        state = api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Main())
        while state:
            main_states.append(state)
            state = api.PyThreadState_Next(state)
        if not main_states or current in main_states:
            return  # `!py -g`: the main interpreter, nothing to do
        mine = api.PyGILState_GetThisThreadState()  # this thread's state in the main interpreter
        api.PyThreadState_Swap(mine if mine in main_states else main_states[0])
    except BaseException:  # noqa: B036
        pass


if __name__ == "__main__":
    run_in_debugger()
