"""Behaviour of dumpkit.analysis.codes: names, fail-fast table, parsing, parameter decoding."""

import pytest

from dumpkit.analysis import codes
from dumpkit.analysis.codes import (
    FAST_FAIL,
    FAST_FAIL_BY_NAME,
    ParsedCode,
    decode_exception,
    describe_access_violation,
    is_guard_page_hit,
    lookup_fastfail,
    lookup_status,
    parse_code,
)

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


# ---- parsing ----------------------------------------------------------------------------

SAME_STACK_OVERFLOW = [
    "-1073741571",
    "3221225725",
    "0xC00000FD",
    "C00000FD",
    "0xc00000fd",
    "c00000fd",
    "0XC00000FD",
    "STATUS_STACK_OVERFLOW",
    "status_stack_overflow",
    "STACK_OVERFLOW",
    "Stack_Overflow",
    "EXCEPTION_STACK_OVERFLOW",
    "  0xC00000FD  ",
    "-1073741571 (0xC00000FD)",
    "exit code -1073741571",
    "Process finished with exit code -1073741571 (0xC00000FD)",
]


@pytest.mark.parametrize("text", SAME_STACK_OVERFLOW)
def test_stack_overflow_spellings(text):
    assert parse_code(text) == ParsedCode(0xC00000FD, None)


def test_signed_unsigned_hex_agree():
    assert parse_code("-1073741571") == parse_code("3221225725") == parse_code("0xC00000FD")
    assert parse_code("-1073740791") == parse_code("3221226505") == parse_code("0xC0000409")


@pytest.mark.parametrize(
    "text,code,sub",
    [
        ("0xC0000409/7", 0xC0000409, 7),
        ("0xC0000409:7", 0xC0000409, 7),
        ("0xC0000409 / 7", 0xC0000409, 7),
        ("-1073740791/2", 0xC0000409, 2),
        ("3221226505:5", 0xC0000409, 5),
        ("0xC0000409/0xA", 0xC0000409, 10),
        ("0xC0000409/FATAL_APP_EXIT", 0xC0000409, 7),
        ("STATUS_STACK_BUFFER_OVERRUN/FAST_FAIL_INVALID_ARG", 0xC0000409, 5),
        ("FAST_FAIL_FATAL_APP_EXIT", 0xC0000409, 7),
        ("fast_fail_stack_cookie_check_failure", 0xC0000409, 2),
        ("FAST_FAIL_0x63", 0xC0000409, 0x63),
        ("FATAL_APP_EXIT", 0x40000015, None),  # without the prefix it is the STATUS_ name
        ("EXCEPTION_INT_DIVIDE_BY_ZERO", 0xC0000094, None),
        ("80000003", 0x80000003, None),  # WER-style bare hex of digits only
        ("40000015", 0x40000015, None),
        ("12345678", 12345678, None),  # otherwise digits are decimal
        ("1", 1, None),
        ("0", 0, None),
        ("E06D7363", 0xE06D7363, None),
    ],
)
def test_parse_other_spellings(text, code, sub):
    assert parse_code(text) == ParsedCode(code, sub)


def test_every_fast_fail_name_round_trips():
    for n, info in FAST_FAIL.items():
        assert parse_code(info.name) == ParsedCode(0xC0000409, n)
        assert parse_code(f"0xC0000409/{n}") == ParsedCode(0xC0000409, n)


def test_every_status_name_and_hex_round_trips():
    for code, info in codes.STATUS_CODES.items():
        assert parse_code(info.name).code == code
        assert parse_code(f"0x{code:08X}").code == code
        assert parse_code(str(code)).code == code
        assert parse_code(str(codes.to_signed32(code))).code == code


def test_unknown_names_round_trip_through_hex():
    info = lookup_status(0xC0DE1234)
    assert parse_code(info.name) == ParsedCode(0xC0DE1234)
    assert parse_code(lookup_fastfail(200).name) == ParsedCode(0xC0000409, 200)


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("foo", "not an NTSTATUS code or name: 'foo'"),
        ("", "not an NTSTATUS code or name"),
        ("0x", "not an NTSTATUS code or name"),
        ("0xC0000005/7", "a subcode only applies to 0xC0000409"),
        ("0x1C00000FD", "out of range"),
        ("4294967296", "out of range"),
        ("-2147483649", "out of range"),
        ("0xC0000409/banana", "not a fail-fast subcode"),
        ("FAST_FAIL_FATAL_APP_EXIT/2", "already includes its subcode"),
        ("1/2/3", "not an NTSTATUS code or name"),
        ("-1073741571 (0xC0000005)", "disagree"),
        ("bad\nline", "not an NTSTATUS code or name"),
    ],
)
def test_bad_input_raises_one_line_value_error(text, fragment):
    with pytest.raises(ValueError) as exc:
        parse_code(text)
    msg = str(exc.value)
    assert fragment in msg
    assert "\n" not in msg


def test_non_string_is_rejected():
    with pytest.raises(ValueError):
        parse_code(123)  # type: ignore[arg-type]


# ---- access violations ------------------------------------------------------------------


def test_read_write_execute():
    assert describe_access_violation([0, 0x7FF612340000]).kind == "read"
    assert describe_access_violation([1, 0x7FF612340000]).kind == "write"
    ex = describe_access_violation([8, 0x7FF612340000])
    assert ex.kind == "execute" and "not executable" in ex.sentence
    assert describe_access_violation([5, 0x1000]).kind == "unknown"


def test_null_pointer():
    av = describe_access_violation([0, 0])
    assert av.null_page and av.address == 0 and "NULL" in av.sentence
    off = describe_access_violation([0, 0x18])
    assert off.null_page and "0x18" in off.sentence
    assert not describe_access_violation([0, 0x10000]).null_page


def test_non_canonical_fill_pattern():
    av = describe_access_violation([1, 0xFEFEFEFEFEFEFEFE])
    assert av.kind == "write"
    assert av.non_canonical and not av.null_page
    assert "non-canonical" in av.sentence
    assert av.fill_pattern and "0xfe" in av.fill_pattern


def test_canonical_edges():
    assert not describe_access_violation([0, 0x00007FFFFFFFFFFF]).non_canonical
    assert describe_access_violation([0, 0x0000800000000000]).non_canonical
    assert not describe_access_violation([0, 0xFFFF800000000000]).non_canonical


def test_all_ones_address_is_a_general_protection_fault():
    av = describe_access_violation([0, 0xFFFFFFFFFFFFFFFF])
    assert av.general_protection and "general-protection" in av.sentence


def test_negative_parameters_are_treated_as_unsigned():
    assert describe_access_violation([1, -1]).address == 0xFFFFFFFFFFFFFFFF


def test_known_fill_values():
    assert "freed" in describe_access_violation([0, 0xFEEEFEEEFEEEFEEE]).fill_pattern
    assert "uninitialised" in describe_access_violation([0, 0xCDCDCDCD]).fill_pattern


def test_in_page_error_third_parameter():
    av = describe_access_violation([0, 0x7FF600001000, 0xC0000185])
    assert av.io_status == 0xC0000185
    assert "STATUS_IO_DEVICE_ERROR" in av.sentence and "mapped" in av.sentence


def test_missing_parameters():
    av = describe_access_violation([])
    assert av.kind == "unknown" and av.address is None


def test_guard_page_helper():
    assert is_guard_page_hit(0x80000001, [1, 0x1000])
    assert is_guard_page_hit(-2147483647)
    assert not is_guard_page_hit(0xC00000FD, [1, 0x1000])


# ---- decode_exception -------------------------------------------------------------------


def test_decode_fail_fast_abort():
    d = decode_exception(0xC0000409, [7])
    assert d.fastfail is not None and d.fastfail.subcode == 7
    assert d.headline == ("0xC0000409 fail-fast FAST_FAIL_FATAL_APP_EXIT (7): abort() was called")


def test_decode_fail_fast_unknown_and_missing_subcode():
    assert "FAST_FAIL_0x63 (99)" in decode_exception(0xC0000409, [99]).headline
    d = decode_exception(0xC0000409, [])
    assert d.fastfail is None and "no subcode" in d.headline


def test_decode_access_violation_headline():
    d = decode_exception(0xC0000005, [1, 0xFEFEFEFEFEFEFEFE])
    assert d.headline == ("0xC0000005 access violation: write to 0xfefefefefefefefe (non-canonical address)")
    assert d.access is not None and d.fastfail is None
    assert decode_exception(0xC0000005, [0, 0]).headline.endswith("(NULL pointer)")
    assert "execute at" in decode_exception(0xC0000005, [8, 0x1234567890]).headline


def test_decode_stack_overflow():
    d = decode_exception(-1073741571, [1, 0x71A8D03FF8])
    assert d.code_info.code == 0xC00000FD
    assert "stack overflow" in d.headline and "not a buffer overrun" in d.headline
    assert "0x71a8d03ff8" in d.headline


def test_decode_unknown_and_other():
    assert decode_exception(0xC0DE1234).headline.startswith("0xC0DE1234: unrecognised")
    assert decode_exception(0xC000001D).headline.startswith("0xC000001D illegal instruction")
    assert "C++ exception" in decode_exception(0xE06D7363, [0x19930520, 0x1000, 0x2000, 0x7FF000000000]).headline
