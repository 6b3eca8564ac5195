"""dumpkit.analysis.codes.parse_code: every way users paste a code."""

import pytest

from dumpkit.analysis import codes
from dumpkit.analysis.codes import FAST_FAIL, ParsedCode, lookup_fastfail, lookup_status, parse_code
from dumpkit.analysis.codes.model import WIN32

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
    "exited with code 3221225725",
    "Process exited with code -1073741571",
    "The program '[11808] python.exe' has exited with code -1073741571 (0xc00000fd).",
]


@pytest.mark.parametrize("text", SAME_STACK_OVERFLOW)
def test_stack_overflow_spellings(text):
    assert parse_code(text) == ParsedCode(0xC00000FD, None)


# What Python itself prints for a native crash, pasted whole: faulthandler's line (its words
# for seven codes, "code 0x..." for the rest, "code <decimal>" on old versions) and the
# OSError ctypes raises (its words, or PyErr_SetFromWindowsErr's "[WinError N] Windows Error
# 0x..." for codes it has no words for; a small WinError is a Win32 error).
PYTHON_PRINTED = [
    ("Windows fatal exception: access violation", ParsedCode(0xC0000005)),
    ("Windows fatal exception: stack overflow", ParsedCode(0xC00000FD)),
    ("Windows fatal exception: int divide by zero", ParsedCode(0xC0000094)),
    ("Windows fatal exception: page error", ParsedCode(0xC0000006)),
    ("Windows fatal exception: code 0xc06d007e", ParsedCode(0xC06D007E)),
    ("Windows fatal exception: code 3221225477", ParsedCode(0xC0000005)),
    ("OSError: exception: access violation reading 0x0000000000000010", ParsedCode(0xC0000005)),
    ("exception: access violation writing 0xFFFFFFFFFFFFFFFF", ParsedCode(0xC0000005)),
    ("OSError: exception: stack over/underflow", ParsedCode(0xC0000092)),
    ("OSError: exception: integer divide by zero", ParsedCode(0xC0000094)),
    ("OSError: [WinError -1066598274] Windows Error 0xc06d007e", ParsedCode(0xC06D007E)),
    ("[WinError -529697949] Windows Error 0xe06d7363", ParsedCode(0xE06D7363)),
    ("OSError: [WinError 126] The specified module could not be found", ParsedCode(126, None, WIN32)),
    # a DLL that would not load: FormatMessage's words, which Python passes on
    (
        "ImportError: DLL load failed while importing _pywrap_tensorflow_internal: The specified module could "
        "not be found.",
        ParsedCode(126, None, WIN32),
    ),
    ("ImportError: DLL load failed: The specified procedure could not be found.", ParsedCode(127, None, WIN32)),
    ("DLL load failed while importing _ext: %1 is not a valid Win32 application.", ParsedCode(193, None, WIN32)),
    (
        "FileNotFoundError: Could not find module 'C:\\cuda\\cudnn64_8.dll' (or one of its dependencies). Try "
        "using the full path with constructor syntax.",
        ParsedCode(126, None, WIN32),
    ),
    (
        'OSError: [WinError 1114] A dynamic link library (DLL) initialization routine failed. Error loading "c10.dll"',
        ParsedCode(1114, None, WIN32),
    ),
    # not Python's, but pasted as often: Windows' application-error dialog
    (
        "The instruction at 0x00007FFB2C1D3A5E referenced memory at 0x0000000000000010. The memory could not be read.",
        ParsedCode(0xC0000005),
    ),
]


@pytest.mark.parametrize("text, parsed", PYTHON_PRINTED)
def test_the_lines_python_prints_for_a_native_crash_name_the_code(text, parsed):
    assert parse_code(text) == parsed


# The same lines on Windows in other display languages: Python's words stay English,
# FormatMessage's are the user's language (each as users have pasted it, line breaks and
# missing spaces included).
LOCALIZED_DLL_LOAD = [
    ("ImportError: DLL load failed while importing _pywrap_tensorflow_internal: 找不到指定的模块。", 126),
    ("DLL load failed while importing _C: 找不到\n指定的程序。", 127),
    ("ImportError: DLL load failed while importing_C:找不到 指定的程序。", 127),
    ("ImportError: DLL load failed while importing _ufuncs: %1 不是有效的 Win32 应用程序。", 193),
    ("DLL load failed while importing onnxruntime_pybind11_state: 动态链接库(DLL)初始化例程失败。", 1114),
    ("ImportError: DLL load failed: 找不到指定的模組。", 126),
    ("DLL load failed while importing _imaging: 動態連結程式庫 (DLL) 初始化例行程序失敗。", 1114),
    ("ImportError: DLL load failed while importing _errors: 指定されたプロシージャが見つかりません。", 127),
    ("ImportError: DLL load failed: 指定されたモジュールが見つかりません。", 126),
    (
        "DLL load failed while importing onnxruntime_pybind11_state:\nダイナミック リンク ライブラリ (DLL) 初期化ルーチンの実行に失敗しました。",
        1114,
    ),
    ("DLL load failed while importing _ssl: %1은(는) 올바른 Win32 응용 프로그램이 아닙니다", 193),
    ("ImportError: DLL load failed while importing QtCore: 지정된 프로시저를 찾을 수 없습니다.", 127),
    ("ImportError: DLL load failed: DLL 초기화 루틴을 실행할 수 없습니다.", 1114),
    ("ImportError: DLL load failed while importing fast_firebirdsql: Das angegebene Modul wurde nicht gefunden.", 126),
    ("DLL load failed while importing _jax: Eine DLL-Initialisierungsroutine ist fehlgeschlagen.", 1114),
    ("ImportError: DLL load failed while importing _multiarray_umath: Le module spécifié est introuvable.", 126),
    (
        "DLL load failed while importing onnx_cpp2py_export: Une routine d\u2019initialisation d\u2019une "
        "bibliothèque de liens dynamiques (DLL) a échoué.",
        1114,
    ),
    ("DLL load failed while importing Kratos: No se puede encontrar el módulo especificado", 126),
    ("ImportError: DLL load failed while importing _rust: Не найдена указанная процедура.", 127),
    (
        "ImportError: DLL load failed while importing _pywrap_tensorflow_internal: Произошел сбой в программе "
        "инициализации библиотеки динамической компоновки (DLL).",
        1114,
    ),
    ("ImportError: DLL load failed while importing QtCore: Impossibile trovare la procedura specificata.", 127),
    ("ImportError: DLL load failed while importing MPI: Não foi possível encontrar o módulo especificado.", 126),
]


@pytest.mark.parametrize("text, error", LOCALIZED_DLL_LOAD)
def test_a_dll_load_failure_is_read_in_the_language_windows_said_it_in(text, error):
    assert parse_code(text) == ParsedCode(error, None, WIN32)


def test_a_dll_load_message_in_no_known_words_is_not_guessed_and_says_what_to_give_instead():
    with pytest.raises(ValueError, match=r"a DLL that would not load.*\[WinError N\]"):
        parse_code("ImportError: DLL load failed while importing x: 参数错误。")


def test_the_dll_load_errors_say_where_python_looks_and_are_named_as_winerror_h_names_them():
    from dumpkit.analysis.codes.notes import WIN32_ROWS
    from dumpkit.analysis.codes.table import error_table
    from dumpkit.analysis.explain import explain

    assert {info.name: info.code for info in WIN32_ROWS} == {
        info.name: error_table().win32_values[info.name] for info in WIN32_ROWS
    }
    said = explain(
        parse_code("ImportError: DLL load failed while importing x: The specified module could not be found.")
    )
    assert said.name == "ERROR_MOD_NOT_FOUND" and "DLL load failed" in said.summary
    assert any("os.add_dll_directory" in c for c in said.causes) and any("Dependencies" in s for s in said.next_steps)


def test_a_winerror_whose_two_numbers_disagree_is_refused():
    with pytest.raises(ValueError, match="the two spellings disagree"):
        parse_code("[WinError -1066598274] Windows Error 0xc06d007f")


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
        ("foo", "not a code or name dumpkit knows: 'foo'"),
        ("", "not a code or name dumpkit knows"),
        ("0x", "not a code or name dumpkit knows"),
        ("0xC0000005/7", "a subcode only applies to 0xC0000409"),
        ("0x1C00000FD", "out of range"),
        ("4294967296", "out of range"),
        ("-2147483649", "out of range"),
        ("0xC0000409/banana", "not a fail-fast subcode"),
        ("FAST_FAIL_FATAL_APP_EXIT/2", "already includes its subcode"),
        ("1/2/3", "not a code or name dumpkit knows"),
        ("-1073741571 (0xC0000005)", "disagree"),
        ("bad\nline", "not a code or name dumpkit knows"),
        # a typo is answered with the nearest spelling dumpkit knows
        ("STATUS_STACK_OVERFLOWW", "; did you mean STATUS_STACK_OVERFLOW?"),
        ("stack overflw", "; did you mean STACK_OVERFLOW?"),
        ("acess violation", "; did you mean ACCESS_VIOLATION?"),
        ("abrt", "; did you mean abort?"),
        ("E_OUTOFMEMOR", "; did you mean E_OUTOFMEMORY?"),
        ("ERROR_ACCES_DENIED", "; did you mean ERROR_ACCESS_DENIED?"),
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
