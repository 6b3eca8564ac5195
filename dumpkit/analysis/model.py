"""What the analyses produce. Renderers (text, JSON, Markdown, HTML, WinDbg) read these and
nothing else. Every field that an analysis may fail to establish is Optional."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Tuple, Union

from dumpkit.records import field, record
from dumpkit.cpython.status import Status as PythonStatus
from dumpkit.unwind.frames import StopReason, Support, Trust
from dumpkit.words import Word

if TYPE_CHECKING:  # an annotation only: cpython.model is ~1.7 ms of start-up, needed by Python processes alone
    from dumpkit.cpython.model import GilRecord

SCHEMA_VERSION = 1


@record
class Evidence:
    """One checkable fact behind a finding: a sentence, optionally pinned to an address or
    frame so a reviewer can look it up in the debugger."""

    text: str
    address: Optional[int] = None
    frame_index: Optional[int] = None


class Severity(Word):
    """How much a finding weighs: FATAL explains the crash (the verdict's own finding)."""

    FATAL = "fatal"
    WARNING = "warning"
    INFO = "info"


@record
class Finding:
    kind: VerdictKind
    severity: Severity
    title: str
    evidence: Tuple[Evidence, ...] = ()
    thread_id: Optional[int] = None


class CallKind(Word):
    """The instruction that ends at a return address, as a call-site check reads it."""

    DIRECT = "direct"  # call rel32: the target is in the code
    INDIRECT = "indirect"  # through a register or memory: not checkable from the code
    NOT_A_CALL = "not_a_call"  # no CALL ends at the return address
    UNAVAILABLE = "unavailable"  # the code bytes are not available


@record
class CallEdge:
    """One call inside a recursion cycle, checked against the code at its return address.

    `call`: how the code at the return address calls (CallKind). `confirmed`: True when the direct call lands on the callee's entry (possibly
    through jump thunks), False when the code contradicts the frames (a call elsewhere, no
    CALL at all, or a callee IP before the entry the call leads to), None when it cannot
    be told."""

    caller: str
    callee: str
    return_address: int
    call: CallKind
    target: Optional[int]
    confirmed: Optional[bool]
    resolved: Optional[int] = None  # where jump thunks starting at `target` lead, if any
    # the small function the CALL enters, when it reaches the callee by a tail jump (its
    # own frame is gone by then, so the stack shows the callee next): `target` itself
    tail_jump: Optional[int] = None


class Recursing(Word):
    """Whose code recursed (`RecursionKind.kind`). A str-valued `Word`: JSON writes the value."""

    PYTHON = "python"  # Python functions calling each other: the eval loop is in the cycle
    C_PROTOCOL = "c_protocol"  # the interpreter's C code through an object protocol: repr, json, pickle...
    # in the interpreter's DLL, whose image is not at hand: its functions have no names, so the
    # eval loop (Python functions) and its C code (repr, json, pickle...) cannot be told apart
    INTERPRETER = "interpreter"
    EXTENSION = "extension"  # inside an extension module: NumPy, TensorFlow...
    NATIVE = "native"  # other native code


# a Python recursion's `what`; one whose calls pass through an extension adds " through ..."
PYTHON_CALLS = "Python functions calling each other"


@record
class RecursionKind:
    """A recursion in the terms of the code that recursed (analysis/python.py).

    `kind`: whose code it is (`Recursing`). `what`: in words, e.g. "json's C encoder
    (json.dumps / json.dump)" or "tf.nest.flatten". `depth`: the nesting levels (or Python
    calls) the repetitions imply, one per repetition."""

    kind: Recursing
    what: str
    module: Optional[str]
    evidence: Tuple[str, ...]
    depth: Optional[int]
    library: Optional[str] = None  # "NumPy", "TensorFlow"...
    protocol: Optional[str] = None  # "json", "pickle", "repr", "comparison"...


@record
class Cycle:
    """A repeating run of frames on one stack (unbounded recursion).

    `functions` are the member functions in stack order from the top (callee first);
    frame indices are inclusive and refer to the thread's walked frames."""

    functions: Tuple[str, ...]
    period: int
    repetitions: int  # complete repetitions
    bytes_per_repetition: int
    first_frame: int
    last_frame: int
    total_bytes: int
    stack_share: Optional[float] = None  # of the thread's used stack, 0..1
    entry_path: Tuple[str, ...] = ()  # the frames below the cycle, outermost last
    frames_above: int = 0  # non-matching frames at the top (the faulting helper...)
    call_edges: Tuple[CallEdge, ...] = ()  # the distinct calls inside, checked (callsites.py)
    kind: Optional[RecursionKind] = None  # what recursed, in the terms of its code (analysis/python.py)


@record
class FrameSize:
    frame_index: int
    function: str
    size: int  # distance to the caller's frame (bytes)
    requested: Optional[int] = None  # what the prologue asks for (sub rsp / __chkstk)
    via_probe: bool = False
    prologue_text: Optional[str] = None
    not_yet_allocated: bool = False  # died in the probe before the frame existed
    oversized: bool = False  # size or requested reaches the analysis threshold


@record
class StackBudget:
    thread_id: int
    base: Optional[int]  # highest address (stack grows down from here)
    limit: Optional[int]  # lowest committed address the TEB reports
    reserve_low: Optional[int]  # lowest reserved address (DeallocationStack)
    reserve_size: Optional[int]
    used: Optional[int]  # base - SP at the fault / in the dump
    source: str  # "teb", "memory-info", "captured+image"
    # fault address inside the guard region / below limit; only claimed (True) when the
    # bounds come from the TEB or the memory map, None when they are estimated
    guard_hit: Optional[bool] = None
    note: Optional[str] = None

    @property
    def used_fraction(self) -> Optional[float]:
        if self.used is None or not self.reserve_size:
            return None
        return self.used / self.reserve_size


@record
class MemoryAccess:
    """The memory operand of the faulting instruction, evaluated with the context."""

    kind: str  # "read", "write", "read/write"
    address: int
    size: int
    instruction: str
    formula: str  # e.g. "rax + rcx = 0x0 + 0xfefefefefefefefe"
    requires_alignment: bool  # movaps & co: #GP unless the address is a multiple of `size`
    misaligned: bool
    registers: Tuple[Tuple[str, int], ...] = ()  # (name, value) of the base, then the index


@record
class Instruction:
    """One decoded instruction around the faulting IP."""

    address: int
    bytes: str  # the instruction's bytes, hex
    text: str  # Intel syntax, as capstone writes it
    faulting: bool = False  # the instruction at the exception's IP
    target_name: Optional[str] = None  # a direct call's or jump's destination, by name, when known


@record
class Disassembly:
    """The code around the faulting IP. `start`: how the instructions before it were found:
    `function_entry` (decoded from the function's entry, exact), `symbol` (from the nearest
    symbol's address, for code without unwind data), `guessed` (decoded from a
    few bytes back, the usual debugger guess: the first ones may be wrong), `none` (only the
    IP onwards). `note`: what was missing, when something was."""

    instructions: Tuple[Instruction, ...]
    start: str
    note: Optional[str] = None


@record
class DelayLoadFailure:
    """A delay-load failure's DelayLoadInfo (0xC06D007E / 0xC06D007F), read from the dump
    (analysis/delayload.py). `info_address`: its address (exception parameter 0); `dll`: the DLL as
    the importing module names it; `function` the function called, or its `ordinal`;
    `last_error`: the Win32 error LoadLibrary or GetProcAddress set; `importer`: the module
    whose delay-import table it is; `loaded`: the path of the module the DLL was loaded as,
    when the function was not found in it, and its `loaded_version`; `similar`: loaded
    modules named like the DLL (`cudnn64_9.dll` for `cudnn64_8.dll`); `slot_address`: the address of
    the import slot the call went through (`ppfn`); `caller`: the frame that made the call
    (`caller_frame` its index), the first whose call instruction reads that slot, directly
    or through a `jmp [slot]` stub; `unread`: what could not be read, and where it lies."""

    info_address: Optional[int]
    dll: Optional[str] = None
    function: Optional[str] = None
    ordinal: Optional[int] = None
    last_error: Optional[int] = None
    importer: Optional[str] = None
    loaded: Optional[str] = None
    loaded_version: Optional[str] = None
    similar: Tuple[str, ...] = ()
    slot_address: Optional[int] = None
    caller: Optional[str] = None
    caller_frame: Optional[int] = None
    unread: Tuple[str, ...] = ()


@record
class CrashInfo:
    code: int
    code_name: str
    summary: str
    headline: str
    thread_id: int
    address: int
    parameters: Tuple[int, ...]
    fastfail_code: Optional[int] = None
    fastfail_name: Optional[str] = None
    access_kind: Optional[str] = None  # read / write / execute
    access_address: Optional[int] = None
    raised_by: Optional[str] = None  # function that raised a fail-fast / abort
    cxx_types: Tuple[str, ...] = ()  # 0xE06D7363: the thrown C++ type, most derived first
    # 0xE06D7363 whose type could not be read: where its ThrowInfo lies ("msvcp140.dll+0x1f2a8")
    cxx_throw_info: Optional[str] = None
    # access violations: the faulting instruction's memory operand, computed from the context
    instruction_access: Optional[MemoryAccess] = None
    # the record as the dump holds it: flags (1 = non-continuable), a chained record, the
    # address and parameters before masking to the CPU's pointer width, the context
    flags: int = 0
    nested: bool = False
    raw_address: Optional[int] = None
    raw_parameters: Tuple[int, ...] = ()
    context_flags: Optional[int] = None
    registers: Tuple[Tuple[str, int], ...] = ()  # (name, value), WinDbg's reading order
    # the module holding the faulting IP, its file version, and the code around the IP
    module: Optional[str] = None
    module_version: Optional[str] = None
    disassembly: Optional[Disassembly] = None
    delay_load: Optional[DelayLoadFailure] = None  # 0xC06D007E / 0xC06D007F: what failed to load


class EndingRoute(Word):
    """How a process that ended itself got out (`Ending.route`): what the program, or a
    runtime acting for it, called. A str-valued `Word`: JSON writes the value."""

    FATAL_PYTHON_ERROR = "fatal_python_error"  # Py_FatalError: CPython gave up (then abort())
    ABORT = "abort"  # abort(): a fail-fast with subcode 7, or exit code 3 through raise(SIGABRT)
    TERMINATE = "terminate"  # std::terminate(): a C++ exception nothing caught (then abort())
    ASSERT = "assert"  # the C runtime's assert() failed (then abort())
    SIGNAL = "signal"  # raise(): a signal whose default action ends the process (exit code 3)
    QUICK_EXIT = "quick_exit"  # _exit() / _Exit() / quick_exit(): no clean-up (os._exit)
    EXIT = "exit"  # the C runtime's exit(): the program's own, normal way out
    EXIT_PROCESS = "exit_process"  # ExitProcess called directly
    TERMINATE_PROCESS = "terminate_process"  # TerminateProcess on itself
    UNKNOWN = "unknown"  # stopped at an exit, but the frames above it have no names


class ReasonKind(Word):
    """What kind of text said why a process ended (`EndingReason.kind`)."""

    FATAL_PYTHON_ERROR = "fatal_python_error"  # Py_FatalError's function and message
    CHECK_FAILED = "check_failed"  # absl/glog/TensorFlow CHECK: "Check failed: ..."
    LOG_FATAL = "log_fatal"  # absl/glog/TensorFlow LOG(FATAL): "F... file.cc:12] ..."
    OPENMP = "openmp"  # Intel OpenMP: "OMP: Error #15: ..."
    ASSERTION = "assertion"  # "Assertion failed: expr, file f, line n"
    CXX_EXCEPTION = "cxx_exception"  # the C++ exception in flight when std::terminate ran
    CUDA = "cuda"  # CUDA, cuDNN and cuBLAS status names
    MKL = "mkl"  # "Intel MKL ERROR: ..."
    RUNTIME_TEXT = "runtime_text"  # another runtime's last words ("terminate called after ...")


@record
class EndingReason:
    """The text a runtime wrote just before the process ended, recovered from the dump.
    `text`: as the runtime printed it (one line); `source`: where it was read and what
    pointed there; `function`: a Fatal Python error's function (`PyThreadState_Get`);
    `message`: its message; `meaning`: what the common ones mean, in a sentence."""

    kind: ReasonKind
    text: str
    source: str
    function: Optional[str] = None
    message: Optional[str] = None
    meaning: Optional[str] = None
    address: Optional[int] = None


@record
class Ending:
    """How a process ended itself (analysis/ending.py, analysis/reasons.py), when the dump
    shows it: stopped at an exit by a debugger (`stopped_at`: the exit function,
    `exit_code` its argument, `stop_evidence` how that is known), or a fail-fast with
    abort()'s subcode. `calls`: the way-out functions from the outermost ("abort()",
    "raise()", "_exit()", "ExitProcess", "RtlExitUserProcess"); `caller`: the first frame
    below them, at `caller_frame`; `fatal_module`: the python3X.dll whose fatal-error path
    ran; `reason`: the text that says why, when the dump holds it; `caller_scanned`: the
    caller is only a stack word found by scanning, with no code to confirm a call before it
    (a pointer into the module's data looks the same)."""

    route: EndingRoute
    exit_code: Optional[int] = None
    stopped_at: Optional[str] = None
    stop_evidence: Optional[str] = None
    calls: Tuple[str, ...] = ()
    caller: Optional[str] = None
    caller_frame: Optional[int] = None
    fatal_module: Optional[str] = None
    reason: Optional[EndingReason] = None
    caller_scanned: bool = False  # JSON: left out (the crashing thread's frames say it)


class WaitKind(Word):
    """What a thread waits on (analysis/waits.py), `ThreadWait.kind`."""

    GIL = "gil"
    PYTHON_LOCK = "python_lock"  # threading.Lock/RLock, and Condition, Event, Queue, join built on one
    CRITICAL_SECTION = "critical_section"
    SRW_LOCK = "srw_lock"
    CONDITION_VARIABLE = "condition_variable"
    HANDLE = "handle"  # WaitForSingleObject(Ex) on a handle
    HANDLES = "handles"  # WaitForMultipleObjects(Ex)
    SLEEP = "sleep"
    IO = "io"  # a file or pipe read, an I/O completion port
    SOCKET = "socket"
    CUDA = "cuda"  # a CUDA synchronisation
    RUNNING = "running"  # not in a wait
    UNKNOWN = "unknown"  # the top frames have no names


@record
class ThreadWait:
    """What one thread waits on (analysis/waits.py, analysis/holders.py): `kind` and `what`
    in words; `caller` the first frame below the wait machinery, at `caller_frame`, the code
    that waits; `python_line` its innermost Python frame of the user's code (when the dump
    holds the Python stack); `wait_frame` the frame that says the kind; `obj` the object
    waited on (a CRITICAL_SECTION, a lock) and `owner` the thread that holds it, where
    memory records them, with `evidence` saying how each is known."""

    tid: int
    kind: WaitKind
    what: str
    caller_frame: Optional[int]
    caller: Optional[str]
    python_line: Optional[str] = None
    wait_frame: Optional[int] = None
    obj: Optional[int] = None
    owner: Optional[int] = None
    evidence: Tuple[str, ...] = ()
    name: Optional[str] = None  # the thread's name, where the dump or the interpreter records one
    held: Optional[str] = None  # what `obj` is: "critical section", "Lock", "RLock"
    owner_at: Optional[str] = None  # the owner's Python line where it entered the lock (a `with` block)
    # an UNKNOWN wait's system DLLs whose nameless frames (their images not here) are the
    # thread's top: their images would name the wait
    unnamed_in: Tuple[str, ...] = ()


@record
class Deadlock:
    """A cycle of waits (analysis/holders.py): each thread waits for what the next holds,
    the last for what the first holds. `threads` in that order; `text` says it with each
    thread's line; `confidence` is high when every owner is recorded or shown by a `with`
    block, lower where one is only inferred."""

    threads: Tuple[int, ...]
    text: str
    confidence: Confidence


@record
class ProcessRecord:
    """The crashed process: its executable (the first .exe module), that file's version,
    and its command line when the dump holds the PEB's process parameters (else
    `command_line_missing` says which memory the dump lacks)."""

    name: Optional[str]
    path: Optional[str]
    version: Optional[str]
    command_line: Optional[str] = None
    command_line_missing: Optional[str] = None


@record
class CrashSignature:
    """One line that names a crash the same way across runs and machines (analysis/signature.py
    documents the rules): `kind`, then `frames` (module!function of the first meaningful
    frames, a recursion as one element), joined with " | " into `text`. `rules`: the version
    of the rules that made it; tools grouping dumps compare signatures of one version."""

    text: str
    kind: str
    frames: Tuple[str, ...]
    rules: int


@record
class PassedFrame:
    """A frame blame passed over, and why: `role` is `system`, `C/C++ runtime`, `Python
    runtime`, `runtime code` (a runtime function linked into the program), `found by stack
    scanning`, `outside every module` or `above the recursion` (where an overflowing
    recursion's last repetition ran out of stack)."""

    frame_index: int
    function: str
    role: str


class PythonTrust(Word):
    """How a blamed Python frame was found, where a native frame's blame says its `Trust`:
    read from the thread's Python stack (docs/report-schema.md, `blame.trust`)."""

    PYTHON_STACK = "python stack"


class BlameKind(Word):
    """What a blame is when it is not a native frame (`BlameFrame.kind`; None: a native
    frame). A str-valued `Word`."""

    PYTHON = "python"  # a frame of the thread's Python stack


@record
class BlameFrame:
    """The first frame, from the top of the crashing stack, in code that is neither the
    system's nor a runtime's (C/C++ runtime, CPython, stack probes, the exception
    machinery): where a reader starts looking. `skipped`: the frames above it; `named`:
    False when the frame has no symbol (it may still be a statically linked runtime
    function)."""

    frame_index: int
    function: str
    module: Optional[str]
    trust: Union[Trust, PythonTrust]  # a native frame's Trust; PYTHON_STACK when the blame is a Python frame
    named: bool
    skipped: Tuple[PassedFrame, ...] = ()
    # In a Python process: the innermost Python frame of the thread ('poke (C:\\x.py:12)',
    # when the dump holds the Python stack) and how Python code reached the native frames
    # ('through a ctypes call into nativelib.dll'). When every native frame is the system's
    # or a runtime's, the blame is that Python frame: `kind` BlameKind.PYTHON (None: a
    # native frame), `frame_index` its index in the thread's Python stack (0 = innermost),
    # `function` its label.
    python_frame: Optional[str] = None
    python_via: Optional[str] = None
    kind: Optional[BlameKind] = None


@record
class FrameRecord:
    """A frame as reports show it (the walker's Frame, flattened)."""

    index: int
    ip: int
    sp: int
    module: Optional[str]
    rva: Optional[int]
    function_start: Optional[int]
    symbol: Optional[str]
    size: Optional[int]
    trust: Trust
    source: Optional[str] = None  # "FILE:LINE" from the module's PDB (JSON: left out when None)
    support: Optional[Support] = None  # scanned frames: what confirms them (JSON: left out when None)


class NotWalked(Word):
    """Why a thread has no walk, where a walked one says its `StopReason`. `text()` as
    StopReason's, so a ThreadReport says either the same way."""

    SKIPPED = "not walked"  # past the thread limits, or nothing is walked (`dumpkit info`)
    REPEATED_TID = "not walked (repeats an earlier thread id)"  # a damaged thread list

    def text(self, frame_limit: Optional[int] = None) -> str:
        return self.value


@record
class ThreadReport:
    tid: int
    name: Optional[str]
    is_crashing: bool
    frame_count: int
    frames: Tuple[FrameRecord, ...]  # possibly elided in the middle (see elided_frames)
    elided_frames: int  # frames left out between the head and the tail
    stop: Union[StopReason, NotWalked]  # how the walk ended, or why there was none (JSON: `stop_reason`)
    trust_counts: Dict[Trust, int]
    cycles: Tuple[Cycle, ...] = ()
    budget: Optional[StackBudget] = None
    same_stack_as: Tuple[int, ...] = ()  # other thread ids with an identical stack
    # scanned frames after the last confirmed one (unwind/confirm.py): shown apart from the
    # stack, never evidence; None when the walk had none (JSON: left out)
    possible_frames: Optional[Tuple[FrameRecord, ...]] = None
    possible_count: Optional[int] = None  # how many possible frames the walk found (the report keeps the first)
    # the thread as the dump records it
    teb: int = 0
    stack_start: int = 0  # lowest captured stack address
    stack_end: int = 0
    context_size: Optional[int] = None
    context_flags: Optional[int] = None
    registers: Tuple[Tuple[str, int], ...] = ()  # (name, value), WinDbg's reading order
    frame_limit: Optional[int] = None  # the limit the walk stopped at (stop is FRAME_LIMIT; JSON: in `stop_reason`)

    @property
    def stop_reason(self) -> str:
        """How the walk ended in the words reports use ("frame limit (2000000) reached",
        "not walked"): JSON's `stop_reason`."""
        return self.stop.text(self.frame_limit)


@record
class PythonFrameRecord:
    """A Python function activation as reports show it. `index`: 0 is the innermost frame."""

    index: int
    function: Optional[str]
    filename: Optional[str]
    line: Optional[int]
    first_line: Optional[int]
    problem: Optional[str] = None


@record
class PythonCycle:
    """Python functions recursing: `functions` ('visit (C:\\job.py:39)') in stack order from the
    top, callee first; frame indices are inclusive, into the thread's Python frames."""

    functions: Tuple[str, ...]
    period: int
    repetitions: int
    first_frame: int
    last_frame: int
    entry_path: Tuple[str, ...] = ()  # the Python frames below the cycle, outermost last


@record
class PythonThreadReport:
    thread_id: int
    depth: int  # Python frames on the thread (at least this many when truncated)
    frames: Tuple[PythonFrameRecord, ...]  # head and tail of a deep stack
    elided_frames: int  # frames left out between head and tail
    truncated: bool = False  # the walk stopped at its cap: the outermost frames are unknown
    cycles: Tuple[PythonCycle, ...] = ()
    problems: Tuple[str, ...] = ()
    # the innermost frames' addresses in the process, innermost first (not in JSON): where
    # analysis/holders.py reads what a frame's `with` blocks hold
    frame_addresses: Tuple[int, ...] = ()
    thread_state: int = 0  # its PyThreadState's address (not in JSON): whose lock a join waits on
    name: Optional[str] = None  # its threading.Thread name (cpython/thread_names.py: the heap)


@record
class PythonReport:
    """The Python side of the process (dumpkit.cpython): which interpreter, and each thread's
    Python stack when the dump holds the interpreter's memory. `status` (cpython's
    `Status`): `read`, `memory_missing` (a MiniDumpNormal dump: `message` says which dump
    type has it), `no_runtime`, `unsupported`, `damaged`, `no_threads`."""

    status: PythonStatus
    message: str
    dll: Optional[str] = None
    version: Optional[str] = None
    layout: Optional[str] = None
    layout_verified: bool = False
    threads: Tuple[PythonThreadReport, ...] = ()
    problems: Tuple[str, ...] = ()
    layout_note: Optional[str] = None  # which build the layout was verified on, and why it is trusted here
    gil: Optional[GilRecord] = None  # which thread holds the GIL (cpython/gil.py); None: not read (JSON: left out)
    # sys.modules[name].__version__ of the packages an issue report asks for (a full dump's
    # heap, cpython/package_versions.py); the environment shows them (JSON: there, not here)
    package_versions: Dict[str, str] = field(default_factory=dict)

    def thread(self, thread_id: int) -> Optional[PythonThreadReport]:
        return next((t for t in self.threads if t.thread_id == thread_id), None)


@record
class ModuleRecord:
    name: str
    path: str
    base: int
    size: int
    timestamp: int
    file_version: Optional[str]
    product_version: Optional[str]
    pdb: Optional[str]
    image_source: Optional[str]  # where its PE image came from, if it was needed
    checksum: int = 0
    pdb_guid: Optional[str] = None  # with pdb_age: which PDB build matches
    pdb_age: Optional[int] = None
    pdb_id: Optional[str] = None  # GUID and age as symbol servers key the PDB
    symbol_source: Optional[str] = None  # where its frames' names came from, if any were named


@record
class UnloadedModuleRecord:
    name: str
    base: int
    size: int
    timestamp: int


IN_MEMORY = "in the dump's memory"  # how a version read from the process's heap is sourced


@record
class PythonPackage:
    """A package the Python process had imported, with the version it ran."""

    name: str  # its sys.modules key: "numpy", "google.protobuf"
    version: str
    source: str  # where `version` was read: "numpy.__version__ in the dump's memory"

    @property
    def from_memory(self) -> bool:
        """The process's own `__version__` (the heap), not an installation's or a wheel's."""
        return self.source.endswith(IN_MEMORY)


@record
class CudaComponent:
    name: str  # "CUDA runtime", "cuDNN", "cuBLAS", "NVIDIA driver"
    module: str
    version: Optional[str]
    source: Optional[str] = None  # "module record", "image", "file name": where `version` came from
    detail: Optional[str] = None  # the raw evidence, e.g. "FileVersion 6.14.11.11020 (CUDA 11.2)"


class CollisionKind(Word):
    """Which runtime DLLs collide (`RuntimeCollision.kind`, docs/report-schema.md)."""

    MSVCP140_MUTEX = "msvcp140_mutex"  # msvcp140.dll older than 14.40 under code linked by MSVC 14.40+
    OPENMP = "openmp"  # two OpenMP runtimes (Intel's twice: "OMP: Error #15", exit code 3)
    PYTHON = "python"  # two Python DLLs: an extension built for another Python
    CUDA = "cuda"  # CUDA runtimes or cuDNN of two majors


@record
class CollidingModule:
    """One module of a runtime collision. `version`: its file version (None: the dump and
    its image have none); `package`: what its folder belongs to ("PyQt5" for
    site-packages\\PyQt5\\Qt5\\bin, "the Python installation", "Windows"; None: not known);
    `role`: its part in the collision, in words."""

    name: str
    path: str
    version: Optional[str]
    package: Optional[str]
    role: str


@record
class RuntimeCollision:
    """Runtime DLLs loaded together that do not fit (analysis/environment/runtimes.py), an
    environment finding: `title` in one line, the `modules` involved, what it `leads_to`,
    the `ways_out` as sentences, and what the dump cannot tell (`unknown`). `confidence`:
    high when the module list (and the images) show it, lower where an image was missing."""

    kind: CollisionKind
    confidence: Confidence
    title: str
    modules: Tuple[CollidingModule, ...]
    leads_to: str
    ways_out: Tuple[str, ...]
    unknown: Tuple[str, ...] = ()


class MemoryLimit(Word):
    """A limit on memory the process had reached when the dump was written (analysis/memory.py)."""

    COMMIT_LIMIT = "commit_limit"  # the machine's: RAM plus the paging files, for every process
    JOB_COMMIT_LIMIT = "job_commit_limit"  # that of the job object the process ran in


@record
class MemoryUse:
    """What the process and the machine had committed when the dump was written, in bytes,
    from the dump's ProcessVmCounters and SystemMemoryInfo streams; None where it does not
    say. `limits_reached`: the limits the commit was at or near, past which allocations fail;
    `findings`: one sentence for each, with its numbers, then one when the machine was short
    of RAM (paging)."""

    private_commit: Optional[int] = None  # this process's commit charge ("private bytes")
    peak_private_commit: Optional[int] = None
    working_set: Optional[int] = None
    peak_working_set: Optional[int] = None
    virtual_size: Optional[int] = None  # its reserved and committed address space
    physical_memory: Optional[int] = None  # the machine's RAM
    available_memory: Optional[int] = None
    system_commit: Optional[int] = None  # every process's and the kernel's commit charge
    system_commit_limit: Optional[int] = None
    job_commit: Optional[int] = None  # what a job object the process ran in counts against its limit
    job_commit_limit: Optional[int] = None  # that limit, when the job sets one
    limits_reached: Tuple[MemoryLimit, ...] = ()
    findings: Tuple[str, ...] = ()


@record
class Environment:
    os: Optional[str] = None
    os_build: Optional[str] = None
    wine: Optional[str] = None
    cpu: Optional[str] = None
    cpu_features: Dict[str, Optional[bool]] = field(default_factory=dict)  # AVX, AVX2, AVX512F
    cpu_features_source: Optional[str] = None
    python: Optional[str] = None
    python_module: Optional[str] = None
    tensorflow: Tuple[str, ...] = ()  # paths of TensorFlow modules
    tensorflow_version: Optional[str] = None
    cuda: Tuple[CudaComponent, ...] = ()
    compatibility: Tuple[str, ...] = ()  # sentences: which TF versions fit the CUDA/cuDNN pair
    cpu_feature_sources: Dict[str, str] = field(default_factory=dict)  # per feature: what showed it
    python_executable: Optional[str] = None  # path of python.exe / pythonw.exe when loaded
    tensorflow_version_source: Optional[str] = None  # "version resource", "path hint"...
    notes: Tuple[str, ...] = ()  # caveats a reader needs (Wine, stand-in evidence...)
    runtime_collisions: Tuple[RuntimeCollision, ...] = ()  # runtime DLLs loaded together that do not fit
    python_packages: Tuple[PythonPackage, ...] = ()  # versions the process held (a full dump's heap)
    memory: Optional[MemoryUse] = None  # the process's and the machine's memory (analysis/memory.py)


class VerdictKind(Word):
    """What the crash was, as `verdict.kind` says it (docs/report-schema.md)."""

    RECURSION = "recursion"
    OVERSIZED_FRAME = "oversized_frame"
    STACK_OVERFLOW = "stack_overflow"
    FASTFAIL = "fastfail"
    ACCESS_VIOLATION = "access_violation"
    ILLEGAL_INSTRUCTION = "illegal_instruction"
    HEAP_CORRUPTION = "heap_corruption"
    CXX_EXCEPTION = "cxx_exception"
    DELAY_LOAD = "delay_load"  # a delay-loaded DLL, or a function in it, missing at the first call
    EXCEPTION = "exception"
    NO_EXCEPTION = "no_exception"
    # the process ended itself (analysis/ending.py): a fatal Python error, abort() (its
    # reason when the dump holds it), or another exit a debugger stopped
    FATAL_PYTHON_ERROR = "fatal_python_error"
    ABORT = "abort"
    PROCESS_EXIT = "process_exit"
    # no exception: a snapshot of a stuck process (analysis/waits.py, analysis/holders.py)
    DEADLOCK = "deadlock"
    GIL_HELD = "gil_held"

    @property
    def is_stack(self) -> bool:
        """A verdict about the stack itself (its cycles, frame sizes, budget): those rest
        on the images of the modules on it."""
        return self in (VerdictKind.RECURSION, VerdictKind.OVERSIZED_FRAME, VerdictKind.STACK_OVERFLOW)


class Confidence(Word):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@record
class Verdict:
    kind: VerdictKind
    headline: str
    confidence: Confidence
    evidence: Tuple[str, ...]
    next_steps: Tuple[str, ...]


@record
class DumpSummary:
    path: str
    file_size: int
    timestamp: int
    streams: Tuple[str, ...]
    skipped_streams: Tuple[str, ...]
    thread_count: int
    module_count: int
    memory_ranges: Optional[int]  # captured memory ranges; None when the source cannot tell
    version: int = 0
    flags: int = 0  # MINIDUMP_TYPE the writer was asked for
    stream_details: Tuple["StreamRecord", ...] = ()
    memory_regions: int = 0  # MemoryInfoList entries (the address-space map)
    function_tables: int = 0  # FunctionTable stream entries (JIT code unwind data)


@record
class StreamRecord:
    type: int
    name: str
    size: int
    known: bool  # dumpkit reads this stream type
    problem: Optional[str] = None  # why it could not be read, when it could not


@record
class SystemSummary:
    arch: str
    os_version: str
    os_build: Optional[str]
    cpu: str
    processors: int
    wine: Optional[str] = None
    pid: Optional[int] = None
    process_create_time: Optional[int] = None
    # the rest of what SystemInfo and MiscInfo record
    csd_version: str = ""
    product_type: int = 0
    cpu_vendor: Optional[str] = None
    cpu_family: Optional[int] = None  # None when the dump gives no CPU signature
    cpu_model: Optional[int] = None
    cpu_stepping: Optional[int] = None
    processor_level: int = 0
    processor_revision: int = 0
    cpuid_version: int = 0
    cpuid_features_edx: int = 0
    processor_features: Tuple[int, ...] = ()
    xstate_enabled_features: Optional[int] = None
    process_user_seconds: Optional[int] = None
    process_kernel_seconds: Optional[int] = None


@record
class MissingImage:
    """A module on the crashing thread's stack whose image was not found."""

    module: str
    frames: int  # frames of the crashing thread in it
    recorded_path: str  # where the crashed process loaded it from
    fix: str  # the option (and folder) that would give dumpkit its image


@record
class ImageCoverage:
    """How much of the crashing stack rests on images (analysis/coverage.py)."""

    frames: int  # frames walked on the crashing thread
    scanned: int  # of them found by stack scanning (validated by a call site or not)
    unvalidated: int  # of them found by scanning with no call site to confirm them
    missing: Tuple[MissingImage, ...]  # modules on that stack without an image, most frames first
    search_problems: Tuple[str, ...]  # --image-path folders and symbol servers that gave nothing


@record
class Report:
    schema_version: int
    dumpkit_version: str
    dump: DumpSummary
    system: Optional[SystemSummary]
    crash: Optional[CrashInfo]
    verdict: Verdict
    findings: Tuple[Finding, ...]
    threads: Tuple[ThreadReport, ...]
    frame_sizes: Tuple[FrameSize, ...]  # crashing thread, largest first
    environment: Environment
    modules: Tuple[ModuleRecord, ...]
    soft_errors: Tuple[str, ...]
    oversized_threshold: Optional[int] = None  # bytes; frame_sizes[].oversized is measured against it
    unloaded_modules: Tuple[UnloadedModuleRecord, ...] = ()
    crash_absent: Optional[str] = None  # why there is no crash record (absent, or present but unreadable)
    python: Optional[PythonReport] = None  # None: not a Python process
    images: Optional[ImageCoverage] = None  # None: no crashing stack and no search to report on
    process: Optional[ProcessRecord] = None
    signature: Optional[CrashSignature] = None  # None when the dump holds no exception
    blame: Optional[BlameFrame] = None  # None when no frame is outside system and runtime code
    ending: Optional[Ending] = None  # how the process ended itself, when it did (analysis/ending.py)
    waits: Tuple[ThreadWait, ...] = ()  # what each walked thread waits on (analysis/waits.py)
    deadlocks: Tuple[Deadlock, ...] = ()  # cycles of waits (analysis/holders.py)


@record
class Contents:
    """What a dump holds, read but not walked or analysed (`dumpkit info`): the Report's
    own records, so every command's JSON has one shape for dump, system, crash, threads
    and modules."""

    schema_version: int
    dumpkit_version: str
    dump: DumpSummary
    system: Optional[SystemSummary]
    crash: Optional[CrashInfo]
    crash_absent: Optional[str]
    threads: Tuple[ThreadReport, ...]  # not walked: no frames
    modules: Tuple[ModuleRecord, ...]
    unloaded_modules: Tuple[UnloadedModuleRecord, ...]
    environment: Environment
    soft_errors: Tuple[str, ...]


@record
class Stacks:
    """Walked stacks without the analyses (`dumpkit stack`): every frame of the threads asked for."""

    schema_version: int
    dumpkit_version: str
    dump: DumpSummary
    system: Optional[SystemSummary]
    threads: Tuple[ThreadReport, ...]
    modules: Tuple[ModuleRecord, ...]
    soft_errors: Tuple[str, ...]
    python: Optional["PythonReport"] = None  # with --python: the Python stacks, every frame
    notes: Tuple[str, ...] = ()  # what the walks lacked because of how the dump was written
