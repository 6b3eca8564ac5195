"""Behaviour of `dumpkit explain`: what a user sees for each spelling of a code."""

import pytest

from dumpkit.analysis.codes import FAST_FAIL, STATUS_CODES, parse_code
from dumpkit.analysis.explain import Explanation, capture_help_for, explain
from dumpkit.report.explanation import render_explanation_text


def _text(spelling: str) -> str:
    return render_explanation_text(explain(parse_code(spelling)))


SPELLINGS = [
    ("-1073741571", 0xC00000FD, "STATUS_STACK_OVERFLOW"),
    ("3221225725", 0xC00000FD, "STATUS_STACK_OVERFLOW"),
    ("0xC00000FD", 0xC00000FD, "STATUS_STACK_OVERFLOW"),
    ("C00000FD", 0xC00000FD, "STATUS_STACK_OVERFLOW"),
    ("0xc00000fd", 0xC00000FD, "STATUS_STACK_OVERFLOW"),
    ("STATUS_STACK_OVERFLOW", 0xC00000FD, "STATUS_STACK_OVERFLOW"),
    ("stack_overflow", 0xC00000FD, "STATUS_STACK_OVERFLOW"),
    ("-1073740791", 0xC0000409, "STATUS_STACK_BUFFER_OVERRUN"),
    ("3221226505", 0xC0000409, "STATUS_STACK_BUFFER_OVERRUN"),
    ("-1073741819", 0xC0000005, "STATUS_ACCESS_VIOLATION"),
    ("0xC000001D", 0xC000001D, "STATUS_ILLEGAL_INSTRUCTION"),
]


@pytest.mark.parametrize("spelling,code,name", SPELLINGS)
def test_every_spelling_shows_name_and_both_decimals(spelling, code, name):
    e = explain(parse_code(spelling))
    assert e.name == name
    assert e.unsigned_decimal == code
    assert e.signed_decimal == code - (1 << 32)
    assert e.code_hex == f"0x{code:08X}"
    text = render_explanation_text(e)
    assert name in text
    assert str(code) in text and str(code - (1 << 32)) in text
    assert f"0x{code:08X}" in text


@pytest.mark.parametrize(
    "spelling,sub,ffname",
    [
        ("0xC0000409/7", 7, "FAST_FAIL_FATAL_APP_EXIT"),
        ("0xC0000409:7", 7, "FAST_FAIL_FATAL_APP_EXIT"),
        ("-1073740791/2", 2, "FAST_FAIL_STACK_COOKIE_CHECK_FAILURE"),
        ("FAST_FAIL_INVALID_ARG", 5, "FAST_FAIL_INVALID_ARG"),
    ],
)
def test_fail_fast_spellings(spelling, sub, ffname):
    e = explain(parse_code(spelling))
    assert e.subcode == sub and e.subcode_name == ffname
    text = render_explanation_text(e)
    assert ffname in text and "STATUS_STACK_BUFFER_OVERRUN" in text
    assert "-1073740791" in text and "3221226505" in text
    assert f"0xC0000409/{sub}" in text


def test_stack_overflow_text_says_what_it_is_and_is_not():
    text = _text("-1073741571")
    assert "not a buffer overrun" in text
    assert "setrecursionlimit" in text
    assert "threading.stack_size" in text
    assert "8 MiB" in text and "1 MiB" in text


def test_fail_fast_without_subcode_points_at_the_subcode():
    e = explain(parse_code("0xC0000409"))
    text = render_explanation_text(e)
    assert "subcode" in text and "__fastfail" in text
    assert "FAST_FAIL_STACK_COOKIE_CHECK_FAILURE" in text  # the only real overrun
    assert any("0xC00000FD" in m for m in e.mixups)


def test_abort_explanation_points_at_stderr():
    e = explain(parse_code("0xC0000409/7"))
    assert "abort()" in e.summary
    text = render_explanation_text(e)
    assert "stderr" in text and "CHECK" in text and "LOG(FATAL)" in text
    assert "nothing overflowed" in text


def test_capture_help_has_localdumps_procdump_and_faulthandler():
    e = explain(parse_code("0xC0000005"))
    joined = "\n".join(e.capture_help)
    assert r"HKLM\SOFTWARE\Microsoft\Windows\Windows Error Reporting\LocalDumps" in joined
    for value in ("DumpFolder", "REG_EXPAND_SZ", "DumpCount", "DumpType", "REG_DWORD", r"LocalDumps\python.exe"):
        assert value in joined
    assert "procdump -accepteula -e -ma -x" in joined
    assert "procdump -accepteula -e -ma -w python.exe" in joined
    assert "-X faulthandler" in joined


def test_the_advice_for_any_crash_says_how_to_dump_a_hang_and_a_codes_advice_does_not():
    """A hang has no code: `explain --how-to-capture` alone says how to dump a running process
    (capture --now, Task Manager, procdump -ma PID)."""
    alone = "\n".join(capture_help_for(None))
    assert "dumpkit capture --attach <pid> --now" in alone and "--full" in alone
    assert '"Create dump file"' in alone and "procdump -accepteula -ma <pid>" in alone
    assert "--now" not in "\n".join(explain(parse_code("0xC0000005")).capture_help)


def test_faulthandler_note_depends_on_the_code():
    av = "\n".join(explain(parse_code("0xC0000005")).capture_help)
    ff = "\n".join(explain(parse_code("0xC0000409/2")).capture_help)
    so = "\n".join(explain(parse_code("0xC00000FD")).capture_help)
    assert "prints the Python stack" in av
    assert "never sees a fail-fast" in ff and "SIGABRT" not in ff
    assert "SIGABRT" in "\n".join(explain(parse_code("0xC0000409/7")).capture_help)
    assert "stack overflow" in so and "cut short" in so


def test_process_start_failures_do_not_ask_for_a_crash_dump():
    text = _text("0xC0000135")
    assert "vcruntime140" in text and "Dependencies" in text
    assert "LocalDumps" not in text


def test_unknown_code_and_subcode_render_in_hex():
    text = _text("0xC0DE1234")
    assert "0xC0DE1234" in text and "unrecognised" in text.lower()
    text = _text("0xC0000409/99")
    assert "FAST_FAIL_0x63" in text and "0xC0000409/99" in text


def test_every_known_code_and_subcode_renders():
    for code in STATUS_CODES:
        text = render_explanation_text(explain(parse_code(f"0x{code:08X}")))
        assert text.endswith("\n") and f"0x{code:08X}" in text
    for sub in FAST_FAIL:
        e = explain(parse_code(f"0xC0000409/{sub}"))
        assert isinstance(e, Explanation) and e.causes and e.next_steps
        assert FAST_FAIL[sub].name in render_explanation_text(e)


def test_rendered_lines_are_terminal_width_except_commands():
    for spelling in ("0xC00000FD", "0xC0000409/7", "0xC0000005", "0xC0000374"):
        for line in _text(spelling).splitlines():
            stripped = line.strip()
            if stripped.startswith(("reg add", "procdump")):
                continue
            assert len(line) <= 100, line


# ---- HRESULTs, Win32 errors, exit codes, typos (issue #16 item 8) ---------------------------


def test_an_hresult_is_named_and_its_win32_error_decoded():
    text = " ".join(_text("0x8007000E").split())
    assert text.startswith("0x8007000E HRESULT E_OUTOFMEMORY")
    assert "not an exception or crash code" in text and "Win32 error 14 ERROR_OUTOFMEMORY" in text
    assert "Capturing a dump" not in text  # a returned error: nothing to dump


def test_a_win32_error_gives_its_hresult_spelling():
    text = " ".join(_text("ERROR_ACCESS_DENIED").split())
    assert text.startswith("0x00000005 Win32 error ERROR_ACCESS_DENIED") and "0x80070005" in text


def test_a_small_exit_code_is_explained_as_one_not_disowned():
    text = _text("1")
    assert text.splitlines()[0] == "0x00000001  exit code 1"
    assert "not a code dumpkit knows" not in text and "unhandled Python exception" in text
    assert "ERROR_INVALID_FUNCTION" in text  # what a launcher passing GetLastError() on would mean


def test_an_unknown_code_one_digit_from_a_crash_code_suggests_it():
    e = explain(parse_code("0xC00001FD"))
    assert not e.known and e.suggestion == "0xC00000FD STATUS_STACK_OVERFLOW"
    assert "Did you mean:" in render_explanation_text(e)
    assert explain(parse_code("0x10000005")).suggestion is None  # the severity digit is no typo
    assert explain(parse_code("0xC00000FD")).suggestion is None


def _capture_section(text: str) -> str:
    return text.split("Capturing a dump next time:", 1)[1]


def test_capture_advice_is_one_pointer_unless_asked_for():
    e = explain(parse_code("0xC0000005"))
    short = " ".join(_capture_section(render_explanation_text(e)).split())
    assert len(short) < 300 and "reg add" not in short
    # issue #13 item 7: a Python user learns that a full-memory dump is what the Python stack needs
    assert "full-memory dump" in short and "DumpType=2" in short and "procdump -ma" in short
    assert "Python stack" in short and "--how-to-capture" in short
    full = _capture_section(render_explanation_text(e, how_to_capture=True))
    assert "reg add" in full and "procdump -accepteula -e -ma" in full
    assert "makes the Python stack possible" in " ".join(full.split())


def test_exit_code_3_names_openmps_error_15_first_and_how_to_dump_an_exit():
    """Exit code 3 in numerical Python on Windows is most often two OpenMP runtimes; no
    crash handler sees an exit, dumpkit capture does (issue #41 item 7)."""
    e = explain(parse_code("3"))
    assert "OMP: Error #15" in e.causes[0] and "libiomp5md.dll" in e.causes[0]
    assert any("abort()" in c and "Fatal Python error" in c for c in e.causes[1:])
    assert any("KMP_DUPLICATE_LIB_OK" in s for s in e.next_steps)
    assert any("dumpkit capture" in s and "RtlExitUserProcess" in s for s in e.next_steps)
    assert "dumpkit capture" in e.capture_pointer[0] and "LocalDumps" not in " ".join(e.capture_pointer)
    assert "dumpkit capture" in e.capture_help[0]


@pytest.mark.parametrize(
    "words, code, subcode",
    [
        ("Fatal Python error", 0xC0000409, 7),
        ("OMP: Error #15", 3, None),
        ("libiomp5md.dll", 3, None),
        ("msvcp140.dll", 0xC0000005, None),
        ("_Mtx_lock", 0xC0000005, None),
    ],
)
def test_the_endings_of_issue_41_are_known_by_their_words(words, code, subcode):
    parsed = parse_code(words)
    assert (parsed.code, parsed.subcode) == (code, subcode)


def test_an_access_violation_lists_the_msvcp140_mutex_break():
    e = explain(parse_code("0xC0000005"))
    assert any("_Mtx_lock" in c and "14.40" in c and "msvcp140.dll" in c for c in e.causes)
