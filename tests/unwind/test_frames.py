"""Trust levels and stop reasons are enums that render as the words reports have always
used, on every Python the WinDbg side runs on (str() and format() of a str-mixin Enum
changed between 3.8 and 3.12)."""

from __future__ import annotations

import json

from dumpkit.unwind.frames import TRUST_LEVELS, Frame, StackWalk, StopReason, Trust


def test_trust_renders_compares_and_hashes_as_its_name():
    assert TRUST_LEVELS == ("scan", "scan_validated", "frame_pointer", "prologue", "unwind_info", "context")
    assert [t.value for t in Trust] == list(TRUST_LEVELS)  # weakest first
    for t in Trust:
        assert str(t) == f"{t}" == t.value and f"[{t:>14}]" == f"[{t.value:>14}]"
        assert t == t.value and t.value in {t} and {t.value: 1}[t] == 1
        assert t.description
    counts = {Trust.SCAN: 2, Trust.CONTEXT: 1}
    assert json.dumps({"trust": Trust.SCAN, "trust_counts": counts}) == (
        '{"trust": "scan", "trust_counts": {"scan": 2, "context": 1}}'
    )
    assert Trust.SCAN_VALIDATED.startswith("scan") and not Trust.PROLOGUE.startswith("scan")


def test_stop_reasons_render_as_before_and_carry_the_frame_limit_as_data():
    texts = {r: r.text() for r in StopReason}
    assert texts == {
        StopReason.END_OF_STACK: "end of stack",
        StopReason.RETURN_ADDRESS_ZERO: "end of stack (return address 0)",
        StopReason.THREAD_START: "end of stack (the thread's start routine)",
        StopReason.NO_CALLER: "no caller found (end of stack or unrecoverable)",
        StopReason.SP_NOT_INCREASING: "stack pointer did not increase",
        StopReason.FRAME_LIMIT: "frame limit reached",
        StopReason.NO_CONTEXT: "no register context",
    }
    assert all(str(r) == r.text() and r.description for r in StopReason)
    ends = [StopReason.END_OF_STACK, StopReason.RETURN_ADDRESS_ZERO, StopReason.THREAD_START]
    assert [r for r in StopReason if r.reached_the_end] == ends
    frame = Frame(0, 0x1000, 0x2000, None, None, None, None, None, Trust.CONTEXT)
    cut = StackWalk(7, [frame], StopReason.FRAME_LIMIT, [], frame_limit=2_000_000)
    assert cut.stop_reason == "frame limit (2000000) reached" and cut.frame_limit == 2_000_000
    ended = StackWalk(7, [frame], StopReason.RETURN_ADDRESS_ZERO, [])
    assert ended.stop_reason == "end of stack (return address 0)" and ended.frame_limit is None
    assert ended.trust_counts == {"context": 1}


def test_a_functions_name_loses_only_its_trailing_offset():
    def name(symbol):
        return Frame(1, 0x1000, 0x2000, "m.dll", 0x10, None, symbol, None, Trust.UNWIND_INFO).function_name

    assert name("m.dll!PyObject_Repr+0x80") == "m.dll!PyObject_Repr"
    assert name("m.dll!PyObject_Repr") == "m.dll!PyObject_Repr"
    # demangled C++ operators keep their own + and -
    assert name("m.dll!foo::operator+=+0x1a") == "m.dll!foo::operator+="
    assert name("m.dll!foo::operator+") == "m.dll!foo::operator+"
    assert name("m.dll!foo::operator-") == "m.dll!foo::operator-"
    # a fragment placed below its function's entry
    assert name("m.dll!func_64170-0x40") == "m.dll!func_64170"
