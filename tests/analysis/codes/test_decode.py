"""dumpkit.analysis.codes.decode: exception parameters in words (access violations,
in-page errors, fail-fast subcodes) and the one-line headline of a crash."""

from dumpkit.analysis.codes import decode_exception, describe_access_violation, is_guard_page_hit

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
    freed = describe_access_violation([0, 0xFEEEFEEEFEEEFEEE])
    assert "0xfeeefeee: memory released by HeapFree" in freed.fill_pattern
    assert freed.sentence.endswith("The value is " + freed.fill_pattern + ".")
    fresh = describe_access_violation([0, 0xCDCDCDCD])
    assert "never initialised" in fresh.fill_pattern and fresh.fill_pattern in fresh.sentence
    assert "'dead' marker" in describe_access_violation([1, 0xDEADBEEF]).sentence


def test_fill_words_are_the_ones_the_operand_evidence_uses():
    # one table for exception addresses and for the registers of the faulting instruction
    from dumpkit.analysis.access import fill_pattern

    for value in (0xFEEEFEEEFEEEFEEE, 0xCDCDCDCD, 0xDEADBEEF, 0xFEFEFEFEFEFEFEFE):
        assert describe_access_violation([0, value]).fill_pattern == fill_pattern(value)


def test_a_32_bit_run_is_not_called_a_fill_in_the_address_sentence():
    # 0x41414141 may be mapped in a 32-bit process; the operand evidence names such runs
    # from the register that held them, so the address sentence does not repeat it
    av = describe_access_violation([0, 0x41414141])
    assert av.fill_pattern is None and "repeated" not in av.sentence
    assert describe_access_violation([0, 0x4141414141414141]).fill_pattern is not None


def test_all_ones_is_a_general_protection_marker_not_a_fill():
    av = describe_access_violation([0, 0xFFFFFFFFFFFFFFFF])
    assert av.fill_pattern is None and "repeated" not in av.sentence


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
