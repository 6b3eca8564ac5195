"""MSVC C++ names read back into what WinDbg shows, checked against LLVM's llvm-undname on
real names exported by TensorFlow 2.13.0's Windows build (tests/symbols/msvc_oracle.tsv,
written by make_msvc_oracle_table.py), and hostile names that must never raise."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path
from typing import List, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpkit.symbols import Demangled, demangle, display_name
from dumpkit.symbols import msvc

TABLE = Path(__file__).resolve().parent / "msvc_oracle.tsv"


class Row(NamedTuple):
    module: str
    decorated: str
    full: str  # llvm-undname
    bare: str  # llvm-undname with every --no-* flag


def rows() -> List[Row]:
    out = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            out.append(Row(*line.split("\t")))
    return out


ROWS = rows()


def strip_parameters(text: str) -> str:
    """The bare oracle output without the trailing parameter list and function qualifiers."""
    while True:
        for suffix in (" const", " volatile", " __restrict", " __unaligned", " &&", " &", " noexcept"):
            if text.endswith(suffix):
                text = text[: -len(suffix)]
                break
        else:
            break
    if not text.endswith(")"):
        return text
    depth = 0
    for k in range(len(text) - 1, -1, -1):
        if text[k] == ")":
            depth += 1
        elif text[k] == "(":
            depth -= 1
            if depth == 0:
                return text[:k]
    return text


def oracle_qualified(row: Row) -> str:
    """The qualified name the oracle implies, with dumpkit's two deliberate choices applied:
    a thunk is named by the function it reaches (no ``[thunk]:``, no `adjustor{8}'), and
    a data symbol's name does not carry its ``const`` storage class. An RTTI type
    descriptor is named by its type, so its qualified name is the whole text."""
    q = strip_parameters(row.bare)
    if q.startswith("[thunk]: "):
        q = re.sub(r"`(adjustor|vtordisp|vtordispex)\{[^}]*\}'$", "", q[len("[thunk]: ") :])
    if q.startswith("const ") and "(" not in q:
        q = q[len("const ") :]
    if q == "`RTTI Type Descriptor'":
        q = row.full
    return q


def test_the_table_covers_real_tensorflow_names():
    modules = {r.module for r in ROWS}
    assert "_pywrap_tensorflow_internal.pyd" in modules
    assert len([r for r in ROWS if r.module != "(synthetic)"]) >= 300
    decorated = {r.decorated for r in ROWS}
    assert "?Flatten@swig@tensorflow@@YAPEAU_object@@PEAU3@_N@Z" in decorated


def test_every_real_name_in_the_table_reads_exactly_as_llvm_undname_writes_it():
    wrong = []
    for r in ROWS:
        d = demangle(r.decorated)
        if d is None or d.full != r.full:
            wrong.append(f"{r.decorated}\n  oracle:  {r.full}\n  dumpkit: {d.full if d else None}")
    assert not wrong, f"{len(wrong)} of {len(ROWS)} differ:\n" + "\n".join(wrong[:10])


def test_qualified_names_agree_with_the_oracle_and_sit_inside_the_declaration():
    wrong = []
    checked = 0
    for r in ROWS:
        d = demangle(r.decorated)
        assert d is not None, r.decorated
        assert d.qualified in d.full, r.decorated
        expected = oracle_qualified(r)
        if expected not in r.full:
            # llvm-undname's --no-* flags also strip return types and calling conventions
            # of function types nested in template arguments: no oracle for the name then
            continue
        checked += 1
        if d.qualified != expected:
            wrong.append(f"{r.decorated}\n  oracle:  {expected}\n  dumpkit: {d.qualified}")
    assert not wrong, f"{len(wrong)} differ:\n" + "\n".join(wrong[:10])
    assert checked >= 0.9 * len(ROWS)


def test_tf_nest_flatten_entry_point_reads_as_windbg_shows_it():
    d = demangle("?Flatten@swig@tensorflow@@YAPEAU_object@@PEAU3@_N@Z")
    assert d == Demangled(
        qualified="tensorflow::swig::Flatten",
        full="struct _object * __cdecl tensorflow::swig::Flatten(struct _object *, bool)",
    )
    assert display_name("?Flatten@swig@tensorflow@@YAPEAU_object@@PEAU3@_N@Z") == "tensorflow::swig::Flatten"


def test_member_functions_constructors_and_templates_keep_class_and_arguments():
    d = demangle("??0Status@tensorflow@@QEAA@W4Code@error@1@Vstring_view@absl@@@Z")
    assert d is not None
    assert d.qualified == "tensorflow::Status::Status"
    assert d.full == (
        "public: __cdecl tensorflow::Status::Status(enum tensorflow::error::Code, class absl::string_view)"
    )
    d = demangle("?erase@?$vector@HV?$allocator@H@std@@@std@@QEAAXPEAH@Z")
    assert d is not None
    assert d.qualified == "std::vector<int, class std::allocator<int>>::erase"
    d = demangle("??1WeakRefCounted@core@tsl@@UEAA@XZ")
    assert d is not None
    assert d.full == "public: virtual __cdecl tsl::core::WeakRefCounted::~WeakRefCounted(void)"


def test_anonymous_namespace_back_reference_reads_like_its_first_mention():
    # llvm-undname writes a back-reference to an anonymous namespace as its raw key
    # ("0xaa65ea30"); Microsoft's undname and WinDbg write `anonymous namespace' each time.
    d = demangle(
        "??$forward@W4Type@?A0xaa65ea30@example@tensorflow@@@std@@YA$$QEAW4Type@?A0xaa65ea30@"
        "example@tensorflow@@AEAW41234@@Z"
    )
    assert d is not None
    assert d.full.endswith("(enum tensorflow::example::`anonymous namespace'::Type &)")
    assert "0xaa65ea30" not in d.full


@pytest.mark.parametrize(
    "name,full",
    [
        # from debugpy's attach_amd64.pdb (tests/symbols/msvc), as llvm-undname reads them:
        # a static local of an extern "C" function, which is named without a signature
        (
            "?_OptionsStorage@?1??__local_stdio_printf_options@@9@4_KA",
            "unsigned __int64 `extern \"C\" __local_stdio_printf_options'::`2'::_OptionsStorage",
        ),
        # a catch funclet's label (``__catch$`` and this): the function it belongs to
        (
            "??$?6U?$char_traits@D@std@@@std@@YAAEAV?$basic_ostream@DU?$char_traits@D@std@@@0@AEAV10@PEBD@Z$0",
            "class std::basic_ostream<char, struct std::char_traits<char>> & __cdecl "
            "std::operator<<<struct std::char_traits<char>>(class std::basic_ostream<char, struct "
            "std::char_traits<char>> &, char const *)",
        ),
        # wide literals whole, though MSVC left their terminator out of the name
        ("??_C@_1O@KDDPCNEL@?$AAp?$AAy?$AAt?$AAh?$AAo?$AAn@", 'L"python"'),
        ("??_C@_15HKBIECK@?$AA_?$AAd@", 'L"_d"'),
        # and the constructs around them
        ("??_C@_1EC@ABCDEFGH@?$AAa?$AAb@", 'L"ab"...'),  # 66 bytes: MSVC kept the first ones
        ("??_C@_17ABCDEFGH@?$AAa?$AAb?$AAc?$AA?$AA@", 'L"abc"'),  # terminator encoded
        ("?f@@$$J0YAXXZ", 'extern "C" void __cdecl f(void)'),
        ("?f@@YAXXZ$12", "void __cdecl f(void)"),
    ],
)
def test_names_from_a_real_msvc_pdb_read_as_llvm_undname_reads_them(name, full):
    d = demangle(name)
    assert d is not None and d.full == full


@pytest.mark.parametrize(
    "name,full",
    [
        # char16_t and char32_t literals share ``_0`` with char ones, little-endian: the
        # declared length and the zero bytes tell them apart
        ("??_C@_05ABCDEFGH@a?$AAb?$AA?$AA?$AA@", 'u"ab"'),
        ("??_C@_07ABCDEFGH@a?$AA?$AA?$AA?$AA?$AA?$AA?$AA@", 'U"a"'),
        ("??_C@_0M@ABCDEFGH@hello?5world?$AA@", '"hello world"'),
        ("??_C@_01ABCDEFGH@?8?$AA@", '"\\\'"'),  # a quote is escaped
        # 32 bytes declared, 32 kept: the last one is the terminator's place
        ("??_C@_0CA@ABCDEFGH@abcdefghijklmnopqrstuvwxyzabcdef@", '"abcdefghijklmnopqrstuvwxyzabcde"'),
        ("??__HC@@QEAAXXZ", "public: void __cdecl C::`vector vbase copy constructor iterator'(void)"),
    ],
)
def test_string_literals_and_special_names_read_as_llvm_undname_reads_them(name, full):
    d = demangle(name)
    assert d is not None and d.full == full


@pytest.mark.parametrize("name", ["?x@@3HA$0", "?f@@YAXXZ$", "?f@@YAXXZ$a", "?f@@YAXXZ$0$1"])
def test_only_a_function_takes_a_funclet_number(name):
    # llvm-undname ignores whatever follows a complete name; a funclet number is the one
    # suffix real PDBs hold
    assert demangle(name) is None


@pytest.mark.parametrize(
    "name",
    [
        "PyObject_Repr",  # plain C export
        "TFE_Py_FastPathExecute_C",
        "_ZN10tensorflow4swig7FlattenEP7_objectb",  # Itanium (mingw, clang)
        "_Py_CheckRecursiveCall@4",  # x86 stdcall C name
        "",
        "?",
        "??",
        "func_12262a0",
        "#12",
    ],
)
def test_names_that_are_not_msvc_decorated_pass_through(name):
    assert demangle(name) is None
    assert display_name(name) == name


def test_non_text_input_gives_none():
    assert demangle(b"?f@@YAXXZ") is None  # type: ignore[arg-type]
    assert demangle(None) is None  # type: ignore[arg-type]
    assert demangle(["?f@@YAXXZ"]) is None  # type: ignore[arg-type]


# --- hostile names: never an exception, always quick -------------------------------------------


def timed(name: str) -> float:
    """CPU seconds one parse takes (process time: other processes on a busy machine do not count)."""
    start = time.process_time()
    msvc.parse(name)
    return time.process_time() - start


def test_every_truncation_of_real_names_is_refused_or_read_without_error():
    slowest = 0.0
    for r in ROWS[::3]:
        for k in range(len(r.decorated)):
            slowest = max(slowest, timed(r.decorated[:k]))
    assert slowest < 1.0


def test_mutated_real_names_never_raise():
    rng = random.Random(5)
    alphabet = "?@$0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_"
    for _ in range(3000):
        text = list(rng.choice(ROWS).decorated)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(text))
            op = rng.random()
            if op < 0.4:
                text[i] = rng.choice(alphabet)
            elif op < 0.7:
                text.insert(i, rng.choice(alphabet))
            else:
                del text[i]
        assert timed("".join(text)) < 1.0


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from("?@$0123456789ABCDEFGHIJPQVWXYZ_a"), max_size=80))
def test_random_decorated_looking_text_never_raises(body):
    result = demangle("?" + body)
    assert result is None or (result.qualified and result.full)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_arbitrary_unicode_never_raises(body):
    demangle("?" + body)


def test_deep_nesting_is_refused_quickly():
    # each under the 4 KiB input cap, so it is the nesting cap that refuses them
    deep = "?f@@YAX" + "V?$a@" * 500 + "H" + "@@" * 500 + "@Z"
    pointers = "?f@@YAX" + "PEA" * 1200 + "H@Z"
    auto_args = "??$f@" + "$M" * 1500 + "H@@YAXXZ"
    locals_ = "?x@" + "?1?" * 1000 + "f@@YAXXZ@4HA"
    functions = "?f@@YAX" + "P6AX" * 500 + "XZ" * 500 + "@Z"
    for name in (deep, pointers, auto_args, locals_, functions):
        assert len(name) <= msvc.MAX_INPUT
        assert timed(name) < 1.0
        assert demangle(name) is None


def test_nesting_real_code_uses_is_read():
    # the deepest real TensorFlow export nests templates 12 levels; 40 still reads
    nested = "?f@@YAX" + "V?$a@" * 40 + "H" + "@@" * 40 + "@Z"
    d = demangle(nested)
    assert d is not None
    assert d.full.count("a<") == 40


def test_back_reference_bomb_is_capped():
    # each level repeats the previous one ten times through name back-references:
    # 12 levels would be 10**12 characters of output
    inner = "V?$a@H@@"
    for level in range(12):
        inner = f"V?$t{level}@{inner}{'V1@' * 9}@@"
    name = "?f@@YAX" + inner + "@Z"
    assert timed(name) < 1.0
    assert demangle(name) is None


def test_very_long_names_are_not_read():
    long_name = "?f" + "x" * 100_000 + "@@YAXXZ"
    assert timed(long_name) < 0.1
    assert demangle(long_name) is None


def test_unicode_digits_are_not_back_references():
    assert demangle("?f@@YAXV?$a@H@@V\u0663@@Z") is None  # ARABIC-INDIC DIGIT THREE
