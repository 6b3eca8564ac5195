#! python3.9
"""!tfstack: dumpkit inside WinDbg, on the dump or live process the debugger has open.

Run by the debugger:
    .load C:\\path\\to\\windbg_scripts\\tfstack.dll     then   !tfstack [--thread TID] [--all] [--json]
          [--max-frames N] [--rows N] [--image-path DIR]... [--symbol-path SPEC]...
or by pykd: `!py -g C:\\path\\to\\windbg_scripts\\tfstack.py` with pykd.pyd loaded (no options: its
`!py` loses them), `!py -3.9 ...\\tfstack.py [options]` with the pykd-ext bootstrapper, or
`!tfstack "..."` once tfstack.js is loaded with `.scriptload`.

When a debugger hosts this script nothing may end the debugger: no exception, SystemExit
or sys.exit leaves it (bad options print the usage error and return; Ctrl-Break, which
pykd delivers as SystemExit("CTRL+BREAK"), stops the run with one line). tfstack.dll hands
over the options as typed in DUMPKIT_TFSTACK_ARGS, because pykd 0.3.4.15's own `!py`
passes a script's arguments to Python from strings it has already freed.

CPython 3.8 or 3.9 because pykd 0.3.4.15 has wheels for 2.7 and 3.5-3.9 only and dumpkit
needs 3.8+ (tests/windbg_real runs this script through the real pykd on 3.8). The first
line asks pykd-ext's `!py` for 3.9 when no `-X.Y` is given; without it pykd-ext would pick
the highest Python 3 installed, which has no pykd.

It builds a `dumpkit.sources.pykd.PykdTarget` over the session, runs the same engine as
`dumpkit analyze` (`dumpkit.engine.analyze`) and prints the verdict, the recursion cycle,
oversized frames, the stack budget and the crashing stack, with DML links that switch to
a thread (`~~[TID]s`) or a frame (`.frame N`). `--json` prints exactly what
`dumpkit analyze --format json` prints for the same Report. Errors are one line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

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
ARGS_ENV = "DUMPKIT_TFSTACK_ARGS"  # set by tfstack.dll for one run: "!tfstack" + what was typed


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
    typed = _process_env(ARGS_ENV)
    if typed is not None:
        words = split_command_line(typed)
        if words and words[0].lower().lstrip("!").split(".")[-1] == "tfstack":
            words = words[1:]
        return words, "tfstack.dll"
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
        default=2_000_000,
        metavar="N",
        help="most frames walked on the crashing thread (default 2,000,000)",
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
_pykd = None


def _emit(line: str, dml: bool = True) -> None:
    if _pykd is not None:
        _pykd.dprintln(line, dml)
    else:
        sys.stdout.write(line + "\n")


_MAX_FRAME_NUMBER = 0xFFFF  # `.frame` rejects higher numbers (seen with dbgeng 10.0)


def debugger_frame_numbers(report, target):
    """The DML's `.frame N` links (a dumpkit.report.dml.FrameNumbers): each of dumpkit's
    frames as the number of the debugger's own frame with the same Child-SP. The two
    number frames alike only while they unwind alike: dbgeng cannot unwind out of a stack
    probe without unwind data (on big_frame.dmp its frame 1 is not dumpkit's), stops at
    1,024 frames in getStack and takes no `.frame` number above 0xffff. A frame it does not
    have is left out of the map (shown unlinked); when the debugger gives no stack at all,
    dumpkit's numbers stay."""
    walked = {t.tid: t.frames + (t.possible_frames or ()) for t in report.threads}  # possible frames get links too

    def numbers(tid: int, exception_context: bool) -> Optional[Dict[int, int]]:
        stack = target.debugger_stack(tid, exception_context=exception_context)
        if stack is None:
            return None
        first = {sp: i for i, sp in reversed(list(enumerate(stack)))}  # an SP's innermost frame
        found = ((f.index, first.get(f.sp)) for f in walked.get(tid, ()))
        return {index: n for index, n in found if n is not None and n <= _MAX_FRAME_NUMBER}

    return numbers


def _emit_debugger_facts(facts: Sequence[str], plain: bool) -> None:
    """Where the report used the debugger's facts instead of the dump file's."""
    if not facts:
        return
    from dumpkit.report.dml import dml_text

    _emit("", dml=not plain)
    _emit("From the debugger" if plain else "<b>From the debugger</b>", dml=not plain)
    for fact in facts:
        _emit(f"  - {fact}" if plain else f"  - {dml_text(fact, 2000)}", dml=not plain)


class _Progress:
    """pykd, with a line on the debugger's output every few seconds of a long run (a
    million-frame walk): every memory read the analysis makes passes here, on the
    debugger's own thread, which is also where Ctrl-Break lands."""

    FIRST = 2.0  # seconds before the first line (DUMPKIT_TFSTACK_PROGRESS_AFTER: the lane's knob)
    EVERY = 5.0

    def __init__(self, pykd_module, enabled: bool = True):
        self._pykd = pykd_module
        self._started = time.perf_counter()
        try:
            first = float(_process_env("DUMPKIT_TFSTACK_PROGRESS_AFTER") or self.FIRST)
        except ValueError:
            first = self.FIRST
        self._next = self._started + first if enabled else float("inf")
        self._reads = 0
        self._bytes = 0
        self.failed: List[Tuple[int, int]] = []

    def __getattr__(self, name):
        return getattr(self._pykd, name)

    def loadBytes(self, address, size):
        self._reads += 1
        self._bytes += size
        if self._reads & 0x3F == 0:
            now = time.perf_counter()
            if now >= self._next:
                self._next = now + self.EVERY
                _emit(
                    f"tfstack: working, {now - self._started:.0f} s, {self._bytes / 1048576:,.1f} MiB read "
                    "from the debugger (Ctrl-Break stops)",
                    dml=False,
                )
        try:
            return self._pykd.loadBytes(address, size)
        except Exception:
            self.failed.append((address, size))
            raise

    def refused_read(self, held: Sequence[Tuple[int, int]]) -> Optional[Tuple[int, int]]:
        """A read that failed although the dump holds every byte of it. dbgeng answers a
        Ctrl-Break that lands during a memory read by failing the read (pykd's own watch
        then often never sees it): the walk would end early and report a short stack as
        if it were the truth."""
        import bisect

        starts = [start for start, _ in held]
        for address, size in self.failed:
            i = bisect.bisect_right(starts, address) - 1
            if i >= 0 and address + size <= held[i][1]:
                return address, size
        return None


# ----------------------------------------------------------------------------- main
def _symbol_paths(explicit: Sequence[str]) -> List[str]:
    paths = list(explicit)
    for extra in (os.environ.get("_NT_SYMBOL_PATH"), _debugger_sympath()):
        if extra and extra not in paths:
            paths.append(extra)
    return paths


def _image_paths(explicit: Sequence[str], exe_path: Sequence[str]) -> List[str]:
    """The user's folders, then the plain folders of the debugger's `.exepath` (where
    dbgeng found the images it maps); its `srv*` elements go with the symbol path."""
    paths = list(explicit)
    for element in exe_path:
        if "*" not in element and "://" not in element and element not in paths:
            paths.append(element)
    return paths


def _exe_path_stores(exe_path: Sequence[str]) -> List[str]:
    return [e for e in exe_path if "*" in e or "://" in e]


def _debugger_sympath() -> Optional[str]:
    if _pykd is None:
        return None
    try:
        return str(_pykd.getSymbolPath() or "") or None
    except Exception:
        return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    global _pykd
    argv, source = arguments(argv)
    try:
        import pykd
    except ImportError:
        _pykd = None
        here = "%d.%d" % sys.version_info[:2]
        sys.stderr.write(
            f"tfstack: error: pykd is not installed in this Python ({here}); pykd "
            "0.3.4.15 exists for CPython 2.7 and 3.5-3.9 only: run `!py -3.9 "
            "tfstack.py` inside WinDbg after `.load pykd`, with "
            "`py -3.9 -m pip install pykd==0.3.4.15` done once\n"
        )
        return 2
    _pykd = pykd
    if argv is None:
        _emit(
            "tfstack: error: pykd's own !py loses a script's options (pykd 0.3.4.15 passes them to "
            "Python from strings it has already freed): load windbg_scripts\\tfstack.dll and type "
            "!tfstack with the options, or run !py -g ...\\tfstack.py without them",
            dml=False,
        )
        return 2
    try:
        args = build_parser().parse_args(argv)
    except _Done:
        return 0
    except UsageError as e:
        _emit(f"tfstack: error: {e} (try {PROG} --help)", dml=False)
        return 2
    try:
        from dumpkit.engine import Options, analyze
        from dumpkit.sources.pykd import PykdTarget

        progress = _Progress(pykd, enabled=not args.json)  # --json: the JSON alone
        target = PykdTarget(progress)
        if args.thread is not None and all(t.tid != args.thread for t in target.threads):
            ids = ", ".join(f"{t.tid} (0x{t.tid:x})" for t in target.threads)
            _emit(f"tfstack: error: no thread {args.thread} (0x{args.thread:x}); threads: {ids}", dml=False)
            return 2
        opts = Options(
            image_paths=tuple(_image_paths(args.image_path, target.exe_path)),
            symbol_paths=_symbol_paths(list(args.symbol_path) + _exe_path_stores(target.exe_path)),
            max_frames=args.max_frames,
        )
        report = analyze(target, opts).report
        refused = progress.refused_read(target.dump_ranges)
        if refused is not None:
            _emit(
                f"tfstack: interrupted (Ctrl-Break): the debugger stopped answering memory reads "
                f"({refused[1]} bytes at {refused[0]:#x}, held by the dump): no report",
                dml=False,
            )
            return 130
        if args.json:
            from dumpkit.report.json_report import render_json

            _emit(render_json(report), dml=False)
        else:
            shown = [args.thread] if args.thread is not None else []
            from dumpkit.report.dml import plain_text, render_dml

            numbers = debugger_frame_numbers(report, target)
            lines = render_dml(report, rows=args.rows, show_threads=shown, all_threads=args.all, frame_numbers=numbers)
            for line in lines:
                if args.plain:
                    _emit(plain_text(line), dml=False)
                else:
                    _emit(line, dml=True)
            _emit_debugger_facts(target.debugger_facts(), plain=args.plain)
        return 1 if report.soft_errors else 0
    except (KeyboardInterrupt, SystemExit) as e:
        # pykd's `!py` turns Ctrl-Break into SystemExit("CTRL+BREAK") raised in the script
        # (a pending call, so it lands between two Python instructions)
        _emit(f"tfstack: interrupted{' (Ctrl-Break)' if isinstance(e, SystemExit) else ''}: no report", dml=False)
        return 130
    except Exception as e:
        text = " ".join(str(e).split()) or type(e).__name__
        _emit(f"tfstack: error: {type(e).__name__}: {text[:500]}", dml=False)
        return 1


def run_in_debugger() -> None:
    """The script's entry when run as a program (`!py`, tfstack.dll): main(), with nothing
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
