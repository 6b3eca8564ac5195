"""The Case the verdict is decided on (`analysis/verdict`), assembled from what the run's
phases found, and how the crashing thread's native code was entered from Python."""

from __future__ import annotations

from typing import Optional

from dumpkit.analysis.model import CrashInfo, Ending, Environment, ImageCoverage, PythonReport, ThreadReport
from dumpkit.analysis.process import executable
from dumpkit.analysis.moduleroles import is_ctypes_machinery
from dumpkit.analysis.pyentry import CTYPES, PythonEntry, crash_entry, installation_of, is_interpreter
from dumpkit.analysis.pyentry import python_entry as entry_below
from dumpkit.analysis.signature import recursion_start
from dumpkit.analysis.threadreport import ThreadReports
from dumpkit.analysis.verdict import Case, frame_limit
from dumpkit.problems import Problems
from dumpkit.records import replace
from dumpkit.target import Target
from dumpkit.unwind.codemap import CodeMap
from dumpkit.unwind.frames import StackWalk

# threads whose stack ranges a case carries (a hostile thread list can name millions)
CASE_STACKS = 4096


def python_entry(
    crash: CrashInfo,
    thread: Optional[ThreadReport],
    walk: Optional[StackWalk],
    python: Optional[PythonReport],
    ending: Optional[Ending] = None,
    installation: Optional[str] = None,
) -> Optional[PythonEntry]:
    """How the crashing thread's native code was entered from Python, from all its frames:
    below the way out of a process that ended itself (its caller), below the recursion that
    overflowed the stack, else below the top frame."""
    if thread is None or walk is None:
        return None
    if ending is not None and ending.caller_frame is not None:
        caller = ending.caller_frame
        if caller >= len(walk.frames) or ending.caller_scanned:
            return None  # a bare stack word as the caller: what lies below it is as unconfirmed
        pythread = python.thread(crash.thread_id) if python is not None else None
        return _ending_entry(walk, caller, pythread, installation)
    start = recursion_start(crash, thread)
    cause = thread.cycles[0] if start is not None and thread.cycles else None
    return crash_entry(walk.frames, cause, python.thread(crash.thread_id) if python is not None else None, installation)


def _ending_entry(walk: StackWalk, caller: int, python, installation: Optional[str]) -> Optional[PythonEntry]:
    """Python's way to the caller of an ending. A caller in the interpreter reached through
    libffi is a C-API function called through ctypes (ctypes.CDLL(...).PyThreadState_Get()):
    that call into the interpreter's DLL is how Python got there, not the interpreter's own
    C code."""
    frames = walk.frames
    below = caller
    while below < min(len(frames), caller + 8) and is_interpreter(frames[below].module):
        below += 1
    if below > caller and below < len(frames) and is_ctypes_machinery(frames[below].module):
        entry = entry_below(frames, below, python, installation)
        if entry is not None and entry.via == CTYPES:
            dll = frames[caller].module
            return replace(entry, how=f"through a ctypes call into {dll}", module=dll)
    return entry_below(frames, caller, python, installation)


def crash_case(
    target: Target,
    code: CodeMap,
    crash: Optional[CrashInfo],
    threads: ThreadReports,
    walk: Optional[StackWalk],
    environment: Environment,
    python: Optional[PythonReport],
    coverage: Optional[ImageCoverage],
    problems: Problems,
    threshold: int,
    ending: Optional[Ending] = None,
) -> Case:
    """The facts of one run for `decide`: `walk` is the crashing thread's (None: not
    walked), `problems` every problem met so far."""
    thread = threads.crashing
    exe = executable(target.modules)
    return Case(
        crash=crash,
        thread=thread,
        frames=walk.frames if walk else (),
        frame_limit=frame_limit(walk),
        sizes=threads.sizes,
        environment=environment,
        problems=tuple(problems.items),
        bits=code.bits,
        stacks=tuple((t.tid, t.stack_start, t.stack_end) for t in target.threads[:CASE_STACKS] if t.stack_size),
        threshold=threshold,
        read_code=code.read_code,
        python=python,
        coverage=coverage,
        executable=exe.name if exe is not None else None,
        python_entry=python_entry(crash, thread, walk, python, ending, installation_of(environment.python_module))
        if crash is not None
        else None,
        ending=ending,
    )
