"""The `__init__` of each shape of record dumpkit defines (dumpkit/records.py): written by
tools/gen_record_shapes.py, not by hand. Field i's name is the constant "\\0i" and its default or
factory the global `_d_i` or `_f_i`; records.py renames each code object for its record and
runs it over that record's globals, so the names below are undefined here."""

# ruff: noqa
# mypy: ignore-errors


def _0(self, a0):
    _set(self, "\x000", a0)


def _1(self, a0, a1):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)


def _2(self, a0, a1, a2):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)


def _3(self, a0, a1, a2, a3):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)


def _4(self, a0, a1, a2, a3, a4):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)


def _5(self, a0, a1, a2, a3, a4, a5):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)


def _6(self, a0, a1, a2, a3, a4, a5, a6):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)


def _7(self, a0, a1, a2, a3, a4, a5, a6, a7):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)


def _8(self, a0, a1, a2, a3, a4, a5, a6, a7, a8):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)


def _9(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)


def _10(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)


def _11(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)


def _12(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)


def _13(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)


def _14(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)
    _set(self, "\x0014", a14)
    _set(self, "\x0015", a15)


def _15(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)
    _set(self, "\x0014", a14)
    _set(self, "\x0015", a15)
    _set(self, "\x0016", a16)


def _16(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)
    _set(self, "\x0014", a14)
    _set(self, "\x0015", a15)
    _set(self, "\x0016", a16)
    _set(self, "\x0017", a17)
    _set(self, "\x0018", a18)


def _17(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)
    _set(self, "\x0014", a14)
    _set(self, "\x0015", a15)
    _set(self, "\x0016", a16)
    _set(self, "\x0017", a17)
    _set(self, "\x0018", a18)
    _set(self, "\x0019", a19)


def _18(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)
    _set(self, "\x0014", a14)
    _set(self, "\x0015", a15)
    _set(self, "\x0016", a16)
    _set(self, "\x0017", a17)
    _set(self, "\x0018", a18)
    _set(self, "\x0019", a19)
    _set(self, "\x0020", a20)
    _set(self, "\x0021", a21)


def _19(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)
    _set(self, "\x0014", a14)
    _set(self, "\x0015", a15)
    _set(self, "\x0016", a16)
    _set(self, "\x0017", a17)
    _set(self, "\x0018", a18)
    _set(self, "\x0019", a19)
    _set(self, "\x0020", a20)
    _set(self, "\x0021", a21)
    _set(self, "\x0022", a22)


def _20(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)
    _set(self, "\x0014", a14)
    _set(self, "\x0015", a15)
    _set(self, "\x0016", a16)
    _set(self, "\x0017", a17)
    _set(self, "\x0018", a18)
    _set(self, "\x0019", a19)
    _set(self, "\x0020", a20)
    _set(self, "\x0021", a21)
    _set(self, "\x0022", a22)
    _set(self, "\x0023", a23)
    _set(self, "\x0024", a24)


def _21(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)
    _set(self, "\x0014", a14)
    _set(self, "\x0015", a15)
    _set(self, "\x0016", a16)
    _set(self, "\x0017", a17)
    _set(self, "\x0018", a18)
    _set(self, "\x0019", a19)
    _set(self, "\x0020", a20)
    _set(self, "\x0021", a21)
    _set(self, "\x0022", a22)
    _set(self, "\x0023", a23)
    _set(self, "\x0024", a24)
    _set(self, "\x0025", a25)
    _set(self, "\x0026", a26)
    _set(self, "\x0027", a27)
    _set(self, "\x0028", a28)


def _22(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)
    _set(self, "\x0014", a14)
    _set(self, "\x0015", a15)
    _set(self, "\x0016", a16)
    _set(self, "\x0017", a17)
    _set(self, "\x0018", a18)
    _set(self, "\x0019", a19)
    _set(self, "\x0020", a20)
    _set(self, "\x0021", a21)
    _set(self, "\x0022", a22)
    _set(self, "\x0023", a23)
    _set(self, "\x0024", a24)
    _set(self, "\x0025", a25)
    _set(self, "\x0026", a26)
    _set(self, "\x0027", a27)
    _set(self, "\x0028", a28)
    _set(self, "\x0029", a29)
    _set(self, "\x0030", a30)


def _23(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    if a10 is _NO_ARG:
        a10 = _f_10()
    _set(self, "\x0010", a10)


def _24(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    if a5 is _NO_ARG:
        a5 = _f_5()
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)
    _set(self, "\x0014", a14)
    _set(self, "\x0015", a15)
    _set(self, "\x0016", a16)
    _set(self, "\x0017", a17)
    _set(self, "\x0018", a18)


def _25(self, a0, a1, a2, a3, a4):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    if a4 is _NO_ARG:
        a4 = _f_4()
    _set(self, "\x004", a4)


def _26(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    if a4 is _NO_ARG:
        a4 = _f_4()
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)
    _set(self, "\x006", a6)
    _set(self, "\x007", a7)
    _set(self, "\x008", a8)
    _set(self, "\x009", a9)
    _set(self, "\x0010", a10)
    _set(self, "\x0011", a11)
    if a12 is _NO_ARG:
        a12 = _f_12()
    _set(self, "\x0012", a12)
    _set(self, "\x0013", a13)
    _set(self, "\x0014", a14)
    _set(self, "\x0015", a15)
    _set(self, "\x0016", a16)
    _set(self, "\x0017", a17)
    _set(self, "\x0018", a18)


def _27(self, a0, a1, a2, a3, a4, a5):
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    if a2 is _NO_ARG:
        a2 = _f_2()
    _set(self, "\x002", a2)
    _set(self, "\x003", a3)
    _set(self, "\x004", a4)
    _set(self, "\x005", a5)


def _28(self, a0, a1, a2, a3, a4, a5):
    if a0 is _NO_ARG:
        a0 = _f_0()
    _set(self, "\x000", a0)
    _set(self, "\x001", a1)
    _set(self, "\x002", a2)
    if a3 is _NO_ARG:
        a3 = _f_3()
    _set(self, "\x003", a3)
    if a4 is _NO_ARG:
        a4 = _f_4()
    _set(self, "\x004", a4)
    if a5 is _NO_ARG:
        a5 = _f_5()
    _set(self, "\x005", a5)


SHAPES = {
    ("a", False): _0,
    ("aa", False): _1,
    ("aaa", False): _2,
    ("aaaa", False): _3,
    ("aaaaa", False): _4,
    ("aaaaaa", False): _5,
    ("aaaaaaa", False): _6,
    ("aaaaaaaa", False): _7,
    ("aaaaaaaaa", False): _8,
    ("aaaaaaaaaa", False): _9,
    ("aaaaaaaaaaa", False): _10,
    ("aaaaaaaaaaaa", False): _11,
    ("aaaaaaaaaaaaa", False): _12,
    ("aaaaaaaaaaaaaa", False): _13,
    ("aaaaaaaaaaaaaaaa", False): _14,
    ("aaaaaaaaaaaaaaaaa", False): _15,
    ("aaaaaaaaaaaaaaaaaaa", False): _16,
    ("aaaaaaaaaaaaaaaaaaaa", False): _17,
    ("aaaaaaaaaaaaaaaaaaaaaa", False): _18,
    ("aaaaaaaaaaaaaaaaaaaaaaa", False): _19,
    ("aaaaaaaaaaaaaaaaaaaaaaaaa", False): _20,
    ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaa", False): _21,
    ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", False): _22,
    ("aaaaaaaaaaf", False): _23,
    ("aaaaafaaaaaaaaaaaaa", False): _24,
    ("aaaaf", False): _25,
    ("aaaafaaaaaaafaaaaaa", False): _26,
    ("aafaaa", False): _27,
    ("faafff", False): _28,
}
