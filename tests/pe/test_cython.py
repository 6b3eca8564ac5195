"""The rule that names a Cython extension's functions (pe/cython.py): the one traceback name
a function's code loads. The real case is tests/analysis/test_python_recursion.py's NumPy
recursion; these hold the rule's edges on code laid out by hand."""

from __future__ import annotations

import struct

from dumpkit.pe.cython import MAX_LOADS, extension_modules, traceback_name, traceback_pattern

START = 0x1000
STRINGS = {
    0x9000: "pandas._libs.index.IndexEngine.get_loc",
    0x9100: "pandas._libs.index._bin_search",
    0x9200: "pandas._libs.algos.take_1d",  # another module's name
    0x9300: "IndexEngine.get_loc",  # no module in it
    0x9400: "pandas._libs.index",  # the module itself
}
PATTERN = traceback_pattern(extension_modules(["PyInit_index", "some_export"]))


def _lea(at: int, target: int, rex: int = 0x48, reg: int = 1) -> bytes:
    """lea r64, [rip+disp] at `at` (7 bytes) loading `target`."""
    return bytes([rex, 0x8D, 0x05 | reg << 3]) + struct.pack("<i", target - (at + 7))


def _code(*targets: int) -> bytes:
    code = b"\x48\x83\xec\x28"  # sub rsp, 0x28
    for target in targets:
        code += _lea(START + len(code), target) + b"\xe8\x00\x00\x00\x00"  # call
    return code + b"\x48\x83\xc4\x28\xc3"


def _name(code: bytes):
    return traceback_name(code, START, STRINGS.get, PATTERN)


def test_the_one_traceback_name_a_function_loads_names_it():
    assert _name(_code(0x9000)) == "pandas._libs.index.IndexEngine.get_loc"
    assert _name(_code(0x9000, 0x9000)) == "pandas._libs.index.IndexEngine.get_loc"  # twice is one
    assert _name(_lea(START, 0x9000, rex=0x4C, reg=0)) == "pandas._libs.index.IndexEngine.get_loc"  # r8


def test_two_names_leave_it_unnamed_rather_than_guessed():
    assert _name(_code(0x9000, 0x9100)) is None


def test_strings_that_are_not_this_modules_qualified_names_do_not_count():
    assert _name(_code(0x9200, 0x9300, 0x9400)) is None
    assert _name(_code(0x9200, 0x9000, 0x9400)) == "pandas._libs.index.IndexEngine.get_loc"


def test_no_module_initialised_means_no_pattern_and_only_a_bounded_scan():
    assert extension_modules(["PyInit_", "init_index"]) == []
    # a name loaded only after MAX_LOADS other loads is not looked at
    assert _name(_code(*([0x9400] * MAX_LOADS), 0x9000)) is None
    assert _name(_code(*([0x9400] * (MAX_LOADS - 1)), 0x9000)) == "pandas._libs.index.IndexEngine.get_loc"
    # a LEA cut off at the end of the code read
    assert _name(_lea(START, 0x9000)[:-1]) is None
