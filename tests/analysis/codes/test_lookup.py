"""dumpkit.analysis.codes lookups: what each status code and fail-fast subcode is called
and means, for the codes with notes, the codes only the SDK headers name, and the rest."""

import pytest

from dumpkit.analysis import codes
from dumpkit.analysis.codes import FAST_FAIL, FAST_FAIL_BY_NAME, lookup_fastfail, lookup_status

# ---- the codes the design notes are about -----------------------------------------------


def test_stack_overflow_is_not_a_buffer_overrun():
    info = lookup_status(0xC00000FD)
    assert info.name == "STATUS_STACK_OVERFLOW"
    assert "out of stack" in info.summary
    assert "not a buffer overrun" in info.summary


def test_stack_buffer_overrun_is_fail_fast():
    info = lookup_status(0xC0000409)
    assert info.name == "STATUS_STACK_BUFFER_OVERRUN"
    assert "__fastfail" in info.summary and "subcode" in info.summary


@pytest.mark.parametrize(
    "code,name",
    [
        (0xC00000FD, "STATUS_STACK_OVERFLOW"),
        (0xC0000409, "STATUS_STACK_BUFFER_OVERRUN"),
        (0xC0000005, "STATUS_ACCESS_VIOLATION"),
        (0xC000001D, "STATUS_ILLEGAL_INSTRUCTION"),
        (0xC0000374, "STATUS_HEAP_CORRUPTION"),
        (0xC000000D, "STATUS_INVALID_PARAMETER"),
        (0xC0000135, "STATUS_DLL_NOT_FOUND"),
        (0xC0000139, "STATUS_ENTRYPOINT_NOT_FOUND"),
        (0xC0000142, "STATUS_DLL_INIT_FAILED"),
        (0xE06D7363, "CPP_EH_EXCEPTION"),
        (0x40000015, "STATUS_FATAL_APP_EXIT"),
        (0x80000003, "STATUS_BREAKPOINT"),
        (0x80000004, "STATUS_SINGLE_STEP"),
        (0xC0000006, "STATUS_IN_PAGE_ERROR"),
        (0xC0000017, "STATUS_NO_MEMORY"),
        (0xC000008C, "STATUS_ARRAY_BOUNDS_EXCEEDED"),
        (0xC000008E, "STATUS_FLOAT_DIVIDE_BY_ZERO"),
        (0xC0000094, "STATUS_INTEGER_DIVIDE_BY_ZERO"),
        (0xC0000096, "STATUS_PRIVILEGED_INSTRUCTION"),
        (0xC0000420, "STATUS_ASSERTION_FAILURE"),
        (0xC0000602, "STATUS_FAIL_FAST_EXCEPTION"),
        (0xC000041D, "STATUS_FATAL_USER_CALLBACK_EXCEPTION"),
        (0xC0000194, "STATUS_POSSIBLE_DEADLOCK"),
        (0x80000002, "STATUS_DATATYPE_MISALIGNMENT"),
        (0xC0000025, "STATUS_NONCONTINUABLE_EXCEPTION"),
        (0xC0000026, "STATUS_INVALID_DISPOSITION"),
        (0xC00002B4, "STATUS_FLOAT_MULTIPLE_FAULTS"),
        (0xC00002B5, "STATUS_FLOAT_MULTIPLE_TRAPS"),
        (0xC0000008, "STATUS_INVALID_HANDLE"),
        (0xC000013A, "STATUS_CONTROL_C_EXIT"),
        (0xC0000144, "STATUS_UNHANDLED_EXCEPTION"),
        (0xC0000022, "STATUS_ACCESS_DENIED"),
        (0xC0000034, "STATUS_OBJECT_NAME_NOT_FOUND"),
        (0x4000001F, "STATUS_WX86_BREAKPOINT"),
    ],
)
def test_known_status_names(code, name):
    info = lookup_status(code)
    assert info.name == name and info.known
    assert info.summary and "\n" not in info.summary


def test_float_and_integer_range_is_covered():
    for code in range(0xC000008C, 0xC0000097):
        assert lookup_status(code).known, hex(code)


def test_illegal_instruction_mentions_avx():
    assert any("AVX" in c for c in lookup_status(0xC000001D).causes)


def test_negative_codes_are_normalised():
    assert lookup_status(-1073741571).code == 0xC00000FD


def test_every_known_code_has_one_line_text():
    for info in codes.STATUS_CODES.values():
        for text in (info.summary,) + info.causes + info.next_steps:
            assert "\n" not in text and text.strip() == text


# ---- unknown codes ----------------------------------------------------------------------


def test_unknown_code_named_in_hex_with_derived_summary():
    info = lookup_status(0xC0DE1234)
    assert not info.known
    assert info.name == "0xC0DE1234"
    assert "error" in info.summary and "facility 0xDE" in info.summary


@pytest.mark.parametrize(
    "code,word",
    [(0x00001234, "success"), (0x40001234, "informational"), (0x80001234, "warning"), (0xC0001234, "error")],
)
def test_unknown_code_severity(code, word):
    assert lookup_status(code).summary.startswith(f"unrecognised {word}")


def test_unknown_code_customer_bit_and_win32_facility():
    assert "customer-defined" in lookup_status(0xE0000001).summary
    assert "Win32 error 14" in lookup_status(0xC007000E).summary


def test_small_values_are_called_exit_codes():
    info = lookup_status(1)
    assert "exit code" in info.summary
    assert any("unhandled Python exception" in c for c in info.causes)


# ---- fail-fast table --------------------------------------------------------------------


def test_fast_fail_table_matches_the_header_numbering():
    defined = set(FAST_FAIL) - {0xFFFFFFFF}
    top = max(defined)
    assert top >= 77
    # contiguous from 0, except 15..17 which winnt.h never defined
    assert defined == set(range(top + 1)) - {15, 16, 17}
    assert FAST_FAIL[0xFFFFFFFF].name == "FAST_FAIL_INVALID_FAST_FAIL_CODE"


def test_fast_fail_names_are_distinct_and_prefixed():
    names = [info.name for info in FAST_FAIL.values()]
    assert len(names) == len(set(names))
    assert all(n.startswith("FAST_FAIL_") for n in names)
    assert all(FAST_FAIL_BY_NAME[info.name] == n for n, info in FAST_FAIL.items())
    assert all(info.summary and "\n" not in info.summary for info in FAST_FAIL.values())


@pytest.mark.parametrize(
    "subcode,name",
    [
        (0, "FAST_FAIL_LEGACY_GS_VIOLATION"),
        (2, "FAST_FAIL_STACK_COOKIE_CHECK_FAILURE"),
        (3, "FAST_FAIL_CORRUPT_LIST_ENTRY"),
        (5, "FAST_FAIL_INVALID_ARG"),
        (7, "FAST_FAIL_FATAL_APP_EXIT"),
        (10, "FAST_FAIL_GUARD_ICALL_CHECK_FAILURE"),
        (13, "FAST_FAIL_INVALID_SET_OF_CONTEXT"),
        (18, "FAST_FAIL_INVALID_JUMP_BUFFER"),
        (22, "FAST_FAIL_CRYPTO_LIBRARY"),
        (28, "FAST_FAIL_INVALID_BUFFER_ACCESS"),
        (38, "FAST_FAIL_INVALID_LONGJUMP_TARGET"),
        (48, "FAST_FAIL_SET_CONTEXT_DENIED"),
        (50, "FAST_FAIL_HEAP_METADATA_CORRUPTION"),
        (54, "FAST_FAIL_UNHANDLED_LSS_EXCEPTON"),
        (57, "FAST_FAIL_CONTROL_INVALID_RETURN_ADDRESS"),
        (70, "FAST_FAIL_INVALID_FLS_DATA"),
        (71, "FAST_FAIL_ASAN_ERROR"),
        (77, "FAST_FAIL_KERNEL_POINTER_EXPECTED"),
    ],
)
def test_fast_fail_values(subcode, name):
    assert lookup_fastfail(subcode).name == name


def test_fast_fail_meanings_of_the_common_ones():
    assert "abort()" in lookup_fastfail(7).summary
    assert "stack" in lookup_fastfail(2).summary and "overrun" in lookup_fastfail(2).summary
    assert "__report_gsfailure" in lookup_fastfail(2).likely_raiser
    assert "invalid-parameter" in lookup_fastfail(5).summary
    assert "_invalid_parameter" in lookup_fastfail(5).likely_raiser
    assert "Control Flow Guard" in lookup_fastfail(10).summary


@pytest.mark.parametrize("subcode,name", [(15, "FAST_FAIL_0xF"), (99, "FAST_FAIL_0x63"), (0x1234, "FAST_FAIL_0x1234")])
def test_unknown_fast_fail_in_hex(subcode, name):
    info = lookup_fastfail(subcode)
    assert info.name == name and not info.known and info.likely_raiser is None
