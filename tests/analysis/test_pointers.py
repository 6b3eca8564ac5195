"""dumpkit.analysis.pointers: what a pointer-sized value says by itself."""

from dumpkit.analysis.pointers import FILL_PATTERNS, fill_pattern, is_canonical


def test_canonical_form():
    assert is_canonical(0) and is_canonical(0x00007FFFFFFFFFFF) and is_canonical(0xFFFF800000000000)
    assert not is_canonical(0x0000800000000000) and not is_canonical(0xFFFF7FFFFFFFFFFF)
    assert is_canonical(-1)  # taken as its 64-bit two's complement, all ones


def test_table_values_in_either_half():
    assert fill_pattern(0xFEEEFEEE).startswith("0xfeeefeee: memory released by HeapFree")
    assert fill_pattern(0xDDDDDDDDDDDDDDDD).startswith("0xdddddddd: memory freed through the debug CRT")
    assert fill_pattern(0xBAADF00D00000010) == fill_pattern(0xBAADF00D)
    assert all(fill_pattern(v) for v in FILL_PATTERNS)


def test_repeated_bytes_and_the_shortest_run_that_counts():
    assert "the byte 0x41 repeated ('AAAA'...)" in fill_pattern(0x41414141)
    assert fill_pattern(0x41414141, min_run=8) is None  # a 32-bit run can be an address
    assert "the byte 0xfe repeated" in fill_pattern(0xFEFEFEFEFEFEFEFE, min_run=8)
    assert fill_pattern(0x4141) is None and fill_pattern(0x41) is None and fill_pattern(0) is None


def test_real_pointers_are_not_fills():
    for value in (0x00007FF612345678, 0x000001D2C3B4A590, 0x10000, 0x12345678):
        assert fill_pattern(value) is None
