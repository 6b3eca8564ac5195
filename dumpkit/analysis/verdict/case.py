"""What every verdict is decided from, and the few helpers all crash kinds share.

A `Case` is the established facts about the crash (the decoded exception, the crashing
thread's frames, budget, cycles and frame sizes, the environment); each module of this
package turns one kind of crash into a headline, a confidence, evidence and next steps."""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

from dumpkit.analysis.advice import Step
from dumpkit.analysis.codes.model import (
    STATUS_ACCESS_VIOLATION,
    STATUS_CPP_EH_EXCEPTION,
    STATUS_FATAL_APP_EXIT,
    STATUS_HEAP_CORRUPTION,
    STATUS_ILLEGAL_INSTRUCTION,
    STATUS_INVALID_PARAMETER,
    STATUS_STACK_BUFFER_OVERRUN,
    STATUS_STACK_OVERFLOW,
)
from dumpkit.analysis.model import (
    CrashInfo,
    Deadlock,
    Ending,
    ThreadWait,
    Environment,
    Evidence,
    Finding,
    FrameSize,
    ImageCoverage,
    PythonReport,
    PythonThreadReport,
    Severity,
    ThreadReport,
    Verdict,
    VerdictKind,
    Confidence,
)
from dumpkit.analysis.pyentry import PythonEntry
from dumpkit.limits import OVERSIZED_FRAME
from dumpkit.unwind.disasm import decode_one
from dumpkit.unwind.frames import Frame, StackWalk
from dumpkit.records import field, record

ReadCode = Callable[[int, int], bytes]

# the codes each verdict module decides (codes/model.py names them once)
STACK_OVERFLOW = STATUS_STACK_OVERFLOW
FAIL_FAST = STATUS_STACK_BUFFER_OVERRUN
ACCESS_VIOLATION = STATUS_ACCESS_VIOLATION
ILLEGAL_INSTRUCTION = STATUS_ILLEGAL_INSTRUCTION
HEAP_CORRUPTION = STATUS_HEAP_CORRUPTION
CXX_EXCEPTION = STATUS_CPP_EH_EXCEPTION
INVALID_PARAMETER = STATUS_INVALID_PARAMETER
FATAL_APP_EXIT = STATUS_FATAL_APP_EXIT


@record
class Case:
    """The facts a verdict is decided from.

    `frames` are the crashing thread's walked frames (all of them; `thread.frames` keeps
    only head and tail); `frame_limit` is the --max-frames the walk stopped at, if it did;
    `problems` the non-fatal problems met so far (reading and walking); `read_problems` those
    reading the dump met, before any walk (what says the dump itself is damaged); `stacks` the captured
    stack range of every thread, (thread id, low, high); `read_code` reads code bytes
    (module image first, then the dump) to show the faulting instruction."""

    crash: Optional[CrashInfo]
    thread: Optional[ThreadReport] = None
    frames: Sequence[Frame] = ()
    frame_limit: Optional[int] = None
    sizes: Sequence[FrameSize] = ()
    environment: Environment = field(default_factory=Environment)
    problems: Sequence[str] = ()
    read_problems: Sequence[str] = ()
    bits: int = 64
    stacks: Sequence[Tuple[int, int, int]] = ()
    threshold: int = OVERSIZED_FRAME
    read_code: Optional[ReadCode] = None
    python: Optional[PythonReport] = None  # the process's Python side (None: not Python)
    coverage: Optional[ImageCoverage] = None  # what of the crashing stack rests on images
    executable: Optional[str] = None  # the process's .exe (python.exe, tfhost.exe), for advice
    # how the crashing thread's native code was entered from Python (pyentry.crash_entry,
    # from every frame): below the recursion that overflowed the stack, else below the top
    python_entry: Optional[PythonEntry] = None
    ending: Optional[Ending] = None  # how the process ended itself, when it did (analysis/ending.py)
    waits: Sequence[ThreadWait] = ()  # what each thread waits on (analysis/waits.py, holders.py)
    deadlocks: Sequence[Deadlock] = ()  # cycles of waits

    @property
    def python_thread(self) -> Optional[PythonThreadReport]:
        """The crashing thread's Python stack, when the dump holds it."""
        if self.python is None or self.crash is None:
            return None
        return self.python.thread(self.crash.thread_id)

    @property
    def frame0(self) -> Optional[str]:
        """Frame 0's name, as headlines cite it."""
        f = self.frames[0] if self.frames else None
        return (f.symbol or f.function_name) if f is not None else None

    @property
    def at(self) -> str:
        """' in mod!fn+0x1a' for headlines, ' outside every module' when frame 0's IP is in
        none (its name would only repeat the address), or '' when there is no frame."""
        f = self.frames[0] if self.frames else None
        if f is None:
            return ""
        if f.module is None and not f.symbol:
            return " outside every module"
        return f" in {self.frame0}"


@record
class Decision:
    """What a crash kind's module decided: the verdict, whose `next_steps` are written
    once `steps` are fitted to the process (verdict/__init__.py), and the fatal finding."""

    verdict: Verdict
    steps: Tuple[Step, ...]
    findings: Tuple[Finding, ...]


def conclude(
    kind: VerdictKind,
    headline: str,
    confidence: Confidence,
    evidence: Sequence[str],
    steps: Sequence[Step],
    thread_id: Optional[int],
) -> Decision:
    """The verdict and the fatal finding that carries the same headline and evidence."""
    finding = Finding(kind, Severity.FATAL, headline, tuple(Evidence(e) for e in evidence), thread_id)
    return Decision(Verdict(kind, headline, confidence, tuple(evidence), ()), tuple(steps), (finding,))


def exception_line(crash: CrashInfo, frame0: Optional[str]) -> str:
    """The first evidence line: code, thread, and where. An exception address of 0 is
    "not given" (a record built in software), not a location."""
    line = f"exception {crash.code:#010x} {crash.code_name} on thread {crash.thread_id}"
    if crash.address == 0:
        return line + "; the exception record gives no address (0)" + (f"; frame 0 is {frame0}" if frame0 else "")
    return line + f" at {crash.address:#x}" + (f" in {frame0}" if frame0 else "")


def instruction(read_code: Optional[ReadCode], ip: int, bits: int = 64) -> Optional[str]:
    """The instruction at `ip` as text ("movaps xmm0, xmmword ptr [rcx]"), when its bytes are known."""
    if read_code is None:
        return None
    code = read_code(ip, 16)
    if not code:
        return None
    got = decode_one(code, ip, bits)
    if got is None:
        return None
    return f"{got[1]} {got[2]}".strip()


def frame_limit(walk: Optional[StackWalk]) -> Optional[int]:
    """The frame limit the walk stopped at (--max-frames), or None when it ended on its own."""
    return walk.frame_limit if walk is not None else None
