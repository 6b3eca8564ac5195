#! python3.9
"""!tfstack: dumpkit inside WinDbg, on the dump or live process the debugger has open.

Run by pykd:  !py -3.9 C:\\path\\to\\windbg_scripts\\tfstack.py [--thread TID] [--all] [--json]
              [--max-frames N] [--rows N] [--image-path DIR]... [--symbol-path SPEC]...
(or `!tfstack ...` once tfstack.js is loaded with `.scriptload`).

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
import re
import sys
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

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


_FRAME_LINK = re.compile(r'<link cmd="~~\[0x([0-9a-f]+)\]s(; \.ecxr)?; \.frame 0x([0-9a-f]+)">(.*?)</link>')
_MAX_FRAME_NUMBER = 0xFFFF  # `.frame` rejects higher numbers (seen with dbgeng 10.0)


def _frame_links_the_debugger_takes(lines: Iterable[str], report, target) -> Iterator[str]:
    """The DML lines with each `.frame N` link pointed at the debugger's own frame with
    the same Child-SP as dumpkit's frame N. The two number frames alike only while they
    unwind alike: dbgeng cannot unwind out of a stack probe without unwind data (on
    big_frame.dmp its frame 1 is not dumpkit's), stops at 1,024 frames in getStack and
    takes no `.frame` number above 0xffff. A frame it does not have keeps its number as
    plain text: a link must show the frame it names or nothing. When the debugger gives
    no stack at all, links are left as dumpkit numbered them."""
    sps = {t.tid: {f.index: f.sp for f in t.frames} for t in report.threads}
    seen: Dict[Tuple[int, bool], Optional[Dict[int, int]]] = {}

    def retarget(m: "re.Match") -> str:
        tid, ecxr, index, label = int(m.group(1), 16), m.group(2) or "", int(m.group(3), 16), m.group(4)
        key = (tid, bool(ecxr))
        if key not in seen:
            stack = target.debugger_stack(tid, exception_context=bool(ecxr))
            seen[key] = None if stack is None else {sp: i for i, sp in reversed(list(enumerate(stack)))}
        numbers = seen[key]
        if numbers is None:
            return m.group(0)
        number = numbers.get(sps.get(tid, {}).get(index, -1))
        if number is None or number > _MAX_FRAME_NUMBER:
            return label
        return f'<link cmd="~~[0x{tid:x}]s{ecxr}; .frame 0x{number:x}">{label}</link>'

    for line in lines:
        yield _FRAME_LINK.sub(retarget, line) if "<link" in line else line


def _emit_debugger_facts(facts: Sequence[str], plain: bool) -> None:
    """Where the report used the debugger's facts instead of the dump file's."""
    if not facts:
        return
    from dumpkit.report.dml import dml_text

    _emit("")
    _emit("From the debugger" if plain else "<b>From the debugger</b>", dml=not plain)
    for fact in facts:
        _emit(f"  - {fact}" if plain else f"  - {dml_text(fact, 2000)}", dml=not plain)


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
    argv = list(sys.argv[1:] if argv is None else argv)
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

        target = PykdTarget(pykd)
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
        if args.json:
            from dumpkit.report.json_report import render_json

            _emit(render_json(report), dml=False)
        else:
            shown = [args.thread] if args.thread is not None else []
            from dumpkit.report.dml import plain_text, render_dml

            lines = render_dml(report, rows=args.rows, show_threads=shown, all_threads=args.all)
            for line in _frame_links_the_debugger_takes(lines, report, target):
                if args.plain:
                    _emit(plain_text(line), dml=False)
                else:
                    _emit(line, dml=True)
            _emit_debugger_facts(target.debugger_facts(), plain=args.plain)
        return 1 if report.soft_errors else 0
    except KeyboardInterrupt:
        _emit("tfstack: interrupted", dml=False)
        return 130
    except Exception as e:
        text = " ".join(str(e).split()) or type(e).__name__
        _emit(f"tfstack: error: {type(e).__name__}: {text[:500]}", dml=False)
        return 1


if __name__ == "__main__":
    main()
