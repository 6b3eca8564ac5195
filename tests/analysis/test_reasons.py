"""Why a process ended, in its runtime's words, read back from memory laid out as the real
dumps hold it (analysis/reasons.py): a Fatal Python error's arguments kept in the registers
the unwinder restores (3.11: rbx = message, rdi = function in _Py_FatalErrorFunc's frame;
3.8: r14 = the message alone), TensorFlow's Check failed text in a heap buffer the stack
points to, Intel OpenMP's hint, the C++ exception a std::terminate was called for. The real
dumps are in tests/analysis/test_endings_dumps.py."""

from __future__ import annotations

import struct
from typing import Dict, List, Sequence, Tuple

from dumpkit.analysis.ending import ending
from dumpkit.analysis.model import CrashInfo, ReasonKind
from dumpkit.analysis.reasons import ending_reason
from dumpkit.target import Module
from dumpkit.unwind.frames import Frame, Trust
from tests.support.fakes.target import Memory

PY = Module("python311.dll", "C:\\Python311\\python311.dll", 0x1_8000_0000, 0x60_0000)
MSG = PY.base + 0x3D3340
FUNC = PY.base + 0x2A3E20
STACK = 0x20F000
ENTRY = 0x1_7003_1E90


def _frames(names: Sequence[str]) -> List[Frame]:
    return [
        Frame(
            i,
            ENTRY if i == 0 else 0x7000_0000 + i,
            STACK + 0x40 * i,
            n.split("!")[0],
            0x10,
            0x10,
            n,
            0x40,
            Trust.UNWIND_INFO,
        )
        for i, n in enumerate(names)
    ]


def _reader(pieces: Sequence[Tuple[int, bytes]]):
    memory = Memory(pieces)
    return memory.read_available


def _module_at(address: int):
    return PY if PY.base <= address < PY.base + PY.size else None


BREAKPOINT = CrashInfo(
    0x80000003, "STATUS_BREAKPOINT", "", "", 264, ENTRY, (0,), registers=(("rcx", 3), ("rip", ENTRY))
)
WAY_OUT = [
    "ntdll.dll!RtlExitUserProcess",
    "kernel32.dll!ExitProcess",
    "ucrtbase.dll!_Exit",
    "ucrtbase.dll!_o_raise",
    "ucrtbase.dll!_o_abort",
]
IMAGE = [
    (
        MSG,
        b"the function must be called with the GIL held, but the GIL is released (the current Python thread "
        b"state is NULL)\0",
    ),
    (FUNC, b"PyThreadState_Get\0"),
    (PY.base + 0x100, b"initialized\0"),
]


def _reason(names, registers: Dict[int, Dict[str, int]], image=IMAGE, memory=(), stack=b""):
    frames = _frames(names)
    end = ending(BREAKPOINT, frames)
    assert end is not None
    regs = [(f.ip, f.sp, registers.get(f.index, {})) for f in frames]
    read_memory = _reader([(STACK, stack or b"\0" * 0x400), *memory])
    return ending_reason(end, frames, regs, read_memory, _reader(image), _module_at, STACK + 0x400, "python311.dll")


def test_a_fatal_python_errors_function_and_message_come_from_the_fatal_error_frames_registers():
    names = WAY_OUT + [
        "python311.dll!func_17910",
        "python311.dll!_Py_FatalErrorFunc",
        "python311.dll!_Py_FatalError_TstateNULL",
        "python311.dll!PyThreadState_Get",
    ]
    # what fatal_error's own words look like in a register above: never taken for the function
    reason = _reason(names, {5: {"r15": MSG, "rsi": PY.base + 0x100}, 6: {"rbx": MSG, "rdi": FUNC}})
    assert reason is not None and reason.kind is ReasonKind.FATAL_PYTHON_ERROR
    assert reason.text == (
        "Fatal Python error: PyThreadState_Get: the function must be called with the GIL held, but the GIL is "
        "released (the current Python thread state is NULL)"
    )
    assert reason.function == "PyThreadState_Get" and "rbx of frame 6" in reason.source
    assert reason.meaning is not None and "GIL" in reason.meaning


def test_38s_py_fatalerror_has_no_function_of_its_own():
    image = [(MSG, b"PyThreadState_Get: no current thread\0"), (FUNC, b"some_identifier\0")]
    names = WAY_OUT + ["python311.dll!func_9a6f4", "python311.dll!Py_FatalError", "python311.dll!PyThreadState_Get"]
    # an identifier-shaped string nearby must not become the function
    reason = _reason(names, {4: {"r14": MSG}, 5: {"r14": MSG, "rbx": FUNC}}, image=image)
    assert reason is not None and reason.text == "Fatal Python error: PyThreadState_Get: no current thread"
    assert reason.function is None


def test_a_fatal_error_raised_by_another_pythons_dll_says_so():
    other = Module("python39.dll", "C:\\ext\\python39.dll", 0x1_9000_0000, 0x40_0000)
    frames = _frames(WAY_OUT + ["python39.dll!func_1", "python39.dll!_Py_FatalErrorFunc", "ext.pyd!init"])
    end = ending(BREAKPOINT, frames)
    msg = other.base + 0x500
    regs = [(f.ip, f.sp, {"rbx": msg} if f.index == 6 else {}) for f in frames]
    reason = ending_reason(
        end,
        frames,
        regs,
        _reader([(STACK, b"\0" * 0x400)]),
        _reader([(msg, b"PyInterpreterState_Get: no current thread state\0")]),
        lambda a: other if other.base <= a < other.base + other.size else None,
        STACK + 0x400,
        "python311.dll",
    )
    assert reason is not None and reason.meaning is not None
    assert "python39.dll" in reason.meaning and "another Python" in reason.meaning


def test_check_failed_text_in_a_heap_buffer_the_stack_points_to():
    heap = 0x5_0000_0000
    text = b"Check failed: dims == 4 (3 vs. 4)\0"
    stack = struct.pack("<QQ", 0, heap + 16) + b"\0" * 0x3F0
    names = WAY_OUT + ["tf.pyd!ConvOp::Compute", "tf.pyd!Run"]
    reason = _reason(names, {}, memory=[(heap, b"\0" * 16 + text)], stack=stack)
    assert reason is not None and reason.kind is ReasonKind.CHECK_FAILED
    assert reason.text == "Check failed: dims == 4 (3 vs. 4)"
    assert f"{heap + 16:#x}" in reason.source and f"{STACK + 8:#x}" in reason.source


def test_openmps_hint_stands_for_error_15_when_the_message_itself_is_gone():
    stack = (
        b"\0" * 0x100 + b"OMP: Hint This means that multiple copies of the OpenMP runtime have been linked into "
        b"the program.\0" + b"\0" * 0x200
    )
    reason = _reason(WAY_OUT + ["libiomp5md.dll!func_71c00"], {}, stack=stack)
    assert reason is not None and reason.kind is ReasonKind.OPENMP
    assert reason.text.startswith("OMP: Error #15:") and "hint" in reason.source
    assert reason.meaning is not None and "two copies" in reason.meaning


def test_no_text_no_reason():
    assert _reason(WAY_OUT + ["app.dll!shutdown"], {}) is None


def test_the_cxx_exception_std_terminate_was_called_for():
    image_base = 0x1_A000_0000
    throw_info = image_base + 0x100
    pieces = [
        (throw_info + 12, struct.pack("<I", 0x200)),  # ThrowInfo.pCatchableTypeArray
        (image_base + 0x200, struct.pack("<II", 1, 0x300)),  # CatchableTypeArray: 1 entry
        (image_base + 0x304, struct.pack("<I", 0x400)),  # CatchableType.pType
        (image_base + 0x410, b".?AUShardError@@\0"),  # TypeDescriptor.name
    ]
    record = struct.pack("<IIQQI", 0xE06D7363, 1, 0, 0x7FF0_1234, 4) + b"\0" * 4
    record += struct.pack("<4Q", 0x19930520, 0x7_0000_0000, throw_info, image_base) + b"\0" * 0x58
    stack = b"\0" * 0x80 + record + b"\0" * 0x200
    names = [
        "ntdll.dll!RtlExitUserProcess",
        "kernel32.dll!ExitProcess",
        "ucrtbase.dll!_Exit",
        "ucrtbase.dll!_o_raise",
        "ucrtbase.dll!_o_abort",
        "ucrtbase.dll!_o_terminate",
        "vcruntime140.dll!__CxxFrameHandler4",
        "shard.dll!explode",
    ]
    reason = _reason(names, {}, image=pieces, stack=stack)
    assert reason is not None and reason.kind is ReasonKind.CXX_EXCEPTION
    assert reason.message == "ShardError" and "0xe06d7363" in reason.source


def test_cudnns_missing_sub_library_is_a_cuda_reason():
    stack = b"\0" * 0x40 + b"Could not locate cudnn_graph64_9.dll. Please make sure it is in your library path!\0"
    reason = _reason(WAY_OUT + ["cudnn64_9.dll!func_15838"], {}, stack=stack + b"\0" * 0x300)
    assert reason is not None and reason.kind is ReasonKind.CUDA
    assert reason.text.startswith("Could not locate cudnn_graph64_9.dll")
